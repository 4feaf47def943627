'use strict'

// The sliding log (the rolling window counting allowed actions only) and its action log with
// metadata, on both stores; consume/peek/reset on every rolling window.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const IORedis = require('ioredis')
const upstream = require('rolling-rate-limiter')

const { SlidingLog, RateLimiter } = require('..')
const { useRedisServer } = require('./helpers/redis-server.js')
const { commandsRun } = require('./helpers/command-stats.js')

const redis = useRedisServer()
let counter = 0

const stores = {
  'in memory': (options) => new SlidingLog(options),
  'on Redis': (options) => {
    counter += 1
    return new SlidingLog({ client: redis.server.url, namespace: `log${counter}:`, ...options })
  },
}

const SECOND = 1000
const T = 1_515_120_000_000
const at = (seconds, extra) => ({ now: T + seconds * SECOND, ...extra })
const verdict = (allowed, timeLeft, remaining, limit, resetAfter) => ({ allowed, timeLeft, remaining, limit, resetAfter })

for (const [name, create] of Object.entries(stores)) {
  describe(`SlidingLog ${name}`, () => {
    it("follows the seed's table: 3 requests per 60 s, refusals not logged", async () => {
      const log = create({ interval: 60 * SECOND, maxInInterval: 3 })
      for (const second of [5, 15, 61]) assert.equal((await log.consume('user1', at(second))).allowed, true)
      assert.deepEqual(await log.consume('user1', at(70)), verdict(true, 0, 0, 3, 60 * SECOND))
      assert.deepEqual(await log.consume('user1', at(100)), verdict(true, 0, 0, 3, 60 * SECOND))
      // 12:01:50: refused until 12:01:01 leaves the window, at 12:02:01.
      assert.deepEqual(await log.consume('user1', at(110)), verdict(false, 11 * SECOND, 0, 3, 50 * SECOND))
      assert.deepEqual(await log.consume('user1', at(140)), verdict(true, 0, 1, 3, 60 * SECOND))
    })

    it('charges weights, keeps minDifference, and never admits a weight above the limit', async () => {
      const log = create({ interval: 10, maxInInterval: 5, minDifference: 2 })
      // Room for 2 more, but none right now: `remaining` is 0 until minDifference has passed.
      assert.deepEqual(await log.consume('u', { now: 0, weight: 3 }), verdict(true, 0, 0, 5, 10))
      assert.deepEqual(await log.consume('u', { now: 1 }), verdict(false, 1, 0, 5, 9))
      assert.deepEqual(await log.peek('u', { now: 2, weight: 3 }), verdict(false, 8, 2, 5, 8))
      assert.deepEqual(await log.consume('u', { now: 2, weight: 2 }), verdict(true, 0, 0, 5, 10))
      assert.deepEqual(await log.consume('u', { now: 9, weight: 6 }), verdict(false, Infinity, 0, 5, 3))
      await log.reset('u')
      assert.deepEqual(await log.peek('u', { now: 9, weight: 5 }), verdict(true, 0, 5, 5, 0))
    })

    it('keeps metadata with each action, so an operator can see who filled a limit', async () => {
      const log = create({ interval: 60 * SECOND, maxInInterval: 3 })
      await log.consume('ip:10.0.0.1', at(0, { meta: 'user:alice' }))
      await log.consume('ip:10.0.0.1', at(1, { meta: 'user:bob|admin', weight: 2 }))
      assert.equal((await log.consume('ip:10.0.0.1', at(2, { meta: 'user:eve' }))).allowed, false)
      assert.deepEqual(await log.entries('ip:10.0.0.1', at(3)), [
        { at: T, meta: 'user:alice' },
        { at: T + SECOND, meta: 'user:bob|admin' },
        { at: T + SECOND, meta: 'user:bob|admin' },
      ])
      // 60.5 s later the first entry has left the window.
      assert.equal((await log.entries('ip:10.0.0.1', at(60.5))).length, 2)
      assert.deepEqual(await log.entries('nobody', at(3)), [])
    })

    it('keeps an empty meta as a value, apart from none', async () => {
      // (On Redis an empty meta was stored as none: `entries` left `meta` out.)
      const log = create({ interval: 60 * SECOND, maxInInterval: 5 })
      await log.consume('u', at(0, { meta: '' }))
      await log.consume('u', at(1))
      await log.consume('u', at(2, { meta: '', weight: 2 }))
      assert.deepEqual(await log.entries('u', at(3)), [{ at: T, meta: '' }, { at: T + SECOND }, { at: T + 2 * SECOND, meta: '' }, { at: T + 2 * SECOND, meta: '' }])
    })

    it('takes limits above 100,000, and at most 10,000 actions in one call', async () => {
      // A million an hour: the log fills over many calls; one call logs at most 10,000.
      const log = create({ interval: 3600 * SECOND, maxInInterval: 1_000_000 })
      assert.deepEqual(await log.consume('global', at(0, { weight: 10_000 })), verdict(true, 0, 990_000, 1_000_000, 3600 * SECOND))
      assert.deepEqual(await log.peek('global', at(1, { weight: 10_000 })), verdict(true, 0, 990_000, 1_000_000, 3599 * SECOND))
      for (const call of [(options) => log.consume('global', options), (options) => log.peek('global', options)]) {
        await assert.rejects(call(at(2, { weight: 10_001 })), (error) => {
          assert.equal(error.name, 'RangeError')
          assert.equal(error.code, 'ERR_INVALID_ARGUMENT')
          assert.match(error.message, /`weight` of a sliding log's call must be at most 10000/)
          return true
        })
      }
      // Nothing was logged by the refused calls; a reward of any weight only forgets.
      assert.equal((await log.entries('global', at(3))).length, 10_000)
      assert.deepEqual(await log.reward('global', at(3, { weight: 50_000 })), verdict(true, 0, 1_000_000, 1_000_000, 0))
      // The same bound whatever the limit: a weight above it is an error, not a refusal.
      await assert.rejects(create({ interval: 1000, maxInInterval: 5 }).consume('u', { weight: 1e6 }), { name: 'RangeError', code: 'ERR_INVALID_ARGUMENT' })
    })

    it('rejects bad calls with codes', async () => {
      const log = create({ interval: 1000, maxInInterval: 1 })
      await assert.rejects(log.consume('u', { meta: 5 }), { name: 'TypeError', code: 'ERR_INVALID_ARGUMENT' })
      await assert.rejects(log.consume('u', { meta: 'x'.repeat(1025) }), { name: 'RangeError', code: 'ERR_INVALID_ARGUMENT' })
      await assert.rejects(log.consume('u', { weight: -1 }), { name: 'RangeError', code: 'ERR_INVALID_ARGUMENT' })
      await assert.rejects(log.limit('u', { weight: 2 }), { name: 'TypeError', code: 'ERR_UNKNOWN_OPTION' })
      await assert.rejects(log.entries(''), { code: 'ERR_INVALID_ID' })
    })
  })
}

describe('SlidingLog options', () => {
  it('takes no recordBlocked', () => {
    assert.throws(() => new SlidingLog({ interval: 1000, maxInInterval: 1, recordBlocked: true }), { code: 'ERR_UNKNOWN_OPTION' })
  })
})

describe('consume on any rolling window', () => {
  it('logs allowed actions only, even with recordBlocked (the default)', async () => {
    const limiter = new RateLimiter({ interval: 10, maxInInterval: 2 })
    assert.equal((await limiter.consume('u', { now: 0 })).allowed, true)
    assert.equal((await limiter.consume('u', { now: 1 })).allowed, true)
    assert.equal((await limiter.consume('u', { now: 2 })).allowed, false)
    // The refusal at 2 ms was not logged: the window has room again at 10 ms.
    assert.equal((await limiter.consume('u', { now: 10 })).allowed, true)
  })
})

describe('the sliding log on Redis', () => {
  it('logs each action as a member of its own, <call>:<n>|<meta>, scored by its time in µs', async () => {
    const log = new SlidingLog({ client: redis.server.url, namespace: 'members:', interval: 60 * SECOND, maxInInterval: 5 })
    await log.consume('u', { now: T, meta: 'one' })
    await log.consume('u', { now: T + SECOND, weight: 2 })
    const [first, firstScore, second, secondScore, third, thirdScore] = (await redis.server.cli('ZRANGE', 'members:u', '0', '-1', 'WITHSCORES')).split('\n')
    assert.match(first, /^.+:1\|one$/)
    assert.equal(firstScore, String(T * 1000))
    const call = second.replace(/:\d$/, '')
    assert.deepEqual([second, third].sort(), [`${call}:1`, `${call}:2`])
    assert.deepEqual([secondScore, thirdScore], [String((T + SECOND) * 1000), String((T + SECOND) * 1000)])
    assert.notEqual(call, first.replace(/:1\|one$/, ''))
  })

  it('counts first: an allowed action costs Redis a ZCARD, a ZCOUNT, a ZADD and an EXPIRE, a refused one a ZCARD and two ZRANGEs; it prunes what left the window over a second ago, and keeps the rest for late calls', async () => {
    const log = new SlidingLog({ client: redis.server.url, namespace: 'cost:', interval: 60 * SECOND, maxInInterval: 5 })
    await log.consume('warm-up', { now: T })
    const counted = ['script', 'time', 'zcard', 'zcount', 'zadd', 'zrange', 'zremrangebyscore', 'expire']
    const commandsOf = (call) => commandsRun(redis.server, counted, call)
    const scores = async () => (await redis.server.cli('ZRANGE', 'cost:u', '0', '-1', 'WITHSCORES')).split('\n').filter((_, i) => i % 2 === 1).map((score) => Number(score) / 1000 - T)
    const consumed = (seconds, expected) => commandsOf(async () => assert.deepEqual(await log.consume('u', at(seconds)), expected))
    assert.deepEqual(await consumed(0, verdict(true, 0, 4, 5, 60 * SECOND)), { script: 1, zcard: 1, zadd: 1, expire: 1 })
    assert.deepEqual(await consumed(0.5, verdict(true, 0, 3, 5, 60 * SECOND)), { script: 1, zcard: 1, zcount: 1, zadd: 1, expire: 1 })
    // Both left the window, less than a second ago: counted, and kept.
    assert.deepEqual(await consumed(60.7, verdict(true, 0, 4, 5, 60 * SECOND)), { script: 1, zcard: 1, zcount: 2, zadd: 1, zremrangebyscore: 1, expire: 1 })
    assert.deepEqual(await scores(), [0, 500, 60_700])
    // The first left over a second ago: pruned.
    await consumed(61.2, verdict(true, 0, 3, 5, 60 * SECOND))
    assert.deepEqual(await scores(), [500, 60_700, 61_200])
    // A call from a host whose clock is 0.8 s behind still counts the action at 0.5 s.
    assert.deepEqual(await log.consume('u', at(60.4)), verdict(true, 0, 1, 5, 60 * SECOND))
    // At 61.5 s, 0.5 s is a second out of the window: pruned.
    await consumed(61.4, verdict(true, 0, 1, 5, 60 * SECOND))
    await consumed(61.5, verdict(true, 0, 0, 5, 60 * SECOND))
    assert.deepEqual(await scores(), [60_400, 60_700, 61_200, 61_400, 61_500])
    // Refused (5 in the window, none before it): the log's ends are read (the oldest is the
    // anchor), nothing is counted or written.
    assert.deepEqual(await consumed(61.6, verdict(false, 58_800, 0, 5, 59_900)), { script: 1, zcard: 1, zrange: 2 })
    assert.deepEqual(await scores(), [60_400, 60_700, 61_200, 61_400, 61_500])
    // 60.4 s left the window 0.1 s ago: with 5 logged, the oldest is read, then the log counted.
    assert.deepEqual(await consumed(120.5, verdict(true, 0, 0, 5, 60 * SECOND)), { script: 1, zcard: 1, zrange: 1, zcount: 2, zadd: 1, zremrangebyscore: 1, expire: 1 })
    // Refused with 5 in the window and one kept before it: counted, then the newest and anchor read.
    assert.deepEqual(await consumed(120.6, verdict(false, 100, 0, 5, 59_900)), { script: 1, zcard: 1, zrange: 3, zcount: 2, zremrangebyscore: 1 })
    assert.deepEqual(await scores(), [60_400, 60_700, 61_200, 61_400, 61_500, 120_500])
  })

  it('forgets, on a refused consume too, what left the window over a second ago', async () => {
    const options = { interval: 60 * SECOND, maxInInterval: 1 }
    const memory = new SlidingLog(options)
    const onRedis = new SlidingLog({ client: redis.server.url, namespace: 'refused:', ...options })
    const scores = async () => (await redis.server.cli('ZRANGE', 'refused:u', '0', '-1', 'WITHSCORES')).split('\n').filter((_, i) => i % 2 === 1).map((score) => Number(score) / 1000 - T)
    // 0 s left the window at 60 s: kept by the allowed call at 60.5 s, forgotten by the refused
    // one at 61.6 s.
    for (const [seconds, allowed, kept] of [[0, true, [0]], [60.5, true, [0, 60_500]], [61.6, false, [60_500]]]) {
      const answer = await memory.consume('u', at(seconds))
      assert.deepEqual(await onRedis.consume('u', at(seconds)), answer)
      assert.equal(answer.allowed, allowed)
      assert.deepEqual(await scores(), kept)
    }
  })

  it('is read by rolling-rate-limiter, metadata and all', async () => {
    const log = new SlidingLog({ client: redis.server.url, namespace: 'shared:', interval: 60 * SECOND, maxInInterval: 3, clock: 'local' })
    const ioredis = new IORedis(redis.server.port, '127.0.0.1')
    try {
      const theirs = new upstream.RedisRateLimiter({ client: ioredis, namespace: 'shared:', interval: 60 * SECOND, maxInInterval: 3 })
      await log.consume('u', { meta: 'from ratekeeper', weight: 2 })
      const info = await theirs.wouldLimitWithInfo('u')
      assert.equal(info.actionsRemaining, 0)
      assert.equal(await theirs.limit('u'), false)
      assert.equal((await log.consume('u')).allowed, false)
      const ttl = Number(await redis.server.cli('TTL', 'shared:u'))
      assert.ok(ttl > 55 && ttl <= 61, `TTL ${ttl}`)
    } finally {
      ioredis.disconnect()
    }
  })
})
