// Compiled by types.test.js with `tsc --noEmit --strict`: the declarations must describe the
// API as the README shows it.
import RateLimiterDefault, {
  RateLimiter,
  InMemoryRateLimiter,
  RedisRateLimiter,
  IORedisRateLimiter,
  NodeRedisRateLimiter,
  RedisStore,
  RateLimitInfo,
  rateLimit,
  FixedWindow,
  SlidingWindow,
  Verdict,
  createRateLimit,
  createClient,
  SlidingLog,
  LogEntry,
  SlidingTail,
  LeakyBucket,
  TokenBucket,
  Gcra,
  WaitOptions,
  RateLimitAnswer,
  RateLimitHeaders,
  RateLimitMiddlewareOptions,
} from '../..'
import { Store as ErlStore, StoreOptions as ErlStoreOptions, ClientRateLimitInfo } from '../../express-rate-limit'

async function main(): Promise<void> {
  const memory = new RateLimiter({ interval: 60_000, maxInInterval: 10, minDifference: 1000 })
  const blocked: boolean = await memory.limit('user', { now: 5 })
  const info: RateLimitInfo = await memory.limitWithInfo(42)
  const wait: number = info.millisecondsUntilAllowed + info.actionsRemaining
  await memory.wouldLimit('user')
  await memory.clear('user')

  const inMemory = new InMemoryRateLimiter({ interval: 1000, maxInInterval: 1, recordBlocked: false })
  const tracked: number = inMemory.trackedIds

  const store: RedisStore = await RedisStore.connect({ host: '127.0.0.1', port: 6380, commandTimeoutMs: 500 })
  const redis = new RedisRateLimiter({ client: store, namespace: 'n:', interval: 1000, maxInInterval: 5, clock: 'local' })
  const io = new IORedisRateLimiter({ client: 'redis://127.0.0.1:6380', interval: 1000, maxInInterval: 5 })
  const node = new NodeRedisRateLimiter({ client: { url: 'redis://127.0.0.1:6380' }, interval: 1000, maxInInterval: 5 })
  const type: string | null = redis.detectedClientType
  await store.close()

  // The callback API.
  const limiter = RateLimiterDefault({ interval: 1000, maxInInterval: 10, redis: 'redis://127.0.0.1:6380' })
  limiter('user', (err, timeLeft, actionsLeft) => {
    if (err) throw err
    console.log(timeLeft, actionsLeft)
  })
  const timeLeft: number | undefined = await limiter('user')
  const sameFunction = RateLimiter({ interval: 1000, maxInInterval: 10 })
  await sameFunction()

  const middleware = rateLimit({ limiter: memory, key: (req) => req.ip, onError: 'allow' })
  console.log(blocked, wait, tracked, io, node, type, timeLeft, middleware)

  const fixed = new FixedWindow({ limits: [{ duration: 1000, limit: 10 }], client: store, clock: 'local' })
  const answer: Verdict = await fixed.consume(['ip', 42], { weight: 2, now: 5 })
  const left: number = answer.timeLeft + answer.remaining + answer.limit + answer.resetAfter
  await fixed.peek('ip')
  await fixed.reset(['ip'])
  const sliding = new SlidingWindow({ limits: [{ duration: 1000, limit: 10, precision: 100 }, { duration: 60_000, limit: 100 }] })
  const slid: Verdict = await sliding.consume('u')
  console.log(left, answer.allowed, slid.allowed)
  // The synchronous twins answer without a Promise.
  const now: Verdict = sliding.consumeSync(['u', 1], { weight: 2, now: 5 })
  const peeked: Verdict = sliding.peekSync('u')
  sliding.rewardSync('u', { weight: 1 })
  const nothing: void = sliding.resetSync('u')
  const syncBlocked: boolean = inMemory.limitSync('u', { now: 5 })
  const syncInfo: RateLimitInfo = inMemory.limitWithInfoSync('u')
  inMemory.clearSync('u')
  // @ts-expect-error the synchronous methods answer at once: no Promise to await
  sliding.consumeSync('u').then(() => {})
  console.log(now, peeked, nothing, syncBlocked, syncInfo)

  const ratelimit = createRateLimit('requests', { bucket_span: 600, client: store })
  ratelimit.add('127.0.0.1')
  ratelimit.count('127.0.0.1', 20, (err, requests) => console.log(err, requests))
  const requests: number = await ratelimit.add('ip', { now: 5 }).count('ip', 20)
  const viaClient = createClient('redis://127.0.0.1:6380', { namespace: 'app' }).createRateLimit('views')
  const both: number = await viaClient.addCount('ip', 60)
  console.log(requests, both)

  const log = new SlidingLog({ interval: 60_000, maxInInterval: 3, client: store })
  const logged: Verdict = await log.consume('ip', { meta: 'user', weight: 2 })
  const who: LogEntry[] = await log.entries('ip')
  console.log(logged, who.map((e) => [e.at, e.meta]))
  // @ts-expect-error a sliding log never records refusals
  new SlidingLog({ interval: 1000, maxInInterval: 1, recordBlocked: true })
  // @ts-expect-error limits are { duration, limit }
  new FixedWindow({ limits: [{ duration: 1000 }] })

  // When things break: fallbacks, Cluster-safe keys, bounded memory, store events and stats, TLS.
  const guarded = new FixedWindow({ client: store, onStoreError: 'memory', hashIds: true, limits: [{ duration: 1000, limit: 5 }] })
  const decided: Verdict = await guarded.consume('u')
  if (decided.reason === 'store-unavailable' && decided.store === 'memory') console.log('Redis is down')
  const bounded = new InMemoryRateLimiter({ interval: 1000, maxInInterval: 5, maxKeys: 100_000 })
  console.log(bounded.trackedIds, bounded.evictedIds, guarded.evictedIds)
  new RedisRateLimiter({ client: store, interval: 1000, maxInInterval: 5, onStoreError: 'allow' })
  createRateLimit('logins', { client: store, onStoreError: 'reject' })
  store.on('error', (error) => console.log(error.code, error.node)).on('reconnect', ({ node }) => console.log(node))
  const stats = store.stats()
  console.log(stats.calls, stats.failures.ERR_STORE_UNAVAILABLE, stats.reconnects, stats.meanBatchSize)
  new RedisStore({ url: 'rediss://10.0.0.5:6380', tls: { ca: ['-----BEGIN CERTIFICATE-----'], servername: 'redis.internal', rejectUnauthorized: true } })
  new RedisStore({ path: '/run/redis/redis.sock', password: 'pw' })
  const ha: RedisStore = new RedisStore({ sentinels: [{ host: '10.0.0.1', port: 26379 }, { host: '10.0.0.2' }], name: 'mymaster', sentinelPassword: 'spw' })
  const haIsSentinel: boolean = ha.isSentinel
  new RedisStore('redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/mymaster')
  // @ts-expect-error a sentinel is { host, port }, not a URL
  new RedisStore({ sentinels: ['redis://10.0.0.1:26379'], name: 'mymaster' })
  // @ts-expect-error onStoreError is one of three policies
  new FixedWindow({ client: store, onStoreError: 'ignore', limits: [{ duration: 1000, limit: 5 }] })
  // @ts-expect-error the store emits 'error' and 'reconnect' only
  store.on('close', () => {})

  // The other limiters, reward and wait.
  const tail = new SlidingTail({ limits: [{ duration: 60_000, limit: 100 }], client: store })
  const leaky = new LeakyBucket({ capacity: 3, leakInterval: 20_000 })
  const tokens = new TokenBucket({ capacity: 10, refillAmount: 3, refillInterval: 1000, initial: 0 })
  const cells = new Gcra({ limit: 30, period: 60_000, burst: 16 })
  const capacity: number = leaky.capacity + tokens.capacity + cells.burst + tail.limits[0].limit
  const given: Verdict = await tokens.reward(['a', 'b'], { weight: 2, now: 5 })
  const controller = new AbortController()
  const options: WaitOptions = { weight: 2, timeoutMs: 60_000, signal: controller.signal }
  const waited: Verdict = await cells.wait('user', options)
  const waitedToo: Verdict = await memory.wait('user', { timeoutMs: 10 })
  await memory.reward('user')
  console.log(capacity, given.remaining, waited.allowed, waitedToo.allowed)
  // @ts-expect-error a token bucket needs its refillInterval
  new TokenBucket({ capacity: 10 })
  // @ts-expect-error capacity is a number
  new LeakyBucket({ capacity: '3', leakInterval: 1000 })
  // @ts-expect-error wait takes no `timeout` (it is `timeoutMs`)
  await cells.wait('user', { timeout: 5 })
  // @ts-expect-error the sliding tail takes `limits`
  new SlidingTail({ duration: 1000, limit: 5 })

  // The middleware's options.
  const modes: RateLimitHeaders[] = ['draft-7', 'legacy', 'x-rate-limit']
  const perRoute: RateLimitMiddlewareOptions = {
    limiter: tokens,
    weight: (req) => (req.method === 'POST' ? 2 : 1),
    headers: modes,
    identifier: 'api',
    skipFailedRequests: true,
    skipSuccessfulRequests: false,
    requestPropertyName: 'quota',
    onError: 'block',
    log: (message, error) => console.warn(message, error),
    validate: false,
  }
  rateLimit(perRoute)
  rateLimit({ limiter: fixed, headers: 'draft-8', ipv6Subnet: 64, message: (timeLeft, req, answer) => ({ timeLeft, key: answer.key }) })
  rateLimit({ limiter: log, headers: false, ipv6Subnet: false, weight: 3, message: 'slow down', statusCode: 503 })
  rateLimit({ limiter: cells, handler: (req, res, next, answer: RateLimitAnswer) => res.status(429).json({ wait: answer.timeLeft }), skip: (req) => req.path === '/health' })
  // @ts-expect-error no such header mode
  rateLimit({ limiter: tokens, headers: 'draft-9' })
  // @ts-expect-error ipv6Subnet is a prefix length or false
  rateLimit({ limiter: tokens, ipv6Subnet: '56' })
  // @ts-expect-error weight is a number or a function of the request
  rateLimit({ limiter: tokens, weight: '2' })
  // @ts-expect-error onError is one of three modes
  rateLimit({ limiter: tokens, onError: 'ignore' })
  // @ts-expect-error express-rate-limit's windowMs is the limiter's
  rateLimit({ limiter: tokens, windowMs: 60_000 })

  // @ts-expect-error maxInInterval is required
  new RateLimiter({ interval: 1000 })
  // @ts-expect-error RedisRateLimiter needs a client
  new RedisRateLimiter({ interval: 1000, maxInInterval: 1 })
}

