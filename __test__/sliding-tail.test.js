'use strict'

// SlidingTail: fixed windows with history. The weighted count of a limit of `limit` per D is
// F = floor(prev * rem / D) + cur, rem = D - (time since the window started); a call of weight w
// is allowed when F + w <= limit. Worked out by hand, then the same numbers on both stores.
// Times below are in ms from T0 unless said otherwise; 1 µs = 0.001 ms.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const fc = require('fast-check')

const { SlidingTail } = require('..')
const { useRedisServer } = require('./helpers/redis-server.js')
const { commandsRun } = require('./helpers/command-stats.js')
const { random } = require('./helpers/random.js')
const { startArb } = require('./helpers/start-times.js')

const redis = useRedisServer()
let namespaceCounter = 0

const stores = {
  'in memory': (options) => ({ limiter: new SlidingTail(options), key: null }),
  'on Redis': (options) => {
    namespaceCounter += 1
    const namespace = `st-${namespaceCounter}:`
    return { limiter: new SlidingTail({ client: redis.server.url, namespace, ...options }), key: (id) => namespace + id }
  },
}

const SECOND = 1000
const MINUTE = 60 * SECOND
// An instant on a minute boundary: windows of 1 s and 1 min start here.
const T0 = 1_700_000_040_000

const verdict = (allowed, timeLeft, remaining, limit, resetAfter) => ({ allowed, timeLeft, remaining, limit, resetAfter })

/** Whether an id holds state: its key on Redis, or the memory store's count of ids. */
async function holds({ limiter, key }, id, before = 0) {
  if (key) return (await redis.server.cli('EXISTS', key(id))) === '1'
  return limiter.trackedIds > before
}

/** The inverse of `a` modulo `m` (BigInts, coprime). */
function inverse(a, m) {
  let [r0, r1, s0, s1] = [a % m, m, 1n, 0n]
  while (r1 !== 0n) {
    const q = r0 / r1
    ;[r0, r1, s0, s1] = [r1, r0 - q * r1, s1, s0 - q * s1]
  }
  return ((s0 % m) + m) % m
}

