'use strict'

// TokenBucket: the exact continuous refill (scaled integers), a bucket started at an id's first
// consume from `initial` (refused or not) and forgotten after `forgetAfter` full, late calls,
// several ids, rewards, the Redis layout, the seed's race for the last token, and the same
// answers on both stores.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const fc = require('fast-check')

const { TokenBucket, RedisStore } = require('..')
const { useRedisServer } = require('./helpers/redis-server.js')
const { random } = require('./helpers/random.js')
const { startArb } = require('./helpers/start-times.js')

const redis = useRedisServer()
let namespaceCounter = 0
const nextNamespace = () => `tb-${++namespaceCounter}:`

const stores = {
  'in memory': (options) => new TokenBucket(options),
  'on Redis': (options) => new TokenBucket({ client: redis.server.url, namespace: nextNamespace(), ...options }),
}

// A whole second: at T0 + x ms, x is exact to the microsecond.
const T0 = 1_700_000_000_000
/** The instant `us` microseconds after T0, in milliseconds. */
const at = (us) => T0 + us / 1000
const HOUR = 3_600_000

const verdict = (allowed, timeLeft, remaining, limit, resetAfter) => ({ allowed, timeLeft, remaining, limit, resetAfter })

/** The bucket at `key` on the test's Redis: the string `<tokens>:<ts>`. */
async function bucketOf(key) {
  assert.equal(await redis.server.cli('TYPE', key), 'string')
  return redis.server.cli('GET', key)
}

const exists = async (key) => (await redis.server.cli('EXISTS', key)) === '1'

