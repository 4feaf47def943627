'use strict'

/**
 * Express (and Connect, Fastify-compatible `(req, res, next)`) middleware: answers 429 Too Many
 * Requests with the wait time, and sets the standard rate-limit headers on every response. Any
 * limiter with `consume` works: each request consumes one action; refused ones are not counted.
 */

const { typeError, rangeError, checkOptionsObject, checkKnownOptions } = require('./errors.js')

const KNOWN = ['limiter', 'key', 'headers', 'statusCode', 'message', 'onError', 'skip']

function setHeaders(res, answer) {
  res.setHeader('RateLimit-Limit', String(answer.limit))
  res.setHeader('RateLimit-Remaining', String(answer.remaining))
  res.setHeader('RateLimit-Reset', String(Math.ceil(answer.resetAfter / 1000)))
}

/**
 * A refusal's body: `{ text }` for a string, else `{ json }`; a value JSON cannot hold (a BigInt,
 * a cycle, too deep) is a TypeError with `code` (`what` names it).
 */
function serialize(value, what, code) {
  if (typeof value === 'string') return { text: value }
  try {
    const json = JSON.stringify(value)
    if (typeof json !== 'string') throw new TypeError(`JSON.stringify gave ${json}`)
    return { json }
  } catch (cause) {
    const error = typeError(code, `${what} must be a string or a value JSON can hold: ${cause.message}`)
    error.cause = cause
    throw error
  }
}

function defaultMessage(timeLeft) {
  return `Too many requests: you must wait ${timeLeft} ms before you can make requests.`
}

/**
 * See `rateLimit` in index.d.ts.
 */
function rateLimit(options) {
  checkOptionsObject(options, 'rateLimit options')
  checkKnownOptions(options, KNOWN, 'rateLimit options')
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
  if (typeof statusCode !== 'number') throw typeError('ERR_INVALID_OPTION', '`statusCode` must be a number, e.g. 429')
  if (!Number.isInteger(statusCode) || statusCode < 100 || statusCode > 999) {
    throw rangeError('ERR_INVALID_OPTION', `\`statusCode\` must be an HTTP status code (a whole number from 100 to 999), got ${statusCode}`)
  }

  // A fixed message is serialized once, now: one that cannot be is an option error.
  const fixedBody = typeof message === 'function' ? undefined : serialize(message, '`message`', 'ERR_INVALID_OPTION')

  /** Answers a refused request; what the user's `message` throws goes to `next`. */
  function refuse(req, res, next, answer) {
    let body = fixedBody
    try {
      if (!body) body = serialize(message(answer.timeLeft, req), '`message(timeLeft, req)`', 'ERR_INVALID_ARGUMENT')
    } catch (error) {
      return next(error)
    }
    const type = typeof body.text === 'string' ? 'text/plain; charset=utf-8' : 'application/json; charset=utf-8'
    body = body.text ?? body.json
    if (Number.isFinite(answer.timeLeft)) res.setHeader('Retry-After', String(Math.ceil(answer.timeLeft / 1000)))
    res.statusCode = statusCode
    res.setHeader('Content-Type', type)
    res.end(body)
  }

  return function rateLimitMiddleware(req, res, next) {
    let skipped
    let id
    try {
      skipped = Boolean(skip && skip(req))
      if (!skipped) id = key(req)
    } catch (error) {
      return next(error)
    }
    if (skipped) return next()
    // Without an id every request would share the limiter's one global limit: refuse instead.
    if (id === undefined || id === null) {
      return next(typeError('ERR_INVALID_ID', '`key(req)` gave no id (is `req.ip` set? behind a proxy, set Express\'s `trust proxy`)'))
    }
    limiter
      .consume(id)
      .then(
        (answer) => {
          if (headers) setHeaders(res, answer)
          if (answer.allowed) return next()
          return refuse(req, res, next, answer)
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
      // Whatever else throws on the way (a header, the response) goes to Express, never unhandled.
      .catch(next)
  }
}

module.exports = { rateLimit }
