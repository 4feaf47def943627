// ratekeeper/koa: Koa middleware over any ratekeeper limiter, on Redis or in memory, with the
// options, headers and answers of ratekeeper's Express middleware (`rateLimit` in index.d.ts).
//
// These declarations use Koa's own types (@types/koa, which a TypeScript Koa app has): the
// functions of the options take Koa's `ctx`, and the middleware is a Koa `Middleware`.

import type { DefaultContext, DefaultState, Middleware, Next, ParameterizedContext } from 'koa'
import type { Id, RateLimitAnswer, RateLimitHeaders, Verdict } from './index'

export type { RateLimitAnswer, RateLimitHeaders }

/**
 * Options of {@link rateLimit}: those of ratekeeper's Express middleware, each function taking
 * Koa's `ctx` where Express's takes `req` (and `handler` being a Koa middleware). Errors:
 * `ERR_INVALID_OPTION` (`TypeError` for a wrong type, `RangeError` out of range) and
 * `ERR_UNKNOWN_OPTION` for a key that is no option, thrown by `rateLimit`.
 */
export interface RateLimitOptions<StateT = DefaultState, ContextT = DefaultContext> {
  /**
   * The limiter to ask: any with `consume` (`RateLimiter`, `SlidingLog`, `FixedWindow`,
   * `SlidingWindow`, `SlidingTail`, `LeakyBucket`, `TokenBucket`, `Gcra`), in memory or on Redis.
   * Each request consumes its `weight`; refused ones are not counted. On Redis, the limiter's
   * `onStoreError` (`'allow'`, `'memory'`) answers while Redis is down; without it, `onError`
   * below decides. Required.
   *
   * ```js
   * const limiter = new TokenBucket({ client: process.env.REDIS_URL, capacity: 5, refillAmount: 1, refillInterval: 2000 })
   * ```
   */
  limiter: { consume(id: Id, options?: { weight?: number }): Promise<Verdict>; reward?(id: Id, options?: { weight?: number }): Promise<unknown> }
  /**
   * The id of a request. Default: `ctx.ip` (Koa's: with `app.proxy`, read from
   * `X-Forwarded-For` within `app.maxIpsCount`), an IPv6 address grouped by its `ipv6Subnet`
   * (`'2001:db8:1:200::/56'`) and an IPv4-mapped one (`::ffff:10.0.0.1`) as its IPv4 address.
   * A request for which it gives `undefined` or `null` (or an empty `ctx.ip`) throws an
   * `ERR_INVALID_ID` error to Koa (it would otherwise share one global limit with every other
   * such request).
   *
   * ```js
   * rateLimit({ limiter, key: (ctx) => ctx.state.user?.id ?? ctx.ip })
   * ```
   */
  key?: (ctx: ParameterizedContext<StateT, ContextT>) => Id
  /**
   * The prefix length by which the default key groups IPv6 addresses (one client commonly holds
   * a /64 or more): a whole number from 32 to 64, or `false` for each address apart. Default
   * `56`. Not with `key` (`ERR_INVALID_OPTION`).
   */
  ipv6Subnet?: number | false
  /**
   * What a request costs: a whole number from 1, or a function of `ctx`. Default `1`. A
   * function giving anything else throws an `ERR_INVALID_ARGUMENT` error to Koa; a weight above
   * the limiter's capacity is refused (429, no `Retry-After`: no wait lets it through).
   *
   * ```js
   * rateLimit({ limiter, weight: (ctx) => (ctx.method === 'POST' ? 2 : 1) })
   * ```
   */
  weight?: number | ((ctx: ParameterizedContext<StateT, ContextT>) => number)
  /**
   * Which rate-limit headers to write on every limited response: one mode, an array of them
   * (`['draft-7', 'legacy']`), or `false` for none; `true` is `'draft-6'`. Default `'draft-7'`.
   * The same headers, byte for byte, as ratekeeper's Express middleware (see
   * `RateLimitHeaders` in index.d.ts): `RateLimit-Policy: 100;w=60` and
   * `RateLimit: limit=100, remaining=99, reset=60` for draft-7. A refusal always reports
   * `remaining` 0 and carries `Retry-After` (seconds, rounded up), whatever this option says.
   * The headers stay on the response of a request that fails downstream (see {@link rateLimit}).
   */
  headers?: RateLimitHeaders | RateLimitHeaders[] | boolean
  /**
   * draft-8's policy name. Default express-rate-limit's: `<limit>-in-<window>` (`100-in-1min`,
   * `10-in-1sec`, `1000-in-1day`).
   */
  identifier?: string | ((ctx: ParameterizedContext<StateT, ContextT>) => string)
  /** Status of a refused request. Default `429`. */
  statusCode?: number
  /**
   * Body of a refused request: a string (sent as `text/plain`), an object (sent as JSON) or a
   * function `(timeLeft, ctx, answer)` giving either. Default: `You must wait <timeLeft> ms
   * before you can make requests.` (whole milliseconds, rounded up), or, when the request's
   * `Accept` ranks JSON above text (`ctx.accepts`), `{ "error": "You must wait ...",
   * "timeLeft": 1234, "retryAfter": 2 }`. What a function throws is thrown to Koa.
   */
  message?: string | object | ((timeLeft: number, ctx: ParameterizedContext<StateT, ContextT>, answer: RateLimitAnswer) => string | object)
  /**
   * Writes the whole refusal instead of `message` (not both): a Koa middleware that also gets
   * the answer, called with the headers and `Retry-After` set and `ctx.status` at `statusCode`,
   * and awaited. What it throws or rejects goes to Koa.
   *
   * ```js
   * rateLimit({ limiter, handler: (ctx, next, answer) => { ctx.body = { retryInMs: answer.timeLeft } } })
   * ```
   */
  handler?: (ctx: ParameterizedContext<StateT, ContextT>, next: Next, answer: RateLimitAnswer) => unknown
  /** Requests for which this returns true are not limited (nor counted, nor given headers). */
  skip?: (ctx: ParameterizedContext<StateT, ContextT>) => boolean
  /**
   * Give a failed request's weight back (`limiter.reward`) once its response is done: a status
   * of 400 or more (set downstream as `ctx.status`, or Koa's answer to an error thrown
   * downstream: `err.status`, else 500), a connection closed before the response ended, or a
   * response error. Only allowed requests were charged, so only they are given back. Default
   * `false`. Needs a limiter with `reward`.
   */
  skipFailedRequests?: boolean
  /** Give a successful request's weight back (a status below 400) once its response is done. Default `false`. */
  skipSuccessfulRequests?: boolean
  /**
   * Where the answer goes on Koa's state: `ctx.state[requestPropertyName]`. Default
   * `'rateLimit'` (`ctx.state.rateLimit`, typed on Koa's `DefaultState`).
   */
  requestPropertyName?: string
  /**
   * When the limiter fails (Redis down and no `onStoreError` on the limiter): `'next'` throws the
   * error to Koa (default; Express's "pass it to next"), `'allow'` lets the request through
   * (fail open), `'block'` answers 503 `Rate limiter unavailable` (fail closed); with `'allow'`
   * and `'block'` the failure goes to `log` at most once a minute. Errors of the request itself
   * (an invalid key or weight: `ERR_INVALID_ID`, `ERR_INVALID_ARGUMENT`) are always thrown, so
   * that no client escapes the limit with a bad id.
   */
  onError?: 'next' | 'allow' | 'block'
  /**
   * Where warnings go: the startup checks (`validate`) as `log(message)`, store failures as
   * `log(message, error)`. Default `console.warn`.
   */
  log?: (message: string, error?: unknown) => void
  /**
   * Check Koa's proxy settings on the first request, when the key is the default one, and warn
   * through `log`: when requests carry `X-Forwarded-For` (Koa's `app.proxyIpHeader`) but
   * `app.proxy` is false (every client shares the proxy's limit), and when `app.proxy` is true
   * with `app.maxIpsCount` 0 (any client chooses its own key). Each warning names the fix
   * (`new Koa({ proxy: true, maxIpsCount: 1 })` behind one proxy). Default `true`; `false`
   * silences them.
   */
  validate?: boolean
}