for (const [name, create] of Object.entries(stores)) {
  describe(`TokenBucket ${name}`, () => {
    it('spends and refills exactly, by the microsecond (a table worked by hand)', async () => {
      // 3 tokens per second: a token is unit = 10^6 units (the interval in µs over gcd(3, 10^6)),
      // and 3 units come every microsecond: a token every 333.333... ms. Full = 4 * 10^6.
      const limiter = create({ capacity: 4, refillAmount: 3, refillInterval: 1000 })
      const c = (weight, us) => limiter.consume('u', { now: at(us), weight })
      const p = (weight, us) => limiter.peek('u', { now: at(us), weight })
      // A new id has a full bucket: 4 tokens. 1 taken: 3 left, full again in ceil(10^6 / 3) =
      // 333_334 µs, reported as 334 ms (rounded up).
      assert.deepEqual(await c(1, 0), verdict(true, 0, 3, 4, 334))
      // The same microsecond: 3 taken, none left; full in ceil(4 * 10^6 / 3) = 1_333_334 µs.
      assert.deepEqual(await c(3, 0), verdict(true, 0, 0, 4, 1334))
      // Empty: a token in ceil(10^6 / 3) = 333_334 µs.
      assert.deepEqual(await c(1, 0), verdict(false, 334, 0, 4, 1334))
      // A weight above the capacity never passes, and writes nothing.
      assert.deepEqual(await c(5, 0), verdict(false, Infinity, 0, 4, 1334))
      // At 333_333 µs: 999_999 units, 1 short of a token: 1 µs (1 ms) to wait; full in
      // ceil(3_000_001 / 3) = 1_000_001 µs.
      assert.deepEqual(await p(1, 333_333), verdict(false, 1, 0, 4, 1001))
      // At 333_334 µs: 1_000_002 units: a token, and 2 units left, as of 333_334 µs.
      assert.deepEqual(await c(1, 333_334), verdict(true, 0, 0, 4, 1334))
      // Back in time to 200 ms (a host whose clock is behind): no refill for the late call; the
      // bucket holds 2 units as of 333_334 µs and has a token ceil(999_998 / 3) = 333_333 µs
      // after that: 133_334 + 333_333 = 466_667 µs from this call's now (467 ms); full in
      // 133_334 + ceil(3_999_998 / 3) = 1_466_667 µs.
      assert.deepEqual(await c(1, 200_000), verdict(false, 467, 0, 4, 1467))
      // 200 + 467 - 1 = 666 ms: 2 + 3 * (666_000 - 333_334) = 998_000 units, refused; at 667 ms
      // 1_001_000 units: allowed, 1000 units left as of 667 ms.
      assert.deepEqual(await p(1, 666_000), verdict(false, 1, 0, 4, 1001))
      assert.deepEqual(await c(1, 667_000), verdict(true, 0, 0, 4, 1333))
      // Full at 667_000 + ceil(3_999_000 / 3) = 2_000_000 µs. A microsecond before: 3_999_997
      // units, 3 tokens, 1 µs from full.
      assert.deepEqual(await p(1, 1_999_999), verdict(true, 0, 3, 4, 1))
      // Full: forgotten, the same as a new id.
      assert.deepEqual(await p(1, 2_000_000), verdict(true, 0, 4, 4, 0))
      // An idle gap of an hour: a full bucket again; two calls in one microsecond.
      assert.deepEqual(await c(4, 1000 * HOUR), verdict(true, 0, 0, 4, 1334))
      assert.deepEqual(await c(1, 1000 * HOUR), verdict(false, 334, 0, 4, 1334))
    })

    it('starts a bucket at the first consume, from `initial`, and forgets it after forgetAfter full', async () => {
      // 4 tokens, 1 per second (unit 10^6, rate 1), 2 to start with, forgotten after 10 s full.
      const limiter = create({ capacity: 4, refillInterval: 1000, initial: 2, forgetAfter: 10_000 })
      const c = (weight, ms) => limiter.consume('u', { now: T0 + ms, weight })
      const p = (weight, ms) => limiter.peek('u', { now: T0 + ms, weight })
      // A new id holds 2 as of now: 3 in 1 s, full in 2 s. A peek starts nothing: an hour later
      // it answers the same.
      assert.deepEqual(await p(3, 0), verdict(false, 1000, 2, 4, 2000))
      assert.deepEqual(await p(3, HOUR), verdict(false, 1000, 2, 4, 2000))
      // A refused consume starts the bucket (2 tokens as of 0, nothing taken)...
      assert.deepEqual(await c(3, 0), verdict(false, 1000, 2, 4, 2000))
      // ... which refills: 2_999_999 units at 999.999 ms (1 µs short: 1 ms; full in 1_000_001 µs),
      // 3 tokens at 1 s, taken: empty, full in 4 s.
      assert.deepEqual(await p(3, 999.999), verdict(false, 1, 2, 4, 1001))
      assert.deepEqual(await c(3, 1000), verdict(true, 0, 0, 4, 4000))
      // The whole capacity passes once the bucket is full: at 5 s.
      assert.deepEqual(await c(4, 1000), verdict(false, 4000, 0, 4, 4000))
      assert.deepEqual(await c(4, 4999.999), verdict(false, 1, 3, 4, 1))
      assert.deepEqual(await c(4, 5000), verdict(true, 0, 0, 4, 4000))
      // Empty at 5 s, full at 9 s, and kept full until 19 s: an idle client finds it full.
      assert.deepEqual(await p(1, 18_999.999), verdict(true, 0, 4, 4, 0))
      // At 19 s it has been full for forgetAfter: forgotten, the same as a new id (2 as of now).
      assert.deepEqual(await p(1, 19_000), verdict(true, 0, 2, 4, 2000))
      assert.deepEqual(await c(4, 19_000), verdict(false, 2000, 2, 4, 2000))
      assert.deepEqual(await c(4, 21_000), verdict(true, 0, 0, 4, 4000))
    })

    it('with `initial: 0`: a new id waits for its first token, and a slow client is never refused', async () => {
      // 3 tokens, 1 per 200 ms (unit 2 * 10^5, rate 1): from empty to full in 600 ms; forgotten
      // after 5 s full.
      const limiter = create({ capacity: 3, refillInterval: 200, initial: 0, forgetAfter: 5000 })
      const c = (weight, ms) => limiter.consume('u', { now: T0 + ms, weight })
      // A new id: refused, a token in exactly 200 ms (full in 600 ms); the refusal starts the
      // bucket, empty as of 0.
      assert.deepEqual(await c(1, 0), verdict(false, 200, 0, 3, 600))
      // At 199.999 ms: 199_999 units, 1 µs short (1 ms); full in 400_001 µs.
      assert.deepEqual(await limiter.peek('u', { now: T0 + 199.999 }), verdict(false, 1, 0, 3, 401))
      assert.deepEqual(await c(1, 200), verdict(true, 0, 0, 3, 600))
      // The whole capacity passes once the bucket is full: at 800 ms.
      assert.deepEqual(await c(3, 200), verdict(false, 600, 0, 3, 600))
      assert.deepEqual(await c(3, 800), verdict(true, 0, 0, 3, 600))
      // A slow client, every 1.8 s (three refill times), takes the whole capacity each time: its
      // bucket is full 600 ms after each call, and kept full (1.2 s of the 5).
      for (let k = 1; k <= 5; k++) assert.deepEqual(await c(3, 800 + 1800 * k), verdict(true, 0, 0, 3, 600), `call ${k}`)
      // Idle for longer than forgetAfter: the last take at 9.8 s, full at 10.4 s, forgotten at
      // 15.4 s; then it starts again from 0, like a new id.
      assert.deepEqual(await limiter.peek('u', { now: T0 + 15_399.999, weight: 3 }), verdict(true, 0, 3, 3, 0))
      assert.deepEqual(await c(1, 15_400), verdict(false, 200, 0, 3, 600))
      assert.deepEqual(await c(1, 15_599.999), verdict(false, 1, 0, 3, 401))
      assert.deepEqual(await c(1, 15_600), verdict(true, 0, 0, 3, 600))
      // With the default forgetAfter (a day), a client every hour finds a full bucket each time
      // after its first call; after a day and more away, it starts from 0 again.
      const daily = create({ capacity: 3, refillInterval: 200, initial: 0 })
      const d = (weight, ms) => daily.consume('v', { now: T0 + ms, weight })
      assert.deepEqual(await d(3, 0), verdict(false, 600, 0, 3, 600))
      for (let k = 1; k <= 5; k++) assert.deepEqual(await d(3, k * HOUR), verdict(true, 0, 0, 3, 600), `hour ${k}`)
      // Full at 5 h + 600 ms and kept for a day: still there 1 µs before it is forgotten.
      assert.deepEqual(await d(3, 29 * HOUR + 599.999), verdict(true, 0, 0, 3, 600))
      // Then away for more than a day (full at 29 h + 1199.999 ms, forgotten a day after it):
      // it starts from 0 again.
      assert.deepEqual(await d(3, 53 * HOUR + 1200), verdict(false, 600, 0, 3, 600))
    })

    it('answers an exact timeLeft: refused 1 ms before it, allowed at it', async () => {
      const configs = [
        { capacity: 7, refillAmount: 3, refillInterval: 700.3 },
        { capacity: 3, refillAmount: 2, refillInterval: 0.9 },
        { capacity: 6, refillInterval: 250.7, initial: 2 },
        { capacity: 1, refillAmount: 5, refillInterval: 12_345.678 },
        { capacity: 5, refillAmount: 2, refillInterval: 100, initial: 0, forgetAfter: 150 },
        // forgetAfter 1 ms, the least for which the rounded timeLeft is exact: a bucket full at
        // some microsecond is still full at the next whole millisecond.
        { capacity: 4, refillInterval: 3.3, initial: 1, forgetAfter: 1 },
      ]
      const rand = random(42)
      let checked = 0
      for (const [c, options] of configs.entries()) {
        const limiter = create(options)
        const { capacity } = options
        for (let trial = 0; trial < 40; trial++) {
          const id = `s${c}-${trial}`
          // A random history (none for a fifth: a new id), some of it late; fractional instants.
          let now = T0 + Math.floor(rand() * 1e9) / 1000
          for (let k = Math.floor(rand() * 5) - 1; k >= 0; k--) {
            await limiter.consume(id, { now, weight: 1 + Math.floor(rand() * capacity) })
            now += (rand() < 0.2 ? -1 : 1) * Math.floor(rand() * 3 * options.refillInterval * 1000) / 1000
          }
          const weight = 1 + Math.floor(rand() * capacity)
          const answer = await limiter.consume(id, { now, weight })
          if (answer.allowed) continue
          // A weight up to the capacity always passes in time: a new id's bucket refills from
          // its first consume, this one.
          const t = answer.timeLeft
          assert.ok(Number.isInteger(t) && t > 0, `${id}: timeLeft ${t}`)
          assert.equal((await limiter.peek(id, { now: now + t - 1, weight })).allowed, false, `${id} at +${t - 1}`)
          assert.equal((await limiter.consume(id, { now: now + t, weight })).allowed, true, `${id} at +${t}`)
          checked++
        }
      }
      assert.ok(checked > 80, `only ${checked} refusals checked`)
    })

    it('admits exactly the refill over a long run: initial + floor(3 * elapsed / 1 s), capped by the bucket', async () => {
      // Greedy spending (every whole token, each time) at irregular instants. In a stretch where
      // the bucket never fills, the total is exactly base + floor(3 * elapsed_µs / 10^6) since the
      // stretch began, base being `initial` for the first stretch; a bucket that fills starts a
      // new stretch holding the capacity (forgotten when initial == capacity, a new bucket then
      // being full; kept full below it, the gaps being far shorter than forgetAfter, a day). Each
      // instant takes exactly the tokens that total says are there: allowed, and nothing left
      // (remaining 0); when there are none, the wait for the next is exact.
      async function run(limiter, id, { capacity, initial }, { span, gap, longGap, longShare, seed }) {
        const rand = random(seed)
        const full = capacity * 1e6
        let start = null // the stretch's first instant
        let base = 0 // the tokens at it
        let stretchTaken = 0
        let total = 0
        let left = 0 // units left after the previous instant
        let previous = 0
        for (let us = 0; us <= span; us += rand() < longShare ? longGap(rand) : gap(rand)) {
          if (start === null || left + 3 * (us - previous) >= full) {
            base = start === null ? initial : capacity
            start = us
            stretchTaken = 0
          }
          const before = base * 1e6 + 3 * (us - start) - 1e6 * stretchTaken
          const stretchTotal = base + Math.floor((3 * (us - start)) / 1e6)
          const k = stretchTotal - stretchTaken
          left = before - 1e6 * k
          previous = us
          const waitMs = (units) => Math.ceil(Math.ceil(units / 3) / 1000)
          if (k > 0) {
            const answer = await limiter.consume(id, { now: at(us), weight: k })
            assert.deepEqual(answer, verdict(true, 0, 0, capacity, waitMs(full - left)), `${id}: ${k} at ${us} µs`)
            total += k
            stretchTaken = stretchTotal
          }
          if (k === 0 || rand() < 0.1) {
            const answer = await limiter.peek(id, { now: at(us) })
            assert.deepEqual(answer, verdict(false, waitMs(1e6 - left), 0, capacity, waitMs(full - left)), `${id}: peek at ${us} µs`)
          }
        }
        return total
      }
      // The brief's bucket, 5 tokens at 3 per second, for a simulated half hour (gaps up to 1.4 s and
      // now and then long ones that fill it), with initial 5 and 2.
      const halfHour = { span: 1.8e9, gap: (r) => Math.floor(r() * 1.4e6), longGap: (r) => 2e6 + Math.floor(r() * 8e6), longShare: 0.01 }
      const small = { capacity: 5, refillAmount: 3, refillInterval: 1000 }
      const [a, b] = await Promise.all([
        run(create(small), 'hour', { capacity: 5, initial: 5 }, { ...halfHour, seed: 1 }),
        run(create({ ...small, initial: 2 }), 'hour', { capacity: 5, initial: 2 }, { ...halfHour, seed: 2 }),
      ])
      assert.ok(a > 4500 && b > 4500, `${a}, ${b}`)
      // The same rate with room for 5000 tokens (gaps up to 2 minutes, and now and then half an
      // hour or more), for a simulated day: up to 259_200 tokens, to the token.
      const day = { span: 8.64e10, gap: (r) => Math.floor(r() * 1.2e8), longGap: (r) => 1.7e9 + Math.floor(r() * 1e9), longShare: 0.01 }
      const large = await run(create({ capacity: 5000, refillAmount: 3, refillInterval: 1000 }), 'day', { capacity: 5000, initial: 5000 }, { ...day, seed: 3 })
      assert.ok(large > 200_000, `${large}`)
    })

    it('judges several ids together, and charges none when one refuses', async () => {
      // 2 tokens, 1 per second.
      const limiter = create({ capacity: 2, refillInterval: 1000 })
      assert.deepEqual(await limiter.consume(['ip', 'u1'], { now: T0, weight: 2 }), verdict(true, 0, 0, 2, 2000))
      // ip holds half a token at 0.5 s: refused through it, and u2 is not charged.
      assert.deepEqual(await limiter.consume(['ip', 'u2'], { now: T0 + 500 }), verdict(false, 500, 0, 2, 1500))
      assert.deepEqual(await limiter.peek('u2', { now: T0 + 500 }), verdict(true, 0, 2, 2, 0))
      // At 1 s both admit: ip is empty again (full in 2 s), u2 holds 1 (full in 1 s).
      assert.deepEqual(await limiter.consume(['ip', 'u2'], { now: T0 + 1000 }), verdict(true, 0, 0, 2, 2000))
      assert.deepEqual(await limiter.peek('u2', { now: T0 + 1000 }), verdict(true, 0, 1, 2, 1000))
      // Repeated ids count once.
      assert.deepEqual(await limiter.consume(['x', 'x'], { now: T0 }), verdict(true, 0, 1, 2, 1000))
      // With initial < capacity, a new id's bucket holds `initial` as of now, and a call waits
      // for the slowest bucket: `a` (emptied at 0) holds 2 at 2 s, `b` (new: 1 token) at 1 s.
      const partial = create({ capacity: 3, refillInterval: 1000, initial: 1 })
      await partial.consume('a', { now: T0 })
      assert.deepEqual(await partial.peek(['a', 'b'], { now: T0, weight: 2 }), verdict(false, 2000, 0, 3, 3000))
      // The refused consume starts b's bucket (a's it leaves as it is): b holds 2 at 1 s.
      assert.deepEqual(await partial.consume(['a', 'b'], { now: T0, weight: 2 }), verdict(false, 2000, 0, 3, 3000))
      assert.deepEqual(await partial.peek('b', { now: T0 + 1000 }), verdict(true, 0, 2, 3, 1000))
      // 1 µs before 2 s: a holds 1_999_999 units (full in 1_000_001 µs), b 2_999_999.
      assert.deepEqual(await partial.consume(['a', 'b'], { now: T0 + 1999.999, weight: 2 }), verdict(false, 1, 1, 3, 1001))
      // At 2 s: a 2 -> 0 (full in 3 s), b 3 (full, kept) -> 1 (full in 2 s).
      assert.deepEqual(await partial.consume(['a', 'b'], { now: T0 + 2000, weight: 2 }), verdict(true, 0, 0, 3, 3000))
    })

    it('gives weight back with reward, up to full, never creating a bucket', async () => {
      const namespace = nextNamespace()
      const limiter = create({ capacity: 5, refillInterval: 1000, namespace })
      // On Redis, the id's hash (to see that a reward creates none).
      const key = name === 'on Redis' ? `${namespace}r` : null
      // No bucket: nothing to give back, and none is created.
      assert.deepEqual(await limiter.reward('r', { now: T0 }), verdict(true, 0, 5, 5, 0))
      if (key) assert.equal(await exists(key), false)
      assert.deepEqual(await limiter.consume('r', { now: T0, weight: 4 }), verdict(true, 0, 1, 5, 4000))
      assert.deepEqual(await limiter.reward('r', { now: T0, weight: 2 }), verdict(true, 0, 3, 5, 2000))
      if (key) assert.ok(Number(await redis.server.cli('PTTL', key)) > 0)
      // A peek takes nothing.
      assert.deepEqual(await limiter.peek('r', { now: T0 }), verdict(true, 0, 3, 5, 2000))
      assert.deepEqual(await limiter.peek('r', { now: T0, weight: 4 }), verdict(false, 1000, 3, 5, 2000))
      // Past full: the bucket is dropped (the same as none).
      assert.deepEqual(await limiter.reward('r', { now: T0, weight: 10 }), verdict(true, 0, 5, 5, 0))
      if (key) assert.equal(await exists(key), false)
      assert.deepEqual(await limiter.consume('r', { now: T0, weight: 5 }), verdict(true, 0, 0, 5, 5000))
      // At 0.5 s: 0.5 + 1 = 1.5 tokens, as of 0.5 s.
      assert.deepEqual(await limiter.reward('r', { now: T0 + 500 }), verdict(true, 0, 1, 5, 3500))
      // A late reward (at 0.2 s): 2.5 tokens, still as of 0.5 s, full 2.5 s after it.
      assert.deepEqual(await limiter.reward('r', { now: T0 + 200 }), verdict(true, 0, 2, 5, 2800))
      // A bucket full by now is dropped by a reward: it was the same as none.
      assert.deepEqual(await limiter.reward('r', { now: T0 + 10_000 }), verdict(true, 0, 5, 5, 0))
      if (key) assert.equal(await exists(key), false)
      // Reset forgets a bucket.
      await limiter.consume('r', { now: T0, weight: 5 })
      await limiter.reset('r')
      assert.deepEqual(await limiter.peek('r', { now: T0 }), verdict(true, 0, 5, 5, 0))
    })

    it('below capacity, keeps a bucket a reward fills full until it is forgotten', async () => {
      const namespace = nextNamespace()
      // 4 tokens, 2 to start with, 1 per second, forgotten after 10 s full.
      const limiter = create({ capacity: 4, refillInterval: 1000, initial: 2, forgetAfter: 10_000, namespace })
      const key = name === 'on Redis' ? `${namespace}f` : null
      // No bucket: a reward creates none (it answers as a new id: 2 tokens, full in 2 s).
      assert.deepEqual(await limiter.reward('f', { now: T0 }), verdict(true, 0, 2, 4, 2000))
      if (key) assert.equal(await exists(key), false)
      assert.deepEqual(await limiter.consume('f', { now: T0, weight: 2 }), verdict(true, 0, 0, 4, 4000))
      // At 1 s it holds 1; 10 back fill it: full as of 1 s, kept until 11 s.
      assert.deepEqual(await limiter.reward('f', { now: T0 + 1000, weight: 10 }), verdict(true, 0, 4, 4, 0))
      const full = `4000000:${(T0 + 1000) * 1000}`
      if (key) assert.equal(await bucketOf(key), full)
      // A full bucket is left as it is (its forgetting is not put off).
      assert.deepEqual(await limiter.reward('f', { now: T0 + 5000 }), verdict(true, 0, 4, 4, 0))
      if (key) assert.equal(await bucketOf(key), full)
      if (key) assert.ok(Number(await redis.server.cli('PTTL', key)) > 0)
      assert.deepEqual(await limiter.peek('f', { now: T0 + 10_999.999, weight: 4 }), verdict(true, 0, 4, 4, 0))
      // Forgotten at 11 s: a reward drops it, and the id starts again from 2.
      assert.deepEqual(await limiter.reward('f', { now: T0 + 11_000 }), verdict(true, 0, 2, 4, 2000))
      if (key) assert.equal(await exists(key), false)
    })

    it('shows its options, and rejects bad calls with codes', async () => {
      const limiter = create({ capacity: 5, refillAmount: 2, refillInterval: 1000, initial: 3, forgetAfter: 60_000 })
      assert.deepEqual(
        [limiter.capacity, limiter.refillAmount, limiter.refillInterval, limiter.initial, limiter.forgetAfter],
        [5, 2, 1000, 3, 60_000],
      )
      await assert.rejects(limiter.consume('u', { weight: 0 }), { name: 'RangeError', code: 'ERR_INVALID_ARGUMENT' })
      await assert.rejects(limiter.consume('u', { weight: 1.5 }), { name: 'RangeError', code: 'ERR_INVALID_ARGUMENT' })
      await assert.rejects(limiter.consume('u', { weight: '2' }), { name: 'TypeError', code: 'ERR_INVALID_ARGUMENT' })
      await assert.rejects(limiter.consume('u', { now: -1 }), { name: 'RangeError', code: 'ERR_INVALID_ARGUMENT' })
      await assert.rejects(limiter.consume('u', { now: NaN }), { code: 'ERR_INVALID_ARGUMENT' })
      await assert.rejects(limiter.reward('u', { weight: -1 }), { name: 'RangeError', code: 'ERR_INVALID_ARGUMENT' })
      await assert.rejects(limiter.consume('u', { wieght: 2 }), { name: 'TypeError', code: 'ERR_UNKNOWN_OPTION' })
      await assert.rejects(limiter.consume([]), { name: 'RangeError', code: 'ERR_INVALID_ID' })
      await assert.rejects(limiter.consume({ id: 'u' }), { name: 'TypeError', code: 'ERR_INVALID_ID' })
      // A weight that can never pass: wait says so at once.
      await assert.rejects(limiter.wait('u', { weight: 6 }), { name: 'RangeError', code: 'ERR_INVALID_ARGUMENT' })
    })
  })
}

