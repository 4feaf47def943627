// ratekeeper/koa in a Koa app typed with Koa's own types (@types/koa): the functions of the
// options take Koa's `ctx` (its type inferred, or written), the middleware is a `Middleware`
// `app.use` accepts (with a state of the app's own too), and `ctx.state.rateLimit` is typed.
// Compiled by types.test.js under `module: commonjs` and `module: nodenext`.
import Koa = require('koa')
import type { Context, Middleware, Next } from 'koa'
import { TokenBucket, FixedWindow, RateLimitAnswer } from '../..'
import { rateLimit, RateLimitOptions } from '../../koa'

const app = new Koa()
const limiter = new TokenBucket({ capacity: 10, refillAmount: 1, refillInterval: 1000 })

// The snippets of docs/koa.md (run in examples/koa.js) type-check too:
app.use(rateLimit({ limiter, key: (ctx) => ctx.state.user?.id ?? ctx.ip }))
app.use(rateLimit({ limiter, handler: (ctx, next, answer) => { ctx.body = { retryInMs: answer.timeLeft } } }))

app.use(rateLimit({ limiter, weight: (ctx) => (ctx.method === 'POST' ? 2 : 1), skipFailedRequests: true }))
const perUser: RateLimitOptions = {
  limiter: new FixedWindow({ limits: [{ duration: 60_000, limit: 100 }] }),
  key: (ctx: Context) => ctx.get('x-user') || ctx.ip,
  skip: (ctx) => ctx.path === '/health',
  headers: ['draft-8', 'legacy'],
  identifier: (ctx) => `per-user-${ctx.method}`,
  message: (timeLeft, ctx, answer) => ({ timeLeft, path: ctx.path, key: answer.key }),
  statusCode: 503,
  requestPropertyName: 'perUser',
  onError: 'block',
  log: (message, error) => console.error(message, error),
  validate: false,
}
const middleware: Middleware = rateLimit(perUser)
app.use(middleware)
app.use(rateLimit({
  limiter,
  ipv6Subnet: 64,
  handler: async (ctx: Context, next: Next, answer: RateLimitAnswer) => {
    ctx.status = 429
    ctx.body = { retryInMs: answer.timeLeft, key: answer.key }
  },
}))
app.use((ctx) => {
  const answer: RateLimitAnswer | undefined = ctx.state.rateLimit
  const left: number | undefined = ctx.state.rateLimit?.remaining
  ctx.body = { left, key: answer?.key, perUser: ctx.state.perUser }
})

// An app with a state of its own: the options' functions see it.
interface UserState {
  user?: { id: string }
}
const typed = new Koa<UserState>()
typed.use(rateLimit<UserState>({ limiter, key: (ctx) => ctx.state.user?.id ?? ctx.ip, skip: (ctx) => ctx.state.user === undefined }))

// @ts-expect-error a key is an id (a string or a number), not an object
rateLimit({ limiter, key: (ctx) => ctx.headers })
// @ts-expect-error the middleware needs a limiter
rateLimit({ key: (ctx) => ctx.ip })
// @ts-expect-error onError is 'next', 'allow' or 'block'
rateLimit({ limiter, onError: 'throw' })
// @ts-expect-error headers are the modes of the Express middleware
rateLimit({ limiter, headers: 'draft-9' })
// @ts-expect-error express-rate-limit's windowMs is the limiter's business: no option here
rateLimit({ limiter, windowMs: 60_000 })
// @ts-expect-error the state's user is typed
typed.use(rateLimit<UserState>({ limiter, key: (ctx) => ctx.state.user.name }))
// @ts-expect-error remaining is a number
const remainingText: string | undefined = ({} as Context).state.rateLimit?.remaining
void remainingText
