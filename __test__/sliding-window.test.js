'use strict'

// SlidingWindow: precision buckets, many limits in one hash per id, weights; the same numbers on
// both stores.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')

const { SlidingWindow } = require('..')
const { useRedisServer } = require('./helpers/redis-server.js')
const { commandsRun } = require('./helpers/command-stats.js')

const redis = useRedisServer()
let namespaceCounter = 0

const stores = {
  'in memory': (options) => new SlidingWindow(options),
  'on Redis': (options) => {
    namespaceCounter += 1
    return new SlidingWindow({ client: redis.server.url, namespace: `sw-${namespaceCounter}:`, ...options })
  },
}

const SECOND = 1000
// An instant on a minute boundary.
const T0 = 1_700_000_040_000

const verdict = (allowed, timeLeft, remaining, limit, resetAfter) => ({ allowed, timeLeft, remaining, limit, resetAfter })

for (const [name, create] of Object.entries(stores)) {
  describe(`SlidingWindow ${name}`, () => {
    it('gives weight back bucket by bucket as the window slides', async () => {
      // 4 per minute in 15 s buckets.
      const limiter = create({ limits: [{ duration: 60 * SECOND, limit: 4, precision: 15 * SECOND }] })
      // Buckets are aligned to the clock: [0 s, 15 s) leaves the window at 60 s.
      assert.deepEqual(await limiter.consume('u', { now: T0 + 5 * SECOND }), verdict(true, 0, 3, 4, 55 * SECOND))
      assert.deepEqual(await limiter.consume('u', { now: T0 + 15 * SECOND }), verdict(true, 0, 2, 4, 60 * SECOND))
      assert.deepEqual(await limiter.consume('u', { now: T0 + 40 * SECOND, weight: 2 }), verdict(true, 0, 0, 4, 50 * SECOND))
      // Full: the first bucket ([0 s, 15 s)) leaves the window at 60 s.
      assert.deepEqual(await limiter.consume('u', { now: T0 + 50 * SECOND }), verdict(false, 10 * SECOND, 0, 4, 40 * SECOND))
      assert.deepEqual(await limiter.consume('u', { now: T0 + 60 * SECOND }), verdict(true, 0, 0, 4, 60 * SECOND))
      // Two need the 15 s and the 30 s buckets gone: at 90 s.
      assert.deepEqual(await limiter.peek('u', { now: T0 + 61 * SECOND, weight: 2 }), verdict(false, 29 * SECOND, 0, 4, 59 * SECOND))
    })

    it('does not reset everyone at the top of the window', async () => {
      const limiter = create({ limits: [{ duration: 60 * SECOND, limit: 10, precision: SECOND }] })
      assert.equal((await limiter.consume('u', { now: T0 + 59 * SECOND, weight: 10 })).allowed, true)
      assert.deepEqual(await limiter.consume('u', { now: T0 + 60 * SECOND }), verdict(false, 59 * SECOND, 0, 10, 59 * SECOND))
      assert.equal((await limiter.consume('u', { now: T0 + 119 * SECOND, weight: 10 })).allowed, true)
    })

    // (From 0 too: test frameworks' fake clocks start at the epoch, where the windows reach back
    // before it.)
    for (const start of [T0, 0]) {
      it(`holds a burst then a sustained rate: 1000 in 1 s, 5000 in 10 s, 7000 in 15 s (from ${start})`, async () => {
        const limiter = create({
          limits: [
            { duration: SECOND, limit: 1000, precision: 100 },
            { duration: 10 * SECOND, limit: 5000, precision: SECOND },
            { duration: 15 * SECOND, limit: 7000, precision: SECOND },
          ],
        })
        // A client asking for 2000 per second, 200 every 100 ms.
        const perSecond = []
        for (let second = 0; second < 15; second++) {
          let admitted = 0
          for (let step = 0; step < 10; step++) {
            const answer = await limiter.consume('client', { now: start + second * SECOND + step * 100, weight: 200 })
            if (answer.allowed) admitted += 200
          }
          perSecond.push(admitted)
        }
        assert.deepEqual(perSecond, [1000, 1000, 1000, 1000, 1000, 0, 0, 0, 0, 0, 1000, 1000, 0, 0, 0])
        assert.equal(perSecond.reduce((a, b) => a + b), 7000)
      })
    }

    it('answers from the epoch on, where the window reaches back before it', async () => {
      const limiter = create({ limits: [{ duration: 10 * SECOND, limit: 3, precision: SECOND }] })
      for (let i = 0; i < 3; i++) assert.deepEqual(await limiter.consume('s', { now: 0 }), verdict(true, 0, 2 - i, 3, 10 * SECOND))
      assert.deepEqual(await limiter.consume('s', { now: 500 }), verdict(false, 9500, 0, 3, 9500))
      // Bucket 0 leaves the window at 10 s; the weight of 10.5 s stays until 20 s.
      assert.deepEqual(await limiter.consume('s', { now: 10_500, weight: 2 }), verdict(true, 0, 1, 3, 10 * SECOND - 500))
      assert.deepEqual(await limiter.peek('s', { now: 19_999, weight: 2 }), verdict(false, 1, 1, 3, 1))
    })

    it('checks several ids together and counts none when one refuses', async () => {
      const limiter = create({ limits: [{ duration: SECOND, limit: 3, precision: 100 }] })
      assert.equal((await limiter.consume('ip', { now: T0, weight: 3 })).allowed, true)
      assert.deepEqual(await limiter.consume(['user', 'ip'], { now: T0 + 50 }), verdict(false, 950, 0, 3, 950))
      // Nothing was counted for user: a peek finds all 3 left, and nothing to reset.
      assert.deepEqual(await limiter.peek('user', { now: T0 + 50 }), verdict(true, 0, 3, 3, 0))
      assert.deepEqual(await limiter.consume('user', { now: T0 + 60, weight: 4 }), verdict(false, Infinity, 3, 3, 0))
    })

    it('defaults the precision to a tenth of the duration, and resets ids', async () => {
      const limiter = create({ limits: [{ duration: SECOND, limit: 2 }] })
      await limiter.consume('u', { now: T0 })
      await limiter.consume('u', { now: T0 + 950 })
      // The bucket [T0, T0 + 100 ms) leaves at T0 + 1 s; the one of 950 ms at T0 + 1.9 s.
      assert.deepEqual(await limiter.peek('u', { now: T0 + 999 }), verdict(false, 1, 0, 2, 901))
      assert.deepEqual(await limiter.peek('u', { now: T0 + SECOND }), verdict(true, 0, 1, 2, 900))
      await limiter.reset('u')
      assert.deepEqual(await limiter.peek('u', { now: T0 + 999 }), verdict(true, 0, 2, 2, 0))
    })
  })
}