for (const [name, create] of Object.entries(stores)) {
  describe(`SlidingTail ${name}`, () => {
    it("answers the seed's table: 3 per 60 s", async () => {
      const { limiter } = create({ limits: [{ duration: MINUTE, limit: 3 }] })
      const at = (m, s) => T0 + m * MINUTE + s * SECOND
      // 12:00:05, no previous window: F = 0, 0 + 1 <= 3. A count of 1 weighs
      // floor(1 * rem / 60 s) = 0 once rem < 60 s: reset at 12:01:00 and 1 µs, 55.000001 s away.
      assert.deepEqual(await limiter.consume('u', { now: at(0, 5) }), verdict(true, 0, 2, 3, 55_001))
      // 12:00:15: F = 1, + 1 = 2. floor(2 * rem / 60 s) = 0 once rem < 30 s: 12:01:30 and 1 µs.
      assert.deepEqual(await limiter.consume('u', { now: at(0, 15) }), verdict(true, 0, 1, 3, 75_001))
      // 12:01:01: prev = 2, cur = 0: F = floor(2 * 59 / 60) + 0 = 1, + 1 = 2 <= 3. Left: 3 - 2.
      // The reset waits for the new count of 1: 12:02:00 and 1 µs.
      assert.deepEqual(await limiter.consume('u', { now: at(1, 1) }), verdict(true, 0, 1, 3, 59_001))
      // 12:01:10: F = floor(2 * 50 / 60) + 1 = 2, + 1 = 3 <= 3. A count of 2: 12:02:30 and 1 µs.
      assert.deepEqual(await limiter.consume('u', { now: at(1, 10) }), verdict(true, 0, 0, 3, 80_001))
      // 12:01:40: F = floor(2 * 20 / 60) + 2 = 2, + 1 = 3 <= 3. A count of 3: 12:02:40 and 1 µs.
      assert.deepEqual(await limiter.consume('u', { now: at(1, 40) }), verdict(true, 0, 0, 3, 60_001))
      // 12:01:50: F = floor(2 * 10 / 60) + 3 = 3, + 1 = 4 > 3: refused (and not counted). cur = 3
      // never falls in this window; at 12:02:00 F = floor(3 * 60 / 60) = 3, 1 µs later 2.
      assert.deepEqual(await limiter.consume('u', { now: at(1, 50) }), verdict(false, 10_001, 0, 3, 50_001))
      assert.equal((await limiter.peek('u', { now: at(2, 0) })).allowed, false)
      assert.equal((await limiter.peek('u', { now: at(2, 0) + 0.001 })).allowed, true)
      // 12:02:20: prev = 3, cur = 0: F = floor(3 * 40 / 60) + 0 = 2, + 1 = 3 <= 3.
      assert.deepEqual(await limiter.consume('u', { now: at(2, 20) }), verdict(true, 0, 0, 3, 40_001))
      // The next needs floor(3 * rem / 60 s) <= 1, rem < 40 s: 1 µs away.
      assert.deepEqual(await limiter.peek('u', { now: at(2, 20) }), verdict(false, 1, 0, 3, 40_001))
    })

    it('weighs the previous window from whole at the edge, to nothing at the end', async () => {
      const { limiter, key } = create({ limits: [{ duration: SECOND, limit: 10 }] })
      // 10 at the last µs of window 0. floor(10 * rem / 1 s) = 0 once rem < 100 ms, from 1.9 s
      // and 1 µs: 900.002 ms away, 901 rounded up.
      assert.deepEqual(await limiter.consume('u', { now: T0 + 999.999, weight: 10 }), verdict(true, 0, 0, 10, 901))
      // 1 s: the edge belongs to window 1, whose start counts all of window 0: F = 10.
      // floor(10 * 999_999 / 1_000_000) = 9 one µs later.
      assert.deepEqual(await limiter.consume('u', { now: T0 + SECOND }), verdict(false, 1, 0, 10, 901))
      // 1 s and 1 µs, twice at the same µs: 9 + 0 + 1 = 10 passes; then 9 + 1 + 1 = 11 does not
      // until floor(10 * rem / 1 s) <= 8, rem < 900 ms, at 1.1 s and 1 µs (100 ms away). The
      // new count of 1 weighs 0 from 2 s and 1 µs.
      assert.deepEqual(await limiter.consume('u', { now: T0 + 1000.001 }), verdict(true, 0, 0, 10, 1000))
      assert.deepEqual(await limiter.consume('u', { now: T0 + 1000.001 }), verdict(false, 100, 0, 10, 1000))
      assert.equal((await limiter.peek('u', { now: T0 + 1100 })).allowed, false)
      assert.deepEqual(await limiter.peek('u', { now: T0 + 1100.001 }), verdict(true, 0, 1, 10, 900))
      // A weight above the limit never passes, and writes nothing.
      assert.deepEqual(await limiter.consume('u', { now: T0 + 1000.001, weight: 11 }), verdict(false, Infinity, 0, 10, 1000))
      assert.deepEqual(await limiter.consume('big', { now: T0, weight: 11 }), verdict(false, Infinity, 10, 10, 0))
      assert.equal(await holds({ limiter, key }, 'big', 1), false)
      // 1.2 s and 1 µs: floor(10 * 799_999 / 1_000_000) + 1 = 8, + 2 = 10. A count of 3 weighs 0
      // once rem < 333_334 µs: from 2.666667 s, 1.466666 s away.
      assert.deepEqual(await limiter.consume('u', { now: T0 + 1200.001, weight: 2 }), verdict(true, 0, 0, 10, 1467))
    })

    it('judges a late call (a clock behind) at the start of the newer window, and counts it there', async () => {
      const { limiter } = create({ limits: [{ duration: SECOND, limit: 10 }] })
      await limiter.consume('u', { now: T0 + 999.999, weight: 10 })
      await limiter.consume('u', { now: T0 + 1000.001 })
      await limiter.consume('u', { now: T0 + 1200.001, weight: 2 })
      // At 999 ms the counters are in window 1 (prev 10, cur 3): judged as at 1 s, F = 10 + 3.
      // Allowed once floor(10 * rem / 1 s) <= 9 - 3, rem < 700 ms: at 1.3 s and 1 µs, 301.001 ms
      // away. Empty at 2.666667 s.
      assert.deepEqual(await limiter.consume('u', { now: T0 + 999 }), verdict(false, 302, 0, 10, 1668))
      assert.equal((await limiter.peek('u', { now: T0 + 1300 })).allowed, false)
      assert.equal((await limiter.peek('u', { now: T0 + 1300.001 })).allowed, true)
      // 3 µs into window 2: prev 3, cur 0, floor(3 * 999_997 / 1_000_000) + 0 + 1 = 3. The count
      // of 1 weighs 0 from 3 s and 1 µs.
      assert.deepEqual(await limiter.consume('u', { now: T0 + 2000.003 }), verdict(true, 0, 7, 10, 1000))
      // A host 1 ms behind is judged at 2 s, where prev counts whole: 3 + 1 + 7 > 10. At 2 s and
      // 1 µs (998 µs away) the share is 2, and 7 would fit.
      assert.deepEqual(await limiter.consume('u', { now: T0 + 1999.003, weight: 7 }), verdict(false, 1, 6, 10, 1001))
      // 3 + 1 + 6 = 10 fits, and counts in window 2 (cur 7): its count weighs 0 once
      // rem < 142_858 µs, from 3.857143 s.
      assert.deepEqual(await limiter.consume('u', { now: T0 + 1999.003, weight: 6 }), verdict(true, 0, 0, 10, 1859))
      // On time, the window's own start is past: floor(3 * 999_997 / 1_000_000) + 7 = 9.
      assert.deepEqual(await limiter.peek('u', { now: T0 + 2000.003 }), verdict(true, 0, 1, 10, 1858))
    })

    it('forgets everything after an idle gap, and resets ids', async () => {
      const { limiter } = create({ limits: [{ duration: SECOND, limit: 10 }, { duration: MINUTE, limit: 30 }] })
      await limiter.consume('u', { now: T0 + 59_999.999, weight: 10 })
      // At 61 s the second's counters are two windows old; the minute's previous count of 10
      // weighs floor(10 * 59 / 60) = 9: 9 + 0 + 10 = 19 <= 30. The second's new 10 weighs 0 from
      // 61.9 s and 1 µs, the minute's from 2:54 and 1 µs (113.000001 s away).
      assert.deepEqual(await limiter.consume('u', { now: T0 + 61 * SECOND, weight: 10 }), verdict(true, 0, 0, 10, 113_001))
      // At 3 min everything is two windows old.
      assert.deepEqual(await limiter.peek('u', { now: T0 + 3 * MINUTE }), verdict(true, 0, 10, 10, 0))
      await limiter.reset(['u', 'v'])
      assert.deepEqual(await limiter.peek('u', { now: T0 + 61 * SECOND }), verdict(true, 0, 10, 10, 0))
    })

    it('reaches twice the limit in one duration when a window is spent at its very end', async () => {
      const { limiter } = create({ limits: [{ duration: SECOND, limit: 10 }] })
      const admitted = []
      const consume = async (now, weight) => {
        const answer = await limiter.consume('u', { now, weight })
        if (answer.allowed) admitted.push({ now, weight })
        return answer
      }
      await consume(T0 + 999.999, 10)
      assert.equal((await consume(T0 + SECOND, 1)).allowed, false)
      // floor(10 * 999_999 / 1_000_000) = 9: one more fits 1 µs into the next window.
      assert.equal((await consume(T0 + 1000.001, 1)).allowed, true)
      // The share is 0 once rem < 100 ms: the window's own limit is all that is left.
      assert.equal((await consume(T0 + 1900, 9)).allowed, false)
      assert.equal((await consume(T0 + 1900.001, 9)).allowed, true)
      // 20 within 900.002 ms: the bound (twice the limit in any interval of a duration) is reached.
      const total = admitted.reduce((sum, a) => sum + a.weight, 0)
      assert.equal(total, 20)
      assert.ok(admitted.at(-1).now - admitted[0].now < SECOND)
      assert.deepEqual(await limiter.peek('u', { now: T0 + 1900.001 }), verdict(false, 100, 0, 10, 1000))
    })

    it('answers refusals with the exact wait: refused 1 ms before it, allowed at it', async () => {
      const { limiter } = create({ limits: [{ duration: SECOND, limit: 5 }, { duration: 3 * SECOND, limit: 12 }] })
      const rand = random(name.length)
      let refusals = 0
      let late = 0
      for (let round = 0; round < 60; round++) {
        const id = `r${round}`
        let latest = T0 + round * 100_000 + Math.floor(rand() * 3000) + (rand() < 0.3 ? 0.25 : 0) + (rand() < 0.3 ? 0.001 : 0)
        let refused = null
        for (let call = 0; call < 60 && !refused; call++) {
          latest += rand() < 0.6 ? Math.floor(rand() * 60) : Math.floor(rand() * 600)
          // Now and then a host whose clock is up to 700 ms behind.
          const now = rand() < 0.2 ? latest - Math.floor(rand() * 700) - 0.5 : latest
          const weight = 1 + Math.floor(rand() * 3)
          const answer = await limiter.consume(id, { now, weight })
          if (!answer.allowed) refused = { now, weight, answer, late: now < latest }
        }
        if (!refused) continue
        refusals++
        if (refused.late) late++
        const { answer, weight, now } = refused
        assert.ok(answer.timeLeft > 0 && Number.isInteger(answer.timeLeft), JSON.stringify(answer))
        const before = await limiter.peek(id, { now: now + answer.timeLeft - 1, weight })
        assert.equal(before.allowed, false, `${id}: still refused 1 ms before timeLeft ${answer.timeLeft}`)
        const after = await limiter.consume(id, { now: now + answer.timeLeft, weight })
        assert.equal(after.allowed, true, `${id}: allowed at timeLeft ${answer.timeLeft}`)
      }
      assert.ok(refusals >= 40 && late >= 5, `${refusals} refusals, ${late} late`)
    })

    it('checks several ids together and charges none when one refuses', async () => {
      const { limiter, key } = create({ limits: [{ duration: SECOND, limit: 3 }] })
      assert.equal((await limiter.consume('ip', { now: T0, weight: 3 })).allowed, true)
      // ip is full until 1 s and 1 µs (floor(3 * 999_999 / 1_000_000) = 2).
      assert.deepEqual(await limiter.consume(['user', 'ip'], { now: T0 + 50 }), verdict(false, 951, 0, 3, 1617))
      assert.equal(await holds({ limiter, key }, 'user', 1), false)
      assert.deepEqual(await limiter.peek('user', { now: T0 + 50 }), verdict(true, 0, 3, 3, 0))
      assert.deepEqual(await limiter.consume(['user', 'other'], { now: T0 + 50, weight: 2 }), verdict(true, 0, 1, 3, 1451))
      // 1 µs into the next window: user floor(2 * 999_999 / 1_000_000) + 0 + 1 = 2, ip 2 + 0 + 1 = 3.
      assert.deepEqual(await limiter.consume(['user', 'ip'], { now: T0 + 1000.001 }), verdict(true, 0, 0, 3, 1000))
    })

    it('peeks without taking, and gives back with reward', async () => {
      const { limiter, key } = create({ limits: [{ duration: SECOND, limit: 10 }] })
      assert.deepEqual(await limiter.peek('u', { now: T0 }), verdict(true, 0, 10, 10, 0))
      assert.deepEqual(await limiter.consume('u', { now: T0, weight: 4 }), verdict(true, 0, 6, 10, 1751))
      assert.deepEqual(await limiter.peek('u', { now: T0 }), verdict(true, 0, 6, 10, 1751))
      // 1000.5 ms: floor(4 * 999_500 / 1_000_000) = 3, + 0 + 3 = 6.
      assert.deepEqual(await limiter.consume('u', { now: T0 + 1000.5, weight: 3 }), verdict(true, 0, 4, 10, 1667))
      // 5 back: 3 from the current window, 2 from the previous (prev 2, cur 0):
      // floor(2 * 999_500 / 1_000_000) = 1; 0 from 1.5 s and 1 µs.
      const back = await limiter.reward('u', { now: T0 + 1000.5, weight: 5 })
      assert.deepEqual(back, verdict(true, 0, 9, 10, 500))
      assert.deepEqual(back, await limiter.peek('u', { now: T0 + 1000.5 }))
      if (key) assert.ok(Number(await redis.server.cli('PTTL', key('u'))) > 0)
      // Never below empty.
      assert.deepEqual(await limiter.reward('u', { now: T0 + 1000.5, weight: 100 }), verdict(true, 0, 10, 10, 0))
      assert.deepEqual(await limiter.consume('u', { now: T0 + 1000.5, weight: 10 }), verdict(true, 0, 0, 10, 1900))
      // Never to an id without state.
      assert.deepEqual(await limiter.reward('nobody', { now: T0, weight: 3 }), verdict(true, 0, 10, 10, 0))
      assert.equal(await holds({ limiter, key }, 'nobody', 1), false)
    })

    it('stays exact where the products pass 2^53: 1e12 per 1e9 ms, 1e15 per 1e12 ms', async () => {
      for (const [duration, limit, previous] of [
        [1e9, 1e12, [1e12 - 1, 987_654_321_001, 123_456_789_011]],
        [1e12, 1e15, [1e15 - 1, 987_654_321_987_653, 314_159_265_358_979]],
      ]) {
        const { limiter } = create({ limits: [{ duration, limit }] })
        const D = BigInt(duration) * 1000n
        // Window 1 starts at one duration; each id spends `prev` at window 0's last µs.
        const start = duration
        for (const prev of previous) {
          // The instant where prev * rem = (F + 1) * D - 1, just below the next whole count
          // (e = 1 / prev mod D, so prev * (D - e) = -1 mod D): doubles cannot tell these
          // products apart. Then random ones.
          const tight = Number(inverse(BigInt(prev), D))
          const rand = random(prev % 997)
          const instants = new Set([1, tight, Number(D) - 1, ...Array.from({ length: 8 }, () => 1 + Math.floor(rand() * (duration * 1000 - 1)))])
          for (const wanted of instants) {
            const id = `p${prev}-${wanted}`
            assert.equal((await limiter.consume(id, { now: start - 0.001, weight: prev })).allowed, true)
            const now = start + wanted / 1000
            const e = BigInt(Math.round(now * 1000)) - D
            if (wanted === tight) assert.equal((BigInt(prev) * (D - e) + 1n) % D, 0n)
            // F = floor(prev * (D - e) / D), and limit - F is what is left. The script decides
            // what it writes: one more is refused and not written, exactly the rest is written.
            const left = limit - Number((BigInt(prev) * (D - e)) / D)
            if (left < limit) assert.equal((await limiter.consume(id, { now, weight: left + 1 })).allowed, false, `prev ${prev}, e ${e}`)
            assert.deepEqual(await limiter.peek(id, { now, weight: left }), verdict(true, 0, left, limit, (await limiter.peek(id, { now })).resetAfter))
            const taken = await limiter.consume(id, { now, weight: left })
            assert.deepEqual([taken.allowed, taken.remaining], [true, 0], `prev ${prev}, e ${e}`)
            assert.equal((await limiter.peek(id, { now })).remaining, 0, `prev ${prev}, e ${e}: the script wrote it`)
          }
        }
      }
    })

    it('rejects bad calls with codes', async () => {
      const { limiter } = create({ limits: [{ duration: SECOND, limit: 1 }] })
      await assert.rejects(limiter.consume('u', { weight: 0 }), { name: 'RangeError', code: 'ERR_INVALID_ARGUMENT' })
      await assert.rejects(limiter.consume('u', { weight: 1.5 }), { name: 'RangeError', code: 'ERR_INVALID_ARGUMENT' })
      await assert.rejects(limiter.consume('u', { weight: 2e15 }), { name: 'RangeError', code: 'ERR_INVALID_ARGUMENT' })
      await assert.rejects(limiter.consume('u', { now: -1 }), { name: 'RangeError', code: 'ERR_INVALID_ARGUMENT' })
      await assert.rejects(limiter.reward('u', { wieght: 2 }), { name: 'TypeError', code: 'ERR_UNKNOWN_OPTION' })
      await assert.rejects(limiter.consume([]), { name: 'RangeError', code: 'ERR_INVALID_ID' })
      await assert.rejects(limiter.consume({ id: 'u' }), { name: 'TypeError', code: 'ERR_INVALID_ID' })
    })
  })
}

