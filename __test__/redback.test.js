'use strict'

// redback's RateLimit, drop-in: the same numbers and Redis layout as redback, its two faults
// fixed, and live data shared with the redback npm package in both directions.

const { describe, it, before, after } = require('node:test')
const assert = require('node:assert/strict')
const redis3 = require('redis3')
const redback = require('redback')

const { createRateLimit, createClient } = require('..')
const { useRedisServer } = require('./helpers/redis-server.js')
const { withTimersFaked, answeredWithin3s } = require('./helpers/faked-timers.js')
const { runScript } = require('./helpers/run-script.js')

const redis = useRedisServer()
let counter = 0

const stores = {
  'in memory': (options) => createRateLimit('requests', options),
  'on Redis': (options) => {
    counter += 1
    return createRateLimit('requests', { client: redis.server.url, namespace: `rb${counter}`, ...options })
  },
}

// A whole number of 10-minute laps, so that buckets are easy to reason about.
const T = 1_700_000_400_000
const at = (seconds) => ({ now: T + seconds * 1000 })

for (const [name, create] of Object.entries(stores)) {
  describe(`createRateLimit ${name}`, () => {
    it('adds and counts over an interval, as redback', async () => {
      const limit = create()
      await limit.add('1.2.3.4', at(0))
      await limit.add('1.2.3.4', at(1))
      await limit.add('1.2.3.4', at(6))
      assert.equal(await limit.count('1.2.3.4', 20, at(6)), 3)
      // The current bucket and floor(20 / 5) = 4 before it: from 25 s, the bucket of 0-5 s is out.
      assert.equal(await limit.count('1.2.3.4', 20, at(25)), 1)
      assert.equal(await limit.count('1.2.3.4', 0, at(6)), 1)
      assert.equal(await limit.count('someone else', 600, at(6)), 0)
      assert.equal(await limit.addCount('1.2.3.4', 20, at(7)), 4)
    })

    it('does not count an earlier lap again after a pause (redback does)', async () => {
      const limit = create()
      for (let i = 0; i < 10; i++) await limit.add('ip', at(0))
      // One lap later (600 s, the key has not expired), the same bucket comes round again.
      assert.equal(await limit.count('ip', 60, at(600)), 0)
      assert.equal(await limit.addCount('ip', 60, at(600)), 1)
      // A 3-minute pause: the buckets it skipped are emptied.
      assert.equal(await limit.addCount('ip', 600, at(780)), 2)
    })

    it('refuses an interval longer than the span instead of double counting', async () => {
      const limit = create({ bucket_span: 60, bucket_interval: 1 })
      await limit.add('ip', at(0))
      await limit.add('ip', at(57))
      // The whole span counts each bucket once. (An add also empties the two buckets ahead, as
      // redback does: at 58 s or later it would empty the bucket of 0 s.)
      assert.equal(await limit.count('ip', 60, at(57)), 2)
      await assert.rejects(limit.count('ip', 61), { name: 'RangeError', code: 'ERR_INVALID_ARGUMENT' })
      await assert.rejects(limit.count('ip'), { name: 'TypeError', code: 'ERR_INVALID_ARGUMENT' })
      // Regression (found by the fuzz test): an `interval` in the options was silently overwritten.
      await assert.rejects(limit.addCount('ip', 5, { interval: 1e9 }), { name: 'TypeError', code: 'ERR_UNKNOWN_OPTION' })
      // Regression (found by the fuzz test): an empty array of subjects skipped the options' check.
      await assert.rejects(limit.add([], { now: 0, wieght: 1 }), { name: 'TypeError', code: 'ERR_UNKNOWN_OPTION' })
      await assert.rejects(limit.add([], { now: -1 }), { name: 'RangeError' })
      assert.equal(await limit.add([], at(0)), undefined)
    })

    it('calls back node-style, chains as redback, and adds arrays of subjects', async () => {
      const limit = create()
      const counted = await new Promise((resolve, reject) => {
        limit.add('a', (err) => {
          if (err) return reject(err)
          limit.count('a', 10, (err2, n) => (err2 ? reject(err2) : resolve(n)))
        })
      })
      assert.equal(counted, 1)
      assert.equal(await limit.add('b', at(0)).count('b', 10, at(0)), 1)
      await limit.add(['c', 'd'], at(0))
      assert.deepEqual([await limit.count('c', 10, at(0)), await limit.count('d', 10, at(0))], [1, 1])
      const error = await new Promise((resolve) => limit.count('a', 10_000, resolve))
      assert.equal(error.code, 'ERR_INVALID_ARGUMENT')
    })
  })
}

