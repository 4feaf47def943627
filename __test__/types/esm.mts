// The package from an ES module under `module: nodenext`, by its name, through package.json's
// `exports`: the default export is the callback API's `RateLimiter`, every documented export is
// importable by name, and the subpath too. Compiled by types.test.js.
import RateLimiter, { RateLimiter as RateLimiterClass, FixedWindow, SlidingWindow, SlidingTail, LeakyBucket, TokenBucket, Gcra, SlidingLog, RedisStore, createRateLimit, rateLimit, type Verdict, type FixedWindowLimit } from 'ratekeeper'
import { Store, type ClientRateLimitInfo } from 'ratekeeper/express-rate-limit'

const limiter = RateLimiter({ interval: 1000, maxInInterval: 10 })
const timeLeft: number | undefined = await limiter('user')
const classic = new RateLimiterClass({ interval: 1000, maxInInterval: 10 })
const limits: FixedWindowLimit[] = [{ duration: 1000, limit: 10 }]
const answers: Verdict[] = await Promise.all([
  new FixedWindow({ limits }).consume('u', { now: 5 }),
  new SlidingWindow({ limits: [{ duration: 1000, limit: 10, precision: 100 }] }).consume('u'),
  new SlidingTail({ limits }).consume('u'),
  new LeakyBucket({ capacity: 3, leakInterval: 1000 }).consume('u'),
  new TokenBucket({ capacity: 3, refillInterval: 1000 }).consume('u'),
  new Gcra({ limit: 3, period: 1000 }).consume('u'),
  new SlidingLog({ interval: 1000, maxInInterval: 3 }).consume('u'),
])
const store = new RedisStore('redis://127.0.0.1:6380')
createRateLimit('requests', { client: store })
rateLimit({ limiter: classic })
const info: ClientRateLimitInfo = await new Store().increment('k')
console.log(timeLeft, answers.map((a) => a.allowed), info.totalHits)

// @ts-expect-error an unknown option
new FixedWindow({ limits, window: 1000 })
// @ts-expect-error limit is a number
new FixedWindow({ limits: [{ duration: 1000, limit: '10' }] })
// @ts-expect-error limits are required
new SlidingWindow({})
// @ts-expect-error the default export is the callback API: maxInInterval is required
RateLimiter({ interval: 1000 })
