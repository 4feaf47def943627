'use strict'

/**
 * Express (and Connect, Fastify-compatible `(req, res, next)`) middleware: answers 429 Too Many
 * Requests with the wait time, and sets the standard rate-limit headers on every response. Any
 * limiter with `consume` works: each request consumes one action; refused ones are not counted.
 */

const { typeError, checkOptionsObject } = require('./errors.js')

const KNOWN = new Set(['limiter', 'key', 'headers', 'statusCode', 'message', 'onError', 'skip'])

function setHeaders(res, answer) {
  res.setHeader('RateLimit-Limit', String(answer.limit))
  res.setHeader('RateLimit-Remaining', String(answer.remaining))
  res.setHeader('RateLimit-Reset', String(Math.ceil(answer.resetAfter / 1000)))
}

function defaultMessage(timeLeft) {
  return `Too many requests: you must wait ${timeLeft} ms before you can make requests.`
}

/**
 * See `rateLimit` in index.d.ts.
 */
function rateLimit(options) {
  checkOptionsObject(options, 'rateLimit options')
  for (const name of Object.keys(options)) {
    if (!KNOWN.has(name)) {
      throw typeError('ERR_UNKNOWN_OPTION', `unknown option \`${name}\` in rateLimit options; the options are ${[...KNOWN].map((n) => `\`${n}\``).join(', ')}`)
    }
  }
  const {
    limiter,
    key = (req) => req.ip,
    headers = true,
    statusCode = 429,
    message = defaultMessage,
    onError = 'next',
    skip,
  } = options
  if (!limiter || typeof limiter.consume !== 'function') {
    throw typeError('ERR_INVALID_OPTION', '`limiter` must be a rate limiter with `consume` (RateLimiter, FixedWindow, SlidingWindow, ...)')
  }
  if (typeof key !== 'function') throw typeError('ERR_INVALID_OPTION', '`key` must be a function (req) => id')
  if (skip !== undefined && typeof skip !== 'function') throw typeError('ERR_INVALID_OPTION', '`skip` must be a function (req) => boolean')
  if (!['next', 'allow', 'block'].includes(onError)) {
    throw typeError('ERR_INVALID_OPTION', "`onError` must be 'next', 'allow' or 'block'")
  }

  return function rateLimitMiddleware(req, res, next) {
    if (skip && skip(req)) return next()
    let id
    try {
      id = key(req)
    } catch (error) {
      return next(error)
    }
    // Without an id every request would share the limiter's one global limit: refuse instead.
    if (id === undefined || id === null) {
      return next(typeError('ERR_INVALID_ID', '`key(req)` gave no id (is `req.ip` set? behind a proxy, set Express\'s `trust proxy`)'))
    }
    limiter.consume(id).then(
      (answer) => {
        if (headers) setHeaders(res, answer)
        if (answer.allowed) return next()
        if (Number.isFinite(answer.timeLeft)) res.setHeader('Retry-After', String(Math.ceil(answer.timeLeft / 1000)))
        res.statusCode = statusCode
        const body = typeof message === 'function' ? message(answer.timeLeft, req) : message
        if (typeof body === 'string') {
          res.setHeader('Content-Type', 'text/plain; charset=utf-8')
          res.end(body)
        } else {
          res.setHeader('Content-Type', 'application/json; charset=utf-8')
          res.end(JSON.stringify(body))
        }
      },
      (error) => {
        if (onError === 'allow') return next()
        if (onError === 'block') {
          res.statusCode = 503
          return res.end('Rate limiter unavailable')
        }
        return next(error)
      },
    )
  }
}

module.exports = { rateLimit }
