// The smoke suite, run by __test__/runtimes.test.js under Node 20, 22 and 24, Bun and Deno: the
// package by its name, as an app imports it (ESM, and `require` through createRequire), every
// documented limiter on both stores (Redis at REDIS_URL), the middleware behind Express, the
// rate-limiter-flexible drop-in, the stores for Fastify, NestJS and Hono, the Koa middleware, and
// `wait()`. Plain JavaScript with no test runner, so that every runtime runs it as it is; prints
// one line per check and `N passed, N failed`, and exits 1 when a check failed.
// Every documented export by name: a name missing from the ESM entry fails the import itself.
import RateLimiter, {
  RateLimiter as RateLimiterClass, SlidingLog, InMemoryRateLimiter, RedisRateLimiter, NodeRedisRateLimiter, IORedisRateLimiter,
  FixedWindow, SlidingWindow, SlidingTail, LeakyBucket, TokenBucket, Gcra, RedisStore, createRateLimit, createClient, use, rateLimit,
  getCurrentMicroseconds, millisecondsToMicroseconds, microsecondsToMilliseconds, microsecondsToSeconds,
} from 'ratekeeper'
import { Store } from 'ratekeeper/express-rate-limit'
import * as flexible from 'ratekeeper/flexible'
import FlexibleMemory from 'ratekeeper/flexible/lib/RateLimiterMemory'
import { ratekeeperStore } from 'ratekeeper/fastify'
import { Store as HonoStore } from 'ratekeeper/hono'
import { RatekeeperThrottlerStorage } from 'ratekeeper/nestjs'
import { rateLimit as koaRateLimit } from 'ratekeeper/koa'
import Koa from 'koa'
import { Hono } from 'hono'
import { rateLimiter } from 'hono-rate-limiter'
import { createRequire } from 'node:module'
import assert from 'node:assert/strict'
import express from 'express'

const NOW = 1_800_000_000_000 // a whole hour: every window starts here
const run = `${Math.random()}`.slice(2)
const store = process.env.REDIS_URL ? new RedisStore(process.env.REDIS_URL) : null
const stores = store ? { memory: undefined, redis: store } : { memory: undefined }

/** Limit 2 per second, 3 calls at NOW, NOW + 1, NOW + 2: [allowed, remaining, timeLeft] each. */
const LIMITERS = {
  RateLimiter: (client) => new RateLimiterClass({ client, interval: 1000, maxInInterval: 2 }),
  SlidingLog: (client) => new SlidingLog({ client, interval: 1000, maxInInterval: 2 }),
  FixedWindow: (client) => new FixedWindow({ client, limits: [{ duration: 1000, limit: 2 }] }),
  SlidingWindow: (client) => new SlidingWindow({ client, limits: [{ duration: 1000, limit: 2, precision: 100 }] }),
  SlidingTail: (client) => new SlidingTail({ client, limits: [{ duration: 1000, limit: 2 }] }),
  LeakyBucket: (client) => new LeakyBucket({ client, capacity: 2, leakInterval: 1000 }),
  TokenBucket: (client) => new TokenBucket({ client, capacity: 2, refillInterval: 1000 }),
  Gcra: (client) => new Gcra({ client, limit: 2, period: 1000, burst: 2 }),
}
const EXPECTED = {
  RateLimiter: [[true, 1, 0], [true, 0, 0], [false, 0, 998]],
  SlidingLog: [[true, 1, 0], [true, 0, 0], [false, 0, 998]],
  FixedWindow: [[true, 1, 0], [true, 0, 0], [false, 0, 998]],
  SlidingWindow: [[true, 1, 0], [true, 0, 0], [false, 0, 998]],
  SlidingTail: [[true, 1, 0], [true, 0, 0], [false, 0, 999]], // one microsecond past the window
  LeakyBucket: [[true, 1, 0], [true, 0, 0], [false, 0, 998]],
  TokenBucket: [[true, 1, 0], [true, 0, 0], [false, 0, 998]],
  Gcra: [[true, 1, 0], [true, 0, 0], [false, 0, 498]],
}

const checks = []
const check = (name, fn) => checks.push([name, fn])

/** Serves `app` (Express or Koa) on a free port and asks `/` three times: each answer's status, Retry-After and body. */
async function askThreeTimes(app) {
  const server = await new Promise((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening))
  })
  try {
    const answers = []
    for (let i = 0; i < 3; i++) {
      const response = await fetch(`http://127.0.0.1:${server.address().port}/`)
      answers.push([response.status, response.headers.get('retry-after'), await response.text()])
    }
    return answers
  } finally {
    server.close()
  }
}

