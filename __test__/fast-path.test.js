'use strict'

// The fast path (src/binding/fast.rs, lib/engine.js) in memory and on Redis, and the synchronous
// methods built on it: a call with one string id and `{ now, weight }` at most answers exactly as
// the general path does (which takes arrays of ids), and every call the fast path declines gets
// the general path's checks and errors, with nothing charged.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const fc = require('fast-check')

const { LIMITERS, ONE_ID } = require('./helpers/limiters.js')
const { FixedWindow, InMemoryRateLimiter, RateLimiter, createRateLimit } = require('..')
const { useRedisServer } = require('./helpers/redis-server.js')

const T0 = 1_700_000_000_000
const redis = useRedisServer()

/** A sequence of calls on one id: mode, weight and the time since the previous call. */
const callsArbitrary = fc.array(
  fc.record({
    mode: fc.constantFrom('consume', 'peek', 'reward'),
    weight: fc.integer({ min: 1, max: 4 }),
    gap: fc.integer({ min: 0, max: 700 }),
  }),
  { minLength: 1, maxLength: 40 },
)

/** The fast path (a string id) and the general path (the same id in an array) answer alike. */
for (const [name, create] of Object.entries(LIMITERS)) {
  if (ONE_ID.has(name)) continue
  it(`${name}: a string id answers as the same id in an array, call after call`, async () => {
    await fc.assert(
      fc.asyncProperty(callsArbitrary, async (calls) => {
        const fast = create({})
        const general = create({})
        let now = T0
        for (const { mode, weight, gap } of calls) {
          now += gap
          const options = { weight, now }
          assert.deepEqual(await fast[mode]('u', options), await general[mode](['u'], options))
          assert.deepEqual(fast[`${mode}Sync`]('v', options), general[`${mode}Sync`](['v'], options))
        }
      }),
      { numRuns: 60 },
    )
  })
}

// redback's RateLimit: its fast path takes the count's interval where the others take a weight.
it("redback's RateLimit: a string subject answers as the same subject given as a number, call after call", async () => {
  const redbackCalls = fc.array(
    fc.record({
      mode: fc.constantFrom('add', 'count', 'addCount'),
      // Seconds to count back; beyond the span (600 s) both refuse.
      interval: fc.integer({ min: 0, max: 700 }),
      gap: fc.integer({ min: 0, max: 90_000 }),
    }),
    { minLength: 1, maxLength: 40 },
  )
  const settle = (promise) => promise.then((value) => ({ value }), (error) => ({ code: error.code, name: error.name }))
  await fc.assert(
    fc.asyncProperty(redbackCalls, async (calls) => {
      const fast = createRateLimit('requests')
      const general = createRateLimit('requests')
      let now = T0
      for (const { mode, interval, gap } of calls) {
        now += gap
        const args = mode === 'add' ? [{ now }] : [interval, { now }]
        assert.deepEqual(await settle(fast[mode]('7', ...args)), await settle(general[mode](7, ...args)))
      }
    }),
    { numRuns: 100 },
  )
})

