'use strict'

// rolling-rate-limiter 0.4.2's own test cases ("sharedExamples"), with time injected through
// `{ now }`, run on every store and client form; then what the Redis layout must guarantee.

const { describe, it, before, after } = require('node:test')
const assert = require('node:assert/strict')
const IORedis = require('ioredis')
const { createClient } = require('redis')

const { InMemoryRateLimiter, RedisRateLimiter, IORedisRateLimiter, NodeRedisRateLimiter, RateLimiter, RedisStore } = require('..')
const { startRedis } = require('./helpers/redis-server.js')
const { commandsRun } = require('./helpers/command-stats.js')

let server
let ioredis
let nodeRedis
let store
let namespaceCounter = 0

before(async () => {
  server = await startRedis()
  ioredis = new IORedis(server.port, '127.0.0.1')
  nodeRedis = createClient({ url: server.url })
  await nodeRedis.connect()
  store = await RedisStore.connect(server.url)
})

after(async () => {
  await store.close()
  ioredis.disconnect()
  await nodeRedis.quit()
  await server.stop()
})

function uniqueNamespace() {
  namespaceCounter += 1
  return `test-${namespaceCounter}:`
}

const stores = {
  'InMemoryRateLimiter': (options) => new InMemoryRateLimiter(options),
  'RateLimiter (in memory by default)': (options) => new RateLimiter(options),
  'RedisRateLimiter on a URL': (options) => new RedisRateLimiter({ client: server.url, namespace: uniqueNamespace(), ...options }),
  'RedisRateLimiter on a RedisStore': (options) => new RedisRateLimiter({ client: store, namespace: uniqueNamespace(), ...options }),
  'RedisRateLimiter on an options object': (options) =>
    new RedisRateLimiter({ client: { host: '127.0.0.1', port: server.port }, namespace: uniqueNamespace(), ...options }),
  'IORedisRateLimiter on an ioredis client': (options) => new IORedisRateLimiter({ client: ioredis, namespace: uniqueNamespace(), ...options }),
  'NodeRedisRateLimiter on a node-redis client': (options) => new NodeRedisRateLimiter({ client: nodeRedis, namespace: uniqueNamespace(), ...options }),
  'RedisRateLimiter with the local clock': (options) =>
    new RedisRateLimiter({ client: store, namespace: uniqueNamespace(), clock: 'local', ...options }),
  'RedisRateLimiter at epoch times': (options) => new RedisRateLimiter({ client: store, namespace: uniqueNamespace(), ...options }),
}
/**
 * Added to the cases' times (milliseconds) on a store: rolling-rate-limiter's cases run from 0,
 * where a window starts before the epoch (which the script's count-first path leaves to reading
 * the log's ends); once more from today, where counting first answers.
 */
const TIME_OFFSETS = { 'RedisRateLimiter at epoch times': 1_700_000_000_000 }

const allowed = (millisecondsUntilAllowed, actionsRemaining) => ({
  blocked: false,
  blockedDueToCount: false,
  blockedDueToMinDifference: false,
  millisecondsUntilAllowed,
  actionsRemaining,
})
const blockedByCount = (millisecondsUntilAllowed) => ({
  blocked: true,
  blockedDueToCount: true,
  blockedDueToMinDifference: false,
  millisecondsUntilAllowed,
  actionsRemaining: 0,
})
const blockedByMinDifference = (millisecondsUntilAllowed, actionsRemaining) => ({
  blocked: true,
  blockedDueToCount: false,
  blockedDueToMinDifference: true,
  millisecondsUntilAllowed,
  actionsRemaining,
})

