'use strict'

// The original callback API of the ClassDojo post: `RateLimiter(options)` without `new`.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')

const RateLimiter = require('..')
const { useRedisServer } = require('./helpers/redis-server.js')
const { withTimersFaked, answeredWithin3s } = require('./helpers/faked-timers.js')
const { runScript } = require('./helpers/run-script.js')

const redis = useRedisServer()

function withCallback(limiter, ...args) {
  return new Promise((resolve) => {
    limiter(...args, (err, timeLeft, actionsLeft) => resolve({ err, timeLeft, actionsLeft }))
  })
}

const forms = {
  'in memory (no redis)': (options) => RateLimiter(options),
  'on Redis (redis: URL)': (options) => RateLimiter({ redis: redis.server.url, namespace: `cb-${Math.random()}:`, ...options }),
}

for (const [name, create] of Object.entries(forms)) {
  describe(`callback API ${name}`, () => {
    it('resolves timeLeft: 0 while allowed, then the wait in milliseconds', async () => {
      const limiter = create({ interval: 60_000, maxInInterval: 2 })
      assert.equal(await limiter('user'), 0)
      assert.equal(await limiter('user'), 0)
      const timeLeft = await limiter('user')
      assert.ok(timeLeft > 59_000 && timeLeft <= 60_000, `timeLeft ${timeLeft}`)
    })

    it('calls back with (err, timeLeft, actionsLeft)', async () => {
      const limiter = create({ interval: 60_000, maxInInterval: 2, minDifference: 0 })
      assert.deepEqual(await withCallback(limiter, 'user'), { err: null, timeLeft: 0, actionsLeft: 1 })
      assert.deepEqual(await withCallback(limiter, 'user'), { err: null, timeLeft: 0, actionsLeft: 0 })
      const third = await withCallback(limiter, 'user')
      assert.equal(third.err, null)
      assert.ok(third.timeLeft > 59_000, `timeLeft ${third.timeLeft}`)
      assert.equal(third.actionsLeft, 0)
    })

    it('takes the callback alone for one global limit', async () => {
      const limiter = create({ interval: 60_000, maxInInterval: 1 })
      assert.equal((await withCallback(limiter)).timeLeft, 0)
      assert.ok((await withCallback(limiter)).timeLeft > 0)
      assert.equal(await limiter('someone-else'), 0)
    })

    it('enforces minDifference, with timeLeft the rest of it', async () => {
      const limiter = create({ interval: 60_000, maxInInterval: 10, minDifference: 5_000 })
      assert.equal(await limiter('user'), 0)
      const timeLeft = await limiter('user')
      assert.ok(timeLeft > 4_000 && timeLeft <= 5_000, `timeLeft ${timeLeft}`)
    })

    it('exposes the limiter underneath, which accepts { now }', async () => {
      const limiter = create({ interval: 10, maxInInterval: 1 })
      assert.equal(await limiter.limiter.limit('user', { now: 0 }), false)
      assert.equal(await limiter.limiter.limit('user', { now: 5 }), true)
    })

    it('rejects a callback that is not a function', async () => {
      const limiter = create({ interval: 10, maxInInterval: 1 })
      await assert.rejects(limiter('user', 'nope'), { name: 'TypeError', code: 'ERR_INVALID_ARGUMENT' })
    })

    it('reports a bad id to the callback, and the promise does not reject', async () => {
      const limiter = create({ interval: 10, maxInInterval: 1 })
      const { err } = await withCallback(limiter, '')
      assert.equal(err.code, 'ERR_INVALID_ID')
      assert.equal(await limiter('', () => {}), undefined)
    })
  })
}

describe('callback API options', () => {
  it('validates them as the class does', () => {
    assert.throws(() => RateLimiter({ interval: 0, maxInInterval: 1 }), { name: 'RangeError', code: 'ERR_INVALID_OPTION' })
    assert.throws(() => RateLimiter({ interval: 10, maxInInterval: 1, minDifference: -1 }), { name: 'RangeError', code: 'ERR_INVALID_OPTION' })
    assert.throws(() => RateLimiter({ interval: 10, maxInInterval: 1, client: redis.server.url }), { code: 'ERR_INVALID_OPTION' })
    assert.throws(() => RateLimiter({ interval: 10, maxInInterval: 1, bogus: 1 }), { code: 'ERR_UNKNOWN_OPTION' })
    assert.throws(() => RateLimiter(), { name: 'TypeError', code: 'ERR_INVALID_OPTION' })
  })

  it('reports Redis being down to the callback', async () => {
    const limiter = RateLimiter({ redis: { port: 1, commandTimeoutMs: 200 }, interval: 10, maxInInterval: 1 })
    const { err } = await withCallback(limiter, 'user')
    assert.equal(err.code, 'ERR_STORE_UNAVAILABLE')
  })
})

describe('callback API: when the callback runs', () => {
  it("calls back while process.nextTick, queueMicrotask and setImmediate do nothing, as under Jest's fake timers", async () => {
    const limiter = RateLimiter({ interval: 60_000, maxInInterval: 2, minDifference: 0 })
    const answers = await withTimersFaked(
      async () => {
        const seen = []
        for (let i = 0; i < 3; i++) seen.push(await answeredWithin3s(withCallback(limiter, 'user'), `call ${i}`))
        return seen
      },
      { nextTick: true },
    )
    assert.deepEqual(
      answers.map(({ err, actionsLeft }) => [err, actionsLeft]),
      [
        [null, 1],
        [null, 0],
        [null, 0],
      ],
    )
    assert.equal(answers[0].timeLeft, 0)
    assert.ok(answers[2].timeLeft > 59_000 && answers[2].timeLeft <= 60_000, `timeLeft ${answers[2].timeLeft}`)
  })

  it('lets an exception thrown by the callback out as an uncaught exception, not into the promise', async () => {
    const ran = await runScript(`
      process.on('uncaughtException', (error) => { console.log('uncaught: ' + error.message); process.exit(4) })
      process.on('unhandledRejection', (reason) => { console.log('rejection: ' + reason); process.exit(3) })
      const RateLimiter = require('.')
      RateLimiter({ interval: 1000, maxInInterval: 1 })('user', () => { throw new Error('thrown by the callback') })
    `)
    assert.deepEqual(ran, { code: 4, output: 'uncaught: thrown by the callback\n' })
  })
})
