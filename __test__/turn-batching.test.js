'use strict'

// Redis calls are held until the turn of the event loop that made them ends, then leave together
// (src/store/batch.rs, `sendSoon` in lib/engine.js), as ioredis's auto-pipelining: the calls an
// app makes while it handles one turn's requests cost Redis one EVALSHA, not one each. A turn
// that makes many calls sends them in batches as they come, so that Redis works meanwhile.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')

const { FixedWindow, SlidingLog, RedisStore } = require('..')
const { useRedisServer } = require('./helpers/redis-server.js')

const redis = useRedisServer()
const T0 = 1_700_000_000_000

/** Keeps the JS thread busy for `ms` (the runtime's thread runs meanwhile). */
function busy(ms) {
  const until = Date.now() + ms
  while (Date.now() < until);
}

/** A store, and a fixed window on it whose connection is open (its first call answered). */
async function connected(t) {
  const store = new RedisStore(redis.server.url)
  t.after(() => store.close())
  const limiter = new FixedWindow({ client: store, namespace: `turn-${Math.random()}:`, limits: [{ duration: 60_000, limit: 100 }] })
  await limiter.consume('warm-up', { now: T0 })
  return { store, limiter }
}

describe('Redis calls made in one turn of the event loop', () => {
  it('leave together once the turn ends, even with Redis idle when the first was made', async (t) => {
    const { store, limiter } = await connected(t)
    const before = store.stats().batches
    const first = limiter.consume('a', { now: T0 })
    // Sent at once, the first call would be on its way meanwhile.
    busy(50)
    const second = limiter.consume('b', { now: T0 })
    const third = limiter.consume('a', { now: T0 })
    const answers = await Promise.all([first, second, third])
    assert.deepEqual(answers.map((a) => a.remaining), [99, 99, 98])
    assert.equal(store.stats().batches - before, 1)
  })

  it('leave in batches of 32 as they come when a turn makes many', async (t) => {
    const { store, limiter } = await connected(t)
    const before = store.stats().batches
    const calls = []
    for (let i = 0; i < 32; i++) calls.push(limiter.consume(`many-${i}`, { now: T0 }))
    // The 32nd call sent the 32 without waiting for the turn to end: the batch leaves while
    // this turn goes on.
    const deadline = Date.now() + 10_000
    while (store.stats().batches === before && Date.now() < deadline) busy(1)
    assert.equal(store.stats().batches - before, 1, 'the first 32 calls left before the turn ended')
    calls.push(limiter.consume('many-last', { now: T0 }))
    const answers = await Promise.all(calls)
    assert.deepEqual(new Set(answers.map((a) => a.remaining)), new Set([99]))
    assert.equal(store.stats().batches - before, 2)
    assert.equal(answers.length, 33)
  })

  it('get commandTimeoutMs from the end of their turn: a long turn does not time them out', async (t) => {
    const store = new RedisStore({ url: redis.server.url, commandTimeoutMs: 100 })
    t.after(() => store.close())
    const limiter = new FixedWindow({ client: store, namespace: `turn-long-${Math.random()}:`, limits: [{ duration: 60_000, limit: 100 }] })
    await limiter.consume('warm-up', { now: T0 })
    const call = limiter.consume('a', { now: T0 })
    // Three timeouts of JavaScript's own work before the call can leave.
    busy(300)
    assert.equal((await call).remaining, 99)
  })

  it('reject with ERR_STORE_CLOSED when the store closes in the same turn (they were not sent)', async (t) => {
    const { store, limiter } = await connected(t)
    const call = limiter.consume('closing', { now: T0 })
    store.close()
    await assert.rejects(call, { code: 'ERR_STORE_CLOSED' })
  })

  it("include a sliding log's entries(), sent at the turn's end too", { timeout: 20_000 }, async (t) => {
    const store = new RedisStore(redis.server.url)
    t.after(() => store.close())
    const limiter = new SlidingLog({ client: store, namespace: `turn-entries-${Math.random()}:`, interval: 60_000, maxInInterval: 5 })
    await limiter.consume('x', { now: T0, meta: 'first' })
    const before = store.stats().batches
    // Alone in its turn: nothing else would send it.
    assert.deepEqual(await limiter.entries('x', { now: T0 + 1 }), [{ at: T0, meta: 'first' }])
    assert.equal(store.stats().batches - before, 1)
  })
})
