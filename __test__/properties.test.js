'use strict'

// Property tests (fast-check) of the window algorithms that came first: over random sequences of
// (time step, id, weight, operation), memory and Redis give identical answers, and no interval
// admits more than the algorithm's documented bound. (Each newer limiter has its own in its test
// file.) RATEKEEPER_PROPERTY_RUNS raises the number of sequences.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const fc = require('fast-check')

const { FixedWindow, SlidingWindow, SlidingLog } = require('..')
const { useRedisServer } = require('./helpers/redis-server.js')
const { startArb } = require('./helpers/start-times.js')

const redis = useRedisServer()
const RUNS = Number(process.env.RATEKEEPER_PROPERTY_RUNS) || 40
const T0 = 1_700_000_000_000
let namespaceCounter = 0

/**
 * Random calls from a random start (see helpers/start-times.js): time steps (backward by up to
 * `back` ms now and then, never before the start), ids among three, weights 1 to 4; with
 * `refunds`, some calls are `reward` or `reset` (then the bound is not checked: refunds give
 * capacity back).
 */
function callsArb({ maxStep, back }) {
  const call = fc.record({
    step: fc.oneof({ weight: 9, arbitrary: fc.integer({ min: 0, max: maxStep }) }, { weight: 1, arbitrary: fc.integer({ min: -back, max: 0 }) }),
    id: fc.constantFrom('a', 'b', 'c'),
    weight: fc.integer({ min: 1, max: 4 }),
    op: fc.constantFrom('consume', 'consume', 'consume', 'peek', 'reward', 'reset'),
  })
  return fc.record({ start: startArb(T0), refunds: fc.boolean(), calls: fc.array(call, { minLength: 10, maxLength: 60 }) })
}

/**
 * Runs the calls on a fresh limiter in memory and one on Redis; asserts equal answers; returns
 * the allowed consumes `{ at, id, weight }` (at in ms) when no refund was made.
 */
async function runBoth(create, { start, refunds, calls }) {
  namespaceCounter += 1
  const memory = create({})
  const onRedis = create({ client: redis.server.url, namespace: `prop${namespaceCounter}:` })
  const allowed = []
  // Per id, the latest now of its allowed actions so far: a late one counts at that time (see the
  // fixed window's property).
  const latest = {}
  let now = start
  for (const [i, call] of calls.entries()) {
    now = Math.max(start, now + call.step)
    const op = refunds ? call.op : call.op === 'peek' ? 'peek' : 'consume'
    const run = (limiter) =>
      op === 'reset' ? limiter.reset(call.id) : limiter[op](call.id, { now, weight: call.weight }).catch((error) => error.code)
    const [a, b] = [await run(memory), await run(onRedis)]
    assert.deepEqual(b, a, `call ${i} (${op} ${call.id} x${call.weight} at ${start} + ${now - start} ms)`)
    if (op === 'consume' && a.allowed) {
      latest[call.id] = Math.max(latest[call.id] ?? now, now)
      allowed.push({ at: now, counted: latest[call.id], id: call.id, weight: call.weight })
    }
  }
  return refunds ? null : allowed
}

/** The most weight one id got in any interval [t, t + length) that `starts` proposes. */
function mostIn(allowed, length, starts = (entry) => [entry.at]) {
  let most = 0
  for (const id of ['a', 'b', 'c']) {
    const mine = allowed.filter((entry) => entry.id === id)
    for (const entry of mine) {
      for (const start of starts(entry)) {
        const sum = mine.filter((e) => e.at >= start && e.at < start + length).reduce((s, e) => s + e.weight, 0)
        most = Math.max(most, sum)
      }
    }
  }
  return most
}