describe('SlidingWindow options', () => {
  for (const [options, message] of [
    [{ limits: [{ duration: 1000, limit: 1, precision: 0 }] }, /`limits\[0\]\.precision`/],
    [{ limits: [{ duration: 3_600_000, limit: 1, precision: 100 }] }, /36000 buckets/],
    [{ limits: [{ duration: 1000, limit: 1, precison: 10 }] }, /`precison`/],
    [{ limits: [{ duration: 1000, limit: 1.5 }] }, /`limits\[0\]\.limit`/],
  ]) {
    it(`rejects ${JSON.stringify(options)}`, () => {
      assert.throws(() => new SlidingWindow(options), { message })
    })
  }
})

describe('SlidingWindow on Redis', () => {
  it('reads an id in one HGETALL; a new id costs an HSET and a PEXPIRE, no PTTL (a new hash has no TTL)', async () => {
    const limiter = new SlidingWindow({ client: redis.server.url, namespace: 'cost:', limits: [{ duration: 60 * SECOND, limit: 2 }, { duration: 10 * SECOND, limit: 5 }] })
    await limiter.consume('warm-up', { now: T0 })
    const counted = ['script', 'time', 'hgetall', 'hmget', 'hlen', 'hkeys', 'hset', 'hdel', 'pexpire', 'pttl']
    const commandsOf = (call) => commandsRun(redis.server, counted, call)
    // One HSET per limit; the hash's TTL is set once.
    assert.deepEqual(await commandsOf(() => limiter.consume('u', { now: T0 })), { script: 1, hgetall: 1, hset: 2, pexpire: 1 })
    // The same buckets: nothing to renew.
    assert.deepEqual(await commandsOf(() => limiter.consume('u', { now: T0 + 100 })), { script: 1, hgetall: 1, hset: 2 })
    // Refused: nothing written.
    assert.deepEqual(await commandsOf(() => limiter.consume('u', { now: T0 + 200 })), { script: 1, hgetall: 1 })
    // A new bucket of a hash that has fields: its TTL is read first (another limiter's may be longer).
    assert.deepEqual(await commandsOf(() => limiter.consume('u', { now: T0 + 60 * SECOND })), { script: 1, hgetall: 1, hset: 2, hdel: 2, pttl: 1, pexpire: 1 })
  })

  it('shares a hash with a limiter of the same namespace without shortening its TTL, and fails on a field of neither', async () => {
    const perMinute = new SlidingWindow({ client: redis.server.url, namespace: 'both:', limits: [{ duration: 60 * SECOND, limit: 100 }] })
    const perTenSeconds = new SlidingWindow({ client: redis.server.url, namespace: 'both:', limits: [{ duration: 10 * SECOND, limit: 5 }] })
    const pttl = async () => Number(await redis.server.cli('PTTL', 'both:u'))
    await perMinute.consume('u', { now: T0 })
    assert.ok((await pttl()) > 60_000, `PTTL ${await pttl()}`)
    assert.deepEqual(await perTenSeconds.consume('u', { now: T0 + SECOND }), verdict(true, 0, 4, 5, 10 * SECOND))
    assert.ok((await pttl()) > 59_000, `PTTL ${await pttl()}`)
    assert.equal((await perMinute.peek('u', { now: T0 + SECOND })).remaining, 99)
    // A new id of the shorter limiter: its own TTL.
    await perTenSeconds.consume('v', { now: T0 })
    const newIdTtl = Number(await redis.server.cli('PTTL', 'both:v'))
    assert.ok(newIdTtl > 10_000 && newIdTtl <= 11_000, `PTTL ${newIdTtl}`)
    await redis.server.cli('HSET', 'both:u', 'other', '1')
    await assert.rejects(perMinute.consume('u', { now: T0 + 2 * SECOND }), (error) => error.code === 'ERR_STORE_ERROR' && /both:u holds a field other/.test(error.message))
  })

  it('renews the TTL when a call counts in a new bucket of any limit, and only then', async () => {
    const limiter = new SlidingWindow({ client: redis.server.url, namespace: 'renew:', limits: [{ duration: 10 * SECOND, limit: 100, precision: SECOND }, { duration: 60 * SECOND, limit: 500, precision: 15 * SECOND }] })
    const pttl = async () => Number(await redis.server.cli('PTTL', 'renew:u'))
    const start = Math.ceil(T0 / (60 * SECOND)) * 60 * SECOND
    await limiter.consume('u', { now: start })
    assert.ok((await pttl()) > 60_000, `PTTL ${await pttl()}`)
    // Shortened to see what the next calls do: in the same buckets, nothing.
    await redis.server.cli('PEXPIRE', 'renew:u', '5000')
    await limiter.consume('u', { now: start + 200 })
    assert.ok((await pttl()) <= 5000, `PTTL ${await pttl()}`)
    // A new bucket of the 1 s precision (the 15 s one is the same): renewed.
    await limiter.consume('u', { now: start + 1200 })
    assert.ok((await pttl()) > 60_000, `PTTL ${await pttl()}`)
    assert.deepEqual((await limiter.peek('u', { now: start + 1300 })).remaining, 97)
  })

  it("keeps the seed's layout in one hash per id, with a TTL, and drops buckets that left", async () => {
    const limiter = new SlidingWindow({ client: redis.server.url, namespace: 'layout:', limits: [{ duration: 10 * SECOND, limit: 100, precision: SECOND }, { duration: 60 * SECOND, limit: 500, precision: 15 * SECOND }] })
    await limiter.consume('u', { now: T0 + 500, weight: 2 })
    await limiter.consume('u', { now: T0 + 3500, weight: 3 })
    const read = async () => {
      const fields = (await redis.server.cli('HGETALL', 'layout:u')).split('\n')
      return Object.fromEntries(fields.flatMap((v, i) => (i % 2 ? [] : [[v, fields[i + 1]]])))
    }
    const bucket = (precision, now) => Math.floor((now * 1000) / (precision * 1000))
    const s = (n) => String(n)
    assert.deepEqual(await read(), {
      [`10000000:1000000:${bucket(SECOND, T0 + 500)}`]: '2',
      [`10000000:1000000:${bucket(SECOND, T0 + 3500)}`]: '3',
      '10000000:1000000:o': s(bucket(SECOND, T0 + 3500) - 9),
      [`60000000:15000000:${bucket(15 * SECOND, T0)}`]: '5',
      '60000000:15000000:o': s(bucket(15 * SECOND, T0) - 3),
    })
    const ttl = Number(await redis.server.cli('PTTL', 'layout:u'))
    assert.ok(ttl > 60_000 && ttl <= 61_000, `PTTL ${ttl}`)
    // 12 s later the first second's buckets have left the 10 s window and are deleted.
    await limiter.consume('u', { now: T0 + 12_000 })
    const after = await read()
    assert.equal(after[`10000000:1000000:${bucket(SECOND, T0 + 500)}`], undefined)
    assert.equal(after[`10000000:1000000:${bucket(SECOND, T0 + 3500)}`], '3')
  })

  it('admits exactly the limit to concurrent callers', async () => {
    const limiter = new SlidingWindow({ client: redis.server.url, namespace: 'race:', limits: [{ duration: 60 * SECOND, limit: 100 }] })
    const answers = await Promise.all(Array.from({ length: 300 }, () => limiter.consume('hot')))
    assert.equal(answers.filter((a) => a.allowed).length, 100)
  })
})