// On Redis the fast path sends the call (`sendPath`): no class method, its options read in
// JavaScript. It answers as the general path does, which still takes every call it declines.
describe('on Redis, the send path', () => {
  const binding = require('../lib/native.js')
  const engines = Object.values(binding).filter((value) => typeof value?.prototype?.sendPath === 'function')
  /** How many calls reach the engines' class method `run` while `body` runs. */
  async function runCalls(body) {
    const originals = engines.map((engine) => engine.prototype.run)
    let calls = 0
    for (const engine of engines) {
      const run = engine.prototype.run
      engine.prototype.run = function (...args) {
        calls++
        return run.apply(this, args)
      }
    }
    try {
      await body()
    } finally {
      engines.forEach((engine, i) => (engine.prototype.run = originals[i]))
    }
    return calls
  }
  /** What `create()` makes, built without the send path: each of its calls takes the class method. */
  function withoutSendPath(create) {
    const originals = engines.map((engine) => engine.prototype.sendPath)
    engines.forEach((engine) => (engine.prototype.sendPath = undefined))
    try {
      return create()
    } finally {
      engines.forEach((engine, i) => (engine.prototype.sendPath = originals[i]))
    }
  }

  for (const [name, create] of Object.entries(LIMITERS)) {
    it(`${name}: a string id with { now, weight } is sent without the class method, and answers as the general path`, async () => {
      const namespace = `send-${name.replace(/\W+/g, '-')}:`
      const fast = create({ client: redis.server.url, namespace: `${namespace}fast:` })
      const general = withoutSendPath(() => create({ client: redis.server.url, namespace: `${namespace}general:` }))
      const single = ONE_ID.has(name)
      let now = T0
      const steps = [
        ['consume', 1, 0],
        ['consume', 2, 10],
        ['peek', 1, 10],
        ['consume', 3, 200],
        ['reward', 1, 5],
        ['consume', 1, 900],
        ['consume', 1, 0],
      ]
      for (const [mode, weight, gap] of steps) {
        now += gap
        // The rolling windows' peek takes no weight.
        const options = single && mode === 'peek' ? { now } : { weight, now }
        let fastAnswer, generalAnswer
        assert.equal(await runCalls(async () => (fastAnswer = await fast[mode]('u', options))), 0, `${mode}: the class method was called`)
        assert.equal(await runCalls(async () => (generalAnswer = await general[mode]('u', options))), 1)
        assert.deepEqual(fastAnswer, generalAnswer, `${mode} at +${now - T0} ms`)
      }
    })
  }

  it("redback's RateLimit: a string subject is sent without the class method, and counts as the general path counts", async () => {
    const fast = createRateLimit('send', { client: redis.server.url, namespace: 'send-fast' })
    const general = withoutSendPath(() => createRateLimit('send', { client: redis.server.url, namespace: 'send-general' }))
    let now = T0
    for (const [mode, interval, gap] of [['add', undefined, 0], ['addCount', 60, 1000], ['count', 60, 5000], ['addCount', 1, 2000]]) {
      now += gap
      const args = interval === undefined ? [{ now }] : [interval, { now }]
      let fastAnswer
      const calls = await runCalls(async () => {
        fastAnswer = await fast[mode]('7', ...args)
      })
      assert.equal(calls, 0, `${mode}: the class method was called`)
      assert.deepEqual(fastAnswer, await general[mode]('7', ...args), `${mode} at +${now - T0} ms`)
    }
  })

  it('a call it declines takes the class method, with its checks and errors', async () => {
    const subject = new FixedWindow({ limits: [{ duration: 1000, limit: 3 }], client: redis.server.url, namespace: 'send-declined:' })
    const calls = await runCalls(async () => {
      await assert.rejects(subject.consume('a', { weight: 0 }), { code: 'ERR_INVALID_ARGUMENT' })
      await assert.rejects(subject.consume('a', { weigth: 2 }), { code: 'ERR_UNKNOWN_OPTION' })
      await assert.rejects(subject.consume('', { now: T0 }), { code: 'ERR_INVALID_ID' })
      assert.equal((await subject.consume('a', { now: T0, weight: 2 })).remaining, 1)
    })
    assert.equal(calls, 3)
    assert.equal((await subject.peek('a', { now: T0 })).remaining, 1)
  })
})

