'use strict'

// Gcra, the generic cell rate algorithm of redis-cell's CL.THROTTLE: numbers worked out by hand,
// the exact wait, several ids, reward, the Redis layout and its TTLs, both stores alike under
// random calls (with the bound checked on every run), odd configurations that trip float ports,
// bad options, and redis-cell's own algorithm transcribed as a reference model.

const { describe, it, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fc = require('fast-check')
const IORedis = require('ioredis')

const { Gcra, RedisStore } = require('..')
const { startRedis } = require('./helpers/redis-server.js')
const { RedisCell } = require('./helpers/redis-cell.js')
const { random } = require('./helpers/random.js')
const { startArb } = require('./helpers/start-times.js')

let redis // the test server
let store // one connection shared by the Redis limiters of this file
let r // a direct client, to read keys
before(async () => {
  redis = await startRedis()
  store = await RedisStore.connect(redis.url)
  r = new IORedis({ host: redis.host, port: redis.port, lazyConnect: true, maxRetriesPerRequest: 0 })
  await r.connect()
})
after(async () => {
  if (r) r.disconnect()
  if (store) await store.close()
  if (redis) await redis.stop()
})

let namespaceCounter = 0
const nextNamespace = () => `gcra-${++namespaceCounter}:`
const onRedis = (options) => new Gcra({ client: store, namespace: nextNamespace(), ...options })
const stores = {
  'in memory': (options) => new Gcra(options),
  'on Redis': onRedis,
}

const SECOND = 1000
// An instant on a minute boundary.
const T0 = 1_700_000_040_000

const verdict = (allowed, timeLeft, remaining, limit, resetAfter) => ({ allowed, timeLeft, remaining, limit, resetAfter })

/** Microseconds (an integer) as the milliseconds a call's `now` takes. */
const ms = (us) => us / 1000
/** The TAT at a key (BigInt microseconds), or null. */
async function storedTat(key) {
  const value = await r.get(key)
  return value === null ? null : BigInt(value)
}
const ceilDiv = (a, b) => (a + b - 1n) / b

/**
 * Our rule in BigInt microseconds, as docs/algorithms.md states it: T = ceil(period / limit),
 * tau = T * burst; a TAT at or before now is none.
 */
class Rule {
  constructor({ limit, period, burst = limit }) {
    this.T = ceilDiv(BigInt(Math.round(period * 1000)), BigInt(limit))
    this.burst = BigInt(burst)
    this.tau = this.T * this.burst
    this.tats = new Map()
  }

  /** `consume` (charge) or `peek` of `weight` at `now` (microseconds): the answer's numbers. */
  call(id, weight, now, charge) {
    const w = BigInt(weight)
    const base = [this.tats.get(id) ?? 0n, now].reduce((a, b) => (a > b ? a : b))
    let allowed = true
    let wait = 0n
    if (w > this.burst) {
      allowed = false
    } else if (base + w * this.T - this.tau > now) {
      allowed = false
      wait = base + w * this.T - this.tau - now
    }
    const after = allowed && charge ? base + w * this.T : base
    if (allowed && charge) this.tats.set(id, after)
    const left = (this.tau - (after - now)) / this.T
    const remaining = after - now > this.tau ? 0n : left
    return verdict(allowed, w > this.burst ? Infinity : Number(ceilDiv(wait, 1000n)), Number(remaining), Number(this.burst), Number(ceilDiv(after - now, 1000n)))
  }
}

for (const [name, create] of Object.entries(stores)) {
  describe(`Gcra ${name}`, () => {
    it('works a table out by hand: 2 per second, bursts of 3', async () => {
      // T = 1000 ms / 2 = 500 ms per action; tau = 3 * T = 1500 ms.
      const g = create({ limit: 2, period: SECOND, burst: 3 })
      // No TAT counts as now: TAT = T0 + 500, allowed since T0 + 500 - 1500 <= T0.
      // remaining = floor((1500 - 500) / 500) = 2; resetAfter = TAT - now = 500.
      assert.deepEqual(await g.consume('u', { now: T0 }), verdict(true, 0, 2, 3, 500))
      // TAT = T0 + 500 + 2 * 500 = T0 + 1500; allowed at T0 + 1500 - 1500 = T0. remaining 0 / 500.
      assert.deepEqual(await g.consume('u', { now: T0, weight: 2 }), verdict(true, 0, 0, 3, 1500))
      // One more would make the TAT T0 + 2000, allowed at T0 + 500: 400 ms to wait.
      assert.deepEqual(await g.consume('u', { now: T0 + 100 }), verdict(false, 400, 0, 3, 1400))
      // 1 µs early: the wait rounds up to 1 ms; resetAfter 1000.001 ms to 1001.
      assert.deepEqual(await g.peek('u', { now: T0 + 499.999 }), verdict(false, 1, 0, 3, 1001))
      // At T0 + 500 exactly: TAT T0 + 2000.
      assert.deepEqual(await g.consume('u', { now: T0 + 500 }), verdict(true, 0, 0, 3, 1500))
      // A weight above the burst never passes, and writes nothing.
      assert.deepEqual(await g.consume('u', { now: T0 + 500, weight: 4 }), verdict(false, Infinity, 0, 3, 1500))
      // The same microsecond again: allowed at T0 + 2000 + 500 - 1500 = T0 + 1000.
      assert.deepEqual(await g.consume('u', { now: T0 + 500 }), verdict(false, 500, 0, 3, 1500))
      // 100 ms back in time (a host whose clock is behind): the same TAT, so a longer wait, and
      // resetAfter 1600 > tau: remaining floor((1500 - 1600) / 500) < 0 is 0.
      assert.deepEqual(await g.consume('u', { now: T0 + 400 }), verdict(false, 600, 0, 3, 1600))
      // TAT - now = 750: remaining floor((1500 - 750) / 500) = 1.
      assert.deepEqual(await g.peek('u', { now: T0 + 1250 }), verdict(true, 0, 1, 3, 750))
      // A minute idle: the TAT (T0 + 2000) has passed, the same as none: a full burst passes.
      assert.deepEqual(await g.consume('u', { now: T0 + 60 * SECOND, weight: 3 }), verdict(true, 0, 0, 3, 1500))
      // TAT T0 + 61.5 s; one more is allowed at T0 + 61.5 s + 500 - 1500 = T0 + 60.5 s.
      assert.deepEqual(await g.consume('u', { now: T0 + 60 * SECOND + 1 }), verdict(false, 499, 0, 3, 1499))
    })

    it('rounds the emission interval up: 3 per second is one per 333,334 µs', async () => {
      const g = create({ limit: 3, period: SECOND })
      // TAT = T0 + 3 * 333.334 ms = T0 + 1000.002 ms: resetAfter rounds up to 1001.
      assert.deepEqual(await g.consume('u', { now: T0, weight: 3 }), verdict(true, 0, 0, 3, 1001))
      // Allowed again at TAT + T - tau = T0 + 333.334 ms.
      assert.deepEqual(await g.consume('u', { now: T0 }), verdict(false, 334, 0, 3, 1001))
      assert.equal((await g.peek('u', { now: T0 + 333.333 })).allowed, false)
      assert.deepEqual(await g.consume('u', { now: T0 + 333.334 }), verdict(true, 0, 0, 3, 1001))
    })

    it("gives redis-cell's own numbers (its it_rate_limits: max_burst 4, 1 per second)", async () => {
      const g = create({ limit: 1, period: SECOND, burst: 5 })
      // CL.THROTTLE k 4 1 1 6: limited, limit 5, remaining 5 (nothing stored), retry -1: never.
      assert.deepEqual(await g.consume('k', { now: T0, weight: 6 }), verdict(false, Infinity, 5, 5, 0))
      for (const remaining of [4, 3, 2, 1, 0]) {
        assert.deepEqual(await g.consume('k', { now: T0 }), verdict(true, 0, remaining, 5, (5 - remaining) * SECOND))
      }
      assert.deepEqual(await g.consume('k', { now: T0 }), verdict(false, SECOND, 0, 5, 5 * SECOND))
      const steps = [
        [3000, 1, verdict(true, 0, 2, 5, 3000)],
        [3100, 1, verdict(true, 0, 1, 5, 3900)],
        [4000, 1, verdict(true, 0, 1, 5, 4000)],
        [8000, 1, verdict(true, 0, 4, 5, 1000)],
        [9500, 1, verdict(true, 0, 4, 5, 1000)],
        [9500, 2, verdict(true, 0, 2, 5, 3000)],
        [9500, 5, verdict(false, 3000, 2, 5, 3000)],
      ]
      for (const [at, weight, expected] of steps) assert.deepEqual(await g.consume('k', { now: T0 + at, weight }), expected)
    })

    it('answers the exact wait: refused 1 ms before it, allowed at it', async () => {
      // T = ceil(1 s / 7) = 142,858 µs: waits are never whole milliseconds.
      const g = create({ limit: 7, period: SECOND, burst: 3 })
      const rand = random(7)
      let now = T0 * 1000
      let refusals = 0
      for (let call = 0; call < 120; call++) {
        now += Math.floor(rand() * 150_000)
        const weight = 1 + Math.floor(rand() * 3)
        const id = rand() < 0.7 ? 'u' : ['u', 'v']
        const answer = await g.consume(id, { now: ms(now), weight })
        if (answer.allowed) continue
        refusals += 1
        const t = answer.timeLeft
        assert.equal((await g.peek(id, { now: ms(now) + t - 1, weight })).allowed, false, `call ${call}`)
        assert.equal((await g.consume(id, { now: ms(now) + t, weight })).allowed, true, `call ${call}`)
      }
      assert.ok(refusals > 20, `only ${refusals} refusals`)
    })

    it('judges several ids together and charges none when one refuses', async () => {
      // T = 1 s, tau = 2 s.
      const g = create({ limit: 1, period: SECOND, burst: 2 })
      assert.deepEqual(await g.consume('ip', { now: T0, weight: 2 }), verdict(true, 0, 0, 2, 2000))
      // ip would reach T0 + 3 s, allowed at T0 + 1 s; user alone would pass. resetAfter is ip's.
      assert.deepEqual(await g.consume(['user', 'ip'], { now: T0 + 100 }), verdict(false, 900, 0, 2, 1900))
      assert.deepEqual(await g.peek('user', { now: T0 + 100 }), verdict(true, 0, 2, 2, 0))
      // At T0 + 1 s both pass: ip's TAT T0 + 3 s (0 left), user's T0 + 2 s (1 left).
      assert.deepEqual(await g.consume(['user', 'ip'], { now: T0 + SECOND }), verdict(true, 0, 0, 2, 2000))
      assert.deepEqual(await g.peek('user', { now: T0 + SECOND }), verdict(true, 0, 1, 2, 1000))
      await g.reset(['ip', 'user'])
      assert.deepEqual(await g.peek(['ip', 'user'], { now: T0 + SECOND }), verdict(true, 0, 2, 2, 0))
    })

    it('gives weight back with reward, never below empty, creating nothing', async () => {
      // T = 1 s, tau = 3 s.
      const g = create({ limit: 1, period: SECOND, burst: 3 })
      assert.deepEqual(await g.reward('none', { now: T0 }), verdict(true, 0, 3, 3, 0))
      assert.deepEqual(await g.consume('u', { now: T0, weight: 3 }), verdict(true, 0, 0, 3, 3000))
      // TAT T0 + 3 s - 1 s = T0 + 2 s: 1.5 s from now, floor((3 - 1.5) / 1) = 1 left.
      assert.deepEqual(await g.reward('u', { now: T0 + 500 }), verdict(true, 0, 1, 3, 1500))
      // T0 + 2 s - 5 s is long before now: empty.
      assert.deepEqual(await g.reward('u', { now: T0 + 500, weight: 5 }), verdict(true, 0, 3, 3, 0))
      // Peeks take nothing.
      assert.deepEqual(await g.peek('u', { now: T0 + 500, weight: 3 }), verdict(true, 0, 3, 3, 0))
      assert.deepEqual(await g.peek('u', { now: T0 + 500, weight: 3 }), verdict(true, 0, 3, 3, 0))
    })

    it('has no float drift on odd configurations', async () => {
      const configs = [
        // T = 142,858 µs, tau = T.
        { limit: 7, period: SECOND, burst: 1 },
        // T = 1 µs (a million per millisecond is capped at one per microsecond), tau = 1 s.
        { limit: 1e6, period: 1 },
        // T = 100 ms, tau = 1e8 s.
        { limit: 10, period: SECOND, burst: 1e9 },
        // T = 2 µs (rounded up from 1.000001), tau = 2e6 µs.
        { limit: 999_999, period: SECOND, burst: 1e6 },
      ]
      for (const [c, options] of configs.entries()) {
        const g = create(options)
        const rule = new Rule(options)
        const rand = random(c + 1)
        let now = BigInt(T0) * 1000n + 7n
        // The very first request passes, with all but its weight left.
        assert.deepEqual(await g.consume('u', { now: ms(Number(now)) }), rule.call('u', 1, now, true))
        assert.equal((await g.peek('u', { now: ms(Number(now)) })).remaining, (options.burst ?? options.limit) - 1)
        const T = Number(rule.T)
        for (let call = 0; call < 60; call++) {
          now += BigInt(Math.floor(rand() * 3 * T))
          const weight = rand() < 0.2 ? Math.ceil(rand() * Number(rule.burst)) : 1 + Math.floor(rand() * 3)
          const charge = rand() < 0.8
          const expected = rule.call('u', weight, now, charge)
          const answer = charge ? await g.consume('u', { now: ms(Number(now)), weight }) : await g.peek('u', { now: ms(Number(now)), weight })
          assert.deepEqual(answer, expected, `${JSON.stringify(options)}, call ${call}`)
        }
      }
    })

    it('rejects bad calls with codes', async () => {
      const g = create({ limit: 1, period: SECOND })
      await assert.rejects(g.consume('u', { weight: 0 }), { name: 'RangeError', code: 'ERR_INVALID_ARGUMENT' })
      await assert.rejects(g.consume('u', { weight: 1.5 }), { name: 'RangeError', code: 'ERR_INVALID_ARGUMENT' })
      await assert.rejects(g.peek('u', { now: -1 }), { name: 'RangeError', code: 'ERR_INVALID_ARGUMENT' })
      await assert.rejects(g.reward('u', { wieght: 2 }), { name: 'TypeError', code: 'ERR_UNKNOWN_OPTION' })
      await assert.rejects(g.consume([]), { name: 'RangeError', code: 'ERR_INVALID_ID' })
    })
  })
}

describe('Gcra options', () => {
  it('shows limit, period and burst as given, and takes a default namespace', () => {
    const g = new Gcra({ limit: 30, period: 60_000, burst: 16 })
    assert.deepEqual([g.limit, g.period, g.burst], [30, 60_000, 16])
    assert.equal(new Gcra({ limit: 3, period: SECOND }).burst, 3)
  })

  const drain = /`burst` \* `period` \/ `limit`/
  for (const [options, errorName, code, message] of [
    [{ period: SECOND }, 'TypeError', 'ERR_INVALID_OPTION', /`limit`/],
    [{ limit: 1 }, 'TypeError', 'ERR_INVALID_OPTION', /`period`/],
    [{ limit: '3', period: SECOND }, 'TypeError', 'ERR_INVALID_OPTION', /`limit`/],
    [{ limit: 0, period: SECOND }, 'RangeError', 'ERR_INVALID_OPTION', /`limit`/],
    [{ limit: 1.5, period: SECOND }, 'RangeError', 'ERR_INVALID_OPTION', /`limit`/],
    [{ limit: 2e15, period: SECOND }, 'RangeError', 'ERR_INVALID_OPTION', /`limit`/],
    [{ limit: 1, period: 0 }, 'RangeError', 'ERR_INVALID_OPTION', /`period`/],
    [{ limit: 1, period: 0.0004 }, 'RangeError', 'ERR_INVALID_OPTION', /`period`/],
    [{ limit: 1, period: 2e12 }, 'RangeError', 'ERR_INVALID_OPTION', /`period`/],
    [{ limit: 1, period: NaN }, 'RangeError', 'ERR_INVALID_OPTION', /`period`/],
    [{ limit: 1, period: SECOND, burst: 0 }, 'RangeError', 'ERR_INVALID_OPTION', /`burst`/],
    [{ limit: 1, period: SECOND, burst: true }, 'TypeError', 'ERR_INVALID_OPTION', /`burst`/],
    // tau = T * burst past 1e12 ms: a burst that would take longer to drain than any duration.
    [{ limit: 1, period: 1e12, burst: 2 }, 'RangeError', 'ERR_INVALID_OPTION', drain],
    [{ limit: 1, period: SECOND, burst: 1e15 }, 'RangeError', 'ERR_INVALID_OPTION', drain],
    [{ limit: 1, period: SECOND, rate: 5 }, 'TypeError', 'ERR_UNKNOWN_OPTION', /`rate`/],
  ]) {
    it(`rejects ${JSON.stringify(options)}`, () => {
      assert.throws(() => new Gcra(options), (error) => {
        assert.equal(error.name, errorName)
        assert.equal(error.code, code)
        assert.match(error.message, message)
        return true
      })
    })
  }

  it('takes the longest burst: 1e12 ms to drain', () => {
    assert.equal(new Gcra({ limit: 1, period: 1e12 }).limit, 1)
    // T = 1e12 µs / 1e6 = 1 s; tau = 1e9 s.
    assert.equal(new Gcra({ limit: 1e6, period: 1e9, burst: 1e9 }).burst, 1e9)
  })
})

describe('Gcra on Redis', () => {
  it("keeps redis-cell's layout: one string per id, the TAT in microseconds, with a TTL", async () => {
    // T = 60 s / 30 = 2 s, tau = 32 s.
    const g = new Gcra({ client: store, namespace: 'layout:', limit: 30, period: 60_000, burst: 16 })
    await g.consume('u', { now: T0, weight: 3 })
    assert.equal(await redis.cli('TYPE', 'layout:u'), 'string')
    assert.equal(await redis.cli('GET', 'layout:u'), String((T0 + 6 * SECOND) * 1000))
    // The key lives until its TAT, plus a second.
    const ttl = Number(await redis.cli('PTTL', 'layout:u'))
    assert.ok(ttl > 6000 && ttl <= 7000, `PTTL ${ttl}`)
    // A refusal writes nothing; a peek creates nothing.
    await g.consume('u', { now: T0, weight: 17 })
    await g.consume('u', { now: T0, weight: 14 })
    assert.equal(await redis.cli('GET', 'layout:u'), String((T0 + 6 * SECOND) * 1000))
    await g.peek('other', { now: T0 })
    assert.equal(await redis.cli('EXISTS', 'layout:other'), '0')
    // A reward moves the TAT back, with a TTL to match; past now, the key is deleted.
    await g.reward('u', { now: T0 })
    assert.equal(await redis.cli('GET', 'layout:u'), String((T0 + 4 * SECOND) * 1000))
    const rewarded = Number(await redis.cli('PTTL', 'layout:u'))
    assert.ok(rewarded > 4000 && rewarded <= 5000, `PTTL ${rewarded}`)
    await g.reward('none', { now: T0 })
    assert.equal(await redis.cli('EXISTS', 'layout:none'), '0')
    await g.reward('u', { now: T0, weight: 2 })
    assert.equal(await redis.cli('EXISTS', 'layout:u'), '0')
  })

  it('refuses data it did not write, and leaves it alone', async () => {
    const g = new Gcra({ client: store, namespace: 'foreign:', limit: 1, period: SECOND })
    await redis.cli('SET', 'foreign:text', 'abc')
    await redis.cli('HSET', 'foreign:hash', 'a', '1')
    // redis-cell's TATs are nanoseconds: past 2^53, not ours.
    await redis.cli('SET', 'foreign:cell', '1700000000123456789')
    for (const id of ['text', 'hash', 'cell']) {
      await assert.rejects(g.consume(id, { now: T0 }), { code: 'ERR_STORE_ERROR' })
      await assert.rejects(g.reward(id, { now: T0 }), { code: 'ERR_STORE_ERROR' })
    }
    assert.equal(await redis.cli('GET', 'foreign:text'), 'abc')
    assert.equal(await redis.cli('GET', 'foreign:cell'), '1700000000123456789')
    assert.equal(await redis.cli('PTTL', 'foreign:text'), '-1')
    await g.reset('text')
    assert.equal((await g.consume('text', { now: T0 })).allowed, true)
  })

  it('admits exactly the burst to concurrent callers', async () => {
    const g = new Gcra({ client: store, namespace: 'race:', limit: 100, period: 60_000 })
    const answers = await Promise.all(Array.from({ length: 300 }, () => g.consume('hot')))
    assert.equal(answers.filter((a) => a.allowed).length, 100)
  })
})

describe('Gcra: memory and Redis alike, and the bound', () => {
  // 3 per second in bursts of 2: T = 333,334 µs, tau = 666,668 µs.
  const OPTIONS = { limit: 3, period: SECOND, burst: 2 }
  const T = 333_334
  const BURST = 2
  const IDS = ['a', 'b', 'c']

  /**
   * Checks that the allowed consumes of one id (`[at µs, weight]`, no reward or reset among them)
   * put at most burst + floor(t / T) weight in any closed interval of length t.
   */
  function assertBound(log) {
    const sorted = [...log].sort((x, y) => x[0] - y[0])
    for (let i = 0; i < sorted.length; i++) {
      let sum = 0
      for (let j = i; j < sorted.length; j++) {
        sum += sorted[j][1]
        const t = sorted[j][0] - sorted[i][0]
        assert.ok(sum <= BURST + Math.floor(t / T), `${sum} weight in ${t} µs: ${JSON.stringify(sorted.slice(i, j + 1))}`)
      }
    }
  }

  const command = fc.record({
    // Microseconds: mostly forward (often by less than T), sometimes back by up to 150 ms.
    step: fc.oneof({ arbitrary: fc.integer({ min: 0, max: 700_000 }), weight: 4 }, { arbitrary: fc.integer({ min: -150_000, max: 0 }), weight: 1 }, { arbitrary: fc.constant(0), weight: 1 }),
    ids: fc.oneof(fc.integer({ min: 0, max: 2 }), fc.uniqueArray(fc.integer({ min: 0, max: 2 }), { minLength: 2, maxLength: 2 })),
    weight: fc.oneof({ arbitrary: fc.integer({ min: 1, max: 2 }), weight: 5 }, { arbitrary: fc.constant(3), weight: 1 }),
    op: fc.constantFrom('consume', 'consume', 'consume', 'peek', 'reward', 'reset'),
  })

  it('answers alike and never admits more than burst + floor(t / T) in t', async () => {
    let run = 0
    await fc.assert(
      fc.asyncProperty(fc.array(command, { minLength: 30, maxLength: 60 }), startArb(T0), async (commands, start) => {
        run += 1
        const namespace = `prop-${run}:`
        const memory = new Gcra(OPTIONS)
        const onStore = new Gcra({ client: store, namespace, ...OPTIONS })
        const logs = new Map(IDS.map((id) => [id, []]))
        let now = start * 1000
        for (const { step, ids, weight, op } of commands) {
          now = Math.max(0, now + step)
          const callIds = Array.isArray(ids) ? ids.map((i) => IDS[i]) : IDS[ids]
          const options = { now: ms(now), weight }
          const [a, b] = op === 'reset' ? [await memory.reset(callIds), await onStore.reset(callIds)] : [await memory[op](callIds, options), await onStore[op](callIds, options)]
          assert.deepEqual(b, a, `${op} ${JSON.stringify(callIds)} at ${start} ms + ${now - start * 1000} µs`)
          for (const id of [callIds].flat()) {
            if (op === 'reward' || op === 'reset') logs.set(id, [])
            else if (op === 'consume' && a.allowed) logs.get(id).push([now, weight])
          }
        }
        for (const log of logs.values()) assertBound(log)
        // Every key left has a TTL.
        for (const id of IDS) {
          const ttl = await r.pttl(`${namespace}${id}`)
          assert.ok(ttl === -2 || ttl > 0, `PTTL ${ttl}`)
        }
      }),
      { numRuns: 40 },
    )
  })
})

describe('Gcra and redis-cell (its algorithm transcribed)', () => {
  // [period s, count, max_burst]: emission intervals of whole microseconds.
  const CONFIGS = [
    [1, 1, 4],
    [1, 8, 0],
    [1, 64, 9],
    [1, 400, 99],
    [2, 5, 2],
    [7, 7, 6],
    [1, 1_000_000, 999],
    [60, 30, 15],
  ]

  for (const [periodSeconds, count, maxBurst] of CONFIGS) {
    it(`CL.THROTTLE k ${maxBurst} ${count} ${periodSeconds} is Gcra({ limit: ${count}, period: ${periodSeconds * 1000}, burst: ${maxBurst + 1} })`, async () => {
      const options = { limit: count, period: periodSeconds * SECOND, burst: maxBurst + 1 }
      const namespace = nextNamespace()
      const g = new Gcra({ client: store, namespace, ...options })
      const memory = new Gcra(options)
      const cell = new RedisCell()
      const T = (periodSeconds * 1_000_000) / count
      const tau = BigInt(T) * BigInt(maxBurst + 1)
      const rand = random(count + maxBurst)
      let now = BigInt(T0) * 1000n
      let refusals = 0
      let allowedCount = 0
      for (let call = 0; call < 150; call++) {
        now += rand() < 0.1 ? 0n : BigInt(Math.floor(rand() * rand() * 3 * T))
        const roll = rand()
        const weight = roll < 0.6 ? 1 : roll < 0.95 ? 1 + Math.floor(rand() * (maxBurst + 1)) : maxBurst + 2
        const peek = rand() < 0.15
        const at = { now: ms(Number(now)), weight: peek ? 1 : weight }
        const ours = peek ? await g.peek('k', at) : await g.consume('k', at)
        assert.deepEqual(await (peek ? memory.peek('k', at) : memory.consume('k', at)), ours)
        // redis-cell peeks with a quantity of 0: remaining and reset_after of now.
        const [limited, limit, remaining, retryAfter, resetAfter] = cell.throttle('k', maxBurst, count, periodSeconds, peek ? 0 : weight, now * 1000n)
        const theirs = { limited, limit, remaining, retryAfter, resetAfter }
        const where = `call ${call} (weight ${peek ? 'peek' : weight}) at +${now - BigInt(T0) * 1000n} µs: ours ${JSON.stringify(ours)}, redis-cell ${JSON.stringify(theirs)}`
        // Our exact numbers, from the TAT the call left.
        const tat = (await storedTat(`${namespace}k`)) ?? 0n
        const untilEmpty = tat > now ? tat - now : 0n
        if (!peek && ours.allowed) allowedCount += 1
        else if (!peek) refusals += 1
        assert.equal(ours.resetAfter, Number(ceilDiv(untilEmpty, 1000n)), where)
        assert.equal(theirs.limit, ours.limit, where)
        if (!peek) {
          assert.equal(theirs.limited, ours.allowed ? 0 : 1, where)
          const wait = (tat > now ? tat : now) + BigInt(weight) * BigInt(T) - tau - now
          if (ours.allowed || ours.timeLeft === Infinity) {
            assert.equal(theirs.retryAfter, -1, where)
          } else {
            assert.equal(ours.timeLeft, Number(ceilDiv(wait, 1000n)), where)
            assert.equal(theirs.retryAfter, Number(wait / 1_000_000n), where)
          }
        }
        if (cell.stale && weight > maxBurst + 1 && !peek) {
          // redis-cell keeps a stale TAT for a weight that never passes: remaining above its
          // limit and a negative reset. A stale TAT is no TAT to us.
          assert.ok(theirs.remaining >= theirs.limit && theirs.resetAfter <= 0, where)
          assert.deepEqual([ours.remaining, ours.resetAfter], [maxBurst + 1, 0], where)
          continue
        }
        assert.equal(theirs.remaining, ours.remaining, where)
        assert.equal(theirs.resetAfter, Number(untilEmpty / 1_000_000n), where)
      }
      // Both answers were well exercised.
      assert.ok(refusals > 30 && allowedCount > 40, `${refusals} refused, ${allowedCount} allowed`)
    })
  }

  it("differs where redis-cell's key expires before its TAT (a TTL truncated to the millisecond)", () => {
    // 64 per second, bursts of 1: T = 15,625 µs. A call at +0.9 ms leaves the TAT at +16.525 ms
    // under a TTL of 15 ms from millisecond 0: Redis drops the key from +16 ms on.
    const cell = new RedisCell({ expiry: true })
    const start = BigInt(T0) * 1_000_000n
    assert.equal(cell.throttle('k', 0, 64, 1, 1, start + 900_000n)[0], 0)
    assert.equal(cell.throttle('k', 0, 64, 1, 1, start + 16_100_000n)[0], 0)
    assert.equal(cell.expiredEarly, true)
    // A stale TAT is none to us, but a TAT ahead is kept: 425 µs to wait.
    const rule = new Rule({ limit: 64, period: SECOND, burst: 1 })
    rule.call('k', 1, start / 1000n + 900n, true)
    assert.deepEqual(rule.call('k', 1, start / 1000n + 16_100n, true), verdict(false, 1, 0, 1, 1))
  })

  it('differs where redis-cell truncates the interval: 3 per second', () => {
    // redis-cell: trunc(1e9 / 3) = 333,333,333 ns, so 3,000,000,003 per 1e9 s; ours 333,334 µs.
    const cell = new RedisCell()
    const start = BigInt(T0) * 1_000_000n
    // Three at once (max_burst 2), then one every 333,333,333 ns: all pass for redis-cell.
    for (let i = 0; i < 3; i++) assert.equal(cell.throttle('k', 2, 3, 1, 1, start)[0], 0)
    assert.equal(cell.throttle('k', 2, 3, 1, 1, start + 333_333_333n)[0], 0)
    // Ours waits for 333,334 µs.
    const rule = new Rule({ limit: 3, period: SECOND })
    for (let i = 0; i < 3; i++) rule.call('k', 1, start / 1000n, true)
    assert.equal(rule.call('k', 1, start / 1000n + 333_333n, true).allowed, false)
    assert.equal(rule.call('k', 1, start / 1000n + 333_334n, true).allowed, true)
  })
})