for (const [name, create] of Object.entries(stores)) {
  describe(name, () => {
    const id = 1
    const id2 = 2
    const offset = TIME_OFFSETS[name] ?? 0
    const at = (now) => ({ now: offset + now })

    it('prevents more than maxInInterval actions within interval', async () => {
      const limiter = create({ interval: 10, maxInInterval: 2 })
      assert.equal(await limiter.limit(id, at(0)), false)
      assert.equal(await limiter.wouldLimit(id, at(1)), false)
      assert.equal(await limiter.limit(id, at(1)), false)
      assert.equal(await limiter.wouldLimit(id, at(9)), true)
      assert.equal(await limiter.wouldLimit(id, at(10)), false)
      assert.equal(await limiter.limit(id, at(10)), false)
    })

    it('blocked actions count as actions', async () => {
      const limiter = create({ interval: 10, maxInInterval: 3 })
      for (let i = 0; i < 3; i++) assert.equal(await limiter.limit(id, at(0)), false)
      assert.equal(await limiter.limit(id, at(9)), true)
      assert.equal(await limiter.limit(id, at(9)), true)
      // The first three left the window, the two blocked ones remain: one more fits.
      assert.equal(await limiter.limit(id, at(10)), false)
      assert.equal(await limiter.limit(id, at(10)), true)
    })

    it('does not count blocked actions with recordBlocked: false', async () => {
      const limiter = create({ interval: 10, maxInInterval: 3, recordBlocked: false })
      for (let i = 0; i < 3; i++) assert.equal(await limiter.limit(id, at(0)), false)
      assert.equal(await limiter.limit(id, at(9)), true)
      assert.equal(await limiter.limit(id, at(9)), true)
      for (let i = 0; i < 3; i++) assert.equal(await limiter.limit(id, at(10)), false)
      assert.equal(await limiter.limit(id, at(10)), true)
    })

    it('with recordBlocked: false, answers a refusal for the log without it', async () => {
      // The push worker case: 2 per 3 s, 1 s apart; a deferred attempt must not push the next out.
      const limiter = create({ interval: 3000, maxInInterval: 2, minDifference: 1000, recordBlocked: false })
      assert.deepEqual(await limiter.limitWithInfo(id, at(0)), allowed(1000, 1))
      assert.deepEqual(await limiter.limitWithInfo(id, at(3)), blockedByMinDifference(997, 1))
      assert.deepEqual(await limiter.wouldLimitWithInfo(id, at(500)), blockedByMinDifference(500, 1))
      assert.deepEqual(await limiter.limitWithInfo(id, at(1000)), allowed(2000, 0))
      // Full: free when the action at 0 leaves the window, at 3000.
      assert.deepEqual(await limiter.limitWithInfo(id, at(2500)), blockedByCount(500))
      assert.deepEqual(await limiter.wouldLimitWithInfo(id, at(2600)), blockedByCount(400))
      assert.equal(await limiter.limit(id, at(3000)), false)
    })

    it('prevents actions less than minDifference apart', async () => {
      const limiter = create({ interval: 10, maxInInterval: 4, minDifference: 2 })
      assert.equal(await limiter.limit(id, at(0)), false)
      assert.equal(await limiter.limit(id, at(0)), true)
      assert.equal(await limiter.limit(id, at(1)), true)
      assert.equal(await limiter.limit(id, at(3)), false)
      assert.equal(await limiter.limit(id, at(3)), true)
    })

    it('keeps separate counts for separate ids', async () => {
      const limiter = create({ interval: 5, maxInInterval: 2 })
      assert.equal(await limiter.limit(id, at(0)), false)
      assert.equal(await limiter.limit(id, at(0)), false)
      assert.equal(await limiter.limit(id, at(0)), true)
      assert.equal(await limiter.limit(id2, at(1)), false)
      assert.equal(await limiter.limit(id2, at(1)), false)
      assert.equal(await limiter.limit(id2, at(1)), true)
      assert.equal(await limiter.limit(id, at(5)), false)
      assert.equal(await limiter.limit(id2, at(5)), true)
    })

    it('treats the number 1 and the string "1" as the same id', async () => {
      const limiter = create({ interval: 10, maxInInterval: 1 })
      assert.equal(await limiter.limit(1, at(0)), false)
      assert.equal(await limiter.limit('1', at(1)), true)
    })

    it('returns info about limiting (no min distance)', async () => {
      const limiter = create({ interval: 10, maxInInterval: 3 })
      assert.deepEqual(await limiter.limitWithInfo(id, at(0)), allowed(0, 2))
      assert.deepEqual(await limiter.limitWithInfo(id, at(4)), allowed(0, 1))
      assert.deepEqual(await limiter.limitWithInfo(id, at(5)), allowed(5, 0))
      assert.deepEqual(await limiter.limitWithInfo(id, at(8)), blockedByCount(6))
      assert.deepEqual(await limiter.wouldLimitWithInfo(id, at(11)), blockedByCount(4))
      assert.deepEqual(await limiter.wouldLimitWithInfo(id, at(17)), allowed(0, 1))
    })

    it('returns info about limiting (with min distance)', async () => {
      const limiter = create({ interval: 10, maxInInterval: 3, minDifference: 2 })
      assert.deepEqual(await limiter.limitWithInfo(id, at(0)), allowed(2, 2))
      assert.deepEqual(await limiter.limitWithInfo(id, at(4)), allowed(2, 1))
      assert.deepEqual(await limiter.limitWithInfo(id, at(5)), blockedByMinDifference(5, 0))
      assert.deepEqual(await limiter.limitWithInfo(id, at(8)), blockedByCount(6))
      assert.deepEqual(await limiter.wouldLimitWithInfo(id, at(11)), blockedByCount(4))
      assert.deepEqual(await limiter.wouldLimitWithInfo(id, at(17)), allowed(2, 1))
    })

    it("answers a new log's first action as rolling-rate-limiter does (maxInInterval 1: full at once)", async () => {
      const limiter = create({ interval: 10, maxInInterval: 1 })
      // Full with this one action, for the interval.
      assert.deepEqual(await limiter.limitWithInfo(id, at(3)), allowed(10, 0))
      // (rolling-rate-limiter's wait counts from the attempt, which it appends to the log.)
      assert.deepEqual(await limiter.wouldLimitWithInfo(id, at(5)), blockedByCount(10))
      assert.deepEqual(await limiter.limitWithInfo(id2, at(4)), allowed(10, 0))
    })

    it('rounds waits up to whole milliseconds, with fractional now', async () => {
      const limiter = create({ interval: 10, maxInInterval: 2 })
      assert.deepEqual(await limiter.limitWithInfo(id, at(0.4)), allowed(0, 1))
      // The window is full until 10.4 ms: from 1 ms that is 9.4 ms, reported as 10.
      assert.deepEqual(await limiter.limitWithInfo(id, at(1)), allowed(10, 0))
    })

    it('clears an id', async () => {
      const limiter = create({ interval: 10, maxInInterval: 1 })
      assert.equal(await limiter.limit(id, at(0)), false)
      assert.equal(await limiter.limit(id2, at(0)), false)
      await limiter.clear(id)
      assert.equal(await limiter.limit(id, at(1)), false)
      assert.equal(await limiter.limit(id2, at(1)), true)
    })

    it('refuses a missing id (only the callback API has a global limit)', async () => {
      const limiter = create({ interval: 10, maxInInterval: 1 })
      for (const call of ['limit', 'limitWithInfo', 'wouldLimit', 'wouldLimitWithInfo', 'clear', 'consume', 'peek', 'reset', 'entries']) {
        await assert.rejects(limiter[call](undefined, at(0)), { name: 'TypeError', code: 'ERR_INVALID_ID' }, call)
      }
      assert.equal(await limiter.limit('someone', at(1)), false)
    })

    it('takes maxInInterval above 100,000, as rolling-rate-limiter does', async () => {
      // (It was capped at 100,000: a global limit of a million an hour threw on the switch.)
      const limiter = create({ interval: 3_600_000, maxInInterval: 1_000_000 })
      assert.equal(limiter.maxInInterval, 1_000_000)
      assert.deepEqual(await limiter.limitWithInfo(id, at(0)), allowed(0, 999_999))
      assert.deepEqual(await limiter.limitWithInfo(id, at(1)), allowed(0, 999_998))
    })

    it('exposes the options as rolling-rate-limiter does (microseconds)', () => {
      const limiter = create({ interval: 10, maxInInterval: 3, minDifference: 2 })
      assert.equal(limiter.interval, 10_000)
      assert.equal(limiter.maxInInterval, 3)
      assert.equal(limiter.minDifference, 2_000)
    })
  })
}

