'use strict'

// The two stores are one algorithm: the same seeded random calls (ids, weights, time moving
// forward by random steps, and now and then back, as from a host whose clock is behind) get the
// same answers in memory and on Redis, for every limiter, from a present-day instant and from the
// epoch (where fake clocks start). A difference means a Lua script and its Rust twin disagree.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')

const { RateLimiter, SlidingLog, FixedWindow, SlidingWindow, createRateLimit, RedisStore } = require('..')
const { LIMITERS, ONE_ID } = require('./helpers/limiters.js')
const { useRedisServer } = require('./helpers/redis-server.js')
const { random } = require('./helpers/random.js')
const { NEAR_EPOCH } = require('./helpers/start-times.js')

const redis = useRedisServer()

const CALLS = 400
const T0 = 1_700_000_000_000

/**
 * Runs `CALLS` random calls on both limiters, from T0 and from the epoch; `step(limiter, rand,
 * now)` makes one call and returns its answer (or the error's code). With `late`, one step in ten
 * goes back in time (never before the start).
 */
async function compare(name, create, step, late = true) {
  for (const [seed, start] of [[1, T0], [2, T0], [3, T0], [4, NEAR_EPOCH[0]], [5, NEAR_EPOCH[2]]]) {
    const memory = create({})
    const onRedis = create({ client: redis.server.url, namespace: `agree-${name}-${seed}:` })
    const rand = random(seed)
    let now = start
    for (let call = 0; call < CALLS; call++) {
      const back = rand() < 0.1
      const jump = Math.floor(rand() * (back ? 1500 : 400))
      now = Math.max(start, back && late ? now - jump : now + jump)
      const state = rand()
      const answer = async (limiter) => {
        try {
          return await step(limiter, random(state * 4294967296), now)
        } catch (error) {
          return error.code
        }
      }
      const [a, b] = [await answer(memory), await answer(onRedis)]
      assert.deepEqual(b, a, `${name}, seed ${seed}, call ${call} at ${start} + ${now - start} ms`)
    }
  }
}

const pick = (rand, items) => items[Math.floor(rand() * items.length)]
const ids = ['a', 'b', 'c']

describe('memory and Redis answer alike', () => {
  // (Without minDifference, Redis answers the usual limit and consume by counting first.)
  for (const recordBlocked of [true, false]) {
    for (const minDifference of [150, 0]) {
      it(`the rolling window (recordBlocked: ${recordBlocked}, minDifference: ${minDifference})`, () =>
        compare(`rolling-${recordBlocked}-${minDifference}`, (o) => new RateLimiter({ interval: 2000, maxInInterval: 4, minDifference, recordBlocked, ...o }), (limiter, rand, now) => {
          const id = pick(rand, ids)
          const r = rand()
          if (r < 0.6) return limiter.limitWithInfo(id, { now })
          if (r < 0.9) return limiter.wouldLimitWithInfo(id, { now })
          return limiter.clear(id)
        }))
    }
  }

  for (const minDifference of [100, 0]) {
    it(`the sliding log (minDifference: ${minDifference})`, () =>
      compare(`log-${minDifference}`, (o) => new SlidingLog({ interval: 2000, maxInInterval: 5, minDifference, ...o }), (limiter, rand, now) => {
        const id = pick(rand, ids)
        const weight = 1 + Math.floor(rand() * 3)
        const r = rand()
        if (r < 0.6) return limiter.consume(id, { now, weight, meta: `m${Math.floor(rand() * 3)}` })
        if (r < 0.8) return limiter.peek(id, { now, weight })
        if (r < 0.95) return limiter.entries(id, { now })
        return limiter.reset(id)
      }))
  }

  it('the fixed window', () =>
    compare('fixed', (o) => new FixedWindow({ limits: [{ duration: 1000, limit: 5 }, { duration: 5000, limit: 12 }], ...o }), (limiter, rand, now) => {
      const callIds = rand() < 0.5 ? pick(rand, ids) : [pick(rand, ids), pick(rand, ids)]
      const weight = 1 + Math.floor(rand() * 4)
      const r = rand()
      if (r < 0.7) return limiter.consume(callIds, { now, weight })
      if (r < 0.95) return limiter.peek(callIds, { now, weight })
      return limiter.reset(callIds)
    }))

  // Late calls are out of scope for the sliding window (as in the seed, which refuses them): its
  // bounded clean-up of old buckets can then leave one that a later late call still reads.
  it('the sliding window (time moving forward)', () =>
    compare('sliding', (o) => new SlidingWindow({ limits: [{ duration: 1000, limit: 6, precision: 200 }, { duration: 4000, limit: 15, precision: 1000 }], ...o }), (limiter, rand, now) => {
      const callIds = rand() < 0.5 ? pick(rand, ids) : [pick(rand, ids), pick(rand, ids)]
      const weight = 1 + Math.floor(rand() * 4)
      const r = rand()
      if (r < 0.7) return limiter.consume(callIds, { now, weight })
      if (r < 0.95) return limiter.peek(callIds, { now, weight })
      return limiter.reset(callIds)
    }, false))

  // The limiters above with more operations; these with consume, peek, reward and reset.
  for (const [name, create] of Object.entries(LIMITERS)) {
    it(`${name} (consume, peek, reward, reset)`, () =>
      compare(`every-${name}`, create, (limiter, rand, now) => {
        const id = pick(rand, ids)
        const callIds = ONE_ID.has(name) || rand() < 0.6 ? id : [id, pick(rand, ids)]
        const weight = 1 + Math.floor(rand() * 3)
        const r = rand()
        if (r < 0.6) return limiter.consume(callIds, { now, weight })
        if (r < 0.85) return limiter.peek(callIds, { now, weight })
        if (r < 0.95) return limiter.reward(callIds, { now, weight })
        return limiter.reset(callIds)
      }, name !== 'SlidingWindow'))
  }

  it("redback's bucket circle", () =>
    compare('redback', (o) => createRateLimit('agree', { bucket_span: 10, bucket_interval: 1, ...o }), (limiter, rand, now) => {
      const id = pick(rand, ids)
      const interval = Math.floor(rand() * 11)
      const r = rand()
      if (r < 0.5) return limiter.add(id, { now })
      if (r < 0.8) return limiter.count(id, interval, { now })
      return limiter.addCount(id, interval, { now })
    }))
})

