'use strict'

// FixedWindow: one or many limits, one or many ids, weights; the same numbers on both stores.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')

const { FixedWindow, RedisStore } = require('..')
const { useRedisServer, startCluster, clusterSkip } = require('./helpers/redis-server.js')
const { commandsRun } = require('./helpers/command-stats.js')
const { hashOf } = require('./helpers/hash-counts.js')

const redis = useRedisServer()
let namespaceCounter = 0

const stores = {
  'in memory': (options) => new FixedWindow(options),
  'on Redis': (options) => {
    namespaceCounter += 1
    return new FixedWindow({ client: redis.server.url, namespace: `fw-${namespaceCounter}:`, ...options })
  },
}

const SECOND = 1000
const MINUTE = 60 * SECOND
// An instant on a minute boundary: windows of 1 s and 1 min start together here.
const T0 = 1_700_000_040_000

const verdict = (allowed, timeLeft, remaining, limit, resetAfter) => ({ allowed, timeLeft, remaining, limit, resetAfter })

for (const [name, create] of Object.entries(stores)) {
  describe(`FixedWindow ${name}`, () => {
    it('counts in windows aligned to the clock, and refuses until the window ends', async () => {
      const limiter = create({ limits: [{ duration: MINUTE, limit: 3 }] })
      assert.deepEqual(await limiter.consume('u', { now: T0 + 5 * SECOND }), verdict(true, 0, 2, 3, 55 * SECOND))
      assert.deepEqual(await limiter.consume('u', { now: T0 + 15 * SECOND }), verdict(true, 0, 1, 3, 45 * SECOND))
      assert.deepEqual(await limiter.consume('u', { now: T0 + 30 * SECOND }), verdict(true, 0, 0, 3, 30 * SECOND))
      assert.deepEqual(await limiter.consume('u', { now: T0 + 59_999.5 }), verdict(false, 1, 0, 3, 1))
      // The next window starts at T0 + 1 min, the edge included.
      assert.deepEqual(await limiter.consume('u', { now: T0 + MINUTE }), verdict(true, 0, 2, 3, MINUTE))
    })

    it('peeks without counting', async () => {
      const limiter = create({ limits: [{ duration: SECOND, limit: 1 }] })
      // `remaining` is what is left now: the peeked action is not taken.
      assert.deepEqual(await limiter.peek('u', { now: T0 }), verdict(true, 0, 1, 1, 0))
      assert.deepEqual(await limiter.peek('u', { now: T0 }), verdict(true, 0, 1, 1, 0))
      assert.equal((await limiter.consume('u', { now: T0 })).allowed, true)
      assert.deepEqual(await limiter.peek('u', { now: T0 + 400 }), verdict(false, 600, 0, 1, 600))
    })

    it('counts only allowed actions', async () => {
      const limiter = create({ limits: [{ duration: SECOND, limit: 2 }] })
      await limiter.consume('u', { now: T0 })
      await limiter.consume('u', { now: T0 })
      for (let i = 0; i < 5; i++) assert.equal((await limiter.consume('u', { now: T0 + 10 })).allowed, false)
      // Had the refusals counted, the next window would not matter; it starts clean.
      assert.deepEqual(await limiter.consume('u', { now: T0 + SECOND }), verdict(true, 0, 1, 2, 1000))
    })

    it('judges several limits together: 10/s, 120/min, 240/h', async () => {
      const limiter = create({ limits: [{ duration: SECOND, limit: 10 }, { duration: MINUTE, limit: 120 }, { duration: 60 * MINUTE, limit: 240 }] })
      let allowed = 0
      for (let second = 0; second < 15; second++) {
        for (let i = 0; i < 12; i++) allowed += (await limiter.consume('u', { now: T0 + second * SECOND })).allowed ? 1 : 0
      }
      // 10 per second for 12 seconds, then the minute limit holds.
      assert.equal(allowed, 120)
      // Refused until the minute ends; everything is reset when the hour ends.
      const hourEnd = 60 * MINUTE - ((T0 + 20 * SECOND) % (60 * MINUTE))
      assert.deepEqual(await limiter.peek('u', { now: T0 + 20 * SECOND }), verdict(false, 40 * SECOND, 0, 120, hourEnd))
    })

    it('refuses when only one limit refuses, and counts nothing then', async () => {
      const limiter = create({ limits: [{ duration: SECOND, limit: 5 }, { duration: MINUTE, limit: 6 }] })
      assert.equal((await limiter.consume('u', { now: T0, weight: 5 })).allowed, true)
      // The second is fresh at T0 + 1 s, but the minute has only 1 left.
      assert.deepEqual(await limiter.consume('u', { now: T0 + SECOND, weight: 2 }), verdict(false, 59 * SECOND, 1, 6, 59 * SECOND))
      assert.deepEqual(await limiter.consume('u', { now: T0 + SECOND, weight: 1 }), verdict(true, 0, 0, 6, 59 * SECOND))
    })

    it('charges weights, and never admits a weight above a limit', async () => {
      const limiter = create({ limits: [{ duration: SECOND, limit: 10 }] })
      assert.deepEqual(await limiter.consume('u', { now: T0, weight: 7 }), verdict(true, 0, 3, 10, 1000))
      assert.deepEqual(await limiter.consume('u', { now: T0, weight: 4 }), verdict(false, 1000, 3, 10, 1000))
      assert.deepEqual(await limiter.consume('u', { now: T0, weight: 11 }), verdict(false, Infinity, 3, 10, 1000))
      assert.deepEqual(await limiter.consume('fresh', { now: T0, weight: 11 }), verdict(false, Infinity, 10, 10, 0))
    })

    it('checks and counts several ids at once (an IP and a user)', async () => {
      const limiter = create({ limits: [{ duration: MINUTE, limit: 2 }] })
      assert.equal((await limiter.consume(['ip:1', 'user:a'], { now: T0 })).allowed, true)
      assert.equal((await limiter.consume(['ip:1', 'user:b'], { now: T0 })).allowed, true)
      // ip:1 is full: user:c is refused through it, and nothing is counted for user:c.
      assert.deepEqual(await limiter.consume(['ip:1', 'user:c'], { now: T0 }), verdict(false, MINUTE, 0, 2, MINUTE))
      // A peek answers whether a consume would be allowed, and what is left now, counting nothing.
      assert.deepEqual(await limiter.peek('user:c', { now: T0 }), verdict(true, 0, 2, 2, 0))
      assert.deepEqual(await limiter.peek('user:c', { now: T0 }), verdict(true, 0, 2, 2, 0))
      assert.deepEqual(await limiter.consume(['ip:2', 'user:a'], { now: T0 }), verdict(true, 0, 0, 2, MINUTE))
      // Repeated ids count once.
      assert.deepEqual(await limiter.consume(['ip:3', 'ip:3'], { now: T0 }), verdict(true, 0, 1, 2, MINUTE))
    })

    it('starts afresh after an idle gap, and resets ids', async () => {
      const limiter = create({ limits: [{ duration: SECOND, limit: 1 }, { duration: MINUTE, limit: 2 }] })
      await limiter.consume('u', { now: T0 })
      await limiter.consume('u', { now: T0 + SECOND })
      assert.equal((await limiter.consume('u', { now: T0 + 2 * SECOND })).allowed, false)
      assert.equal((await limiter.consume('u', { now: T0 + 3 * MINUTE })).allowed, true)
      assert.equal((await limiter.consume('u', { now: T0 + 3 * MINUTE })).allowed, false)
      await limiter.reset(['u', 'v'])
      assert.deepEqual(await limiter.consume('u', { now: T0 + 3 * MINUTE }), verdict(true, 0, 0, 1, MINUTE))
    })

    it('keeps a counter rewarded to 0 in its window, so a late call still counts there', async () => {
      // (The property test's counterexample: the memory store dropped the counter at 0, and the
      // late call started a counter in its own older window.)
      const limiter = create({ limits: [{ duration: SECOND, limit: 6 }] })
      assert.deepEqual(await limiter.consume('b', { now: T0 + SECOND }), verdict(true, 0, 5, 6, SECOND))
      assert.deepEqual(await limiter.reward('b', { now: T0 + 999 }), verdict(true, 0, 6, 6, 0))
      // 1 ms late: counted in the newer window, where the counter is...
      const late = await limiter.consume('b', { now: T0 + 999 })
      assert.deepEqual([late.allowed, late.remaining], [true, 5])
      // ...so the next window's call finds it.
      assert.deepEqual(await limiter.consume('b', { now: T0 + SECOND }), verdict(true, 0, 4, 6, SECOND))
    })

    it('keeps the count of a window that ended before a reward, for a late call that counts in it', async () => {
      // (stores-agree's counterexample: on Redis the reward deleted the 1 s window's counter, and
      // the late call counted 1 where memory counted 3 + 1.)
      const limiter = create({ limits: [{ duration: SECOND, limit: 5 }, { duration: 4 * SECOND, limit: 12 }] })
      assert.deepEqual(await limiter.consume('c', { now: T0 + 500, weight: 3 }), verdict(true, 0, 2, 5, 3500))
      // In the next 1 s window: nothing to give back there; the 4 s window gets 1 back.
      assert.deepEqual(await limiter.reward('c', { now: T0 + 1100 }), verdict(true, 0, 5, 5, 2900))
      // 400 ms late, in the first 1 s window, which still holds 3.
      assert.deepEqual(await limiter.consume('c', { now: T0 + 700 }), verdict(true, 0, 1, 5, 3300))
      assert.deepEqual(await limiter.consume('c', { now: T0 + 700, weight: 2 }), verdict(false, 300, 1, 5, 3300))
    })

    it('makes a late call wait for the end of the newer window its counter is in', async () => {
      // A host whose clock is a second behind, after a call in the next window.
      const limiter = create({ limits: [{ duration: MINUTE, limit: 1 }] })
      assert.deepEqual(await limiter.consume('u', { now: T0 + MINUTE }), verdict(true, 0, 0, 1, MINUTE))
      const late = { now: T0 + MINUTE - SECOND }
      assert.deepEqual(await limiter.consume('u', late), verdict(false, MINUTE + SECOND, 0, 1, MINUTE + SECOND))
      assert.deepEqual(await limiter.peek('u', late), verdict(false, MINUTE + SECOND, 0, 1, MINUTE + SECOND))
      // Several limits and ids: each counter waits for its own window.
      const both = create({ limits: [{ duration: SECOND, limit: 10 }, { duration: MINUTE, limit: 1 }] })
      assert.equal((await both.consume('v', { now: T0 + MINUTE })).allowed, true)
      assert.deepEqual(await both.consume(['w', 'v'], late), verdict(false, MINUTE + SECOND, 0, 1, MINUTE + SECOND))
      // (w alone has no counter ahead: its windows end in a second.)
      assert.deepEqual(await both.consume('w', late), verdict(true, 0, 0, 1, SECOND))
      // A late reward gives back in the newer windows: nothing left to wait for.
      assert.deepEqual(await both.reward('v', late), verdict(true, 0, 1, 1, 0))
      assert.deepEqual(await both.peek('v', { now: T0 + MINUTE }), verdict(true, 0, 1, 1, 0))
    })

    it('rejects bad calls with codes', async () => {
      const limiter = create({ limits: [{ duration: SECOND, limit: 1 }] })
      await assert.rejects(limiter.consume('u', { weight: 0 }), { name: 'RangeError', code: 'ERR_INVALID_ARGUMENT' })
      await assert.rejects(limiter.consume('u', { weight: 1.5 }), { name: 'RangeError', code: 'ERR_INVALID_ARGUMENT' })
      await assert.rejects(limiter.consume('u', { wieght: 2 }), { name: 'TypeError', code: 'ERR_UNKNOWN_OPTION' })
      await assert.rejects(limiter.consume([]), { name: 'RangeError', code: 'ERR_INVALID_ID' })
      await assert.rejects(limiter.consume(['a', '']), { name: 'RangeError', code: 'ERR_INVALID_ID' })
      await assert.rejects(limiter.consume(Array.from({ length: 17 }, (_, i) => `id${i}`)), { code: 'ERR_INVALID_ID' })
      await assert.rejects(limiter.consume({ id: 'u' }), { name: 'TypeError', code: 'ERR_INVALID_ID' })
    })
  })
}

