'use strict'

/**
 * Koa middleware (`require('ratekeeper/koa')`) over any limiter with `consume`: the Express
 * middleware's options, headers and answers (middleware.js holds what the two share), with Koa's
 * `ctx` where Express has `req` and `res`. See koa.d.ts for the documentation.
 *
 * Koa is never required here: the middleware only uses the `ctx` Koa gives it.
 */

const { middlewareCore, contentType, UNAVAILABLE_BODY } = require('./middleware.js')

const PREFIX = 'ratekeeper/koa rateLimit:'

/** Koa, as middleware.js needs to know it. */
const KOA = {
  optionsName: 'ratekeeper/koa rateLimit options',
  prefix: PREFIX,
  request: 'ctx',
  handlerShape: '(ctx, next, answer) => void',
  // Koa's ctx.ip is '' when the socket has no address: no id, as Express's undefined req.ip.
  ip: (ctx) => ctx.ip || undefined,
  missingId: '`key(ctx)` gave no id (is `ctx.ip` set? behind a proxy, set `app.proxy` and `app.maxIpsCount`)',
  proxyWarning,
}

/**
 * The warning the first request calls for, if any, when the key is ctx.ip (see `validate`):
 * Koa's `app.proxy` and `app.maxIpsCount` play Express's `trust proxy`.
 */
function proxyWarning(ctx) {
  const app = ctx.app
  if (!app) return undefined
  const header = app.proxyIpHeader || 'X-Forwarded-For'
  if (app.proxy && !(app.maxIpsCount > 0) && header.toLowerCase() === 'x-forwarded-for') {
    return (
      `${PREFIX} Koa's app.proxy is true and app.maxIpsCount is 0, so ctx.ip is whatever the client writes first in X-Forwarded-For: ` +
      'any client can choose its own key and escape the limit. Set app.maxIpsCount to the number of proxies in front of the app ' +
      '(new Koa({ proxy: true, maxIpsCount: 1 })). (validate: false silences this.)'
    )
  }
  if (!app.proxy && typeof ctx.get === 'function' && ctx.get(header)) {
    return (
      `${PREFIX} requests carry an ${header} header but Koa's app.proxy is false, so ctx.ip is the proxy's address ` +
      "and every client shares the proxy's limit. Set new Koa({ proxy: true, maxIpsCount: 1 }) (maxIpsCount: the number of proxies " +
      'in front of the app), or pass a `key`. (validate: false silences this.)'
    )
  }
  return undefined
}

/**
 * `res` as `writeHeaders` uses it, remembering the names of the headers written: Koa's default
 * error handler removes every header of a failed response, and these are given back to it.
 */
function recordingHeaders(res) {
  const names = new Set()
  return {
    names,
    get headersSent() {
      return res.headersSent
    },
    setHeader(name, value) {
      names.add(name)
      res.setHeader(name, value)
    },
    appendHeader(name, value) {
      names.add(name)
      res.appendHeader(name, value)
    },
  }
}

/**
 * Puts the rate-limit headers `names` (as `res` holds them now) in the `headers` of an error
 * thrown downstream, where Koa's default error handler (`ctx.onerror`) takes the headers of an
 * error response from, after removing all others: so that a failed request still tells its
 * client its limit, as under Express. The error's own headers win; the error is left as it is
 * when it is no object or cannot be changed.
 */
function keepRateLimitHeaders(error, res, names) {
  if (names.size === 0 || error === null || typeof error !== 'object') return
  if (error.headers !== undefined && (error.headers === null || typeof error.headers !== 'object')) return
  const kept = {}
  for (const name of names) {
    const value = res.getHeader(name)
    if (value !== undefined) kept[name] = value
  }
  try {
    error.headers = { ...kept, ...error.headers }
  } catch {
    // A frozen error: Koa answers it without our headers.
  }
}

/**
 * See koa.d.ts.
 */
function rateLimit(options) {
  const core = middlewareCore(options, KOA)
  const { limiter, skip, statusCode, handler, requestPropertyName } = core.settings

  /** Answers a refusal (`headers`: where to write its own headers). */
  async function refuse(ctx, next, answer, headers) {
    const retryAfter = core.retryAfterOf(answer)
    if (retryAfter !== null) headers.setHeader('Retry-After', String(retryAfter))
    ctx.status = statusCode
    if (handler) return handler(ctx, next, answer)
    const body = core.refusalBody(ctx, answer, retryAfter)
    ctx.body = body.text ?? body.json
    ctx.set('Content-Type', contentType(body))
  }

  function storeFailed(ctx, next, error) {
    const outcome = core.failureOutcome(error)
    if (outcome === 'next') throw error
    if (outcome === 'allow') return next()
    ctx.status = 503
    ctx.body = UNAVAILABLE_BODY
  }

  return async function rateLimitMiddleware(ctx, next) {
    if (skip && skip(ctx)) return next()
    const { id, weight } = core.identify(ctx)
    // Outside the `try`: what `consume` throws at once (a bad id, not a store failure) goes to Koa as it is, as under Express.
    const consumed = limiter.consume(id, { weight })
    let verdict
    try {
      verdict = await consumed
    } catch (error) {
      return storeFailed(ctx, next, error)
    }
    const answer = core.answerOf(verdict, id)
    ctx.state[requestPropertyName] = answer
    const headers = recordingHeaders(ctx.res)
    try {
      if (answer.allowed && core.refunds) core.watchResponse(ctx.res, id, weight)
      core.writeRateLimitHeaders(ctx, headers, answer)
      if (!answer.allowed) return await refuse(ctx, next, answer, headers)
      await next()
    } catch (error) {
      keepRateLimitHeaders(error, ctx.res, headers.names)
      throw error
    }
  }
}

module.exports = { rateLimit }
