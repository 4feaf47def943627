'use strict'

// LeakyBucket: the leaky bucket as a meter. Leaks keep their phase (at ts + k * leakInterval), an
// empty bucket is forgotten, only allowed actions fill the bucket; the same numbers on both stores.

const { describe, it, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fc = require('fast-check')

const { LeakyBucket, RedisStore } = require('..')
const { useRedisServer } = require('./helpers/redis-server.js')
const { startArb } = require('./helpers/start-times.js')

const redis = useRedisServer()
let namespaceCounter = 0
const nextNamespace = () => `lb-${++namespaceCounter}:`

/** The namespace of each limiter on Redis. */
const namespaces = new WeakMap()

const stores = {
  'in memory': (options) => new LeakyBucket(options),
  'on Redis': (options) => {
    const namespace = nextNamespace()
    const limiter = new LeakyBucket({ client: redis.server.url, namespace, ...options })
    namespaces.set(limiter, namespace)
    return limiter
  },
}

const SECOND = 1000
const DAY = 86_400 * SECOND
// 12:00:00 UTC: the seed's table starts here.
const NOON = Date.UTC(2018, 0, 5, 12)
const T0 = 1_700_000_000_000

const verdict = (allowed, timeLeft, remaining, limit, resetAfter) => ({ allowed, timeLeft, remaining, limit, resetAfter })

/** Whether the Redis key of `id` exists. */
const keyExists = async (limiter, id) => (await redis.server.cli('EXISTS', `${namespaces.get(limiter)}${id}`)) === '1'

for (const [name, build] of Object.entries(stores)) {
  const onRedis = name === 'on Redis'

  describe(`LeakyBucket ${name}`, () => {
    it("works the seed's table (3, leaking 1 per 20 s) with the phase kept", async () => {
      const limiter = build({ capacity: 3, leakInterval: 20 * SECOND })
      const at = (s) => ({ now: NOON + s * SECOND })
      // 12:00:05: a new bucket, level 1, ts 12:00:05; its leak at 12:00:25 empties it.
      assert.deepEqual(await limiter.consume('user1', at(5)), verdict(true, 0, 2, 3, 20 * SECOND))
      // 12:00:15: no leak yet; level 2, leaks at 12:00:25 and 12:00:45: empty in 30 s.
      assert.deepEqual(await limiter.consume('user1', at(15)), verdict(true, 0, 1, 3, 30 * SECOND))
      // 12:01:01: 56 s since ts = floor(56 / 20) = 2 leaks >= ceil(2 / 1): empty, forgotten; a new
      // bucket at 12:01:01, level 1.
      assert.deepEqual(await limiter.consume('user1', at(61)), verdict(true, 0, 2, 3, 20 * SECOND))
      // 12:01:10: 9 s, no leak; level 2, empty at 12:01:01 + 40 s = 12:01:41: in 31 s.
      assert.deepEqual(await limiter.consume('user1', at(70)), verdict(true, 0, 1, 3, 31 * SECOND))
      // 12:01:40: 39 s = 1 leak (12:01:21); ts = 12:01:21, level 2 - 1 + 1 = 2; empty at 12:02:01.
      assert.deepEqual(await limiter.consume('user1', at(100)), verdict(true, 0, 1, 3, 21 * SECOND))
      // 12:01:50: 29 s since 12:01:21 = 1 leak (12:01:41); level 2 - 1 + 1 = 2, empty at 12:02:21.
      assert.deepEqual(await limiter.consume('user1', at(110)), verdict(true, 0, 1, 3, 31 * SECOND))
      // 12:02:20: 39 s since 12:01:41 = 1 leak (12:02:01); level 2 - 1 + 1 = 2, empty at 12:02:41.
      assert.deepEqual(await limiter.consume('user1', at(140)), verdict(true, 0, 1, 3, 21 * SECOND))
      // Two more need 2 + 2 - 3 = 1 leak: the one at 12:02:21, in 1 s.
      assert.deepEqual(await limiter.peek('user1', { ...at(140), weight: 2 }), verdict(false, SECOND, 1, 3, 21 * SECOND))
      assert.deepEqual(await limiter.consume('user1', { ...at(141), weight: 2 }), verdict(true, 0, 0, 3, 60 * SECOND))
    })

    it('refuses a burst until exactly the leaks it needs, and never a weight above the capacity', async () => {
      const limiter = build({ capacity: 3, leakInterval: 20 * SECOND })
      assert.equal(limiter.capacity, 3)
      assert.equal(limiter.leakInterval, 20 * SECOND)
      assert.equal(limiter.leakAmount, 1)
      // Full at T0 (ts = T0): it leaks at T0 + 20 s, 40 s, 60 s.
      assert.deepEqual(await limiter.consume('u', { now: T0, weight: 3 }), verdict(true, 0, 0, 3, 60 * SECOND))
      // One more needs ceil((3 + 1 - 3) / 1) = 1 leak: T0 + 20 s.
      assert.deepEqual(await limiter.consume('u', { now: T0 + SECOND }), verdict(false, 19 * SECOND, 0, 3, 59 * SECOND))
      // 1 µs before the leak: 1 µs to wait, rounded up to 1 ms; empty in 40.000001 s.
      assert.deepEqual(await limiter.peek('u', { now: T0 + 19_999.999 }), verdict(false, 1, 0, 3, 40_001))
      assert.deepEqual(await limiter.consume('u', { now: T0 + 20 * SECOND }), verdict(true, 0, 0, 3, 60 * SECOND))
      // Weight 2 needs 2 leaks after the new ts (T0 + 20 s): T0 + 60 s.
      assert.deepEqual(await limiter.consume('u', { now: T0 + 20 * SECOND, weight: 2 }), verdict(false, 40 * SECOND, 0, 3, 60 * SECOND))
      assert.deepEqual(await limiter.peek('u', { now: T0 + 59_999.999, weight: 2 }), verdict(false, 1, 1, 3, 20_001))
      assert.deepEqual(await limiter.consume('u', { now: T0 + 60 * SECOND, weight: 2 }), verdict(true, 0, 0, 3, 60 * SECOND))
      // Above the capacity: never, and nothing is written (a fresh id stays without state).
      assert.deepEqual(await limiter.consume('u', { now: T0 + 70 * SECOND, weight: 4 }), verdict(false, Infinity, 0, 3, 50 * SECOND))
      assert.deepEqual(await limiter.consume('fresh', { now: T0, weight: 4 }), verdict(false, Infinity, 3, 3, 0))
      if (onRedis) assert.equal(await keyExists(limiter, 'fresh'), false)
      else assert.equal(limiter.trackedIds, 1)
      assert.deepEqual(await limiter.peek('fresh', { now: T0 }), verdict(true, 0, 3, 3, 0))
    })

    it('leaks leakAmount at a time: a partial bucket empties in one leak', async () => {
      // 10, leaking 4 per second.
      const limiter = build({ capacity: 10, leakAmount: 4, leakInterval: SECOND })
      assert.equal(limiter.leakAmount, 4)
      // Empty after ceil(10 / 4) = 3 leaks.
      assert.deepEqual(await limiter.consume('u', { now: T0, weight: 10 }), verdict(true, 0, 0, 10, 3 * SECOND))
      // 5 more need ceil(5 / 4) = 2 leaks: T0 + 2 s.
      assert.deepEqual(await limiter.consume('u', { now: T0 + 500, weight: 5 }), verdict(false, 1500, 0, 10, 2500))
      // T0 + 1 s: level 6 (ts T0 + 1 s); 5 need ceil(1 / 4) = 1 more leak; 4 fit.
      assert.deepEqual(await limiter.consume('u', { now: T0 + SECOND, weight: 5 }), verdict(false, SECOND, 4, 10, 2 * SECOND))
      assert.deepEqual(await limiter.consume('u', { now: T0 + SECOND, weight: 4 }), verdict(true, 0, 0, 10, 3 * SECOND))
      // T0 + 3.2 s: 2 leaks (2 s, 3 s) take 8: level 2, ts T0 + 3 s; + 1 = 3, one leak from empty.
      assert.deepEqual(await limiter.consume('u', { now: T0 + 3200 }), verdict(true, 0, 7, 10, 800))
      // T0 + 4 s: the leak takes the 3 left.
      assert.deepEqual(await limiter.peek('u', { now: T0 + 4 * SECOND }), verdict(true, 0, 10, 10, 0))
    })

    it('empties after an idle gap of days, exactly, even with the largest numbers', async () => {
      const limiter = build({ capacity: 3, leakInterval: 20 * SECOND })
      await limiter.consume('u', { now: T0, weight: 3 })
      // 3 days = 12,960 leaks >= 3: empty; a new bucket starts at the call.
      assert.deepEqual(await limiter.peek('u', { now: T0 + 3 * DAY + 0.007 }), verdict(true, 0, 3, 3, 0))
      assert.deepEqual(await limiter.consume('u', { now: T0 + 3 * DAY + 0.007, weight: 3 }), verdict(true, 0, 0, 3, 60 * SECOND))
      // 1e15 leaking 1e15 per microsecond.
      const huge = build({ capacity: 1e15, leakAmount: 1e15, leakInterval: 0.001 })
      assert.deepEqual(await huge.consume('u', { now: T0, weight: 1e15 }), verdict(true, 0, 0, 1e15, 1))
      assert.deepEqual(await huge.consume('u', { now: T0 }), verdict(false, 1, 0, 1e15, 1))
      assert.deepEqual(await huge.consume('u', { now: T0 + 0.001 }), verdict(true, 0, 1e15 - 1, 1e15, 1))
      assert.deepEqual(await huge.consume('u', { now: T0 + 30 * DAY + 0.003, weight: 1e15 }), verdict(true, 0, 0, 1e15, 1))
    })

    it('answers calls at the same microsecond one after the other', async () => {
      const limiter = build({ capacity: 2, leakInterval: 20 * SECOND })
      const now = T0 + 0.001
      assert.deepEqual(await limiter.consume('u', { now }), verdict(true, 0, 1, 2, 20 * SECOND))
      assert.deepEqual(await limiter.consume('u', { now }), verdict(true, 0, 0, 2, 40 * SECOND))
      assert.deepEqual(await limiter.consume('u', { now }), verdict(false, 20 * SECOND, 0, 2, 40 * SECOND))
      const answers = await Promise.all(Array.from({ length: 10 }, () => limiter.consume('v', { now })))
      assert.equal(answers.filter((a) => a.allowed).length, 2)
    })

    it('drains nothing for a late call, and never moves ts back', async () => {
      const limiter = build({ capacity: 3, leakInterval: 20 * SECOND })
      assert.deepEqual(await limiter.consume('u', { now: T0 + 40 * SECOND, weight: 3 }), verdict(true, 0, 0, 3, 60 * SECOND))
      // Half a second behind ts: no leak; the first is at ts + 20 s, 20.5 s away.
      assert.deepEqual(await limiter.consume('u', { now: T0 + 39_500 }), verdict(false, 20_500, 0, 3, 60_500))
      assert.deepEqual(await limiter.consume('u', { now: T0 + 60 * SECOND }), verdict(true, 0, 0, 3, 60 * SECOND))
      assert.deepEqual(await limiter.consume('u', { now: T0 + 59 * SECOND }), verdict(false, 21 * SECOND, 0, 3, 61 * SECOND))
      // A bucket restarted at T0 + 30 s; a call at T0 + 25 s fills it and leaves ts at T0 + 30 s.
      assert.deepEqual(await limiter.consume('v', { now: T0 }), verdict(true, 0, 2, 3, 20 * SECOND))
      assert.deepEqual(await limiter.consume('v', { now: T0 + 30 * SECOND }), verdict(true, 0, 2, 3, 20 * SECOND))
      assert.deepEqual(await limiter.consume('v', { now: T0 + 25 * SECOND }), verdict(true, 0, 1, 3, 45 * SECOND))
      assert.deepEqual(await limiter.peek('v', { now: T0 + 50 * SECOND }), verdict(true, 0, 2, 3, 20 * SECOND))
    })

    it('waits exactly timeLeft: refused 1 ms before, allowed at it (random states, fractional nows)', async () => {
      const state = fc.record({
        capacity: fc.integer({ min: 1, max: 8 }),
        leakAmount: fc.integer({ min: 1, max: 3 }),
        intervalUs: fc.integer({ min: 1, max: 3_000_000 }),
        startUs: fc.integer({ min: 0, max: 1_000_000 }),
        // Weights (taken modulo the capacity) and the µs until the next call.
        calls: fc.array(fc.tuple(fc.integer({ min: 1, max: 8 }), fc.oneof(fc.integer({ min: 0, max: 300_000 }), fc.integer({ min: 0, max: 6_000_000 }))), { minLength: 1, maxLength: 8 }),
        last: fc.integer({ min: 1, max: 8 }),
      })
      await fc.assert(
        fc.asyncProperty(state, async ({ capacity, leakAmount, intervalUs, startUs, calls, last }) => {
          const limiter = build({ capacity, leakAmount, leakInterval: intervalUs / 1000 })
          const fit = (w) => 1 + ((w - 1) % capacity)
          let us = startUs
          for (const [w, gap] of calls) {
            await limiter.consume('u', { now: T0 + us / 1000, weight: fit(w) })
            us += gap
          }
          const now = T0 + us / 1000
          const weight = fit(last)
          const answer = await limiter.consume('u', { now, weight })
          if (answer.allowed) return
          assert.equal((await limiter.peek('u', { now: now + answer.timeLeft - 1, weight })).allowed, false)
          assert.equal((await limiter.consume('u', { now: now + answer.timeLeft, weight })).allowed, true)
        }),
        { numRuns: 100, seed: onRedis ? 8 : 7 },
      )
    })

    it('checks several ids together and charges none when one refuses', async () => {
      const limiter = build({ capacity: 2, leakInterval: SECOND })
      assert.equal((await limiter.consume('ip', { now: T0, weight: 2 })).allowed, true)
      // ip is full until T0 + 1 s; user is not charged.
      assert.deepEqual(await limiter.consume(['user', 'ip'], { now: T0 + 10 }), verdict(false, 990, 0, 2, 1990))
      if (onRedis) assert.equal(await keyExists(limiter, 'user'), false)
      else assert.equal(limiter.trackedIds, 1)
      assert.deepEqual(await limiter.peek('user', { now: T0 + 10 }), verdict(true, 0, 2, 2, 0))
      // At T0 + 1 s ip has leaked 1: both take 1; ip empties at T0 + 3 s, user at T0 + 2 s.
      assert.deepEqual(await limiter.consume(['user', 'ip'], { now: T0 + SECOND }), verdict(true, 0, 0, 2, 2 * SECOND))
      assert.deepEqual(await limiter.peek('user', { now: T0 + SECOND }), verdict(true, 0, 1, 2, SECOND))
    })

    it('gives weight back with reward, never below empty, never creating state', async () => {
      const limiter = build({ capacity: 5, leakInterval: SECOND })
      assert.deepEqual(await limiter.reward('ghost', { now: T0 }), verdict(true, 0, 5, 5, 0))
      if (onRedis) assert.equal(await keyExists(limiter, 'ghost'), false)
      else assert.equal(limiter.trackedIds, 0)
      assert.deepEqual(await limiter.consume('u', { now: T0, weight: 5 }), verdict(true, 0, 0, 5, 5 * SECOND))
      // T0 + 1.5 s: one leak (ts T0 + 1 s), 4 - 2 = 2; empty at T0 + 3 s.
      assert.deepEqual(await limiter.reward('u', { now: T0 + 1500, weight: 2 }), verdict(true, 0, 3, 5, 1500))
      assert.deepEqual(await limiter.peek('u', { now: T0 + 1500 }), verdict(true, 0, 3, 5, 1500))
      assert.deepEqual(await limiter.peek('u', { now: T0 + 1500, weight: 4 }), verdict(false, 500, 3, 5, 1500))
      if (onRedis) {
        const ttl = Number(await redis.server.cli('PTTL', `${namespaces.get(limiter)}u`))
        assert.ok(ttl > 5000 && ttl <= 6000, `PTTL ${ttl}`)
      }
      assert.deepEqual(await limiter.reward('u', { now: T0 + 1500, weight: 10 }), verdict(true, 0, 5, 5, 0))
      if (onRedis) assert.equal(await keyExists(limiter, 'u'), false)
      else assert.equal(limiter.trackedIds, 0)
      assert.deepEqual(await limiter.reward('u', { now: T0 + 1500 }), verdict(true, 0, 5, 5, 0))
      if (onRedis) assert.equal(await keyExists(limiter, 'u'), false)
      else assert.equal(limiter.trackedIds, 0)
    })

    it('resets ids', async () => {
      const limiter = build({ capacity: 1, leakInterval: SECOND })
      await limiter.consume(['a', 'b'], { now: T0 })
      await limiter.reset(['a', 'b'])
      assert.deepEqual(await limiter.consume(['a', 'b'], { now: T0 }), verdict(true, 0, 0, 1, SECOND))
    })

    it('rejects bad calls with codes', async () => {
      const limiter = build({ capacity: 2, leakInterval: SECOND })
      await assert.rejects(limiter.consume('u', { weight: 0 }), { name: 'RangeError', code: 'ERR_INVALID_ARGUMENT' })
      await assert.rejects(limiter.consume('u', { weight: 1.5 }), { name: 'RangeError', code: 'ERR_INVALID_ARGUMENT' })
      await assert.rejects(limiter.consume('u', { weight: '1' }), { name: 'TypeError', code: 'ERR_INVALID_ARGUMENT' })
      await assert.rejects(limiter.consume('u', { now: -1 }), { name: 'RangeError', code: 'ERR_INVALID_ARGUMENT' })
      await assert.rejects(limiter.reward('u', { now: NaN }), { code: 'ERR_INVALID_ARGUMENT' })
      await assert.rejects(limiter.consume('u', { wieght: 2 }), { name: 'TypeError', code: 'ERR_UNKNOWN_OPTION' })
      await assert.rejects(limiter.consume([]), { name: 'RangeError', code: 'ERR_INVALID_ID' })
    })
  })
}

describe('LeakyBucket options', () => {
  const cases = [
    [{}, 'TypeError', /`capacity` and `leakInterval` are required/],
    [{ capacity: 3 }, 'TypeError', /`leakInterval` is required/],
    [{ leakInterval: 1000 }, 'TypeError', /`capacity` is required/],
    [{ capacity: '3', leakInterval: 1000 }, 'TypeError', /`capacity`/],
    [{ capacity: 3, leakInterval: 1000, leakAmount: null }, 'TypeError', /`leakAmount`/],
    [{ capacity: 0, leakInterval: 1000 }, 'RangeError', /`capacity`/],
    [{ capacity: 2.5, leakInterval: 1000 }, 'RangeError', /`capacity`/],
    [{ capacity: 1e16, leakInterval: 1000 }, 'RangeError', /`capacity`/],
    [{ capacity: 3, leakAmount: 0, leakInterval: 1000 }, 'RangeError', /`leakAmount`/],
    [{ capacity: 3, leakAmount: 1.5, leakInterval: 1000 }, 'RangeError', /`leakAmount`/],
    [{ capacity: 3, leakInterval: 0 }, 'RangeError', /`leakInterval`/],
    [{ capacity: 3, leakInterval: -5 }, 'RangeError', /`leakInterval`/],
    [{ capacity: 3, leakInterval: 0.0004 }, 'RangeError', /`leakInterval`.*one microsecond/],
    [{ capacity: 3, leakInterval: 2e12 }, 'RangeError', /`leakInterval`/],
    [{ capacity: 3, leakInterval: Infinity }, 'RangeError', /`leakInterval`/],
    // ceil(1e15 / 1) * 10 µs and ceil(10 / 1) * 1e15 µs: past 2^53 µs.
    [{ capacity: 1e15, leakInterval: 0.01 }, 'RangeError', /`capacity`, `leakAmount` and `leakInterval`.*2\^53/],
    [{ capacity: 10, leakInterval: 1e12 }, 'RangeError', /`capacity`, `leakAmount` and `leakInterval`.*2\^53/],
    [{ capacity: 3, leakInterval: 1000, limits: [] }, 'TypeError', /`limits`/],
    [{ capacity: 3, leakInterval: 1000, leakIntervall: 5 }, 'TypeError', /`leakIntervall`/],
  ]
  for (const [options, errorName, message] of cases) {
    it(`rejects ${JSON.stringify(options)}`, () => {
      assert.throws(() => new LeakyBucket(options), (error) => {
        assert.equal(error.name, errorName)
        assert.match(error.code, /^ERR_(INVALID|UNKNOWN)_OPTION$/)
        if (/leakIntervall|limits/.test(JSON.stringify(options))) assert.equal(error.code, 'ERR_UNKNOWN_OPTION')
        else assert.equal(error.code, 'ERR_INVALID_OPTION')
        assert.match(error.message, message)
        return true
      })
    })
  }

  it('takes the largest exact drain times', () => {
    new LeakyBucket({ capacity: 9, leakInterval: 1e12 })
    new LeakyBucket({ capacity: 1e15, leakInterval: 0.009 })
    new LeakyBucket({ capacity: 1e15, leakAmount: 1e15, leakInterval: 1e12 })
  })
})

describe('LeakyBucket on Redis', () => {
  /** The bucket at `key`: the string `<level>:<ts>`. */
  const read = async (key) => {
    assert.equal(await redis.server.cli('TYPE', key), 'string')
    return redis.server.cli('GET', key)
  }

  it('keeps the seed\'s level and ts (µs) as one string per id, `<level>:<ts>`, with a TTL of the drain time plus a second', async () => {
    const limiter = new LeakyBucket({ client: redis.server.url, namespace: 'layout:', capacity: 3, leakInterval: 20 * SECOND })
    await limiter.consume('u', { now: T0 + 1.5, weight: 2 })
    assert.equal(await read('layout:u'), `2:${T0 * 1000 + 1500}`)
    const ttl = Number(await redis.server.cli('PTTL', 'layout:u'))
    assert.ok(ttl > 60_000 && ttl <= 61_000, `PTTL ${ttl}`)
    // 25 s later: one leak, at ts + 20 s (the phase is kept), then the new weight.
    await limiter.consume('u', { now: T0 + 25 * SECOND })
    assert.equal(await read('layout:u'), `2:${T0 * 1000 + 1500 + 20_000_000}`)
    // Refusals and peeks write nothing.
    await redis.server.cli('PEXPIRE', 'layout:u', 100_000)
    await limiter.consume('u', { now: T0 + 26 * SECOND, weight: 2 })
    await limiter.peek('u', { now: T0 + 50 * SECOND })
    assert.equal(await read('layout:u'), `2:${T0 * 1000 + 1500 + 20_000_000}`)
    assert.ok(Number(await redis.server.cli('PTTL', 'layout:u')) > 61_000)
    await limiter.peek('other')
    assert.equal(await redis.server.cli('EXISTS', 'layout:other'), '0')
  })

  it("counts on an earlier version's hash (`level`, `ts`) and replaces it with its string at the next write", async () => {
    const limiter = new LeakyBucket({ client: redis.server.url, namespace: 'old:', capacity: 3, leakInterval: SECOND })
    // Earlier versions kept a bucket as a hash: 2 in it as of T0.
    await redis.server.cli('HSET', 'old:u', 'level', '2', 'ts', String(T0 * 1000))
    assert.equal((await limiter.peek('u', { now: T0, weight: 2 })).allowed, false)
    assert.equal((await limiter.consume('u', { now: T0, weight: 2 })).allowed, false)
    assert.equal(await redis.server.cli('TYPE', 'old:u'), 'hash')
    // 1.5 s later one has leaked (at T0 + 1 s): 1 + 2 fits, and the bucket is a string.
    assert.equal((await limiter.consume('u', { now: T0 + 1500, weight: 2 })).allowed, true)
    assert.equal(await read('old:u'), `3:${(T0 + 1000) * 1000}`)
    assert.ok(Number(await redis.server.cli('PTTL', 'old:u')) > 3000)
  })

  it('refuses data it did not write and leaves it as it was', async () => {
    const limiter = new LeakyBucket({ client: redis.server.url, namespace: 'foreign:', capacity: 3, leakInterval: SECOND })
    for (const [id, value] of [
      ['text', 'abc:1'],
      ['minus', '1:-5'],
      ['lone', '1'],
      ['three', '1:1:1'],
    ]) {
      await redis.server.cli('SET', `foreign:${id}`, value)
      for (const call of [() => limiter.consume(id), () => limiter.peek(id), () => limiter.reward(id)]) {
        await assert.rejects(call(), { code: 'ERR_STORE_ERROR', message: new RegExp(`foreign:${id}`) })
      }
      assert.equal(await redis.server.cli('GET', `foreign:${id}`), value)
      assert.equal(await redis.server.cli('PTTL', `foreign:${id}`), '-1')
    }
    // An earlier version's hash holding what it would not have written.
    for (const [id, fields] of [
      ['abc', ['level', 'abc', 'ts', '1']],
      ['negative', ['level', '-5', 'ts', '1']],
      ['extra', ['level', '1', 'ts', '1', 'foo', 'bar']],
      ['half', ['level', '1']],
      ['other', ['count', '1']],
    ]) {
      await redis.server.cli('HSET', `foreign:${id}`, ...fields)
      for (const call of [() => limiter.consume(id), () => limiter.peek(id), () => limiter.reward(id)]) {
        await assert.rejects(call(), { code: 'ERR_STORE_ERROR', message: new RegExp(`foreign:${id}`) })
      }
      assert.equal(await redis.server.cli('HLEN', `foreign:${id}`), String(fields.length / 2))
      assert.equal(await redis.server.cli('PTTL', `foreign:${id}`), '-1')
    }
    await redis.server.cli('RPUSH', 'foreign:list', 'x')
    await assert.rejects(limiter.consume('list'), { code: 'ERR_STORE_ERROR', message: /WRONGTYPE/ })
  })

  it('admits exactly the capacity to concurrent callers', async () => {
    const limiter = new LeakyBucket({ client: redis.server.url, namespace: 'race:', capacity: 100, leakInterval: 60 * SECOND })
    const answers = await Promise.all(Array.from({ length: 300 }, () => limiter.consume('hot')))
    assert.equal(answers.filter((a) => a.allowed).length, 100)
  })
})

describe('LeakyBucket properties', () => {
  let store
  before(async () => {
    store = await RedisStore.connect(redis.server.url)
  })
  after(() => store && store.close())

  const OPTIONS = { capacity: 4, leakAmount: 2, leakInterval: 700 }
  const I = 700_000 // µs
  const ids = ['a', 'b', 'c']

  /**
   * Runs `calls` on both stores from `start` (ms); returns the answers and each id's log of allowed
   * consumes (µs).
   */
  async function run(calls, start) {
    const namespace = nextNamespace()
    const memory = new LeakyBucket(OPTIONS)
    const onRedis = new LeakyBucket({ client: store, namespace, ...OPTIONS })
    let us = 0
    let latest = 0
    let lateness = 0
    const admitted = { a: [], b: [], c: [] }
    for (const [index, { step, id, weight, op }] of calls.entries()) {
      us = Math.max(0, us + step)
      latest = Math.max(latest, us)
      lateness = Math.max(lateness, latest - us)
      const options = { now: start + us / 1000, weight }
      const answers = []
      for (const limiter of [memory, onRedis]) {
        answers.push(await (op === 'reset' ? limiter.reset(id) : limiter[op](id, options)))
      }
      assert.deepEqual(answers[1], answers[0], `call ${index} at ${start} ms + ${us} µs: ${op} ${id} ${weight}`)
      if (op === 'consume' && answers[0].allowed) for (const one of [id].flat()) admitted[one].push([us, weight])
    }
    // Every key written has a TTL.
    for (const id of ids) {
      const ttl = Number(await redis.server.cli('PTTL', `${namespace}${id}`))
      assert.ok(ttl === -2 || ttl > 0, `PTTL ${ttl}`)
    }
    return { admitted, lateness }
  }

  /** The most weight admitted in any closed interval of `t` µs. */
  const mostIn = (log, t) => Math.max(0, ...log.map(([start]) => log.filter(([at]) => at >= start && at <= start + t).reduce((sum, [, w]) => sum + w, 0)))
  const bound = (t) => OPTIONS.capacity + OPTIONS.leakAmount * Math.ceil(t / I)

  // Time steps in µs: mostly on a 50 ms grid (so that calls land on leak instants, 700 ms
  // apart, where the bound is reached), some anywhere, and with `back`, some backwards.
  const step = (back) =>
    fc.oneof(
      { weight: 6, arbitrary: fc.integer({ min: 0, max: 4 }).map((k) => k * 50_000) },
      { weight: 1, arbitrary: fc.integer({ min: 0, max: 40 }).map((k) => k * 50_000) },
      { weight: 2, arbitrary: fc.integer({ min: 1, max: 900_000 }) },
      ...(back ? [{ weight: 1, arbitrary: fc.integer({ min: -back, max: -1 }) }] : []),
    )
  const call = (ops, back) =>
    fc.record({
      step: step(back),
      id: fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...ids) }, { weight: 1, arbitrary: fc.shuffledSubarray(ids, { minLength: 2, maxLength: 2 }) }),
      weight: fc.integer({ min: 1, max: 5 }),
      op: fc.constantFrom(...ops),
    })

  it('both stores answer alike, whatever the calls (late ones, rewards and resets included)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(call(['consume', 'consume', 'peek', 'reward', 'reset'], 1_500_000), { minLength: 30, maxLength: 60 }), startArb(T0), async (calls, start) => {
        await run(calls, start)
      }),
      { numRuns: 30, seed: 4242 },
    )
  })

  it('no interval admits more than capacity + leakAmount * ceil(t / leakInterval), in time order', async () => {
    let reached = 0
    await fc.assert(
      fc.asyncProperty(fc.array(call(['consume', 'consume', 'consume', 'peek'], 0), { minLength: 30, maxLength: 60 }), startArb(T0), async (calls, start) => {
        const { admitted } = await run(calls, start)
        for (const log of Object.values(admitted)) {
          for (const t of [I / 2, I, I + 1, 2.5 * I, 4 * I]) {
            const most = mostIn(log, t)
            assert.ok(most <= bound(t), `t = ${t} µs: ${JSON.stringify(log)}`)
            if (most === bound(t)) reached++
          }
        }
      }),
      { numRuns: 30, seed: 1717 },
    )
    // The bound is not loose: some runs reach it.
    assert.ok(reached > 0)
  })

  it('with calls up to δ late, no interval admits more than capacity + leakAmount * ceil((t + δ) / leakInterval)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(call(['consume', 'consume', 'consume', 'peek'], 400_000), { minLength: 30, maxLength: 60 }), startArb(T0), async (calls, start) => {
        const { admitted, lateness } = await run(calls, start)
        for (const log of Object.values(admitted)) {
          for (const t of [I / 2, I, 2.5 * I, 4 * I]) assert.ok(mostIn(log, t) <= bound(t + lateness), `t = ${t} µs, δ = ${lateness}: ${JSON.stringify(log)}`)
        }
      }),
      { numRuns: 30, seed: 2323 },
    )
  })

  it('late calls can pass the in-order bound: 10 in [0, 10 s] where it says 9', async () => {
    // capacity 6, 3 per 10 s; a bucket of 1 started at -9 s leaks at 1 s, 11 s, ...
    const options = { capacity: 6, leakAmount: 3, leakInterval: 10 * SECOND }
    for (const limiter of [new LeakyBucket(options), new LeakyBucket({ client: store, namespace: nextNamespace(), ...options })]) {
      assert.equal((await limiter.consume('u', { now: T0 - 9 * SECOND })).allowed, true)
      assert.equal((await limiter.consume('u', { now: T0, weight: 5 })).allowed, true)
      assert.equal((await limiter.consume('u', { now: T0 + SECOND, weight: 3 })).allowed, true)
      // Outside [T0, T0 + 10 s]: credits the leak at 11 s...
      assert.equal((await limiter.consume('u', { now: T0 + 11 * SECOND, weight: 1 })).allowed, true)
      // ...which a call 1 s late, back inside, uses: 5 + 3 + 2 = 10 > 6 + 3 * ceil(10 / 10).
      assert.equal((await limiter.consume('u', { now: T0 + 10 * SECOND, weight: 2 })).allowed, true)
    }
  })
})
