// ratekeeper/hono in a Hono app typed with hono's and hono-rate-limiter's own declarations: the
// Store is what `rateLimiter({ store })` takes, and assignable to hono-rate-limiter's `Store` type
// (for any Env), beside its MemoryStore. Compiled by types.test.js under `module: commonjs` and
// `module: nodenext`.
import { Hono } from 'hono'
import type { Context } from 'hono'
import { rateLimiter, webSocketLimiter, MemoryStore } from 'hono-rate-limiter'
import type { Store as HonoRateLimiterStore, RateLimitInfo, ClientRateLimitInfo as TheirInfo } from 'hono-rate-limiter'
import { RedisStore } from '../..'
import { Store, StoreOptions, ClientRateLimitInfo } from '../../hono'

type Env = { Variables: { rateLimit: RateLimitInfo; user: string } }

// docs/hono.md: usage
const app = new Hono()

app.use(
  rateLimiter({
    windowMs: 60_000, // a window of 1 minute, aligned to the clock
    limit: 100, // hono-rate-limiter refuses the 101st request of a window
    standardHeaders: 'draft-6',
    keyGenerator: (c) => c.req.header('x-api-key') ?? 'anonymous',
    store: new Store({ client: process.env.REDIS_URL }), // in memory when REDIS_URL is unset
  }),
)
// end of docs/hono.md: usage

// docs/hono.md: outage
const store = new Store({
  client: process.env.REDIS_URL,
  prefix: 'myapp:hrl:', // default 'ratekeeper:hrl:'
  onStoreError: 'memory', // while Redis is unavailable, this process counts alone
})
// end of docs/hono.md: outage

// docs/hono.md: redis forms
const onCluster = new Store({ client: { cluster: ['redis://10.0.0.1:7000', 'redis://10.0.0.2:7000'] } })
const behindSentinel = new Store({ client: 'redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/mymaster' })
const withTimeouts = new Store({ client: new RedisStore({ url: 'redis://10.0.0.5:6379', commandTimeoutMs: 500 }) })
// end of docs/hono.md: redis forms

// A typed Env: the store fits any Env's Store type, and the middleware's info is typed.
const typed = new Hono<Env>()
typed.use('/api/*', rateLimiter<Env>({ windowMs: 1000, limit: 5, keyGenerator: (c: Context<Env>) => c.get('user'), store }))
typed.get('/api/me', (c) => c.json({ remaining: c.get('rateLimit').remaining }))

const asTheirs: HonoRateLimiterStore = new Store()
const asTheirsTyped: HonoRateLimiterStore<Env> = new Store({ client: new RedisStore('redis://127.0.0.1:6380'), clock: 'local' })
const sameShape: HonoRateLimiterStore[] = [new MemoryStore(), new Store()]
const options: StoreOptions = { prefix: 'x:', onStoreError: 'allow' }
webSocketLimiter({ windowMs: 1000, limit: 5, keyGenerator: () => 'ws', store: new Store() })

async function answers(): Promise<number> {
  const info: ClientRateLimitInfo = await store.increment('k')
  const theirs: TheirInfo = info
  const maybe = await store.get('k')
  await store.decrement('k')
  await store.resetKey('k')
  return info.totalHits + info.resetTime.getTime() + (maybe?.totalHits ?? 0) + (theirs.resetTime?.getTime() ?? 0)
}

// @ts-expect-error the window's length is hono-rate-limiter's windowMs, not a store option
new Store({ windowMs: 60_000 })
// @ts-expect-error onStoreError is 'reject', 'allow' or 'memory'
new Store({ onStoreError: 'ignore' })
// @ts-expect-error clock is 'redis' or 'local'
new Store({ clock: 'server' })
// @ts-expect-error init takes hono-rate-limiter's options, with windowMs
store.init({})
// @ts-expect-error a key is a string
store.increment(42)
// @ts-expect-error the shape is checked: an object without increment is no store
const notAStore: HonoRateLimiterStore = { decrement() {}, resetKey() {} }

console.log(app, typed, onCluster, behindSentinel, withTimeouts, asTheirs, asTheirsTyped, sameShape, options, answers, notAStore)