describe('TokenBucket options', () => {
  const ok = { capacity: 5, refillInterval: 1000 }
  const cases = [
    [{}, 'TypeError', /`capacity`/],
    [{ capacity: 5 }, 'TypeError', /`refillInterval`/],
    [{ ...ok, capacity: '5' }, 'TypeError', /`capacity`/],
    [{ ...ok, capacity: 0 }, 'RangeError', /`capacity`/],
    [{ ...ok, capacity: 2.5 }, 'RangeError', /`capacity`/],
    [{ ...ok, capacity: 1e16 }, 'RangeError', /`capacity`/],
    [{ ...ok, refillInterval: 0 }, 'RangeError', /`refillInterval`/],
    [{ ...ok, refillInterval: 0.0004 }, 'RangeError', /`refillInterval`.*microsecond/],
    [{ ...ok, refillInterval: 2e12 }, 'RangeError', /`refillInterval`/],
    [{ ...ok, refillInterval: NaN }, 'RangeError', /`refillInterval`/],
    [{ ...ok, refillAmount: 0 }, 'RangeError', /`refillAmount`/],
    [{ ...ok, refillAmount: 1.5 }, 'RangeError', /`refillAmount`/],
    [{ ...ok, refillAmount: '1' }, 'TypeError', /`refillAmount`/],
    [{ ...ok, initial: 6 }, 'RangeError', /`initial`/],
    [{ ...ok, initial: -1 }, 'RangeError', /`initial`/],
    [{ ...ok, initial: null }, 'TypeError', /`initial`/],
    [{ ...ok, forgetAfter: 0 }, 'RangeError', /`forgetAfter`/],
    [{ ...ok, initial: 0, forgetAfter: -1 }, 'RangeError', /`forgetAfter`/],
    [{ ...ok, forgetAfter: 0.0004 }, 'RangeError', /`forgetAfter`.*microsecond/],
    [{ ...ok, forgetAfter: 2e12 }, 'RangeError', /`forgetAfter`/],
    [{ ...ok, forgetAfter: Infinity }, 'RangeError', /`forgetAfter`/],
    [{ ...ok, forgetAfter: '1000' }, 'TypeError', /`forgetAfter`/],
    [{ ...ok, forgetAfter: null }, 'TypeError', /`forgetAfter`/],
    [{ ...ok, forgetAfterMs: 1000 }, 'TypeError', /`forgetAfterMs`/],
    // 10 tokens of 10^15 units (a token per 10^12 ms, kept in microseconds) pass 2^53.
    [{ capacity: 10, refillInterval: 1e12 }, 'RangeError', /`capacity`.*`refillInterval`.*2\^53/s],
    [{ ...ok, limits: [] }, 'TypeError', /`limits`/],
    [{ ...ok, interval: 5 }, 'TypeError', /`interval`/],
    [{ ...ok, onStoreError: 'allow' }, 'RangeError', /onStoreError/],
  ]
  for (const [options, errorName, message] of cases) {
    it(`rejects ${JSON.stringify(options)}`, () => {
      assert.throws(() => new TokenBucket(options), (error) => {
        assert.equal(error.name, errorName)
        assert.match(error.code, /^ERR_(INVALID|UNKNOWN)_OPTION$/)
        assert.match(error.message, message)
        return true
      })
    })
  }

  it('takes a bucket of up to 2^53 units', async () => {
    // 2^33 tokens of 2^20 units (1048.576 ms per token): exactly 2^53.
    const limiter = new TokenBucket({ capacity: 2 ** 33, refillInterval: 1048.576 })
    assert.deepEqual(await limiter.consume('u', { now: T0, weight: 2 ** 33 }), verdict(true, 0, 0, 2 ** 33, Math.ceil(2 ** 53 / 1000)))
    assert.throws(() => new TokenBucket({ capacity: 2 ** 33 + 1, refillInterval: 1048.576 }), { code: 'ERR_INVALID_OPTION' })
    // A refill amount sharing factors with the interval keeps the unit small.
    assert.doesNotThrow(() => new TokenBucket({ capacity: 1e15, refillAmount: 1e15, refillInterval: 1e12 }))
  })
})

