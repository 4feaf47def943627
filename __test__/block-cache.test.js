'use strict'

// `blockCache` (lib/block-cache.js): refusals learned from Redis are answered in process, with
// the answer Redis would give, and no round trip; everything else goes to Redis.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const fc = require('fast-check')

const { LIMITERS, ONE_ID } = require('./helpers/limiters.js')
const { FixedWindow, RateLimiter, SlidingLog, RedisStore, createRateLimit } = require('..')
const { useRedisServer, freePort } = require('./helpers/redis-server.js')

const T0 = 1_700_000_000_000
const redis = useRedisServer()
let namespaceCounter = 0
const namespace = () => `bc${++namespaceCounter}:`

/** The scripts Redis has run so far (every call of a limiter runs one, alone or in a batch). */
async function scriptCalls() {
  const stats = await redis.server.cli('INFO', 'commandstats')
  return [...stats.matchAll(/cmdstat_(?:evalsha|eval|fcall):calls=(\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0)
}

describe('blockCache', () => {
  it('answers a refused id in process until the wait is over, then asks Redis again', async () => {
    const limiter = new FixedWindow({ client: redis.server.url, namespace: namespace(), blockCache: true, limits: [{ duration: 1000, limit: 2 }] })
    const at = (ms) => ({ now: T0 + ms })
    assert.equal((await limiter.consume('u', at(0))).allowed, true)
    assert.equal((await limiter.consume('u', at(1))).allowed, true)
    assert.deepEqual(await limiter.consume('u', at(2)), { allowed: false, timeLeft: 998, remaining: 0, limit: 2, resetAfter: 998 })
    const before = await scriptCalls()
    assert.deepEqual(await limiter.consume('u', at(500)), { allowed: false, timeLeft: 500, remaining: 0, limit: 2, resetAfter: 500 })
    assert.deepEqual(await limiter.peek('u', at(999)), { allowed: false, timeLeft: 1, remaining: 0, limit: 2, resetAfter: 1 })
    assert.equal(await scriptCalls(), before, 'answered without Redis')
    // At the end of the wait, Redis answers (and allows).
    assert.deepEqual(await limiter.consume('u', at(1000)), { allowed: true, timeLeft: 0, remaining: 1, limit: 2, resetAfter: 1000 })
    assert.equal(await scriptCalls(), before + 1)
  })

  it('leaves to Redis what it cannot answer exactly: other weights, fractional instants, arrays, other ids', async () => {
    const limiter = new FixedWindow({ client: redis.server.url, namespace: namespace(), blockCache: true, limits: [{ duration: 1000, limit: 1 }] })
    await limiter.consume('u', { now: T0 })
    await limiter.consume('u', { now: T0 + 1 }) // refused: learned
    const before = await scriptCalls()
    await limiter.consume('u', { now: T0 + 2, weight: 2 })
    await limiter.consume('u', { now: T0 + 2.5 })
    await limiter.consume(['u'], { now: T0 + 3 })
    await limiter.consume('v', { now: T0 + 3 })
    assert.equal(await scriptCalls(), before + 4)
    await limiter.consume('u', { now: T0 + 3, weight: 1 })
    assert.equal(await scriptCalls(), before + 4)
  })

  it('forgets ids that reset or reward name', async () => {
    const limiter = new FixedWindow({ client: redis.server.url, namespace: namespace(), blockCache: true, limits: [{ duration: 1000, limit: 1 }] })
    const at = (ms) => ({ now: T0 + ms })
    await limiter.consume('u', at(0))
    assert.equal((await limiter.consume('u', at(1))).allowed, false)
    await limiter.reward('u', at(2))
    assert.equal((await limiter.consume('u', at(3))).allowed, true)
    assert.equal((await limiter.consume('u', at(4))).allowed, false)
    await limiter.reset(['u'])
    assert.equal((await limiter.consume('u', at(5))).allowed, true)
  })

  it('remembers at most maxIds ids, the oldest learned forgotten first', async () => {
    const limiter = new FixedWindow({ client: redis.server.url, namespace: namespace(), blockCache: { maxIds: 2 }, limits: [{ duration: 1000, limit: 1 }] })
    for (const id of ['a', 'b', 'c']) {
      await limiter.consume(id, { now: T0 })
      await limiter.consume(id, { now: T0 })
    }
    const before = await scriptCalls()
    for (const id of ['b', 'c']) await limiter.consume(id, { now: T0 + 1 })
    assert.equal(await scriptCalls(), before)
    await limiter.consume('a', { now: T0 + 1 })
    assert.equal(await scriptCalls(), before + 1)
  })

  it("on rolling-rate-limiter's API: limit's refusals by count, with recordBlocked: false", async () => {
    const limiter = new RateLimiter({ client: redis.server.url, namespace: namespace(), blockCache: true, recordBlocked: false, interval: 1000, maxInInterval: 1, minDifference: 100 })
    const at = (ms) => ({ now: T0 + ms })
    assert.equal(await limiter.limit('u', at(0)), false)
    // Blocked by minDifference (and count): not learned, the flags change before the end.
    assert.equal((await limiter.limitWithInfo('u', at(10))).blockedDueToMinDifference, true)
    assert.deepEqual(await limiter.limitWithInfo('u', at(200)), { blocked: true, blockedDueToCount: true, blockedDueToMinDifference: false, millisecondsUntilAllowed: 800, actionsRemaining: 0 })
    const before = await scriptCalls()
    assert.deepEqual(await limiter.limitWithInfo('u', at(600)), { blocked: true, blockedDueToCount: true, blockedDueToMinDifference: false, millisecondsUntilAllowed: 400, actionsRemaining: 0 })
    assert.equal(await limiter.limit('u', at(999)), true)
    assert.equal(await scriptCalls(), before)
    assert.equal(await limiter.limit('u', at(1000)), false)
  })

  it("never learns from onStoreError's fallback: its answers keep their reason", async () => {
    const dead = await freePort()
    const limiter = new FixedWindow({
      client: { port: dead, connectTimeoutMs: 50, commandTimeoutMs: 50 },
      onStoreError: 'memory',
      blockCache: true,
      limits: [{ duration: 1000, limit: 1 }],
    })
    const answers = []
    for (let i = 0; i < 3; i++) answers.push(await limiter.consume('u', { now: T0 + i }))
    assert.deepEqual(answers.map((a) => [a.allowed, a.reason, a.store]), [
      [true, 'store-unavailable', 'memory'],
      [false, 'store-unavailable', 'memory'],
      [false, 'store-unavailable', 'memory'],
    ])
  })

  it('refuses the options it cannot honour', () => {
    const cases = [
      [() => new FixedWindow({ blockCache: true, limits: [{ duration: 1000, limit: 1 }] }), TypeError, 'ERR_INVALID_OPTION', /applies to limiters on Redis/],
      [() => new RateLimiter({ client: redis.server.url, blockCache: true, interval: 1000, maxInInterval: 1 }), TypeError, 'ERR_INVALID_OPTION', /recordBlocked: false/],
      [() => new FixedWindow({ client: redis.server.url, blockCache: 'yes', limits: [{ duration: 1000, limit: 1 }] }), TypeError, 'ERR_INVALID_OPTION', /true, false or \{ maxIds \}/],
      [() => new FixedWindow({ client: redis.server.url, blockCache: { maxIds: 0 }, limits: [{ duration: 1000, limit: 1 }] }), RangeError, 'ERR_INVALID_OPTION', /maxIds/],
      [() => new FixedWindow({ client: redis.server.url, blockCache: { maxIDs: 5 }, limits: [{ duration: 1000, limit: 1 }] }), TypeError, 'ERR_UNKNOWN_OPTION', /maxIDs/],
      [() => createRateLimit('c', { client: redis.server.url, blockCache: true }), TypeError, 'ERR_UNKNOWN_OPTION', /blockCache/],
    ]
    for (const [make, ErrorClass, code, message] of cases) {
      assert.throws(make, (error) => error instanceof ErrorClass && error.code === code && message.test(error.message))
    }
    assert.ok(new SlidingLog({ client: redis.server.url, blockCache: true, interval: 1000, maxInInterval: 1 }))
  })

  // The same calls on a limiter with the cache and on one without (each its own namespace):
  // the same answers, call after call, for every limiter.
  const callsArbitrary = fc.array(
    fc.record({
      mode: fc.constantFrom('consume', 'consume', 'consume', 'peek', 'reward'),
      id: fc.constantFrom('a', 'b'),
      weight: fc.constantFrom(1, 1, 1, 2),
      gap: fc.integer({ min: 0, max: 400 }),
    }),
    { minLength: 1, maxLength: 30 },
  )
  for (const [name, create] of Object.entries(LIMITERS)) {
    it(`${name}: answers as Redis does, call after call`, async () => {
      const store = await RedisStore.connect(redis.server.url)
      try {
        await fc.assert(
          fc.asyncProperty(callsArbitrary, async (calls) => {
            const extra = name.startsWith('RateLimiter') ? { recordBlocked: false } : {}
            const cached = create({ client: store, namespace: namespace(), blockCache: true, ...extra })
            const plain = create({ client: store, namespace: namespace(), ...extra })
            let now = T0
            for (const { mode, id, weight, gap } of calls) {
              now += gap
              const options = mode === 'consume' && weight === 1 ? { now } : { now, weight }
              assert.deepEqual(await cached[mode](id, options), await plain[mode](id, options), `${mode} ${id} at +${now - T0}`)
            }
          }),
          { numRuns: ONE_ID.has(name) ? 25 : 40 },
        )
      } finally {
        await store.close()
      }
    })
  }
})
