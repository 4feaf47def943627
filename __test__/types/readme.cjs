// The JavaScript examples of the README and of the guides in docs/, each verbatim in a function
// whose parameters stand for what the example takes from around it, type-checked (`--checkJs`) by
// types.test.js under `module: nodenext`; readme.test.js checks every ```js block of the README
// and docs/ is here or in examples/, so they cannot drift from the declarations. Each function's
// doc comment names where its example is.
'use strict'

/**
 * README, Use it: In your code
 * @param {string} userId
 * @param {string} ip
 * @param {import('express').Express} app
 */
async function example(userId, ip, app) {
const { RateLimiter, RedisRateLimiter, rateLimit } = require('ratekeeper')

// 10 actions per minute per user, at least 1 s apart. In memory:
const limiter = new RateLimiter({ interval: 60_000, maxInInterval: 10, minDifference: 1000 })
if (await limiter.limit(userId)) throw new Error('slow down')

// The same on Redis (a URL, an options object, a RedisStore, or an ioredis / node-redis client):
const shared = new RedisRateLimiter({ client: 'redis://127.0.0.1:6379', namespace: 'push:', interval: 60_000, maxInInterval: 10 })
const { blocked, millisecondsUntilAllowed } = await shared.limitWithInfo(userId)

// Express: 429 with Retry-After and the IETF RateLimit headers (any limiter below works too).
app.use(rateLimit({ limiter }))

// 10 per second and 120 per minute, per IP and per user at once, weights allowed:
const { FixedWindow } = require('ratekeeper')
const windows = new FixedWindow({ limits: [{ duration: 1000, limit: 10 }, { duration: 60_000, limit: 120 }] })
const { allowed, timeLeft, remaining } = await windows.consume([`ip:${ip}`, `user:${userId}`], { weight: 2 })
return [blocked, millisecondsUntilAllowed, allowed, timeLeft, remaining]
}

/**
 * docs/rolling-rate-limiter.md: The original callback API
 * @param {string} userId
 * @param {import('ioredis').Redis} redisClient
 */
async function callbackApi(userId, redisClient) {
const RateLimiter = require('ratekeeper')
const limiter = RateLimiter({ redis: redisClient, namespace: 'UserLoginLimiter', interval: 1000, maxInInterval: 10, minDifference: 100 })
limiter(userId, (err, timeLeft, actionsLeft) => {
  if (err) { /* redis failed or similar */ }
  else if (timeLeft > 0) { /* limited: wait timeLeft ms */ }
  else { /* allowed */ }
})
const timeLeft = await limiter(userId) // or as a Promise
return timeLeft
}

/**
 * README, Use it: In a worker
 * @param {{ take(): Promise<{ user: string } | null> }} queue
 * @param {(push: { user: string }) => Promise<void>} send
 */