describe('the Redis layout', () => {
  it("is rolling-rate-limiter's: a sorted set at namespace + id, scored in microseconds", async () => {
    const limiter = new RedisRateLimiter({ client: store, namespace: 'layout:', interval: 60_000, maxInInterval: 5 })
    const now = 1_700_000_000_123.456
    await limiter.limit('user', { now })
    await limiter.limit('user', { now: now + 1 })
    assert.equal(await server.cli('TYPE', 'layout:user'), 'zset')
    const [first, firstScore, second, secondScore] = (await server.cli('ZRANGE', 'layout:user', '0', '-1', 'WITHSCORES')).split('\n')
    assert.equal(Number(firstScore), 1_700_000_000_123_456)
    assert.equal(Number(secondScore), 1_700_000_000_124_456)
    assert.match(first, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-8[0-9a-f]{3}-[0-9a-f]{12}$/)
    assert.notEqual(first, second)
  })

  it('sets a TTL of interval (in seconds, rounded up) + 1 s on every key it writes, and writes nothing on peeks', async () => {
    const limiter = new RedisRateLimiter({ client: store, namespace: 'ttl:', interval: 89_500, maxInInterval: 5 })
    await limiter.limit('a')
    const ttl = Number(await server.cli('PTTL', 'ttl:a'))
    assert.ok(ttl > 90_000 && ttl <= 91_000, `PTTL ${ttl}`)
    await limiter.wouldLimit('b')
    assert.equal(await server.cli('EXISTS', 'ttl:b'), '0')
  })

  // From 1 s (a window that starts before the epoch: the log's ends are read) and from today
  // (counting first).
  for (const start of [1000, 1_700_000_000_000]) {
    it(`keeps at most maxInInterval members per id, however many attempts are blocked (from ${start} ms)`, async () => {
      const limiter = new RedisRateLimiter({ client: store, namespace: `cap${start}:`, interval: 60_000, maxInInterval: 3 })
      for (let i = 0; i < 50; i++) await limiter.limit('flood', { now: start + i })
      assert.equal(await server.cli('ZCARD', `cap${start}:flood`), '3')
      // The answer is the one the uncapped log of 50 gives: timestamps[51 - 3] is the attempt at
      // start + 48 ms.
      assert.deepEqual(await limiter.wouldLimitWithInfo('flood', { now: start + 50 }), blockedByCount(60_000 - 2))
    })
  }

  it('counts first: a call costs Redis a ZCARD, a ZCOUNT, a ZADD and an EXPIRE (entries that left the window: a ZCOUNT and a ZREMRANGEBYRANK more)', async () => {
    const limiter = new RedisRateLimiter({ client: store, namespace: 'cost:', interval: 60_000, maxInInterval: 3 })
    const T = 1_700_000_000_000
    await limiter.limit('warm-up', { now: T })
    const counted = ['script', 'time', 'zcard', 'zcount', 'zadd', 'zrange', 'zrem', 'zremrangebyrank', 'zremrangebyscore', 'expire']
    const commandsOf = (call) => commandsRun(server, counted, call)
    const scores = async () => (await server.cli('ZRANGE', 'cost:u', '0', '-1', 'WITHSCORES')).split('\n').filter((_, i) => i % 2 === 1).map(Number)
    // A new log.
    assert.deepEqual(await commandsOf(() => limiter.limit('u', { now: T })), { script: 1, zcard: 1, zadd: 1, expire: 1 })
    assert.deepEqual(await commandsOf(() => limiter.limit('u', { now: T + 1000 })), { script: 1, zcard: 1, zcount: 1, zadd: 1, expire: 1 })
    // 61.5 s on, the first two left the window: they are counted, and pruned by rank.
    assert.deepEqual(
      await commandsOf(async () => assert.deepEqual(await limiter.limitWithInfo('u', { now: T + 61_500 }), allowed(0, 2))),
      { script: 1, zcard: 1, zcount: 2, zadd: 1, zremrangebyrank: 1, expire: 1 },
    )
    assert.deepEqual(await scores(), [(T + 61_500) * 1000])
    // Full: the newest two and the anchor are read.
    await limiter.limit('u', { now: T + 62_000 })
    assert.deepEqual(
      await commandsOf(async () => assert.deepEqual(await limiter.limitWithInfo('u', { now: T + 63_000 }), allowed(58_500, 0))),
      { script: 1, zcard: 1, zcount: 1, zadd: 1, zrange: 2, expire: 1 },
    )
    // With the server's clock, it is read once (TIME) and sent back for the count alone.
    const fresh = await commandsOf(() => limiter.limit('v'))
    assert.deepEqual(fresh, { script: 1, time: 1, zcard: 1, zadd: 1, expire: 1 })
    assert.deepEqual(await limiter.wouldLimitWithInfo('v'), allowed(0, 1))
  })

  it('refuses a log holding a negative score, also in the first interval after the epoch (a window that starts before it)', async () => {
    const limiter = new RedisRateLimiter({ client: store, namespace: 'negative:', interval: 60_000, maxInInterval: 5 })
    await server.cli('ZADD', 'negative:u', '-1000', 'x')
    for (const now of [1000, 1_700_000_000_000]) {
      await assert.rejects(limiter.limit('u', { now }), (error) => error.code === 'ERR_STORE_ERROR' && /negative:u holds a score of -1000/.test(error.message))
    }
    assert.equal(await server.cli('ZRANGE', 'negative:u', '0', '-1', 'WITHSCORES'), 'x\n-1000')
  })

  it('prunes exactly the entries that left the window, the newest of them at its start', async () => {
    const limiter = new RedisRateLimiter({ client: store, namespace: 'prune:', interval: 60_000, maxInInterval: 5 })
    const T = 1_700_000_000_000
    for (const at of [T, T + 1000, T + 2000, T + 3000]) await limiter.limit('u', { now: at })
    // The window at T + 61 s starts at T + 1 s (excluded): T and T + 1 s leave it.
    assert.deepEqual(await limiter.limitWithInfo('u', { now: T + 61_000 }), allowed(0, 2))
    const scores = (await server.cli('ZRANGE', 'prune:u', '0', '-1', 'WITHSCORES')).split('\n').filter((_, i) => i % 2 === 1).map(Number)
    assert.deepEqual(scores, [T + 2000, T + 3000, T + 61_000].map((ms) => ms * 1000))
  })

  it('uses the Redis server clock by default', async () => {
    const limiter = new RedisRateLimiter({ client: store, namespace: 'clock:', interval: 60_000, maxInInterval: 5 })
    await limiter.limit('x')
    const [seconds, micros] = (await server.cli('TIME')).split('\n').map(Number)
    const serverNow = seconds * 1e6 + micros
    const score = Number((await server.cli('ZRANGE', 'clock:x', '0', '0', 'WITHSCORES')).split('\n')[1])
    assert.ok(score <= serverNow && serverNow - score < 5e6, `score ${score}, server time ${serverNow}`)
  })

  it('builds one store per client object and per URL', () => {
    const a = new RedisRateLimiter({ client: ioredis, namespace: 'a:', interval: 1000, maxInInterval: 1 })
    const b = new RedisRateLimiter({ client: ioredis, namespace: 'b:', interval: 1000, maxInInterval: 1 })
    assert.equal(a.detectedClientType, 'ioredis')
    assert.equal(a.namespace, 'a:')
    assert.equal(RedisRateLimiter.determineRedisClientType(nodeRedis), 'node-redis')
    assert.equal(RedisRateLimiter.determineRedisClientType({ connect() {} }), null)
    assert.ok(a.window && b.window)
  })
})

describe('the in-memory store', () => {
  it('does not grow without bound', async () => {
    const limiter = new InMemoryRateLimiter({ interval: 10, maxInInterval: 1 })
    for (let i = 0; i < 20_000; i++) await limiter.limit(`id-${i}`, { now: i })
    // Every id is idle 10 ms after its call; sweeps keep the map within twice the threshold.
    assert.ok(limiter.trackedIds <= 2048, `${limiter.trackedIds} ids tracked`)
  })
})
