'use strict'

/**
 * Express (and Connect: any `(req, res, next)`) middleware over any limiter with `consume`:
 * each request consumes its weight for its key; refused ones (not counted) get 429 with
 * `Retry-After` and the wait. Sets the rate-limit headers of the modes asked for (see
 * express-headers.js), gives failed or successful requests back on request, and reports
 * misconfigurations and store failures through `log`. See `rateLimit` in index.d.ts.
 *
 * What does not depend on Express (the options, keys, headers, bodies, refunds and failures) is
 * in middleware.js, shared with the Koa middleware (koa.js): this file moves `req` and `res`.
 */

const { middlewareCore, contentType, UNAVAILABLE_BODY } = require('./middleware.js')

const PREFIX = 'ratekeeper rateLimit:'

/** Express, as middleware.js needs to know it. */
const EXPRESS = {
  optionsName: 'rateLimit options',
  prefix: PREFIX,
  request: 'req',
  handlerShape: '(req, res, next, answer) => void',
  ip: (req) => req.ip,
  missingId: "`key(req)` gave no id (is `req.ip` set? behind a proxy, set Express's `trust proxy`)",
  proxyWarning,
}

/** The warning the first request calls for, if any, when the key is req.ip (see `rateLimit`'s `validate`). */
function proxyWarning(req) {
  const trust = typeof req.app?.get === 'function' ? req.app.get('trust proxy') : undefined
  if (trust === true) {
    return (
      `${PREFIX} Express's 'trust proxy' setting is true, so req.ip is whatever the client writes first in X-Forwarded-For: ` +
      "any client can choose its own key and escape the limit. Set it to the number of proxies in front of the app (app.set('trust proxy', 1)) " +
      'or to their addresses. (validate: false silences this.)'
    )
  }
  if (trust === false && req.headers?.['x-forwarded-for']) {
    return (
      `${PREFIX} requests carry an X-Forwarded-For header but Express's 'trust proxy' setting is off, so req.ip is the proxy's address ` +
      "and every client shares the proxy's limit. Set app.set('trust proxy', 1) (the number of proxies in front of the app), " +
      'or pass a `key`. (validate: false silences this.)'
    )
  }
  return undefined
}

/**
 * See `rateLimit` in index.d.ts.
 */
function rateLimit(options) {
  const core = middlewareCore(options, EXPRESS)
  const { limiter, skip, statusCode, handler, requestPropertyName } = core.settings

  function refuse(req, res, next, answer) {
    const retryAfter = core.retryAfterOf(answer)
    if (retryAfter !== null) res.setHeader('Retry-After', String(retryAfter))
    res.statusCode = statusCode
    if (handler) {
      return Promise.resolve()
        .then(() => handler(req, res, next, answer))
        .catch(next)
    }
    let body
    try {
      body = core.refusalBody(req, answer, retryAfter)
    } catch (error) {
      return next(error)
    }
    res.setHeader('Content-Type', contentType(body))
    res.end(body.text ?? body.json)
  }

  function decide(req, res, next, { id, weight }, verdict) {
    const answer = core.answerOf(verdict, id)
    req[requestPropertyName] = answer
    if (answer.allowed) {
      if (core.refunds) core.watchResponse(res, id, weight)
      core.writeRateLimitHeaders(req, res, answer)
      return next()
    }
    core.writeRateLimitHeaders(req, res, answer)
    return refuse(req, res, next, answer)
  }

  function fail(res, next, error) {
    const outcome = core.failureOutcome(error)
    if (outcome === 'next') return next(error)
    if (outcome === 'allow') return next()
    res.statusCode = 503
    res.end(UNAVAILABLE_BODY)
  }

  return function rateLimitMiddleware(req, res, next) {
    let request
    let consumed
    try {
      if (skip && skip(req)) return next()
      request = core.identify(req)
      consumed = limiter.consume(request.id, { weight: request.weight })
    } catch (error) {
      return next(error)
    }
    Promise.resolve(consumed)
      .then(
        (verdict) => decide(req, res, next, request, verdict),
        (error) => fail(res, next, error),
      )
      // Whatever else throws on the way (a header, the response) goes to Express, never unhandled.
      .catch(next)
  }
}

module.exports = { rateLimit }
