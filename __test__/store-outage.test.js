'use strict'

// Redis goes away under load and comes back: what each `onStoreError` policy answers meanwhile,
// how the store reports it (stats(), 'error' and 'reconnect' events), and that every call
// settles and Redis decides again once it is back.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')

const { FixedWindow, SlidingWindow, RedisRateLimiter, RateLimiter, RedisStore, createRateLimit } = require('..')
const { startRedis, freePort } = require('./helpers/redis-server.js')

const NOW = 1_700_000_000_000
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** The loads started and not stopped yet. */
const loads = new Set()

/**
 * Keeps `workers` callers busy with `call(i)` until stopped; collects every outcome.
 * @returns {{ stop(): Promise<Array<{ value?: any, error?: any }>> }}
 */
function load(workers, call) {
  const outcomes = []
  let running = true
  let n = 0
  const loops = Array.from({ length: workers }, async () => {
    while (running) {
      const i = n++
      outcomes.push(await call(i).then((value) => ({ value }), (error) => ({ error })))
      await sleep(1)
    }
  })
  const handle = {
    async stop() {
      running = false
      loads.delete(handle)
      await Promise.all(loops)
      return outcomes
    },
  }
  loads.add(handle)
  return handle
}

/** Calls `probe()` until `done(answer)`, up to 200 times 25 ms apart; resolves the last answer. */
async function until(probe, done) {
  let answer
  for (let attempt = 0; attempt < 200; attempt++) {
    answer = await probe().catch((error) => ({ error }))
    if (done(answer)) return answer
    await sleep(25)
  }
  return answer
}

/** Runs `test(server, store)` on a redis-server and a store of its own, closed afterwards. */
async function withStore(test) {
  const server = await startRedis()
  const store = new RedisStore({ url: server.url, commandTimeoutMs: 300 })
  try {
    await test(server, store)
  } finally {
    // A test that failed halfway must not leave its load running (the file would never end).
    await Promise.all([...loads].map((running) => running.stop()))
    await store.close()
    await server.stop()
  }
}

const fromRedis = (answer) => answer && !answer.error && answer.store === undefined