/**
 * Koa middleware: each request consumes its weight for its key; a refused one gets 429 with
 * `Retry-After` (seconds) and the wait in its body, and goes no further down the chain. Every
 * limited response carries the rate-limit headers chosen (IETF draft-7 by default), and
 * `ctx.state.rateLimit` holds the answer (`allowed`, `timeLeft`, `remaining`, `limit`,
 * `resetAfter`, and `key`).
 *
 * When a request allowed through fails downstream (an error thrown), the error goes on to Koa
 * with the rate-limit headers added to its `headers` (its own win), which Koa's default error
 * handler sends (it removes all others). With `skipFailedRequests`, its weight is given back.
 *
 * ```js
 * const Koa = require('koa')
 * const { TokenBucket } = require('ratekeeper')
 * const { rateLimit } = require('ratekeeper/koa')
 *
 * const app = new Koa() // behind one proxy: new Koa({ proxy: true, maxIpsCount: 1 })
 * const limiter = new TokenBucket({ client: process.env.REDIS_URL, capacity: 5, refillAmount: 1, refillInterval: 2000 })
 * app.use(rateLimit({ limiter, weight: (ctx) => (ctx.method === 'POST' ? 2 : 1), skipFailedRequests: true }))
 * ```
 */
export function rateLimit<StateT = DefaultState, ContextT = DefaultContext>(options: RateLimitOptions<StateT, ContextT>): Middleware<StateT, ContextT>

declare module 'koa' {
  interface DefaultState {
    /**
     * The answer of ratekeeper's Koa `rateLimit` middleware for this request (`allowed`,
     * `timeLeft`, `remaining`, `limit`, `resetAfter`, and `key`), under its default
     * `requestPropertyName`; `undefined` where the middleware does not run.
     *
     * ```js
     * ctx.body = { hello: 'world', left: ctx.state.rateLimit?.remaining }
     * ```
     */
    rateLimit?: RateLimitAnswer
  }
}