describe('properties', () => {
  it('fixed window: stores agree; each aligned window admits at most its limit, any interval of its length twice that', async () => {
    const create = (o) => new FixedWindow({ limits: [{ duration: 1000, limit: 6 }], ...o })
    await fc.assert(
      fc.asyncProperty(callsArb({ maxStep: 300, back: 400 }), async (sequence) => {
        const allowed = await runBoth(create, sequence)
        if (!allowed) return
        // A call that came late counts in the newer window its id's counter is in (that of the
        // id's latest allowed action so far), so the bounds hold at the time each call counted:
        // per aligned window the limit, per interval of its length (two windows at most) twice
        // that. (By the calls' own `now`, a late one can make an interval hold more: 13 in seed
        // 643393321.)
        const counted = allowed.map((e) => ({ ...e, at: e.counted }))
        assert.ok(mostIn(counted, 1000) <= 12, 'any 1 s')
        const aligned = mostIn(counted, 1000, (e) => [Math.floor(e.at / 1000) * 1000])
        assert.ok(aligned <= 6, `an aligned window admitted ${aligned}`)
      }),
      { numRuns: RUNS },
    )
  })

  it('fixed window: limiters that share a namespace (one hash per id) answer as each would alone', async () => {
    // Calls alternate at random between a limiter of 1 s and one of 2.5 s; on Redis their
    // counters share each id's hash, in memory they do not. (No reset: it deletes the hash.)
    const limits = [[{ duration: 1000, limit: 3 }], [{ duration: 2500, limit: 5 }]]
    const callArb = fc.record({
      step: fc.oneof({ weight: 9, arbitrary: fc.integer({ min: 0, max: 600 }) }, { weight: 1, arbitrary: fc.integer({ min: -400, max: 0 }) }),
      which: fc.constantFrom(0, 1),
      id: fc.constantFrom('a', 'b'),
      weight: fc.integer({ min: 1, max: 3 }),
      op: fc.constantFrom('consume', 'consume', 'consume', 'peek', 'reward'),
    })
    await fc.assert(
      fc.asyncProperty(startArb(T0), fc.array(callArb, { minLength: 10, maxLength: 60 }), async (start, calls) => {
        namespaceCounter += 1
        const namespace = `share${namespaceCounter}:`
        const memory = limits.map((l) => new FixedWindow({ limits: l }))
        const onRedis = limits.map((l) => new FixedWindow({ limits: l, client: redis.server.url, namespace }))
        let now = start
        for (const [i, call] of calls.entries()) {
          now = Math.max(start, now + call.step)
          const run = (limiter) => limiter[call.op](call.id, { now, weight: call.weight })
          const [a, b] = [await run(memory[call.which]), await run(onRedis[call.which])]
          assert.deepEqual(b, a, `call ${i} (${call.op} ${call.id} x${call.weight} on limiter ${call.which} at ${start} + ${now - start} ms)`)
        }
      }),
      { numRuns: RUNS },
    )
  })

  it('precision sliding window: stores agree; any run of `buckets` buckets admits at most the limit', async () => {
    // 6 per second in buckets of 200 ms: any 5 consecutive buckets hold at most 6.
    const create = (o) => new SlidingWindow({ limits: [{ duration: 1000, limit: 6, precision: 200 }], ...o })
    await fc.assert(
      fc.asyncProperty(callsArb({ maxStep: 300, back: 0 }), async (sequence) => {
        const allowed = await runBoth(create, sequence)
        if (!allowed) return
        const most = mostIn(allowed, 1000, (e) => [Math.floor(e.at / 200) * 200])
        assert.ok(most <= 6, `5 buckets admitted ${most}`)
      }),
      { numRuns: RUNS },
    )
  })

  // (Without minDifference, Redis answers the usual consume by counting first.)
  for (const minDifference of [20, 0]) {
    it(`sliding log (minDifference: ${minDifference}): stores agree; any interval of its length admits at most maxInInterval`, async () => {
      const create = (o) => new SlidingLog({ interval: 1000, maxInInterval: 6, minDifference, ...o })
      await fc.assert(
        fc.asyncProperty(callsArb({ maxStep: 300, back: 400 }), async (sequence) => {
          const allowed = await runBoth(create, sequence)
          if (!allowed) return
          // The log holds actions by their time: (t - 1000, t] for every t, late ones included.
          const most = mostIn(allowed, 1000, (e) => [e.at - 999])
          assert.ok(most <= 6, `an interval of 1 s admitted ${most}`)
        }),
        { numRuns: RUNS },
      )
    })
  }
})