describe('SlidingTail options', () => {
  const cases = [
    [{}, 'TypeError', /`limits`/],
    [{ limits: [] }, 'RangeError', /`limits`/],
    [{ limits: {} }, 'TypeError', /`limits`/],
    [{ limits: [{ duration: 1000 }] }, 'TypeError', /`limit`/],
    [{ limits: [{ duration: '1000', limit: 1 }] }, 'TypeError', /duration/],
    [{ limits: [{ duration: 0, limit: 1 }] }, 'RangeError', /`limits\[0\]\.duration`/],
    [{ limits: [{ duration: 0.0004, limit: 1 }] }, 'RangeError', /`limits\[0\]\.duration`/],
    [{ limits: [{ duration: 2e12, limit: 1 }] }, 'RangeError', /`limits\[0\]\.duration`/],
    [{ limits: [{ duration: 1000, limit: 1 }, { duration: 1000, limit: 0.5 }] }, 'RangeError', /`limits\[1\]\.limit`/],
    [{ limits: [{ duration: 1000, limit: 1e16 }] }, 'RangeError', /`limits\[0\]\.limit`/],
    [{ limits: Array.from({ length: 17 }, () => ({ duration: 1000, limit: 1 })) }, 'RangeError', /`limits`/],
    [{ limits: [{ duration: 1000, limit: 1, precision: 10 }] }, 'TypeError', /`precision`/],
    [{ limits: [{ duration: 1000, limit: 1 }], namespace: 5 }, 'TypeError', /namespace/],
    [{ limits: [{ duration: 1000, limit: 1 }], interval: 5 }, 'TypeError', /`interval`/],
  ]
  for (const [options, errorName, message] of cases) {
    it(`rejects ${JSON.stringify(options).slice(0, 80)}`, () => {
      assert.throws(() => new SlidingTail(options), (error) => {
        assert.equal(error.name, errorName)
        assert.match(error.code, /^ERR_(INVALID|UNKNOWN)_OPTION$/)
        assert.match(error.message, message)
        return true
      })
    })
  }

  it('shows its limits', () => {
    const limiter = new SlidingTail({ limits: [{ duration: 1000, limit: 5 }] })
    assert.deepEqual(limiter.limits, [{ duration: 1000, limit: 5 }])
  })
})