describe('onStoreError', () => {
  it("'reject' (the default) rejects with ERR_STORE_UNAVAILABLE under load, and Redis decides again once back", async () => {
    await withStore(async (server, store) => {
      const limiter = new FixedWindow({ client: store, limits: [{ duration: 60_000, limit: 1_000_000 }] })
      const traffic = load(32, (i) => limiter.consume(`id-${i % 500}`))
      await sleep(100)
      await server.kill()
      await sleep(300)
      await server.restart()
      await until(() => limiter.consume('probe'), fromRedis)
      const outcomes = await traffic.stop()
      const failures = outcomes.filter((o) => o.error)
      assert.ok(failures.length > 0, 'calls failed while Redis was down')
      for (const { error } of failures) assert.equal(error.code, 'ERR_STORE_UNAVAILABLE', error.message)
      assert.ok(outcomes.at(-1).value.allowed, 'the last calls were answered by Redis')
    })
  })

  it("'allow' answers allowed, marked store-unavailable, and never rejects under load", async () => {
    await withStore(async (server, store) => {
      const limiter = new FixedWindow({ client: store, onStoreError: 'allow', limits: [{ duration: 3_600_000, limit: 2 }] })
      assert.equal((await limiter.consume('a', { now: NOW })).remaining, 1)
      assert.equal((await limiter.consume('a', { now: NOW })).remaining, 0)
      assert.equal((await limiter.consume('a', { now: NOW })).allowed, false)
      const traffic = load(32, (i) => limiter.consume(`id-${i % 50}`, { now: NOW }))
      await sleep(100)
      await server.kill()
      // 'a' is over its limit, but Redis cannot say so: allowed, with what an empty limiter has.
      assert.deepEqual(await limiter.consume('a', { now: NOW }), {
        allowed: true,
        timeLeft: 0,
        remaining: 2,
        limit: 2,
        resetAfter: 0,
        reason: 'store-unavailable',
        store: 'none',
      })
      await server.restart()
      const back = await until(() => limiter.peek('a', { now: NOW }), fromRedis)
      assert.ok(fromRedis(back), JSON.stringify(back))
      const outcomes = await traffic.stop()
      assert.deepEqual(outcomes.filter((o) => o.error).map((o) => o.error.message), [])
      const fallbacks = outcomes.filter((o) => o.value.store === 'none')
      assert.ok(fallbacks.length > 0)
      assert.ok(fallbacks.every((o) => o.value.allowed && o.value.reason === 'store-unavailable'))
      // The restarted Redis kept nothing: 'a' starts afresh there.
      assert.equal((await limiter.consume('a', { now: NOW })).remaining, 1)
    })
  })

  it("'memory' answers from an in-process limiter with the same settings, then goes back to Redis", async () => {
    await withStore(async (server, store) => {
      const limiter = new FixedWindow({ client: store, onStoreError: 'memory', limits: [{ duration: 3_600_000, limit: 3 }] })
      assert.equal((await limiter.consume('a', { now: NOW })).remaining, 2)
      const traffic = load(32, (i) => limiter.consume(`id-${i % 50}`, { now: NOW }))
      await sleep(100)
      await server.kill()
      // The in-process limiter starts empty: 3 more for 'a', then refused, as the settings say.
      const during = []
      for (let i = 0; i < 4; i++) during.push(await limiter.consume('a', { now: NOW }))
      assert.deepEqual(during.map((v) => [v.allowed, v.remaining, v.store, v.reason]), [
        [true, 2, 'memory', 'store-unavailable'],
        [true, 1, 'memory', 'store-unavailable'],
        [true, 0, 'memory', 'store-unavailable'],
        [false, 0, 'memory', 'store-unavailable'],
      ])
      await server.restart()
      await until(() => limiter.peek('a', { now: NOW }), fromRedis)
      const outcomes = await traffic.stop()
      assert.deepEqual(outcomes.filter((o) => o.error).map((o) => o.error.message), [])
      assert.ok(outcomes.some((o) => o.value.store === 'memory'))
      // Redis decides again (it restarted empty).
      assert.deepEqual(await limiter.consume('a', { now: NOW }), {
        allowed: true,
        timeLeft: 0,
        remaining: 2,
        limit: 3,
        resetAfter: 3_600_000 - (NOW % 3_600_000),
      })
    })
  })

  it('works on every Redis-backed limiter, and rejects a bad value or an in-memory limiter', async () => {
    const port = await freePort()
    const store = new RedisStore({ url: `redis://127.0.0.1:${port}`, commandTimeoutMs: 200, connectTimeoutMs: 200 })
    const window = { limits: [{ duration: 1000, limit: 1 }] }
    const rolling = { interval: 1000, maxInInterval: 1 }
    assert.deepEqual(
      await new RedisRateLimiter({ client: store, onStoreError: 'allow', ...rolling }).limitWithInfo('a'),
      {
        blocked: false,
        blockedDueToCount: false,
        blockedDueToMinDifference: false,
        // As for a first attempt: the next one waits for the window.
        millisecondsUntilAllowed: 1000,
        actionsRemaining: 0,
        reason: 'store-unavailable',
        store: 'none',
      },
    )
    assert.equal(await new RateLimiter({ client: store, onStoreError: 'memory', ...rolling }).limit('a'), false)
    assert.equal((await new SlidingWindow({ client: store, onStoreError: 'memory', ...window }).consume('a')).store, 'memory')
    const callback = RateLimiter({ redis: store, onStoreError: 'memory', ...rolling })
    assert.equal(await callback('a'), 0)
    assert.ok((await callback('a')) > 0)
    const redback = createRateLimit('login', { client: store, onStoreError: 'memory' })
    assert.equal(await redback.addCount('a', 10), 1)
    assert.equal(await redback.addCount('a', 10), 2)
    assert.equal(await createRateLimit('login', { client: store, onStoreError: 'allow' }).addCount('a', 10), 0)
    await assert.rejects(new FixedWindow({ client: store, ...window }).consume('a'), { code: 'ERR_STORE_UNAVAILABLE' })

    for (const bad of ['ignore', true, null]) {
      assert.throws(() => new FixedWindow({ client: store, onStoreError: bad, ...window }), { name: 'RangeError', code: 'ERR_INVALID_OPTION' })
    }
    assert.throws(() => new FixedWindow({ onStoreError: 'allow', ...window }), { name: 'RangeError', code: 'ERR_INVALID_OPTION', message: /`onStoreError`/ })
    assert.throws(() => new RateLimiter({ onStoreError: 'allow', ...rolling }), { code: 'ERR_INVALID_OPTION' })
    assert.throws(() => createRateLimit('x', { onStoreError: 'memory' }), { code: 'ERR_INVALID_OPTION' })
    await store.close()
  })
})

