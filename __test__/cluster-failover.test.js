'use strict'

// A real 6-node Redis Cluster changing under traffic: a primary is SIGKILLed (its replica takes
// over) and slots migrate (MOVED and ASK). Every call settles; calls fail only for the slots
// that have no reachable primary, with ERR_STORE_UNAVAILABLE naming the node; the store follows
// the new topology by itself; and counts survive within the documented bound.

const { describe, it, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { execFile } = require('node:child_process')

const IORedis = require('ioredis')

const { FixedWindow, RedisStore } = require('..')
const { startCluster, keySlot, clusterSkip } = require('./helpers/redis-server.js')
const { hashCounts } = require('./helpers/hash-counts.js')
const { settle: settleWithin, clusterNodes, inRanges } = require('./helpers/failover.js')

const COMMAND_TIMEOUT_MS = 500
/** A call that has not settled this long after it started has hung. */
const HANG_MS = COMMAND_TIMEOUT_MS + 2000
const NOW = 1_700_000_000_000

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const settle = (call) => settleWithin(call, HANG_MS)

describe('Redis Cluster under change', { skip: clusterSkip() }, () => {
  let cluster
  let store
  let killedPort
  before(async () => {
    // Without full coverage required, the healthy primaries keep serving while one is down: what
    // the store does for their slots is then visible.
    cluster = await startCluster({ nodeTimeoutMs: 1000, args: ['--cluster-require-full-coverage', 'no'] })
    await cluster.replicasSynced()
  })
  after(async () => {
    if (store) await store.close()
    await cluster.stop()
  })

  it('follows the failover of the very primary it was given, failing fast meanwhile', async (t) => {
    const nodes = await clusterNodes(cluster, cluster.nodes[0].port)
    const victim = nodes.find((n) => n.master && n.ranges.length > 0)
    const victimNode = cluster.nodes.find((n) => n.port === victim.port)
    store = await RedisStore.connect({ cluster: [victimNode.url], commandTimeoutMs: COMMAND_TIMEOUT_MS })

    const LIMIT = 3
    const limiter = new FixedWindow({ client: store, namespace: 'fo:', limits: [{ duration: 3_600_000, limit: LIMIT }] })
    const ids = Array.from({ length: 1000 }, (_, i) => `user-${i}`)
    const onVictim = new Set(ids.filter((id) => inRanges(keySlot(`fo:${id}`), victim.ranges)))
    assert.ok(onVictim.size > 200 && onVictim.size < 500, `${onVictim.size} ids on the victim`)

    const admitted = new Map(ids.map((id) => [id, 0]))
    const failures = []
    const hung = []
    let calls = 0
    const round = () =>
      Promise.all(
        ids.map(async (id) => {
          const outcome = await settle(() => limiter.consume(id, { now: NOW }))
          calls++
          if (outcome.hung) hung.push(id)
          else if (outcome.error) failures.push({ id, ...outcome })
          else if (outcome.value.allowed) admitted.set(id, admitted.get(id) + 1)
        }),
      )

    for (let i = 0; i < LIMIT; i++) await round()
    assert.equal(failures.length, 0, 'no failure before the kill')
    assert.ok([...admitted.values()].every((n) => n === LIMIT))
    const killedAt = Date.now()
    killedPort = victim.port
    await victimNode.kill()
    // What the victim's replica holds now is what survives the kill: read it before traffic
    // resumes (and before the replica is promoted, which takes over a second).
    const replica = nodes.find((n) => !n.master && n.masterId === victim.id)
    const survived = await hashCounts(replica.port, [...onVictim].map((id) => `fo:${id}`), 3_600_000, { readonly: true })

    // Traffic until the store has answered 5 rounds in a row without a failure (after the
    // replica's promotion), for 30 s at most.
    let clean = 0
    const deadline = killedAt + 30_000
    while (clean < 5 && Date.now() < deadline) {
      const before = failures.length
      await round()
      clean = failures.length === before ? clean + 1 : 0
      await sleep(20)
    }
    assert.deepEqual(hung, [], 'every call settled')
    assert.equal(clean, 5, `calls still failing 30 s after the kill: ${failures.at(-1)?.error.message}`)
    assert.ok(failures.length > 0, 'calls for the dead primary failed while it was gone')
    for (const { id, error, took } of failures) {
      assert.equal(error.code, 'ERR_STORE_UNAVAILABLE', error.message)
      assert.ok(onVictim.has(id), `a call for ${id}, on a healthy primary, failed: ${error.message}`)
      assert.ok(took < HANG_MS, `a failure took ${took} ms`)
    }
    // The errors name the node that failed.
    assert.ok(failures.some(({ error }) => error.message.includes(`127.0.0.1:${victim.port}`)), failures[0].error.message)
    const firstFailure = Math.min(...failures.map((f) => f.started))
    const lastFailure = Math.max(...failures.map((f) => f.started + f.took))
    t.diagnostic(
      `${calls} calls; ${failures.length} failed, all for the killed primary's slots, from ${firstFailure - killedAt} ms ` +
        `to ${lastFailure - killedAt} ms after the kill (median failure answered in ` +
        `${failures.map((f) => f.took).sort((a, b) => a - b)[failures.length >> 1]} ms)`,
    )

    // Admission bound: ids on healthy primaries never exceed the limit; an id on the killed
    // primary is admitted again at most as often as the admissions its primary acknowledged
    // but had not replicated when it died (so at most LIMIT more per window).
    let lostIds = 0
    for (const id of ids) {
      if (!onVictim.has(id)) {
        assert.equal(admitted.get(id), LIMIT, id)
        continue
      }
      const lost = LIMIT - survived.get(`fo:${id}`)
      assert.ok(admitted.get(id) <= LIMIT + lost, `${id}: admitted ${admitted.get(id)}, lost ${lost}`)
      if (lost > 0) lostIds++
    }
    t.diagnostic(`${lostIds} of ${onVictim.size} ids on the killed primary lost counts in the failover`)

    // The replica took over and holds the keys, each with a TTL.
    const promoted = (await clusterNodes(cluster, cluster.nodes.find((n) => n.port !== victim.port).port)).find(
      (n) => n.master && !n.failed && inRanges(keySlot(`fo:${[...onVictim][0]}`), n.ranges),
    )
    assert.ok(promoted && promoted.port !== victim.port, 'a replica was promoted')
    for (const id of [...onVictim].slice(0, 20)) {
      const ttl = Number(await cluster.cli(promoted.port, 'PTTL', `fo:${id}`))
      assert.ok(ttl > 0, `fo:${id} on the new primary has a TTL (${ttl})`)
    }
  })

  it('follows slots migrating under traffic (ASK, then MOVED), losing and doubling no count', async (t) => {
    assert.ok(store, 'the failover test ran first')
    const live = cluster.nodes.find((n) => n.port !== killedPort)
    const nodes = (await clusterNodes(cluster, live.port)).filter((n) => !n.failed)
    const [source, target] = nodes.filter((n) => n.master && n.ranges.length > 0)
    const SLOTS = 40
    const from = source.ranges[0][0]
    const moving = [[from, from + SLOTS - 1]]

    // Ids whose keys sit in the slots that move.
    const ids = []
    for (let n = 0; ids.length < 400; n++) if (inRanges(keySlot(`mig:${n}`), moving)) ids.push(String(n))

    const LIMIT = 1_000_000
    const limiter = new FixedWindow({ client: store, namespace: 'mig:', limits: [{ duration: 3_600_000, limit: LIMIT }] })
    const counted = new Map(ids.map((id) => [id, 0]))
    const failures = []
    const round = () =>
      Promise.all(
        ids.map(async (id) => {
          const outcome = await settle(() => limiter.consume(id, { now: NOW }))
          if (outcome.error || outcome.hung) failures.push({ id, ...outcome })
          else if (outcome.value.allowed) counted.set(id, counted.get(id) + 1)
        }),
      )
    await round()

    const resharding = new Promise((resolve, reject) => {
      execFile(
        'redis-cli',
        ['--cluster', 'reshard', `127.0.0.1:${source.port}`, '--cluster-from', source.id, '--cluster-to', target.id,
          '--cluster-slots', String(SLOTS), '--cluster-yes', '--cluster-pipeline', '5'],
        { timeout: 60_000 },
        (error, stdout, stderr) => (error ? reject(new Error(`reshard failed:\n${stdout}\n${stderr}`)) : resolve()),
      )
    })
    let done = false
    resharding.then(() => (done = true), () => (done = true))
    let rounds = 0
    while (!done) {
      await round()
      rounds++
    }
    await resharding
    await round()
    await round()

    assert.deepEqual(failures.map((f) => f.error?.message ?? 'hung'), [], 'no call failed during the migration')
    // The slots did move: the target now holds the keys.
    const after = (await clusterNodes(cluster, target.port)).find((n) => n.id === target.id)
    assert.ok(inRanges(from, after.ranges) && inRanges(from + SLOTS - 1, after.ranges), JSON.stringify(after.ranges))
    assert.equal(Number(await cluster.cli(target.port, 'EXISTS', `mig:${ids[0]}`)), 1)
    for (const id of ids) {
      const verdict = await limiter.peek(id, { now: NOW })
      assert.equal(verdict.remaining, LIMIT - counted.get(id), `mig:${id}`)
    }
    t.diagnostic(`${rounds} rounds of ${ids.length} calls while ${SLOTS} slots moved`)
  })

  it('follows ASK to the node importing a slot for the keys already moved there, and MOVED after', async () => {
    assert.ok(store, 'the failover test ran first')
    const live = cluster.nodes.find((n) => n.port !== killedPort)
    const nodes = (await clusterNodes(cluster, live.port)).filter((n) => !n.failed)
    const masters = nodes.filter((n) => n.master && n.ranges.length > 0)
    const [source, target] = masters
    const slot = source.ranges.at(-1)[1]
    const ids = []
    for (let n = 0; ids.length < 6; n++) if (keySlot(`ask:${n}`) === slot) ids.push(String(n))
    const [fresh, ...existing] = ids
    const moved = existing.slice(0, 2)
    const limiter = new FixedWindow({ client: store, namespace: 'ask:', limits: [{ duration: 3_600_000, limit: 10 }] })
    const consumeAll = (list) => Promise.all(list.map((id) => limiter.consume(id, { now: NOW })))

    for (const verdict of await consumeAll(existing)) assert.equal(verdict.remaining, 9)
    // The slot starts migrating; two of its keys move to the target.
    await cluster.cli(target.port, 'CLUSTER', 'SETSLOT', slot, 'IMPORTING', source.id)
    await cluster.cli(source.port, 'CLUSTER', 'SETSLOT', slot, 'MIGRATING', target.id)
    const migrate = (keys) => cluster.cli(source.port, 'MIGRATE', '127.0.0.1', target.port, '', 0, 5000, 'KEYS', ...keys.map((id) => `ask:${id}`))
    assert.equal(await migrate(moved), 'OK')
    // Moved keys are counted on the target (ASK), the others on the source, a new one on the target.
    for (const verdict of await consumeAll(existing)) assert.equal(verdict.remaining, 8)
    assert.equal((await limiter.consume(fresh, { now: NOW })).remaining, 9)
    // (The importing target answers for the slot only after ASKING.)
    const holds = async (port, id) => {
      const node = new IORedis({ host: '127.0.0.1', port, lazyConnect: true })
      try {
        await node.connect()
        const [[, exists]] = (await node.pipeline().call('ASKING').exists(`ask:${id}`).exec()).slice(1)
        return exists === 1
      } finally {
        node.disconnect()
      }
    }
    for (const id of [...moved, fresh]) assert.ok(await holds(target.port, id), id)
    for (const id of existing.slice(2)) assert.ok(await holds(source.port, id), id)

    // The migration ends: the rest of the keys move and the slot belongs to the target (MOVED).
    assert.equal(await migrate(existing.slice(2)), 'OK')
    for (const master of [target, source, ...masters.slice(2)]) {
      await cluster.cli(master.port, 'CLUSTER', 'SETSLOT', slot, 'NODE', target.id)
    }
    for (const verdict of await consumeAll(existing)) assert.equal(verdict.remaining, 7)
    for (const id of existing) assert.equal(await cluster.cli(target.port, 'EXISTS', `ask:${id}`), '1', id)
  })
})