describe('SlidingTail on Redis', () => {
  const hash = async (key) => {
    const fields = (await redis.server.cli('HGETALL', key)).split('\n')
    return Object.fromEntries(fields.flatMap((v, i) => (i % 2 ? [] : [[v, fields[i + 1]]])))
  }

  it('keeps one hash per id: count, previous count and window per limit, with a TTL of two longest windows and a second', async () => {
    const limiter = new SlidingTail({ client: redis.server.url, namespace: 'tail-layout:', limits: [{ duration: SECOND, limit: 5 }, { duration: MINUTE, limit: 50 }] })
    await limiter.consume('u', { now: T0 + 1500, weight: 2 })
    await limiter.consume('u', { now: T0 + 2500, weight: 1 })
    const second = String(Math.floor((T0 + 2500) / SECOND))
    const minute = String(Math.floor((T0 + 2500) / MINUTE))
    assert.deepEqual(await hash('tail-layout:u'), {
      1000000: '1',
      '1000000:p': '2',
      '1000000:w': second,
      60000000: '3',
      '60000000:p': '0',
      '60000000:w': minute,
    })
    const ttl = Number(await redis.server.cli('PTTL', 'tail-layout:u'))
    assert.ok(ttl > 120_000 && ttl <= 121_000, `PTTL ${ttl}`)
    // Peeks, refusals and weights above the limit write nothing.
    await limiter.peek('other', { now: T0 })
    await limiter.consume('other', { now: T0, weight: 6 })
    assert.equal(await redis.server.cli('EXISTS', 'tail-layout:other'), '0')
  })

  it('renews the TTL when the window of any limit moves, and writes only the count in between', async () => {
    const limiter = new SlidingTail({ client: redis.server.url, namespace: 'tail-renew:', limits: [{ duration: 40 * SECOND, limit: 5 }, { duration: MINUTE, limit: 50 }] })
    const pttl = async () => Number(await redis.server.cli('PTTL', 'tail-renew:u'))
    const start = Math.ceil(T0 / (2 * MINUTE)) * 2 * MINUTE
    await limiter.consume('u', { now: start + SECOND })
    assert.ok((await pttl()) > 120_000, `PTTL ${await pttl()}`)
    // Shortened, and the previous counts overwritten, to see what the next call writes: in the
    // same windows, the counts alone, and no TTL.
    await redis.server.cli('PEXPIRE', 'tail-renew:u', '5000')
    await redis.server.cli('HSET', 'tail-renew:u', '40000000:p', '3', '60000000:p', '4')
    await limiter.consume('u', { now: start + 2 * SECOND })
    assert.ok((await pttl()) <= 5000, `PTTL ${await pttl()}`)
    assert.deepEqual(await hash('tail-renew:u'), {
      40000000: '2',
      '40000000:p': '3',
      '40000000:w': String(start / (40 * SECOND)),
      60000000: '2',
      '60000000:p': '4',
      '60000000:w': String(start / MINUTE),
    })
    // The 40 s window moves (the 60 s one does not): its counters move on, and the TTL is renewed.
    await limiter.consume('u', { now: start + 41 * SECOND })
    assert.ok((await pttl()) > 120_000, `PTTL ${await pttl()}`)
    assert.equal((await hash('tail-renew:u'))['40000000:p'], '2')
  })

  it('costs a new id an HGETALL, an HSET and a PEXPIRE, no PTTL; a hash shared with a longer limiter keeps its TTL', async () => {
    const perMinute = new SlidingTail({ client: redis.server.url, namespace: 'tail-both:', limits: [{ duration: MINUTE, limit: 50 }] })
    const perSecond = new SlidingTail({ client: redis.server.url, namespace: 'tail-both:', limits: [{ duration: SECOND, limit: 5 }] })
    await perSecond.consume('warm-up', { now: T0 })
    const counted = ['script', 'time', 'hgetall', 'hset', 'pexpire', 'pttl']
    const commandsOf = (call) => commandsRun(redis.server, counted, call)
    const pttl = async (key) => Number(await redis.server.cli('PTTL', key))
    assert.deepEqual(await commandsOf(() => perSecond.consume('alone', { now: T0 })), { script: 1, hgetall: 1, hset: 1, pexpire: 1 })
    assert.ok((await pttl('tail-both:alone')) > 2000 && (await pttl('tail-both:alone')) <= 3000, `PTTL ${await pttl('tail-both:alone')}`)
    // The per-minute limiter's hash (TTL 2 min 1 s): the per-second one reads its TTL and leaves it.
    await perMinute.consume('u', { now: T0 })
    assert.deepEqual(await commandsOf(() => perSecond.consume('u', { now: T0 })), { script: 1, hgetall: 1, hset: 1, pttl: 1 })
    assert.ok((await pttl('tail-both:u')) > 120_000, `PTTL ${await pttl('tail-both:u')}`)
    assert.equal((await perMinute.peek('u', { now: T0 })).remaining, 49)
  })

  it('keeps counters in a window ahead of now alive until two windows after it', async () => {
    const limiter = new SlidingTail({ client: redis.server.url, namespace: 'tail-ahead:', limits: [{ duration: MINUTE, limit: 5 }] })
    await limiter.consume('u', { now: T0 + MINUTE })
    // A host 1 s behind writes in window 1: its counts matter until T0 + 3 min, 2 min 1 s away.
    await limiter.consume('u', { now: T0 + MINUTE - SECOND })
    assert.equal((await hash('tail-ahead:u'))['60000000'], '2')
    const ttl = Number(await redis.server.cli('PTTL', 'tail-ahead:u'))
    assert.ok(ttl > 121_000 && ttl <= 122_000, `PTTL ${ttl}`)
  })

  it('refuses data it did not write, and leaves it alone', async () => {
    const limiter = new SlidingTail({ client: redis.server.url, namespace: 'tail-foreign:', limits: [{ duration: SECOND, limit: 5 }] })
    const window = String(Math.floor(T0 / SECOND))
    for (const [id, field, value, message] of [
      ['junk', 'junk', '1', /holds a field junk/],
      ['abc', '1000000', 'abc', /1000000 = abc, not a whole number/],
      ['far', '1000000:w', '9000000000000', /1000000:w = 9000000000000, a window out of range/],
    ]) {
      const key = `tail-foreign:${id}`
      await redis.server.cli('HSET', key, '1000000', '1', '1000000:p', '0', '1000000:w', window)
      await redis.server.cli('HSET', key, field, value)
      const before = await hash(key)
      await assert.rejects(limiter.consume(id, { now: T0 }), { code: 'ERR_STORE_ERROR', message })
      await assert.rejects(limiter.reward(id, { now: T0 }), { code: 'ERR_STORE_ERROR', message })
      assert.deepEqual(await hash(key), before)
    }
  })

  it("admits exactly the limit to concurrent callers, and reads the server's clock without now", async () => {
    const limiter = new SlidingTail({ client: redis.server.url, namespace: 'tail-race:', limits: [{ duration: MINUTE, limit: 100 }] })
    const answers = await Promise.all(Array.from({ length: 300 }, () => limiter.consume('hot', { now: T0 })))
    assert.equal(answers.filter((a) => a.allowed).length, 100)
    const before = Math.floor(Date.now() / MINUTE)
    assert.equal((await limiter.consume('clock')).allowed, true)
    const window = Number((await hash('tail-race:clock'))['60000000:w'])
    assert.ok(window >= before && window <= Math.floor(Date.now() / MINUTE), String(window))
  })
})