// Concurrent calls of a limiter leave together in one EVALSHA, which sends a call's arguments
// only when they differ from the previous call's (src/store/batch.rs): runs of calls alike and
// changes of weight and now within one batch must still reach each call. Concurrent calls have
// no order (two batches can be in flight), so each call has ids of its own. The redis-server is
// stopped (SIGSTOP) while the calls are made, so that they queue up behind the first batches
// whatever the machine's load: without it, how many batches form depends on thread scheduling.
describe('calls sent together in one batch get their own arguments', () => {
  const plan = (seed, oneId) => {
    const rand = random(seed)
    const calls = []
    let now = T0
    let weight = 1
    for (let call = 0; call < 240; call++) {
      if (rand() < 0.2) now += Math.floor(rand() * 300)
      if (rand() < 0.15) weight = 1 + Math.floor(rand() * 7)
      const many = !oneId && rand() < 0.2
      calls.push({ id: many ? [`${call}a`, `${call}b`] : `${call}`, weight, now })
    }
    return calls
  }
  const batched = async (create, calls, make) => {
    const memory = create({})
    const expected = []
    for (const call of calls) expected.push(await make(memory, call))
    const store = new RedisStore(redis.server.url)
    try {
      const onRedis = create({ client: store, namespace: `batched-${Math.random()}:` })
      process.kill(redis.server.pid, 'SIGSTOP')
      let answering
      try {
        answering = Promise.all(calls.map((call) => make(onRedis, call)))
        // One turn of the event loop: every call has reached the store's queue.
        await new Promise(setImmediate)
      } finally {
        process.kill(redis.server.pid, 'SIGCONT')
      }
      const answers = await answering
      assert.deepEqual(answers, expected)
      const { batches } = store.stats()
      assert.ok(batches <= calls.length / 4, `${batches} batches carried the ${calls.length} calls`)
    } finally {
      store.close()
    }
  }
  for (const [name, create] of Object.entries(LIMITERS)) {
    it(name, () => batched(create, plan(name.length, ONE_ID.has(name)), (limiter, { id, weight, now }) => limiter.consume(id, { weight, now })))
  }
  it("redback's bucket circle", () =>
    batched((o) => createRateLimit('batched', { bucket_span: 10, bucket_interval: 1, ...o }), plan(7, true), (limiter, { id, weight, now }) =>
      weight % 2 ? limiter.addCount(id, weight, { now }) : limiter.count(id, weight, { now })))
})