check('import and require give the same objects', () => {
  const required = createRequire(import.meta.url)('ratekeeper')
  assert.equal(required, RateLimiter)
  const imported = { RateLimiter: RateLimiterClass, SlidingLog, InMemoryRateLimiter, RedisRateLimiter, NodeRedisRateLimiter, IORedisRateLimiter, FixedWindow, SlidingWindow, SlidingTail, LeakyBucket, TokenBucket, Gcra, RedisStore, createRateLimit, createClient, use, rateLimit, getCurrentMicroseconds, millisecondsToMicroseconds, microsecondsToMilliseconds, microsecondsToSeconds }
  for (const [name, value] of Object.entries(imported)) assert.ok(typeof value === 'function' && value === required[name], name)
  assert.equal(microsecondsToSeconds(millisecondsToMicroseconds(1500)), 2)
  assert.equal(createRequire(import.meta.url)('ratekeeper/express-rate-limit').Store, Store)
})

for (const [storeName, client] of Object.entries(stores)) {
  for (const [name, make] of Object.entries(LIMITERS)) {
    check(`${name} on ${storeName}`, async () => {
      const limiter = make(client)
      const id = `${run}:${name}`
      const answers = []
      for (let i = 0; i < 3; i++) {
        const { allowed, remaining, timeLeft } = await limiter.consume(id, { now: NOW + i })
        answers.push([allowed, remaining, timeLeft])
      }
      assert.deepEqual(answers, EXPECTED[name])
    })
  }

  check(`redback's createRateLimit on ${storeName}`, async () => {
    const limit = createRateLimit(`smoke${run}`, { client })
    await limit.add('ip', { now: NOW })
    assert.equal(await limit.addCount('ip', 60, { now: NOW + 1 }), 2)
  })

  check(`express-rate-limit's Store on ${storeName}`, async () => {
    const erl = new Store({ client, prefix: `erl${run}:`, clock: 'local' })
    erl.init({ windowMs: 60_000 })
    assert.equal((await erl.increment('ip')).totalHits, 1)
    assert.equal((await erl.increment('ip')).totalHits, 2)
  })

  check(`wait() on ${storeName}`, async () => {
    const limiter = new TokenBucket({ client, capacity: 1, refillInterval: 20 })
    assert.equal((await limiter.consume(`${run}:wait`)).allowed, true)
    const answer = await limiter.wait(`${run}:wait`, { timeoutMs: 60_000 })
    assert.equal(answer.allowed, true)
  })

  check(`the middleware behind Express on ${storeName}`, async () => {
    const app = express()
    const limiter = new TokenBucket({ client, namespace: `smoke${run}:`, capacity: 2, refillInterval: 3_600_000 })
    app.use(rateLimit({ limiter }))
    app.get('/', (req, res) => res.send('ok'))
    const answers = await askThreeTimes(app)
    assert.deepEqual(answers.map(([status, retryAfter]) => [status, retryAfter]), [[200, null], [200, null], [429, '3600']])
  })
}

check('ratekeeper/flexible: import, require and lib/<Name> give the same classes', () => {
  const required = createRequire(import.meta.url)('ratekeeper/flexible')
  const names = ['RateLimiterMemory', 'RateLimiterRedis', 'RateLimiterValkey', 'RateLimiterUnion', 'RateLimiterQueue', 'RateLimiterQueueError', 'BurstyRateLimiter',
    'RLWrapperBlackAndWhite', 'RLWrapperTimeouts', 'RateLimiterCluster', 'RateLimiterClusterMaster', 'RateLimiterClusterMasterPM2', 'RateLimiterRes', 'RateLimiterAbstract']
  for (const name of names) assert.ok(typeof flexible[name] === 'function' && flexible[name] === required[name], name)
  assert.equal(FlexibleMemory, flexible.RateLimiterMemory)
})

for (const [storeName, client] of Object.entries(stores)) {
  const make = (options) => (client ? new flexible.RateLimiterRedis({ storeClient: process.env.REDIS_URL, ...options }) : new flexible.RateLimiterMemory(options))
  check(`ratekeeper/flexible on ${storeName}: consume, a refusal, an atomic union`, async () => {
    const second = make({ keyPrefix: `smoke-second${run}`, points: 2, duration: 1 })
    const hour = make({ keyPrefix: `smoke-hour${run}`, points: 100, duration: 3600 })
    const first = await second.consume('ip')
    assert.deepEqual([first.remainingPoints, first.consumedPoints, first.isFirstInDuration], [1, 1, true])
    await second.consume('ip')
    const refused = await second.consume('ip').then(() => null, (res) => res)
    assert.ok(refused instanceof flexible.RateLimiterRes && refused.consumedPoints === 3 && refused.msBeforeNext > 0 && refused.msBeforeNext <= 1000)
    const union = new flexible.RateLimiterUnion(second, hour)
    assert.equal(union.atomic, true)
    const rejection = await union.consume('ip').then(() => null, (refusals) => refusals)
    assert.deepEqual(Object.keys(rejection), [`smoke-second${run}`])
    assert.equal(await hour.get('ip'), null) // charged nothing
  })
}