describe('createRateLimit options', () => {
  it('validates them', () => {
    assert.throws(() => createRateLimit(''), { code: 'ERR_INVALID_OPTION' })
    assert.throws(() => createRateLimit('a', { bucket_span: 600, bucket_interval: 7 }), { name: 'RangeError', message: /multiple/ })
    assert.throws(() => createRateLimit('a', { bucket_span: -1 }), { name: 'RangeError', message: /`bucket_span`/ })
    assert.throws(() => createRateLimit('a', { subject_expiry: '1200' }), { name: 'TypeError', message: /`subject_expiry`/ })
    assert.throws(() => createRateLimit('a', { bucketSpan: 600 }), { code: 'ERR_UNKNOWN_OPTION' })
  })
})

describe("redback's Redis layout", () => {
  it('is a hash of buckets at [namespace:]action:subject, with subject_expiry as TTL', async () => {
    const limit = createClient(redis.server.url, { namespace: 'layout' }).createRateLimit('views', { subject_expiry: 300 })
    await limit.add('10.0.0.1', at(12))
    const fields = (await redis.server.cli('HGETALL', 'layout:views:10.0.0.1')).split('\n')
    const hash = Object.fromEntries(fields.flatMap((v, i) => (i % 2 ? [] : [[v, fields[i + 1]]])))
    // Bucket floor(((T / 1000 + 12) % 600) / 5) = 2; `last` is the absolute bucket.
    assert.deepEqual(hash, { 2: '1', last: String(Math.floor((T / 1000 + 12) / 5)) })
    const ttl = Number(await redis.server.cli('TTL', 'layout:views:10.0.0.1'))
    assert.ok(ttl > 290 && ttl <= 300, `TTL ${ttl}`)
  })

  describe('shared live with the redback npm package', () => {
    let client
    let theirs
    before(() => {
      client = redis3.createClient(redis.server.port, '127.0.0.1')
      theirs = redback.use(client, { namespace: 'live' }).createRateLimit('requests')
    })
    after(() => client.quit())

    const theirCount = (subject, interval) =>
      new Promise((resolve, reject) => theirs.count(subject, interval, (err, n) => (err ? reject(err) : resolve(n))))
    const theirAdd = (subject) => new Promise((resolve, reject) => theirs.add(subject, (err) => (err ? reject(err) : resolve())))

    it('counts what redback wrote, and redback counts what we write', async () => {
      // Both on real time: a 9-minute interval keeps the test free of timing.
      const ours = createRateLimit('requests', { client: redis.server.url, namespace: 'live', clock: 'local' })
      await theirAdd('ip')
      await theirAdd('ip')
      assert.equal(await ours.count('ip', 540), 2)
      await ours.add('ip')
      assert.equal(await theirCount('ip', 540), 3)
      assert.equal(await ours.addCount('ip', 540), 4)
      assert.equal(await theirCount('ip', 540), 4)
    })

    it('counts the whole span once where redback counts the current bucket twice', async () => {
      const ours = createRateLimit('requests', { client: redis.server.url, namespace: 'live', clock: 'local' })
      await theirAdd('span')
      assert.equal(await theirCount('span', 600), 2)
      assert.equal(await ours.count('span', 600), 1)
    })
  })
})

describe('createRateLimit: when a callback runs', () => {
  it("calls back while process.nextTick, queueMicrotask and setImmediate do nothing, as under Jest's fake timers", async () => {
    const limit = createRateLimit('requests')
    const viaCallback = (method, ...args) => new Promise((resolve, reject) => limit[method](...args, (err, value) => (err ? reject(err) : resolve(value))))
    const counts = await withTimersFaked(
      async () => {
        await answeredWithin3s(viaCallback('add', 'a', at(0)), 'add')
        const counted = await answeredWithin3s(viaCallback('count', 'a', 10, at(1)), 'count')
        const added = await answeredWithin3s(viaCallback('addCount', 'a', 10, at(2)), 'addCount')
        return [counted, added]
      },
      { nextTick: true },
    )
    assert.deepEqual(counts, [1, 2])
  })

  it('lets an exception thrown by a callback out as an uncaught exception, not into the promise', async () => {
    const ran = await runScript(`
      process.on('uncaughtException', (error) => { console.log('uncaught: ' + error.message); process.exit(4) })
      process.on('unhandledRejection', (reason) => { console.log('rejection: ' + reason); process.exit(3) })
      const { createRateLimit } = require('.')
      createRateLimit('requests').add('a', () => { throw new Error('thrown by the callback') })
    `)
    assert.deepEqual(ran, { code: 4, output: 'uncaught: thrown by the callback\n' })
  })
})