describe('RedisStore stats and events', () => {
  it('counts calls, batches, failures, reconnects and script loads', async () => {
    await withStore(async (server, store) => {
      assert.deepEqual(store.stats(), {
        calls: 0,
        failures: { ERR_STORE_UNAVAILABLE: 0, ERR_STORE_ERROR: 0, ERR_STORE_CLOSED: 0 },
        connections: 0,
        reconnects: 0,
        scriptLoads: 0,
        batches: 0,
        meanBatchSize: 0,
      })
      const limiter = new FixedWindow({ client: store, limits: [{ duration: 60_000, limit: 10 }] })
      await limiter.consume('first')
      assert.equal(store.stats().scriptLoads, 1, 'the script was loaded once (NOSCRIPT on the first call)')
      await Promise.all(Array.from({ length: 100 }, (_, i) => limiter.consume(`id-${i}`)))
      await server.cli('SET', 'ratekeeper:fixed:wrong', 'a string')
      await assert.rejects(limiter.consume('wrong'), { code: 'ERR_STORE_ERROR' })
      let stats = store.stats()
      assert.equal(stats.calls, 102)
      assert.equal(stats.failures.ERR_STORE_ERROR, 1)
      assert.equal(stats.connections, 1)
      assert.equal(stats.scriptLoads, 1)
      assert.ok(stats.batches >= 3 && stats.batches < 102, `${stats.batches} batches`)
      assert.equal(stats.meanBatchSize, 102 / stats.batches)

      await server.kill()
      await assert.rejects(limiter.consume('a'), { code: 'ERR_STORE_UNAVAILABLE' })
      await server.restart()
      await until(() => limiter.consume('a'), (answer) => answer && !answer.error)
      stats = store.stats()
      assert.ok(stats.failures.ERR_STORE_UNAVAILABLE >= 1)
      assert.equal(stats.reconnects, 1)
      assert.equal(stats.connections, 2)
      assert.ok(stats.scriptLoads >= 2, 'the restarted server needed the script again')
      await store.close()
      await assert.rejects(limiter.consume('a'), { code: 'ERR_STORE_CLOSED' })
      assert.equal(store.stats().failures.ERR_STORE_CLOSED, 1)
    })
  })

  it("emits 'error' once per outage and 'reconnect' once when Redis is back, not once per call", async () => {
    await withStore(async (server, store) => {
      const errors = []
      const reconnects = []
      store.on('error', (error) => errors.push(error)).on('reconnect', (event) => reconnects.push(event))
      const limiter = new FixedWindow({ client: store, limits: [{ duration: 60_000, limit: 1000 }] })
      await limiter.consume('a')
      await server.kill()
      const failed = await Promise.allSettled(Array.from({ length: 50 }, (_, i) => limiter.consume(`id-${i}`)))
      assert.ok(failed.every((outcome) => outcome.status === 'rejected'))
      await server.restart()
      await until(() => limiter.consume('a'), (answer) => answer && !answer.error)
      await sleep(50) // events reach the JS thread asynchronously
      assert.equal(errors.length, 1, errors.map((e) => e.message).join('\n'))
      assert.equal(errors[0].code, 'ERR_STORE_UNAVAILABLE')
      assert.equal(errors[0].node, `127.0.0.1:${server.port}`)
      assert.match(errors[0].message, new RegExp(`127\\.0\\.0\\.1:${server.port}`))
      assert.deepEqual(reconnects, [{ node: `127.0.0.1:${server.port}` }])
      assert.throws(() => store.on('close', () => {}), { name: 'RangeError', code: 'ERR_INVALID_ARGUMENT' })
      assert.throws(() => store.on('error', 'not a function'), { name: 'TypeError', code: 'ERR_INVALID_ARGUMENT' })
    })
  })

  it('a replica at the address given (a primary demoted) rejects with ERR_STORE_UNAVAILABLE, so the policy applies', async () => {
    const primary = await startRedis()
    const replica = await startRedis({ args: ['--replicaof', '127.0.0.1', String(primary.port)] })
    const store = new RedisStore({ url: replica.url, commandTimeoutMs: 1000 })
    try {
      const limits = [{ duration: 60_000, limit: 10 }]
      await assert.rejects(new FixedWindow({ client: store, limits }).consume('a'), (error) => {
        assert.equal(error.code, 'ERR_STORE_UNAVAILABLE')
        assert.match(error.message, new RegExp(`127\\.0\\.0\\.1:${replica.port} is unavailable: a replica: READONLY`))
        return true
      })
      const answer = await new FixedWindow({ client: store, limits, onStoreError: 'allow' }).consume('a')
      assert.equal(answer.allowed, true)
      assert.equal(answer.reason, 'store-unavailable')
    } finally {
      await store.close()
      await Promise.all([replica.stop(), primary.stop()])
    }
  })
})