for (const [storeName, client] of Object.entries(stores)) {
  check(`ratekeeper/fastify's store on ${storeName}`, async () => {
    // The class @fastify/rate-limit constructs, called as the plugin calls it.
    const FastifyStore = ratekeeperStore({ client, nameSpace: `smoke-fastify${run}-` })
    const fastifyStore = new FastifyStore({ continueExceeding: true })
    const incr = (key) => new Promise((resolve, reject) => fastifyStore.incr(key, (error, answer) => (error ? reject(error) : resolve(answer)), 1000, 1))
    assert.deepEqual(await incr('ip'), { current: 1, ttl: 1000 })
    assert.deepEqual(await incr('ip'), { current: 2, ttl: 1000 }) // over max 1: continueExceeding starts the window again
    assert.equal(createRequire(import.meta.url)('ratekeeper/fastify').ratekeeperStore, ratekeeperStore)
  })

  check(`ratekeeper/nestjs: @nestjs/throttler's storage on ${storeName}`, async () => {
    const storage = new RatekeeperThrottlerStorage({ client, prefix: `smoke:${run}:nest:` })
    const records = []
    for (let i = 0; i < 3; i++) records.push(await storage.increment('client', 60_000, 2, 60_000, 'default'))
    assert.deepEqual(records.map((r) => [r.totalHits, r.timeToExpire, r.isBlocked, r.timeToBlockExpire]), [[1, 60, false, 0], [2, 60, false, 0], [3, 60, true, 60]])
    assert.equal(createRequire(import.meta.url)('ratekeeper/nestjs').RatekeeperThrottlerStorage, RatekeeperThrottlerStorage)
  })

  check(`ratekeeper/hono in a Hono app on ${storeName}`, async () => {
    assert.equal(createRequire(import.meta.url)('ratekeeper/hono').Store, HonoStore)
    const counts = new HonoStore({ client, prefix: `hrl${run}:` })
    const app = new Hono()
    app.use(rateLimiter({ windowMs: 3_600_000, limit: 2, keyGenerator: () => 'ip', store: counts }))
    app.get('/', (c) => c.text('ok'))
    const answers = []
    for (let i = 0; i < 3; i++) {
      const response = await app.request('/')
      answers.push([response.status, response.headers.get('ratelimit-remaining')])
    }
    assert.deepEqual(answers, [[200, '1'], [200, '0'], [429, '0']])
    assert.equal((await counts.get('ip')).totalHits, 3)
  })

  check(`ratekeeper/koa in a Koa app on ${storeName}`, async () => {
    assert.equal(createRequire(import.meta.url)('ratekeeper/koa').rateLimit, koaRateLimit)
    const app = new Koa()
    const limiter = new TokenBucket({ client, namespace: `smoke-koa${run}:`, capacity: 2, refillInterval: 3_600_000 })
    app.use(koaRateLimit({ limiter }))
    app.use((ctx) => {
      ctx.body = { left: ctx.state.rateLimit.remaining }
    })
    const answers = await askThreeTimes(app)
    assert.deepEqual(answers.slice(0, 2), [[200, null, '{"left":1}'], [200, null, '{"left":0}']])
    assert.deepEqual(answers[2].slice(0, 2), [429, '3600'])
    assert.match(answers[2][2], /^You must wait \d+ ms before you can make requests\.$/)
  })
}

check('the callback API (the default export)', async () => {
  const limiter = RateLimiter({ interval: 1000, maxInInterval: 1 })
  assert.equal(await limiter('user'), 0)
  assert.ok((await limiter('user')) > 0)
})

let failed = 0
for (const [name, fn] of checks) {
  try {
    await fn()
    console.log(`ok ${name}`)
  } catch (error) {
    failed++
    console.log(`not ok ${name}: ${error.stack ?? error}`)
  }
}
await store?.close()
console.log(`smoke: ${checks.length - failed} passed, ${failed} failed`)
process.exit(failed === 0 ? 0 : 1)
