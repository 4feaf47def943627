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
} from '../..'

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
  // @ts-expect-error onStoreError is one of three policies
  new FixedWindow({ client: store, onStoreError: 'ignore', limits: [{ duration: 1000, limit: 5 }] })
  // @ts-expect-error the store emits 'error' and 'reconnect' only
  store.on('close', () => {})

  // @ts-expect-error maxInInterval is required
  new RateLimiter({ interval: 1000 })
  // @ts-expect-error RedisRateLimiter needs a client
  new RedisRateLimiter({ interval: 1000, maxInInterval: 1 })
}

void main