describe('FixedWindow options', () => {
  const cases = [
    [{}, 'TypeError', /`limits`/],
    [{ limits: [] }, 'RangeError', /`limits`/],
    [{ limits: {} }, 'TypeError', /`limits`/],
    [{ limits: [{ duration: 1000 }] }, 'TypeError', /`limit`/],
    [{ limits: [{ duration: 0, limit: 1 }] }, 'RangeError', /`limits\[0\]\.duration`/],
    [{ limits: [{ duration: 1000, limit: 1 }, { duration: 1000, limit: -1 }] }, 'RangeError', /`limits\[1\]\.limit`/],
    [{ limits: [{ duration: 1000, limit: 1, precision: 10 }] }, 'TypeError', /`precision`/],
    [{ limits: [{ duration: 1000, limit: 1 }], interval: 5 }, 'TypeError', /`interval`/],
  ]
  for (const [options, errorName, message] of cases) {
    it(`rejects ${JSON.stringify(options)}`, () => {
      assert.throws(() => new FixedWindow(options), (error) => {
        assert.equal(error.name, errorName)
        assert.match(error.code, /^ERR_(INVALID|UNKNOWN)_OPTION$/)
        assert.match(error.message, message)
        return true
      })
    })
  }
})

describe('FixedWindow on Redis', () => {
  it('keeps one hash per id with a TTL of the longest window plus a second', async () => {
    const limiter = new FixedWindow({ client: redis.server.url, namespace: 'layout:', limits: [{ duration: SECOND, limit: 5 }, { duration: MINUTE, limit: 50 }] })
    await limiter.consume('u', { now: T0 + 1500, weight: 2 })
    assert.equal(await redis.server.cli('TYPE', 'layout:u'), 'hash')
    const hash = await hashOf(redis.server, 'layout:u')
    // Field `<duration µs>:<window>`: the count in that window.
    assert.deepEqual(hash, {
      [`1000000:${Math.floor((T0 + 1500) / SECOND)}`]: '2',
      [`60000000:${Math.floor((T0 + 1500) / MINUTE)}`]: '2',
    })
    const ttl = Number(await redis.server.cli('PTTL', 'layout:u'))
    assert.ok(ttl > 60_000 && ttl <= 61_000, `PTTL ${ttl}`)
    await limiter.peek('other')
    assert.equal(await redis.server.cli('EXISTS', 'layout:other'), '0')
  })

  it('renews the TTL when the window of any limit moves: a shorter window can end after the longest', async () => {
    // 40 s and 60 s: the 40 s window of 40-80 s ends after the 60 s window of 0-60 s. Were the
    // TTL renewed only when the 60 s window moves, the hash would expire at 61 s with counts that
    // still matter until 80 s.
    const limiter = new FixedWindow({ client: redis.server.url, namespace: 'renew:', limits: [{ duration: 40 * SECOND, limit: 5 }, { duration: MINUTE, limit: 50 }] })
    const pttl = async () => Number(await redis.server.cli('PTTL', 'renew:u'))
    const start = Math.ceil(T0 / (2 * MINUTE)) * 2 * MINUTE
    await limiter.consume('u', { now: start + SECOND })
    assert.ok((await pttl()) > 60_000, `PTTL ${await pttl()}`)
    // Shortened to see what the next calls do: in the same windows, nothing.
    await redis.server.cli('PEXPIRE', 'renew:u', '5000')
    await limiter.consume('u', { now: start + 2 * SECOND })
    assert.ok((await pttl()) <= 5000, `PTTL ${await pttl()}`)
    // The 40 s window moves (the 60 s one does not): renewed.
    await limiter.consume('u', { now: start + 41 * SECOND })
    assert.ok((await pttl()) > 60_000, `PTTL ${await pttl()}`)
    // The same in a batch: calls sent together take the script's general path.
    await redis.server.cli('PEXPIRE', 'renew:u', '5000')
    await Promise.all([limiter.consume('u', { now: start + 42 * SECOND }), limiter.consume('v', { now: start + 42 * SECOND })])
    assert.ok((await pttl()) <= 5000, `PTTL ${await pttl()}`)
    await Promise.all([limiter.consume('u', { now: start + 81 * SECOND }), limiter.consume('v', { now: start + 81 * SECOND })])
    assert.ok((await pttl()) > 60_000, `PTTL ${await pttl()}`)
  })

  it('writes the same hash and TTL for a call of one id under one limit (the script counts first)', async () => {
    const limiter = new FixedWindow({ client: redis.server.url, namespace: 'alone:', limits: [{ duration: MINUTE, limit: 3 }] })
    const fieldsOf = () => hashOf(redis.server, 'alone:u')
    const pttl = async () => Number(await redis.server.cli('PTTL', 'alone:u'))
    const window = Math.floor(T0 / MINUTE)
    assert.deepEqual(await limiter.consume('u', { now: T0, weight: 2 }), verdict(true, 0, 1, 3, MINUTE))
    assert.deepEqual(await fieldsOf(), { [`60000000:${window}`]: '2' })
    assert.ok((await pttl()) > 60_000 && (await pttl()) <= 61_000, `PTTL ${await pttl()}`)
    // In the same window the TTL is left alone (shortened here to see it), and a refusal writes nothing.
    await redis.server.cli('PEXPIRE', 'alone:u', '5000')
    assert.deepEqual(await limiter.consume('u', { now: T0 + SECOND }), verdict(true, 0, 0, 3, MINUTE - SECOND))
    assert.deepEqual(await limiter.consume('u', { now: T0 + SECOND }), verdict(false, MINUTE - SECOND, 0, 3, MINUTE - SECOND))
    assert.deepEqual(await fieldsOf(), { [`60000000:${window}`]: '3' })
    assert.ok((await pttl()) <= 5000, `PTTL ${await pttl()}`)
    // The next window: counted from 0 there, the ended window's field deleted, the TTL renewed.
    assert.deepEqual(await limiter.consume('u', { now: T0 + MINUTE }), verdict(true, 0, 2, 3, MINUTE))
    assert.deepEqual(await fieldsOf(), { [`60000000:${window + 1}`]: '1' })
    assert.ok((await pttl()) > 60_000, `PTTL ${await pttl()}`)
    // A late call (a host with a slow clock) counts in the newer window the counter is in.
    assert.deepEqual(await limiter.consume('u', { now: T0 + 2 * SECOND }), verdict(true, 0, 1, 3, 2 * MINUTE - 2 * SECOND))
    assert.deepEqual(await fieldsOf(), { [`60000000:${window + 1}`]: '2' })
    // A peek writes nothing, not even for an id without a hash.
    await limiter.peek('v', { now: T0 })
    assert.equal(await redis.server.cli('EXISTS', 'alone:v'), '0')
  })

  it('counts first: an allowed call costs Redis an HINCRBY and an HLEN (a new id: PEXPIRE; a new window: HGETALL, HDEL of the ended one, PEXPIRE)', async () => {
    const limiter = new FixedWindow({ client: redis.server.url, namespace: 'cost:', limits: [{ duration: MINUTE, limit: 2 }] })
    await limiter.consume('warm-up', { now: T0 })
    const counted = ['script', 'time', 'hincrby', 'hlen', 'hgetall', 'hset', 'hdel', 'pexpire', 'pttl']
    const commandsOf = (call) => commandsRun(redis.server, counted, call)
    assert.deepEqual(await commandsOf(() => limiter.consume('u', { now: T0 })), { script: 1, hincrby: 1, hlen: 1, pexpire: 1 })
    assert.deepEqual(await commandsOf(() => limiter.consume('u', { now: T0 + SECOND })), { script: 1, hincrby: 1, hlen: 1 })
    // Refused: the weight is given back.
    assert.deepEqual(await commandsOf(() => limiter.consume('u', { now: T0 + SECOND })), { script: 1, hincrby: 2, hlen: 1 })
    assert.deepEqual(await commandsOf(() => limiter.consume('u', { now: T0 + MINUTE })), { script: 1, hincrby: 1, hlen: 1, hgetall: 1, hdel: 1, pexpire: 1 })
    // A late call: counting first undoes its increment, and reading first counts it in the newer window.
    assert.deepEqual(await commandsOf(() => limiter.consume('u', { now: T0 + 2 * SECOND })), { script: 1, hincrby: 1, hlen: 1, hgetall: 2, hdel: 1, hset: 1 })
    assert.deepEqual((await limiter.peek('u', { now: T0 + MINUTE })).remaining, 0)
  })

  it("counts an earlier version's hash (`<duration>` the count, `<duration>:w` the window) and moves it when it writes", async () => {
    const limiter = new FixedWindow({ client: redis.server.url, namespace: 'earlier:', limits: [{ duration: MINUTE, limit: 5 }] })
    const window = Math.floor(T0 / MINUTE)
    const fieldsOf = (key) => hashOf(redis.server, key)
    const pttl = async (key) => Number(await redis.server.cli('PTTL', key))
    // In the current window: its count counts, and moves to the window's field (TTL untouched).
    await redis.server.cli('HSET', 'earlier:now', '60000000', '3', '60000000:w', String(window))
    await redis.server.cli('PEXPIRE', 'earlier:now', '50000')
    assert.deepEqual(await limiter.peek('now', { now: T0 + SECOND }), verdict(true, 0, 2, 5, MINUTE - SECOND))
    assert.deepEqual(await limiter.consume('now', { now: T0 + SECOND }), verdict(true, 0, 1, 5, MINUTE - SECOND))
    assert.deepEqual(await fieldsOf('earlier:now'), { [`60000000:${window}`]: '4' })
    assert.ok((await pttl('earlier:now')) <= 50_000, `PTTL ${await pttl('earlier:now')}`)
    // In an ended window: counted from 0, the old fields deleted, the TTL renewed.
    await redis.server.cli('HSET', 'earlier:ended', '60000000', '5', '60000000:w', String(window - 1))
    assert.deepEqual(await limiter.consume('ended', { now: T0 + SECOND }), verdict(true, 0, 4, 5, MINUTE - SECOND))
    assert.deepEqual(await fieldsOf('earlier:ended'), { [`60000000:${window}`]: '1' })
    assert.ok((await pttl('earlier:ended')) > 60_000, `PTTL ${await pttl('earlier:ended')}`)
  })

  it('keeps the counters of limiters that share a namespace in one hash, whose TTL none of them shortens', async () => {
    const perSecond = new FixedWindow({ client: redis.server.url, namespace: 'both:', limits: [{ duration: SECOND, limit: 10 }] })
    const perMinute = new FixedWindow({ client: redis.server.url, namespace: 'both:', limits: [{ duration: MINUTE, limit: 100 }] })
    const start = Math.ceil(T0 / MINUTE) * MINUTE
    const pttl = async () => Number(await redis.server.cli('PTTL', 'both:u'))
    await perMinute.consume('u', { now: start })
    assert.ok((await pttl()) > 60_000, `PTTL ${await pttl()}`)
    // The 1 s limiter's new windows set a TTL of 2 s, unless the hash has a longer one: the minute's
    // count must outlive them.
    assert.deepEqual(await perSecond.consume('u', { now: start }), verdict(true, 0, 9, 10, SECOND))
    assert.ok((await pttl()) > 59_000, `PTTL ${await pttl()}`)
    assert.deepEqual(await perSecond.consume('u', { now: start + 1500 }), verdict(true, 0, 9, 10, 500))
    assert.deepEqual(await perSecond.consume('u', { now: start + 1600 }), verdict(true, 0, 8, 10, 400))
    assert.ok((await pttl()) > 58_000, `PTTL ${await pttl()}`)
    assert.deepEqual(await perMinute.consume('u', { now: start + 1600 }), verdict(true, 0, 98, 100, MINUTE - 1600))
    const fields = (await redis.server.cli('HKEYS', 'both:u')).split('\n').sort()
    assert.deepEqual(fields, [`1000000:${start / SECOND + 1}`, `60000000:${start / MINUTE}`])
    // A TTL shorter than the limiter's own is renewed when its window moves.
    await redis.server.cli('PEXPIRE', 'both:u', '1000')
    await perSecond.consume('u', { now: start + 2100 })
    assert.ok((await pttl()) > 1000, `PTTL ${await pttl()}`)
  })

  it('admits exactly the limit to concurrent callers', async () => {
    const limiter = new FixedWindow({ client: redis.server.url, namespace: 'race:', limits: [{ duration: MINUTE, limit: 100 }] })
    // One instant for all: the window is aligned to the clock and could end among the calls.
    const answers = await Promise.all(Array.from({ length: 300 }, () => limiter.consume('hot', { now: T0 })))
    assert.equal(answers.filter((a) => a.allowed).length, 100)
  })

  it('shares the counters of a RedisStore between limiters', async () => {
    const store = await RedisStore.connect(redis.server.url)
    const options = { client: store, namespace: 'shared:', limits: [{ duration: MINUTE, limit: 2 }] }
    const a = new FixedWindow(options)
    const b = new FixedWindow(options)
    await a.consume('u', { now: T0 })
    await b.consume('u', { now: T0 })
    assert.equal((await a.consume('u', { now: T0 })).allowed, false)
    await store.close()
  })
})

describe('FixedWindow on a Redis Cluster', { skip: clusterSkip() }, () => {
  it('needs the ids of one call to share a hash tag, and says so', async () => {
    const cluster = await startCluster()
    try {
      const store = await RedisStore.connect({ cluster: cluster.urls })
      const limiter = new FixedWindow({ client: store, limits: [{ duration: MINUTE, limit: 1 }, { duration: SECOND, limit: 1 }] })
      await assert.rejects(limiter.consume(['ip:1', 'user:1']), { name: 'RangeError', code: 'ERR_INVALID_ID', message: /hash tag/ })
      assert.equal((await limiter.consume(['{u1}ip:1', '{u1}user:1'], { now: T0 })).allowed, true)
      assert.equal((await limiter.consume(['{u1}ip:1', '{u1}user:1'], { now: T0 + 1 })).allowed, false)
      // One id with several limits needs no tag: its limits share one hash.
      assert.equal((await limiter.consume('solo', { now: T0 })).allowed, true)
      await store.close()
    } finally {
      await cluster.stop()
    }
  })
})