describe('calls the fast path declines get the general path, with nothing charged', () => {
  const limiter = () => new FixedWindow({ limits: [{ duration: 1000, limit: 3 }] })
  const cases = [
    ['a weight of 0', { weight: 0 }, RangeError, 'ERR_INVALID_ARGUMENT'],
    ['a fractional weight', { weight: 1.5 }, RangeError, 'ERR_INVALID_ARGUMENT'],
    ['a negative weight', { weight: -1 }, RangeError, 'ERR_INVALID_ARGUMENT'],
    ['a NaN weight', { weight: NaN }, RangeError, 'ERR_INVALID_ARGUMENT'],
    ['a weight over 1e15', { weight: 1e16 }, RangeError, 'ERR_INVALID_ARGUMENT'],
    ['a string weight', { weight: '2' }, TypeError, 'ERR_INVALID_ARGUMENT'],
    ['a NaN now', { now: NaN }, RangeError, 'ERR_INVALID_ARGUMENT'],
    ['a negative now', { now: -1 }, RangeError, 'ERR_INVALID_ARGUMENT'],
    ['an infinite now', { now: Infinity }, RangeError, 'ERR_INVALID_ARGUMENT'],
    ['an unknown option', { weigth: 2 }, TypeError, 'ERR_UNKNOWN_OPTION'],
    // Found by a long fuzz run: the fast path skipped undefined values before it read their names.
    ['an unknown option set to undefined', { now: T0, url: undefined }, TypeError, 'ERR_UNKNOWN_OPTION'],
    ['an array for options', [], TypeError, 'ERR_INVALID_ARGUMENT'],
    ['a function for options', () => {}, TypeError, 'ERR_INVALID_ARGUMENT'],
  ]
  for (const [what, options, ErrorClass, code] of cases) {
    it(what, async () => {
      const subject = limiter()
      await assert.rejects(subject.consume('a', options), (error) => error instanceof ErrorClass && error.code === code)
      assert.throws(() => subject.consumeSync('a', options), (error) => error instanceof ErrorClass && error.code === code)
      assert.equal(subject.trackedIds, 0)
      assert.equal((await subject.peek('a', { now: T0 })).remaining, 3)
    })
  }

  it('a getter that throws: its error, and nothing charged', async () => {
    const subject = limiter()
    const boom = new Error('boom')
    const options = {
      get now() {
        throw boom
      },
    }
    await assert.rejects(subject.consume('a', options), (error) => error === boom)
    assert.throws(() => subject.consumeSync('a', options), (error) => error === boom)
    assert.equal(subject.trackedIds, 0)
  })

  it('a revoked Proxy for options: rejected (thrown by the Sync methods), never thrown by a Promise method', async () => {
    // Regression (found by the fuzz test): Array.isArray throws on a revoked Proxy.
    const subject = limiter()
    const { proxy, revoke } = Proxy.revocable({}, {})
    revoke()
    await assert.rejects(subject.reward('a', proxy), TypeError)
    assert.throws(() => subject.consumeSync('a', proxy), TypeError)
    assert.equal(subject.trackedIds, 0)
  })

  it('ids: 1 KiB in UTF-8 at most, well-formed, each its own', async () => {
    const subject = limiter()
    const options = { now: T0 }
    // Near the limit the fast path leaves the id to the general path: the answers do not change.
    for (const id of ['x'.repeat(1021), 'x'.repeat(1022), 'x'.repeat(1023), 'x'.repeat(1024), 'é'.repeat(512)]) {
      assert.equal((await subject.consume(id, options)).remaining, 2, `${id.length} characters`)
      assert.equal(subject.consumeSync(id, options).remaining, 1)
    }
    for (const id of ['x'.repeat(1025), 'é'.repeat(513), '😀'.repeat(257), '', '\uD800', 'a\uDC00b', '😀\uD83D']) {
      await assert.rejects(subject.consume(id, options), { code: 'ERR_INVALID_ID' })
      assert.throws(() => subject.consumeSync(id, options), { code: 'ERR_INVALID_ID' })
    }
    // A real U+FFFD is an id like any other, not the lone surrogate that would print as it.
    assert.equal(subject.consumeSync('\uFFFD', options).remaining, 2)
    assert.equal(subject.consumeSync('\uFFFD', options).remaining, 1)
    assert.equal(subject.trackedIds, 6)
    // An id the fast path reads (a string) and one the general path reads (in an array) are one.
    for (const id of ['é', '😀'.repeat(256), 'a😀\uFFFDé', 'y'.repeat(1024)]) {
      assert.equal(subject.consumeSync(id, { now: T0 + 1 }).remaining, 2, `${id.length} code units`)
      assert.equal(subject.consumeSync([id], { now: T0 + 1 }).remaining, 1)
    }
  })

  it('options read as the general path reads them: undefined values and null are absent, inherited ones count', () => {
    const subject = limiter()
    assert.equal(subject.consumeSync('a', { now: undefined, weight: undefined }).remaining, 2)
    assert.equal(subject.consumeSync('a', null).remaining, 1)
    const inherited = Object.create({ now: T0, weight: 2 })
    assert.deepEqual(subject.consumeSync('b', inherited), subject.consumeSync(['c'], { now: T0, weight: 2 }))
    assert.equal(subject.peekSync('b', { now: T0 }).remaining, 1)
  })

  it('a mode that takes no weight refuses one on both paths', async () => {
    const rolling = new InMemoryRateLimiter({ interval: 1000, maxInInterval: 2 })
    await assert.rejects(rolling.limit('a', { weight: 2 }), { code: 'ERR_UNKNOWN_OPTION' })
    assert.throws(() => rolling.limitSync('a', { weight: 2 }), { code: 'ERR_UNKNOWN_OPTION' })
    assert.equal(rolling.window.trackedIds, 0)
  })
})