describe('TokenBucket on Redis', () => {
  it('keeps one string per id, `<tokens>:<ts>` (1/unit of a token, µs), with a TTL', async () => {
    // 3 tokens a minute: a token is 6 * 10^7 / gcd(3, 6 * 10^7) = 2 * 10^7 units, 1 unit comes
    // each microsecond. After 1 of 4 tokens is taken the bucket is full in 2 * 10^7 µs = 20 s, and
    // forgotten then (initial == capacity): the TTL is 21 s.
    const limiter = new TokenBucket({ client: redis.server.url, namespace: 'tb-layout:', capacity: 4, refillAmount: 3, refillInterval: 60_000 })
    await limiter.consume('u', { now: T0 + 1.5 })
    const ttl = Number(await redis.server.cli('PTTL', 'tb-layout:u'))
    assert.ok(ttl > 20_000 && ttl <= 21_000, `PTTL ${ttl}`)
    assert.equal(await bucketOf('tb-layout:u'), `60000000:${T0 * 1000 + 1500}`)
    // Peeks, refusals and weights above the capacity write nothing.
    await limiter.peek('other')
    await limiter.consume('other', { weight: 5 })
    assert.equal(await exists('tb-layout:other'), false)
    await limiter.consume('u', { now: T0 + 1.5, weight: 3 })
    await limiter.consume('u', { now: T0 + 2, weight: 1 })
    assert.equal(await bucketOf('tb-layout:u'), `0:${T0 * 1000 + 1500}`)
    // A level past full (another configuration's data) is a full bucket: forgotten.
    await redis.server.cli('SET', 'tb-layout:big', '999999999999:0')
    assert.deepEqual(await limiter.peek('big', { now: T0 }), verdict(true, 0, 4, 4, 0))
  })

  it('below capacity, a refused consume of a new id starts its bucket, with a TTL until it is forgotten', async () => {
    // The same bucket starting with 1 token (2 * 10^7 units), forgotten after 30 s full: a new
    // bucket is full in 6 * 10^7 µs = 60 s, forgotten 30 s later: a TTL of 60 + 30 + 1 = 91 s.
    const options = { client: redis.server.url, namespace: 'tb-start:', capacity: 4, refillAmount: 3, refillInterval: 60_000 }
    const limiter = new TokenBucket({ ...options, initial: 1, forgetAfter: 30_000 })
    assert.deepEqual(await limiter.consume('u', { now: T0 + 1.5, weight: 2 }), verdict(false, 20_000, 1, 4, 60_000))
    assert.equal(await bucketOf('tb-start:u'), `20000000:${T0 * 1000 + 1500}`)
    const ttl = Number(await redis.server.cli('PTTL', 'tb-start:u'))
    assert.ok(ttl > 90_000 && ttl <= 91_000, `PTTL ${ttl}`)
    // A refusal leaves a kept bucket as it is; peeks and weights above the capacity write nothing.
    await limiter.consume('u', { now: T0 + 5000, weight: 4 })
    assert.equal(await bucketOf('tb-start:u'), `20000000:${T0 * 1000 + 1500}`)
    await limiter.peek('other', { now: T0, weight: 4 })
    await limiter.consume('other', { now: T0, weight: 5 })
    assert.equal(await exists('tb-start:other'), false)
    // With initial == capacity a refusal writes nothing (a new bucket would be full: none).
    const plain = new TokenBucket({ ...options, namespace: 'tb-plain:' })
    await plain.consume('u', { now: T0, weight: 4 })
    assert.equal((await plain.consume('u', { now: T0 })).allowed, false)
    assert.equal((await plain.consume('v', { now: T0, weight: 5 })).allowed, false)
    assert.equal(await bucketOf('tb-plain:u'), `0:${T0 * 1000}`)
    assert.equal(await exists('tb-plain:v'), false)
    // Forgetting follows from the stored level and instant, not from the key's expiry: a full
    // level written at T0 is kept until T0 + 30 s, then is a new id's (1 token as of now).
    await redis.server.cli('SET', 'tb-start:big', `999999999999:${T0 * 1000}`)
    assert.deepEqual(await limiter.peek('big', { now: T0 + 29_999.999 }), verdict(true, 0, 4, 4, 0))
    assert.deepEqual(await limiter.peek('big', { now: T0 + 30_000 }), verdict(true, 0, 1, 4, 60_000))
  })

  it("counts on an earlier version's hash (`tokens`, `ts`) and replaces it with its string at the next write", async () => {
    // Earlier versions kept a bucket as a hash. 4 tokens, 1 a second: 1 token left as of T0.
    const limiter = new TokenBucket({ client: redis.server.url, namespace: 'tb-old:', capacity: 4, refillInterval: 1000 })
    await redis.server.cli('HSET', 'tb-old:u', 'tokens', '1000000', 'ts', String(T0 * 1000))
    await redis.server.cli('PEXPIRE', 'tb-old:u', '60000')
    // Peeks and refusals leave it as it is.
    assert.deepEqual(await limiter.peek('u', { now: T0 }), verdict(true, 0, 1, 4, 3000))
    assert.deepEqual(await limiter.consume('u', { now: T0, weight: 2 }), verdict(false, 1000, 1, 4, 3000))
    assert.equal(await redis.server.cli('TYPE', 'tb-old:u'), 'hash')
    // At 0.5 s it holds 1.5: one is taken, and the bucket is a string from then on.
    assert.deepEqual(await limiter.consume('u', { now: T0 + 500 }), verdict(true, 0, 0, 4, 3500))
    assert.equal(await bucketOf('tb-old:u'), `500000:${(T0 + 500) * 1000}`)
    const ttl = Number(await redis.server.cli('PTTL', 'tb-old:u'))
    assert.ok(ttl > 3000 && ttl <= 4500, `PTTL ${ttl}`)
    // The batch path reads it as well (two calls sent together).
    await redis.server.cli('HSET', 'tb-old:v', 'tokens', '4000000', 'ts', String(T0 * 1000))
    const [v, w] = await Promise.all([limiter.consume('v', { now: T0, weight: 4 }), limiter.consume('w', { now: T0, weight: 4 })])
    assert.deepEqual([v, w], [verdict(true, 0, 0, 4, 4000), verdict(true, 0, 0, 4, 4000)])
    assert.equal(await bucketOf('tb-old:v'), `0:${T0 * 1000}`)
  })

  it('refuses data it did not write, writing nothing', async () => {
    const limiter = new TokenBucket({ client: redis.server.url, namespace: 'tb-bad:', capacity: 4, refillInterval: 1000 })
    const shapes = [
      ['text', ['SET', 'tb-bad:text', 'abc:1'], /tokens = abc/],
      ['negative', ['SET', 'tb-bad:negative', '1:-5'], /ts = -5/],
      ['fraction', ['SET', 'tb-bad:fraction', '1.5:1'], /tokens = 1.5/],
      ['empty', ['SET', 'tb-bad:empty', ':1'], /tokens = ,/],
      ['half', ['SET', 'tb-bad:half', '1'], /holds "1", not tokens:ts/],
      ['extra', ['SET', 'tb-bad:extra', '1:1:2'], /holds "1:1:2", not tokens:ts/],
      // An earlier version's hash (see the next test) is checked as it was.
      ['old-text', ['HSET', 'tb-bad:old-text', 'tokens', 'abc', 'ts', '1'], /tokens = abc/],
      ['old-half', ['HSET', 'tb-bad:old-half', 'tokens', '1'], /only one of/],
      ['old-extra', ['HSET', 'tb-bad:old-extra', 'tokens', '1', 'ts', '1', 'other', '2'], /field other/],
      ['list', ['RPUSH', 'tb-bad:list', 'x'], /WRONGTYPE/],
    ]
    for (const [id, command, message] of shapes) {
      await redis.server.cli(...command)
      const before = await redis.server.cli('DUMP', `tb-bad:${id}`)
      for (const method of ['consume', 'peek', 'reward']) {
        await assert.rejects(limiter[method](id), (error) => {
          assert.equal(error.code, 'ERR_STORE_ERROR')
          assert.match(error.message, message)
          return true
        })
      }
      assert.equal(await redis.server.cli('DUMP', `tb-bad:${id}`), before)
    }
  })

  it('gives the last token to exactly one of two workers racing for it (the seed\'s race)', async () => {
    // Two limiters on two RedisStores (two connections), as two workers would be, on one key
    // holding 1 token; the refill (a token an hour) adds nothing meanwhile. The server's clock.
    const stores = await Promise.all([RedisStore.connect(redis.server.url), RedisStore.connect(redis.server.url)])
    try {
      const options = { namespace: 'tb-race:', capacity: 3, refillInterval: HOUR }
      const [a, b] = stores.map((client) => new TokenBucket({ client, ...options }))
      for (let round = 0; round < 10; round++) {
        await Promise.all(
          Array.from({ length: 20 }, async (_, i) => {
            const id = `last-${round}-${i}`
            assert.equal((await a.consume(id, { weight: 2 })).allowed, true)
            const answers = await Promise.all([a.consume(id), b.consume(id)])
            assert.equal(answers.filter((x) => x.allowed).length, 1, JSON.stringify(answers))
            const refused = answers.find((x) => !x.allowed)
            assert.ok(refused.timeLeft > HOUR - 10_000 && refused.timeLeft <= HOUR, `${refused.timeLeft}`)
          }),
        )
      }
      // Many workers on one bucket of 10: exactly 10 pass.
      const answers = await Promise.all(Array.from({ length: 60 }, (_, i) => [a, b][i % 2].consume('hot', { now: T0 })))
      assert.equal(answers.filter((x) => x.allowed).length, 3)
      const many = new TokenBucket({ client: stores[0], namespace: 'tb-race:', capacity: 10, refillInterval: HOUR })
      const other = new TokenBucket({ client: stores[1], namespace: 'tb-race:', capacity: 10, refillInterval: HOUR })
      const tens = await Promise.all(Array.from({ length: 60 }, (_, i) => [many, other][i % 2].consume('hot10', { now: T0 })))
      assert.equal(tens.filter((x) => x.allowed).length, 10)
    } finally {
      await Promise.all(stores.map((store) => store.close()))
    }
  })
})