void main

// ratekeeper/express-rate-limit: a store for express-rate-limit.
async function expressRateLimitStore(): Promise<void> {
  const store = new ErlStore({ client: 'redis://127.0.0.1:6380', prefix: 'rl2:', clock: 'local' })
  store.init({ windowMs: 60_000 })
  const options: ErlStoreOptions = { client: { url: 'redis://127.0.0.1:6380' } }
  const hits: ClientRateLimitInfo = await store.increment('127.0.0.1')
  const resetAt: number = hits.resetTime.getTime()
  const now: ClientRateLimitInfo | undefined = await store.get('127.0.0.1')
  await store.decrement('127.0.0.1')
  await store.resetKey('127.0.0.1')
  const shared: boolean = !store.localKeys && store.prefix === 'rl2:'
  console.log(options, hits.totalHits, resetAt, now, shared)
  // @ts-expect-error the window's length is express-rate-limit's windowMs, not a store option
  new ErlStore({ windowMs: 60_000 })
  // @ts-expect-error init takes express-rate-limit's options, with windowMs
  store.init({})
  // @ts-expect-error prefix is a string
  new ErlStore({ prefix: 1 })
  // @ts-expect-error clock is 'redis' or 'local'
  new ErlStore({ clock: 'server' })
  // @ts-expect-error increment answers `totalHits`, not `remaining`
  console.log((await store.increment('k')).remaining)
}

void expressRateLimitStore
