'use strict'

// ratekeeper/flexible's RateLimiterRedis through a failover, given the ioredis client a
// rate-limiter-flexible app already has (Cluster mode, Sentinel mode): a real 6-node Cluster
// whose primary is SIGKILLed, and a Sentinel set-up whose primary is SIGKILLed. Every call
// settles; a call fails only while its key has no primary, and then rejects with an Error
// (ERR_STORE_UNAVAILABLE), never with a RateLimiterRes that an app would read as "too many";
// an `insuranceLimiter` answers instead of failing; the store follows the new primary by itself;
// and an id is admitted again at most as often as the points its old primary had not yet
// replicated (rate-limiter-flexible promises nothing here: its issues #73 and #283).

const { describe, it, before, after } = require('node:test')
const assert = require('node:assert/strict')

const IORedis = require('ioredis')

const { RateLimiterRedis, RateLimiterMemory, RateLimiterRes } = require('../flexible.js')
const { startCluster, startSentinel, keySlot, clusterSkip } = require('./helpers/redis-server.js')
const { settle, clusterNodes, inRanges, stringCounts } = require('./helpers/failover.js')

/** ratekeeper's default `commandTimeoutMs` (an ioredis client's own timeout is not read). */
const COMMAND_TIMEOUT_MS = 1000
const HANG_MS = COMMAND_TIMEOUT_MS + 2000
const LIMIT = 3
const DURATION_S = 3600
const ROUNDS_TO_RECOVER = 5
const RECOVERY_DEADLINE_MS = 30_000

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Consumes every id LIMIT + 1 times, awaits `kill()` (which kills the primary and reads what its
 * replicas hold before one is promoted), and goes on until ROUNDS_TO_RECOVER rounds in a row
 * had no failure. Resolves what each limiter answered.
 */
async function throughFailover(storeClient, ids, kill) {
  const strict = new RateLimiterRedis({ storeClient, keyPrefix: 'fo', points: LIMIT, duration: DURATION_S })
  const insurance = new RateLimiterMemory({ points: 1_000_000, duration: DURATION_S })
  const insured = new RateLimiterRedis({ storeClient, keyPrefix: 'fi', points: 1_000_000, duration: DURATION_S, insuranceLimiter: insurance })
  const admitted = new Map(ids.map((id) => [id, 0]))
  const failures = []
  const refusals = []
  const insuredFailures = []
  const round = () =>
    Promise.all([
      ...ids.map(async (id) => {
        const outcome = await settle(() => strict.consume(id), HANG_MS)
        if (outcome.value) admitted.set(id, admitted.get(id) + 1)
        else if (outcome.error instanceof RateLimiterRes) refusals.push({ id, res: outcome.error })
        else failures.push({ id, ...outcome })
      }),
      ...ids.slice(0, 20).map(async (id) => {
        const outcome = await settle(() => insured.consume(id), HANG_MS)
        if (!outcome.value) insuredFailures.push({ id, ...outcome })
      }),
    ])

  for (let i = 0; i < LIMIT; i++) await round()
  assert.deepEqual(failures, [], 'no failure before the kill')
  assert.ok([...admitted.values()].every((n) => n === LIMIT))
  await round()
  assert.equal(refusals.length, ids.length, 'every id refused once over its points')
  assert.ok(refusals.every(({ res }) => res.remainingPoints === 0 && res.consumedPoints === LIMIT + 1))

  const killedAt = Date.now()
  await kill()
  let clean = 0
  while (clean < ROUNDS_TO_RECOVER && Date.now() < killedAt + RECOVERY_DEADLINE_MS) {
    const before = failures.length
    await round()
    clean = failures.length === before ? clean + 1 : 0
    await sleep(20)
  }
  assert.equal(clean, ROUNDS_TO_RECOVER, `calls still failing ${RECOVERY_DEADLINE_MS} ms after the kill: ${failures.at(-1)?.error?.message}`)
  return { admitted, failures, insuredFailures, insurance }
}

/**
 * What every failover must show, whatever the deployment: `affected` are the ids whose primary
 * died, `survived` the points their keys held on the replica that was promoted.
 */