describe('the synchronous methods', () => {
  it("return what the Promise methods resolve, on the counting limiters", async () => {
    const a = new FixedWindow({ limits: [{ duration: 1000, limit: 2 }] })
    const b = new FixedWindow({ limits: [{ duration: 1000, limit: 2 }] })
    const at = (ms) => ({ now: T0 + ms })
    assert.deepEqual(a.consumeSync('u', at(0)), await b.consume('u', at(0)))
    assert.deepEqual(a.consumeSync('u', at(1)), await b.consume('u', at(1)))
    const refused = a.consumeSync('u', at(2))
    assert.deepEqual(refused, await b.consume('u', at(2)))
    assert.deepEqual(refused, { allowed: false, timeLeft: 998, remaining: 0, limit: 2, resetAfter: 998 })
    assert.deepEqual(a.rewardSync('u', at(3)), await b.reward('u', at(3)))
    assert.deepEqual(a.peekSync('u', at(3)), { allowed: true, timeLeft: 0, remaining: 1, limit: 2, resetAfter: 997 })
    assert.equal(a.resetSync('u'), undefined)
    assert.equal(a.trackedIds, 0)
  })

  it("return what the Promise methods resolve, on rolling-rate-limiter's API", async () => {
    const a = new InMemoryRateLimiter({ interval: 1000, maxInInterval: 2, minDifference: 10 })
    const b = new InMemoryRateLimiter({ interval: 1000, maxInInterval: 2, minDifference: 10 })
    const at = (ms) => ({ now: T0 + ms })
    assert.equal(a.limitSync('u', at(0)), await b.limit('u', at(0)))
    assert.deepEqual(a.wouldLimitWithInfoSync('u', at(5)), await b.wouldLimitWithInfo('u', at(5)))
    // Blocked by minDifference, and recorded (recordBlocked): the window of 2 is full.
    const blocked = a.limitWithInfoSync('u', at(5))
    assert.deepEqual(blocked, await b.limitWithInfo('u', at(5)))
    assert.deepEqual(blocked, {
      blocked: true,
      blockedDueToCount: false,
      blockedDueToMinDifference: true,
      millisecondsUntilAllowed: 995,
      actionsRemaining: 0,
    })
    assert.equal(a.wouldLimitSync('u', at(20)), await b.wouldLimit('u', at(20)))
    assert.deepEqual(a.consumeSync('v', at(0)), await b.consume('v', at(0)))
    assert.deepEqual(a.peekSync('v', at(0)), await b.peek('v', at(0)))
    assert.deepEqual(a.rewardSync('v', at(0)), await b.reward('v', at(0)))
    a.clearSync('u')
    a.resetSync('v')
    assert.equal(a.window.trackedIds, 0)
  })

  it('throw ERR_SYNC_ON_REDIS on a limiter on Redis', () => {
    const onRedis = [
      new FixedWindow({ limits: [{ duration: 1000, limit: 2 }], client: redis.server.url }),
      new RateLimiter({ interval: 1000, maxInInterval: 2, client: redis.server.url }),
    ]
    for (const limiter of onRedis) {
      assert.throws(() => limiter.consumeSync('u'), (error) => error instanceof TypeError && error.code === 'ERR_SYNC_ON_REDIS' && error.message.includes(limiter.constructor.name))
    }
    assert.throws(() => onRedis[1].limitSync('u'), { code: 'ERR_SYNC_ON_REDIS' })
  })
})