describe('SlidingTail property: both stores agree, and no duration admits more than twice the limit', () => {
  const LIMITS = [
    { duration: 1000, limit: 5 },
    { duration: 2500, limit: 9 },
  ]
  const command = fc.record({
    // Time moves forward; a call is now and then from a host up to 900 ms behind (less than a
    // duration, the bound's premise).
    step: fc.oneof(fc.integer({ min: 0, max: 80 }), fc.integer({ min: 0, max: 1500 }), fc.constant(0.001)),
    behind: fc.oneof({ weight: 4, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.integer({ min: 1, max: 900 }) }),
    fraction: fc.constantFrom(0, 0, 0.5, 0.001),
    id: fc.constantFrom('a', 'b', 'c'),
    weight: fc.integer({ min: 1, max: 4 }),
    op: fc.constantFrom('consume', 'consume', 'consume', 'peek', 'reward', 'reset'),
  })
  let run = 0

  it('holds for random sequences', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(command, { minLength: 30, maxLength: 60 }), fc.boolean(), startArb(T0), async (commands, givesBack, start) => {
        run += 1
        const memory = new SlidingTail({ limits: LIMITS })
        const onRedis = new SlidingTail({ client: redis.server.url, namespace: `tail-prop-${run}:`, limits: LIMITS })
        const admitted = { a: [], b: [], c: [] }
        let latest = start
        for (const { step, behind, fraction, id, weight, op: chosen } of commands) {
          // Without rewards and resets, the bound holds for every interval.
          const op = givesBack || (chosen !== 'reward' && chosen !== 'reset') ? chosen : 'consume'
          latest += step
          const now = Math.max(0, latest - behind + (behind ? fraction : 0))
          const call = (limiter) => (op === 'reset' ? limiter.reset(id) : limiter[op](id, { now, weight }))
          const [a, b] = [await call(memory), await call(onRedis)]
          assert.deepEqual(b, a, `${op} ${id} weight ${weight} at ${start} + ${now - start}`)
          if (op === 'consume' && a.allowed) admitted[id].push({ at: Math.round(now * 1000), weight })
        }
        if (givesBack) return
        for (const [id, log] of Object.entries(admitted)) {
          log.sort((x, y) => x.at - y.at)
          for (const { duration, limit } of LIMITS) {
            for (let i = 0; i < log.length; i++) {
              let sum = 0
              for (let k = i; k < log.length && log[k].at < log[i].at + duration * 1000; k++) sum += log[k].weight
              assert.ok(sum <= 2 * limit, `${id}: ${sum} in ${duration} ms from ${log[i].at / 1000}`)
            }
          }
        }
      }),
      { numRuns: 40, seed: 20260607 },
    )
  })
})
