'use strict'

// A real 6-node Redis Cluster (3 masters, 3 replicas): every call touches one key, so ids spread
// over the slots and each script runs on the master that owns its key.

const { it, before, after } = require('node:test')
const assert = require('node:assert/strict')
const IORedis = require('ioredis')

const { FixedWindow, RedisRateLimiter, RedisStore } = require('..')
const { startCluster, keySlot, clusterSkip } = require('./helpers/redis-server.js')

const skip = clusterSkip()
let cluster
let store
before(async () => {
  if (skip) return
  cluster = await startCluster()
  store = await RedisStore.connect({ cluster: [cluster.urls[0]] })
})
after(async () => {
  await store?.close()
  await cluster?.stop()
})

it('connects from one node and discovers the others', { skip }, () => {
  assert.equal(store.isCluster, true)
})

it('limits ids whose keys live on different masters', { skip }, async () => {
  const limiter = new RedisRateLimiter({ client: store, namespace: 'cl:', interval: 10, maxInInterval: 2 })
  const ids = Array.from({ length: 30 }, (_, i) => `user-${i}`)
  for (const id of ids) {
    assert.equal(await limiter.limit(id, { now: 0 }), false)
    assert.equal(await limiter.limit(id, { now: 1 }), false)
    assert.equal(await limiter.limit(id, { now: 2 }), true)
    // The blocked attempt at 2 ms was recorded: the window is full until 12 ms.
    assert.deepEqual(await limiter.wouldLimitWithInfo(id, { now: 10 }), {
      blocked: true,
      blockedDueToCount: true,
      blockedDueToMinDifference: false,
      millisecondsUntilAllowed: 2,
      actionsRemaining: 0,
    })
    assert.equal(await limiter.wouldLimit(id, { now: 12 }), false)
  }
  // The keys are spread over the three masters.
  const masters = new Set()
  for (const node of cluster.nodes) {
    const role = await cluster.cli(node.port, 'ROLE')
    if (!role.startsWith('master')) continue
    const keys = Number(await cluster.cli(node.port, 'DBSIZE'))
    if (keys > 0) masters.add(node.port)
  }
  assert.equal(masters.size, 3)
})

it('admits exactly the limit to concurrent callers', { skip }, async () => {
  const limiter = new RedisRateLimiter({ client: store, namespace: 'cl-race:', interval: 60_000, maxInInterval: 50 })
  const answers = await Promise.all(Array.from({ length: 200 }, () => limiter.limit('hot')))
  assert.equal(answers.filter((blocked) => !blocked).length, 50)
})

it('accepts an ioredis Cluster client and shares its nodes', { skip }, async () => {
  const client = new IORedis.Cluster([{ host: '127.0.0.1', port: cluster.nodes[1].port }], { lazyConnect: true })
  try {
    const limiter = new RedisRateLimiter({ client, namespace: 'cl-io:', interval: 60_000, maxInInterval: 1 })
    assert.equal(limiter.detectedClientType, 'ioredis-cluster')
    assert.equal(await limiter.limit('a'), false)
    assert.equal(await limiter.limit('a'), true)
  } finally {
    client.disconnect()
  }
})

it('hashIds: ids that carry a hash tag cannot choose their shard', { skip }, async () => {
  // Every id names the same tag: without hashIds they would all land in one slot.
  const ids = Array.from({ length: 10_000 }, (_, i) => `{victim}${i}`)
  // One instant for every call: a window aligned to the clock could end during the test.
  const now = { now: Date.now() }
  const plain = new FixedWindow({ client: store, namespace: 'tag:', limits: [{ duration: 60_000, limit: 5 }] })
  const hashed = new FixedWindow({ client: store, namespace: 'hashed:', hashIds: true, limits: [{ duration: 60_000, limit: 5 }] })
  await plain.consume(ids[0])
  assert.equal(await cluster.cli(cluster.nodes[0].port, 'CLUSTER', 'KEYSLOT', `tag:${ids[0]}`), String(keySlot('victim')))

  for (let i = 0; i < ids.length; i += 500) {
    await Promise.all(ids.slice(i, i + 500).map((id) => hashed.consume(id, now)))
  }
  // The key keeps the id after its tag, so that no two ids share a key.
  const perMaster = []
  const slots = new Set()
  for (const node of cluster.nodes) {
    const role = await cluster.cli(node.port, 'ROLE')
    if (!role.startsWith('master')) continue
    let keys = 0
    let cursor = '0'
    do {
      const [next, ...found] = (await cluster.cli(node.port, 'SCAN', cursor, 'MATCH', 'hashed:*', 'COUNT', 1000)).split('\n')
      cursor = next
      keys += found.filter(Boolean).length
      for (const key of found.filter(Boolean)) {
        assert.match(key, /^hashed:\{[0-9a-f]{16}\}\{victim\}\d+$/)
        slots.add(keySlot(key))
      }
    } while (cursor !== '0')
    perMaster.push(keys)
  }
  assert.equal(perMaster.length, 3)
  assert.equal(perMaster.reduce((a, b) => a + b), ids.length)
  for (const keys of perMaster) assert.ok(keys > 2500, `keys per master: ${perMaster}`)
  assert.ok(slots.size > 4000, `${slots.size} slots used`)
  // Counting still works per id.
  assert.equal((await hashed.consume(ids[7], now)).remaining, 3)
})