async function workers(queue, send) {
const { RedisRateLimiter } = require('ratekeeper')
const limiter = new RedisRateLimiter({ client: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', namespace: 'push:', interval: 60_000, maxInInterval: 10, minDifference: 1000 })
for (let push; (push = await queue.take()) !== null; ) {
  await limiter.wait(push.user) // resolves once this push may go, counted on the shared Redis
  await send(push)
}
}

/** README, Use it: Express; docs/express.md */
function expressMiddleware() {
const express = require('express')
const { TokenBucket, rateLimit } = require('ratekeeper')

const app = express()
app.set('trust proxy', 1) // one proxy in front: req.ip is the client's address
const limiter = new TokenBucket({ client: process.env.REDIS_URL, capacity: 10, refillAmount: 1, refillInterval: 1000 })

// GET /user costs 1, POST /user 2, from one budget per client; failed requests are given back.
app.use('/user', rateLimit({ limiter, weight: (req) => (req.method === 'POST' ? 2 : 1), skipFailedRequests: true }))
app.get('/user', (req, res) => res.json({ left: req.rateLimit?.remaining })) // Express's Request carries it, typed
}

/**
 * README, Use it: express-rate-limit; docs/express-rate-limit.md
 * @param {import('express').Express} app
 */
function expressRateLimitStore(app) {
const { rateLimit } = require('express-rate-limit')
const { Store } = require('ratekeeper/express-rate-limit')

app.use(rateLimit({ windowMs: 60_000, limit: 100, standardHeaders: 'draft-8',
  store: new Store({ client: 'redis://127.0.0.1:6379' }) })) // was: new RedisStore({ sendCommand })
}

/**
 * docs/algorithms.md: What every limiter answers (reward)
 * @param {import('ratekeeper').Limiter} limiter
 * @param {string} userId
 * @param {{ userId: string }} push
 * @param {(push: { userId: string }) => Promise<{ delivered: boolean }>} send
 */
async function reward(limiter, userId, push, send) {
const answer = await limiter.consume(userId)
if (answer.allowed && !(await send(push)).delivered) await limiter.reward(userId) // not charged
}

/**
 * docs/algorithms.md: Waiting
 * @param {Array<{ userId: string }>} queue
 * @param {AbortSignal} signal
 * @param {(push: { userId: string }) => Promise<void>} send
 */
async function waiting(queue, signal, send) {
const { TokenBucket } = require('ratekeeper')
const perUser = new TokenBucket({ capacity: 5, refillInterval: 60_000 }) // 5 at once, 1 more per minute
for (const push of queue) {
  await perUser.wait(push.userId, { timeoutMs: 10 * 60_000, signal }) // then it is charged
  await send(push)
}
}

/**
 * docs/algorithms.md: Fixed window (several limits)
 * @param {import('express').Request} req
 * @param {string} userId
 */
async function severalLimits(req, userId) {
const { FixedWindow } = require('ratekeeper')
// 10 per second, 120 per minute and 240 per hour, per IP and per user, checked together:
const limiter = new FixedWindow({ client: 'redis://127.0.0.1:6379', limits: [
  { duration: 1000, limit: 10 }, { duration: 60_000, limit: 120 }, { duration: 3_600_000, limit: 240 },
] })
const { allowed, timeLeft } = await limiter.consume([`ip:${req.ip}`, `user:${userId}`])
return [allowed, timeLeft]
}

/**
 * docs/algorithms.md: Without a Promise: the synchronous methods
 * @param {Array<{ userId: string }>} batch
 * @param {(message: { userId: string }) => void} deliver
 */
function synchronous(batch, deliver) {
const { FixedWindow } = require('ratekeeper')
const perUser = new FixedWindow({ limits: [{ duration: 1000, limit: 20 }] })
for (const message of batch) {
  if (perUser.consumeSync(message.userId).allowed) deliver(message)
}
}

/** docs/algorithms.md: Sliding window, Sliding tail, Leaky bucket, Token bucket, GCRA */
function algorithms() {
{
const { SlidingWindow } = require('ratekeeper')
// A burst of 1000 in a second, 5000 in 10 s, 7000 in 15 s:
const limiter = new SlidingWindow({ limits: [
  { duration: 1000, limit: 1000, precision: 100 },
  { duration: 10_000, limit: 5000, precision: 1000 },
  { duration: 15_000, limit: 7000, precision: 1000 },
] })
}
{
const { SlidingTail } = require('ratekeeper')
const limiter = new SlidingTail({ limits: [{ duration: 60_000, limit: 100 }] })
}
{
const { LeakyBucket } = require('ratekeeper')
const limiter = new LeakyBucket({ capacity: 3, leakInterval: 20_000 }) // the seed's: 3, leaking 1 per 20 s
}
{
const { TokenBucket } = require('ratekeeper')
const limiter = new TokenBucket({ capacity: 10, refillAmount: 3, refillInterval: 1000 }) // bursts of 10, then 3 per second
}
{
const { Gcra } = require('ratekeeper')
// CL.THROTTLE user123 15 30 60: 30 per minute, bursts of 16
const limiter = new Gcra({ client: 'redis://127.0.0.1:6379', limit: 30, period: 60_000, burst: 16 })
}
}

/**
 * docs/deployments.md: Deployments: a single node, Sentinel, or a Cluster
 * @param {string} password
 * @param {string} ca
 */
function deployments(password, ca) {
const { RedisStore, FixedWindow } = require('ratekeeper')
// A single node: a URL, an options object, a unix socket, or an ioredis / node-redis client.
const store = new RedisStore({ url: 'rediss://redis.internal:6380', username: 'limiter', password, tls: { ca } })
const local = new RedisStore({ path: '/run/redis/redis.sock' }) // or 'redis+unix:///run/redis/redis.sock'
// Sentinel: the sentinels and the master name; credentials, `db`, `tls` are the data nodes'.
const ha = new RedisStore({ sentinels: [{ host: '10.0.0.1', port: 26379 }, { host: '10.0.0.2', port: 26379 }], name: 'mymaster', password })
const same = new RedisStore('redis+sentinel://:secret@10.0.0.1:26379,10.0.0.2:26379/mymaster') // [/db]; rediss+sentinel:// for TLS
// A Cluster: one or more nodes; the rest are discovered.
const cluster = new RedisStore({ cluster: ['redis://10.0.0.1:7000', 'redis://10.0.0.2:7000'] })
const limiter = new FixedWindow({ client: ha, limits: [{ duration: 60_000, limit: 100 }] })
return [store, local, same, cluster, limiter]
}

/**
 * docs/deployments.md: Hot keys: `blockCache`
 * @param {import('ratekeeper').RedisStore} client
 */
function hotKeys(client) {
const { FixedWindow } = require('ratekeeper')
const limiter = new FixedWindow({ client, blockCache: true, limits: [{ duration: 60_000, limit: 100 }] })
return limiter
}

/**
 * docs/deployments.md: Watching the store
 * @param {import('ratekeeper').RedisStore} store
 * @param {Console} log
 */
function watching(store, log) {
store.on('error', (error) => log.warn(error.message))   // once per outage of a node
store.on('reconnect', ({ node }) => log.info(`Redis at ${node} is back`))
store.stats() // { calls, failures: { ERR_STORE_UNAVAILABLE, ERR_STORE_ERROR, ERR_STORE_CLOSED },
              //   connections, reconnects, scriptLoads, batches, meanBatchSize }
}

/** docs/algorithms.md: Rolling window and sliding log */
async function slidingLog() {
const { SlidingLog } = require('ratekeeper')
const log = new SlidingLog({ interval: 60_000, maxInInterval: 3 })
await log.consume('ip:10.0.0.1', { meta: 'user:alice' })
await log.entries('ip:10.0.0.1') // [{ at: 1515120005000, meta: 'user:alice' }]
}

/**
 * README, Use it: rate-limiter-flexible's API
 * @param {import('ioredis').Redis} redisClient
 * @param {string} ip
 */
async function flexibleApi(redisClient, ip) {
const { RateLimiterRedis } = require('ratekeeper/flexible') // was: require('rate-limiter-flexible')

const limiter = new RateLimiterRedis({ storeClient: redisClient, keyPrefix: 'login', points: 5, duration: 60 })
try {
  const res = await limiter.consume(ip) // res.remainingPoints are left this minute
} catch (refused) {
  if (refused instanceof Error) throw refused // Redis failed
  // refused is a RateLimiterRes: retry in refused.msBeforeNext ms
}
}

module.exports = { example, callbackApi, workers, expressMiddleware, expressRateLimitStore, flexibleApi, reward, waiting, severalLimits, synchronous, algorithms, slidingLog, deployments, hotKeys, watching }