describe('TokenBucket: memory and Redis agree, and the bound holds', () => {
  const config = fc.record({
    capacity: fc.integer({ min: 1, max: 6 }),
    refillAmount: fc.integer({ min: 1, max: 4 }),
    refillInterval: fc.constantFrom(0.5, 1, 333.3, 1000, 2500),
    initialShare: fc.option(fc.double({ min: 0, max: 1, noNaN: true }), { nil: undefined }),
    // Milliseconds: from a microsecond (forgotten as soon as full) to longer than any run.
    forgetAfter: fc.option(fc.constantFrom(0.001, 0.7, 300, 2000, 40_000), { nil: undefined }),
  })
  const optionsOf = ({ capacity, refillAmount, refillInterval, initialShare, forgetAfter }) => ({
    capacity,
    refillAmount,
    refillInterval,
    ...(initialShare === undefined ? {} : { initial: Math.floor(initialShare * capacity) }),
    ...(forgetAfter === undefined ? {} : { forgetAfter }),
  })
  const call = (ops) =>
    fc.array(
      fc.record({
        // Microseconds: forward, or back a little (a host whose clock is behind).
        step: fc.oneof(fc.integer({ min: 0, max: 1_500_000 }), fc.integer({ min: -300_000, max: 0 })),
        ids: fc.constantFrom('a', 'b', 'c', ['a', 'b'], ['b', 'c', 'a']),
        weight: fc.integer({ min: 1, max: 7 }),
        op: fc.constantFrom(...ops),
      }),
      { minLength: 30, maxLength: 60 },
    )

  /** Runs `calls` on both stores from `start` (ms); returns the common answers. */
  async function both(options, calls, start) {
    const memory = new TokenBucket(options)
    const onRedis = new TokenBucket({ client: redis.server.url, namespace: `tb-agree-${++namespaceCounter}:`, ...options })
    let us = 0
    const answers = []
    for (const { step, ids, weight, op } of calls) {
      us = Math.max(0, us + step)
      const args = op === 'reset' ? [ids] : [ids, { now: start + us / 1000, weight }]
      const [a, b] = [await memory[op](...args), await onRedis[op](...args)]
      assert.deepEqual(b, a, `${op}(${JSON.stringify(ids)}, weight ${weight}) at ${start} ms + ${us} µs`)
      answers.push({ us, ids: [ids].flat(), weight, op, answer: a })
    }
    return answers
  }

  it('answers alike on both stores (consume, peek, reward, reset; late calls)', async () => {
    await fc.assert(
      fc.asyncProperty(config, call(['consume', 'consume', 'peek', 'reward', 'reset']), startArb(T0), async (c, calls, start) => {
        await both(optionsOf(c), calls, start)
      }),
      { numRuns: 50, seed: 7 },
    )
    // Every key the limiters wrote has a TTL (PTTL -1: none).
    const lua = "local k = redis.call('KEYS', ARGV[1]) local none = {} for _, key in ipairs(k) do if redis.call('PTTL', key) == -1 then none[#none + 1] = key end end return { #k, none }"
    const [count, ...none] = (await redis.server.cli('EVAL', lua, '0', 'tb-agree-*')).split('\n').filter((k) => k !== '')
    assert.ok(Number(count) > 0)
    assert.deepEqual(none, [])
  })

  it('never admits more than the bound in any span', async () => {
    // In any span of t µs of a bucket's instants, at most capacity + floor(A * t / I) tokens
    // pass (I the refill interval in µs): a bucket never holds more than its capacity, and one
    // forgotten and started again from `initial <= capacity` holds no more either. A bucket's
    // instant is the latest now of its allowed calls: a late call is charged at it. (A refused
    // consume may start a bucket at its now, unlogged: a late call then is charged at that
    // instant, up to 300 ms after the one logged here. That bucket was forgotten after being full
    // for forgetAfter, which covers the difference when forgetAfter >= 300 ms; below it, time only
    // moves forward in this run.)
    await fc.assert(
      fc.asyncProperty(config, call(['consume', 'consume', 'consume', 'peek']), startArb(T0), async (c, generated, start) => {
        const options = optionsOf(c)
        const { capacity, refillAmount: A, forgetAfter = Infinity } = options
        const I = Math.round(options.refillInterval * 1000)
        const bound = (t) => capacity + Math.floor((A * t) / I)
        const calls = forgetAfter >= 300 ? generated : generated.map((x) => ({ ...x, step: Math.max(0, x.step) }))
        const logs = { a: [], b: [], c: [] }
        for (const { us, ids, weight, op, answer } of await both(options, calls, start)) {
          if (op !== 'consume' || !answer.allowed) continue
          for (const id of new Set(ids)) {
            const log = logs[id]
            const instant = Math.max(us, log.length ? log[log.length - 1].instant : 0)
            log.push({ instant, weight })
          }
        }
        for (const log of Object.values(logs)) {
          for (let i = 0; i < log.length; i++) {
            let sum = 0
            for (let j = i; j < log.length; j++) {
              sum += log[j].weight
              const t = log[j].instant - log[i].instant
              assert.ok(sum <= bound(t), `${sum} tokens in ${t} µs, bound ${bound(t)}`)
            }
          }
        }
      }),
      { numRuns: 50, seed: 8 },
    )
  })
})