function assertFailover({ admitted, failures, insuredFailures }, affected, survived, t) {
  assert.deepEqual(failures.filter((f) => f.hung).map((f) => f.id), [], 'every call settled')
  assert.ok(failures.length > 0, 'calls failed while their primary was gone')
  for (const { id, error, took } of failures) {
    assert.ok(error instanceof Error && !(error instanceof RateLimiterRes), `${id}: a failure is an Error`)
    assert.equal(error.code, 'ERR_STORE_UNAVAILABLE', error.message)
    assert.ok(affected.has(id), `a call for ${id}, whose primary lived, failed: ${error.message}`)
    assert.ok(took < HANG_MS, `a failure took ${took} ms`)
  }
  assert.deepEqual(insuredFailures.map((f) => f.error?.message ?? 'hung'), [], 'the insured limiter never failed')
  // The admission bound. Before the kill each key held LIMIT + 1 points (a refused consume adds
  // its points, as rate-limiter-flexible's); a key the promoted replica holds with fewer admits
  // again until it holds LIMIT, and no more.
  let lostIds = 0
  for (const [id, count] of admitted) {
    if (!affected.has(id)) {
      assert.equal(count, LIMIT, `${id}, whose primary lived`)
      continue
    }
    const held = survived.get(`fo:${id}`)
    assert.ok(count <= LIMIT + Math.max(0, LIMIT - held), `${id}: admitted ${count}, the promoted replica held ${held}`)
    if (held < LIMIT + 1) lostIds++
  }
  t.diagnostic(`${failures.length} calls failed; ${lostIds} of ${affected.size} ids lost points in the failover`)
}

/** The insurance limiter holds points for some of the first 20 ids: it answered for them. */
async function insuranceAnswered(insurance, ids) {
  const held = await Promise.all(ids.slice(0, 20).map((id) => insurance.get(id)))
  return held.filter((res) => res !== null).length
}

describe('ratekeeper/flexible through a Redis Cluster failover', { skip: clusterSkip() }, () => {
  let cluster
  let client
  before(async () => {
    cluster = await startCluster({ nodeTimeoutMs: 1000, args: ['--cluster-require-full-coverage', 'no'] })
    await cluster.replicasSynced()
  })
  after(async () => {
    if (client) client.disconnect()
    await cluster.stop()
  })

  it('an ioredis Cluster client as storeClient: fails fast for the dead primary\'s keys only, insured calls answered, within the bound', async (t) => {
    client = new IORedis.Cluster(cluster.nodes.map(({ host, port }) => ({ host, port })))
    client.on('error', () => {})
    const nodes = await clusterNodes(cluster, cluster.nodes[0].port)
    const victim = nodes.find((n) => n.master && n.ranges.length > 0)
    const replica = nodes.find((n) => !n.master && n.masterId === victim.id)
    const ids = Array.from({ length: 600 }, (_, i) => `user-${i}`)
    const affected = new Set(ids.filter((id) => inRanges(keySlot(`fo:${id}`), victim.ranges)))
    assert.ok(affected.size > 100 && affected.size < 350, `${affected.size} ids on the victim`)

    let survived
    const outcome = await throughFailover(client, ids, async () => {
      await cluster.nodes.find((n) => n.port === victim.port).kill()
      survived = await stringCounts(replica.port, [...affected].map((id) => `fo:${id}`), { readonly: true })
    })
    assertFailover(outcome, affected, survived, t)
    assert.ok((await insuranceAnswered(outcome.insurance, ids)) > 0, 'the insurance limiter answered for the dead primary\'s keys')

    // The promoted replica holds the keys, each with its TTL.
    const promoted = (await clusterNodes(cluster, replica.port)).find((n) => n.port === replica.port)
    assert.ok(promoted.master && promoted.ranges.length > 0, 'the replica was promoted')
    for (const id of [...affected].slice(0, 20)) {
      const ttl = Number(await cluster.cli(replica.port, 'PTTL', `fo:${id}`))
      assert.ok(ttl > 0 && ttl <= DURATION_S * 1000, `fo:${id} has a TTL (${ttl})`)
    }
  })
})

describe('ratekeeper/flexible through a Sentinel failover', () => {
  let setup
  let client
  before(async () => {
    setup = await startSentinel()
  })
  after(async () => {
    if (client) client.disconnect()
    if (setup) await setup.stop()
  })

  it('an ioredis client in Sentinel mode as storeClient: fails fast while there is no primary, insured calls answered, within the bound', async (t) => {
    client = new IORedis({ sentinels: setup.sentinelAddresses, name: setup.name })
    client.on('error', () => {})
    const ids = Array.from({ length: 200 }, (_, i) => `user-${i}`)
    const keys = ids.map((id) => `fo:${id}`)
    let held
    const outcome = await throughFailover(client, ids, async () => {
      await setup.replicasSynced()
      await setup.primary.kill()
      // Which replica the sentinels promote is known only later.
      held = new Map(await Promise.all(setup.replicas.map(async (r) => [r.port, await stringCounts(r.port, keys)])))
    })
    const promoted = await setup.masterPort()
    assert.ok(held.has(promoted), `a replica was promoted (${promoted})`)
    assertFailover(outcome, new Set(ids), held.get(promoted), t)
    assert.ok((await insuranceAnswered(outcome.insurance, ids)) > 0, 'the insurance limiter answered while there was no primary')
    const newPrimary = setup.nodes.find((n) => n.port === promoted)
    for (const key of keys.slice(0, 20)) {
      const ttl = Number(await newPrimary.cli('PTTL', key))
      assert.ok(ttl > 0 && ttl <= DURATION_S * 1000, `${key} has a TTL (${ttl})`)
    }
  })
})