it('runs every limiter on the Cluster: ids over all masters, several ids of one hash tag at once, reward and reset', { skip }, async () => {
  const { LIMITERS, CAPACITY, SPACED, ONE_ID } = require('./helpers/limiters.js')
  const T0 = 1_700_000_000_000
  for (const [name, create] of Object.entries(LIMITERS)) {
    const namespace = `every-${name.replace(/\W+/g, '-')}:`
    const limiter = create({ client: store, namespace })
    const ids = Array.from({ length: 30 }, (_, i) => `id-${i}`)
    for (const id of ids) {
      const first = await limiter.consume(id, { now: T0, weight: CAPACITY })
      assert.equal(first.allowed, true, `${name} ${id}`)
      assert.equal(first.remaining, 0, `${name} ${id}`)
      const refused = await limiter.consume(id, { now: T0 })
      assert.equal(refused.allowed, false, `${name} ${id}`)
      assert.ok(refused.timeLeft > 0 && refused.timeLeft < Infinity, `${name} ${id}: ${refused.timeLeft}`)
      const back = await limiter.reward(id, { now: T0, weight: 2 })
      assert.equal(back.remaining, SPACED.has(name) ? 0 : 2, `${name} ${id}`)
    }
    // The ids' keys live on every master (by the slot map: a scan would miss the keys whose short
    // TTL has run out meanwhile, on a loaded machine all of one master's).
    const owners = await slotOwners()
    const masters = new Set(ids.map((id) => owners(`${namespace}${id}`)))
    assert.equal(masters.size, 3, `${name}: keys on every master`)
    for (const port of masters) {
      // Every key has a TTL (-1 would be none; -2, gone already: short TTLs expire as we look).
      for (const key of await keysOf(port, `${namespace}*`)) assert.notEqual(Number(await cluster.cli(port, 'PTTL', key)), -1, `${key} has a TTL`)
    }
    if (!ONE_ID.has(name)) {
      // One call, two ids of one tag, one atomic step: the full one refuses both.
      await limiter.consume('{u1}ip', { now: T0, weight: CAPACITY })
      const both = await limiter.consume(['{u1}ip', '{u1}user'], { now: T0 })
      assert.equal(both.allowed, false, name)
      assert.equal((await limiter.peek('{u1}user', { now: T0 })).remaining, CAPACITY, `${name}: nothing charged`)
      await assert.rejects(limiter.consume(['{u1}ip', '{u2}user'], { now: T0 }), { code: 'ERR_INVALID_ID' })
    }
    for (const id of ids) await limiter.reset(id)
    assert.equal((await limiter.peek(ids[0], { now: T0 })).remaining, CAPACITY, `${name}: reset`)
  }
})

it('runs ratekeeper/flexible on the cluster: RateLimiterRedis on every master, and an atomic RateLimiterUnion of hash-tagged keys', { skip }, async () => {
  const flexible = require('../flexible.js')
  const perSecond = new flexible.RateLimiterRedis({ storeClient: store, keyPrefix: 'fx-second', points: 3, duration: 60 })
  const perHour = new flexible.RateLimiterRedis({ storeClient: store, keyPrefix: 'fx-hour', points: 10, duration: 3600 })
  const users = Array.from({ length: 30 }, (_, i) => `user-${i}`)
  for (const user of users) {
    assert.equal((await perSecond.consume(user, 3)).remainingPoints, 0)
    assert.equal(await perSecond.consume(user).then(assert.fail, (res) => res.consumedPoints), 4)
  }
  const owner = await slotOwners()
  assert.equal(new Set(users.map((user) => owner(`fx-second:${user}`))).size, 3)
  // A union's keys differ by prefix: with a hash tag they share a slot, and it is one script call.
  const union = new flexible.RateLimiterUnion(perSecond, perHour)
  assert.equal(union.atomic, true)
  const outcomes = await Promise.allSettled(Array.from({ length: 20 }, () => union.consume('{team-7}')))
  assert.equal(outcomes.filter((o) => o.status === 'fulfilled').length, 3)
  assert.deepEqual(
    [(await perSecond.get('{team-7}')).consumedPoints, (await perHour.get('{team-7}')).consumedPoints],
    [3, 3],
  )
  // Without one they would not: a clear error, nothing charged.
  await assert.rejects(union.consume('team-8'), { name: 'RangeError', code: 'ERR_INVALID_ID', message: /share a hash tag/ })
  assert.equal(await perHour.get('team-8'), null)
})

/** The port of the master that owns `key`'s slot, by the cluster's slot map (CLUSTER SLOTS). */
async function slotOwners() {
  const client = new IORedis(cluster.nodes[0].port, '127.0.0.1')
  try {
    const ranges = await client.cluster('SLOTS')
    return (key) => {
      const slot = keySlot(key)
      return ranges.find(([start, end]) => slot >= start && slot <= end)[2][1]
    }
  } finally {
    client.disconnect()
  }
}

/** Every key of the node at `port` matching `pattern` (SCAN to the end). */
async function keysOf(port, pattern) {
  const keys = []
  let cursor = '0'
  do {
    const [next, ...found] = (await cluster.cli(port, 'SCAN', cursor, 'MATCH', pattern, 'COUNT', 1000)).split('\n')
    cursor = next
    keys.push(...found.filter(Boolean))
  } while (cursor !== '0')
  return keys
}
