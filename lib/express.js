'use strict'

/**
 * Express (and Connect: any `(req, res, next)`) middleware over any limiter with `consume`:
 * each request consumes its weight for its key; refused ones (not counted) get 429 with
 * `Retry-After` and the wait. Sets the rate-limit headers of the modes asked for (see
 * express-headers.js), gives failed or successful requests back on request, and reports
 * misconfigurations and store failures through `log`. See `rateLimit` in index.d.ts.
 */

const { typeError, rangeError, shown, checkOptionsObject, checkKnownOptions } = require('./errors.js')
const { headerModes, policyWindow, policyName, writeHeaders } = require('./express-headers.js')
const { ipKey } = require('./express-keys.js')

const KNOWN = [
  'limiter',
  'key',
  'ipv6Subnet',
  'weight',
  'headers',
  'identifier',
  'statusCode',
  'message',
  'handler',
  'skip',
  'skipFailedRequests',
  'skipSuccessfulRequests',
  'requestPropertyName',
  'onError',
  'log',
  'validate',
]

/** Store failures are reported at most this often (ms). */
const REPORT_EVERY_MS = 60_000

/** Errors of the request itself (its key or weight): always Express's, whatever `onError` says. */
const REQUEST_ERRORS = new Set(['ERR_INVALID_ID', 'ERR_INVALID_ARGUMENT'])

const PREFIX = 'ratekeeper rateLimit:'

/** Reads and checks the options; returns them with defaults filled in. */
function readOptions(options) {
  checkOptionsObject(options, 'rateLimit options')
  checkKnownOptions(options, KNOWN, 'rateLimit options')
  const {
    limiter,
    key,
    ipv6Subnet = 56,
    weight = 1,
    headers = 'draft-7',
    identifier,
    statusCode = 429,
    message,
    handler,
    skip,
    skipFailedRequests = false,
    skipSuccessfulRequests = false,
    requestPropertyName = 'rateLimit',
    onError = 'next',
    log = (...args) => console.warn(...args),
    validate = true,
  } = options
  if (!limiter || typeof limiter.consume !== 'function') {
    throw typeError('ERR_INVALID_OPTION', '`limiter` must be a rate limiter with `consume` (RateLimiter, FixedWindow, TokenBucket, ...)')
  }
  checkFunction(key, 'key', '(req) => id')
  if (key !== undefined && options.ipv6Subnet !== undefined) {
    throw typeError('ERR_INVALID_OPTION', '`ipv6Subnet` groups the default key (req.ip) only: with your own `key`, group IPv6 addresses in it')
  }
  if (ipv6Subnet !== false && (typeof ipv6Subnet !== 'number' || !Number.isInteger(ipv6Subnet) || ipv6Subnet < 32 || ipv6Subnet > 64)) {
    throw invalid(typeof ipv6Subnet === 'number', `\`ipv6Subnet\` must be false or a whole number from 32 to 64 (usually 48 to 64), got ${shown(ipv6Subnet)}`)
  }
  if (typeof weight !== 'function' && !isWeight(weight)) {
    throw invalid(typeof weight === 'number', `\`weight\` must be a whole number from 1 or a function (req) => weight, got ${shown(weight)}`)
  }
  if (identifier !== undefined && typeof identifier !== 'function' && (typeof identifier !== 'string' || identifier === '')) {
    throw typeError('ERR_INVALID_OPTION', '`identifier` must be a non-empty string or a function (req) => string')
  }
  if (typeof statusCode !== 'number') throw typeError('ERR_INVALID_OPTION', '`statusCode` must be a number, e.g. 429')
  if (!Number.isInteger(statusCode) || statusCode < 100 || statusCode > 999) {
    throw rangeError('ERR_INVALID_OPTION', `\`statusCode\` must be an HTTP status code (a whole number from 100 to 999), got ${shown(statusCode)}`)
  }
  checkFunction(handler, 'handler', '(req, res, next, answer) => void')
  if (handler !== undefined && message !== undefined) {
    throw typeError('ERR_INVALID_OPTION', '`message` and `handler` exclude each other: `handler` writes the whole refusal')
  }
  checkFunction(skip, 'skip', '(req) => boolean')
  checkBoolean(skipFailedRequests, 'skipFailedRequests')
  checkBoolean(skipSuccessfulRequests, 'skipSuccessfulRequests')
  if ((skipFailedRequests || skipSuccessfulRequests) && typeof limiter.reward !== 'function') {
    throw typeError('ERR_INVALID_OPTION', '`skipFailedRequests` and `skipSuccessfulRequests` need a limiter with `reward`')
  }
  if (typeof requestPropertyName !== 'string' || requestPropertyName === '') {
    throw typeError('ERR_INVALID_OPTION', '`requestPropertyName` must be a non-empty string')
  }
  if (!['next', 'allow', 'block'].includes(onError)) {
    throw typeError('ERR_INVALID_OPTION', "`onError` must be 'next', 'allow' or 'block'")
  }
  checkFunction(log, 'log', '(message, error) => void')
  checkBoolean(validate, 'validate')
  return {
    limiter,
    key,
    ipv6Subnet,
    weight,
    modes: headerModes(headers),
    identifier,
    statusCode,
    // A fixed message is serialized once, now: one that cannot be is an option error.
    message: message === undefined || typeof message === 'function' ? message : serialize(message, '`message`', 'ERR_INVALID_OPTION'),
    handler,
    skip,
    skipFailedRequests,
    skipSuccessfulRequests,
    requestPropertyName,
    onError,
    log,
    validate,
  }
}

function invalid(isRange, text) {
  return isRange ? rangeError('ERR_INVALID_OPTION', text) : typeError('ERR_INVALID_OPTION', text)
}

function checkFunction(value, name, shape) {
  if (value !== undefined && typeof value !== 'function') throw typeError('ERR_INVALID_OPTION', `\`${name}\` must be a function ${shape}`)
}

function checkBoolean(value, name) {
  if (typeof value !== 'boolean') throw typeError('ERR_INVALID_OPTION', `\`${name}\` must be true or false`)
}

const isWeight = (value) => Number.isSafeInteger(value) && value >= 1

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

/**
 * The default refusal: the seed's sentence, or `{ error, timeLeft, retryAfter }` as JSON when the
 * request's Accept header ranks JSON above text. A weight that can never pass has no wait (`null`).
 */
function defaultBody(req, answer, retryAfter) {
  const timeLeft = Number.isFinite(answer.timeLeft) ? Math.ceil(answer.timeLeft) : null
  const error =
    timeLeft === null
      ? `This request can never be allowed: it costs more than the limit of ${answer.limit}.`
      : `You must wait ${timeLeft} ms before you can make requests.`
  if (prefersJson(req)) return { json: JSON.stringify({ error, timeLeft, retryAfter }) }
  return { text: error }
}

/**
 * Whether the request's Accept header ranks JSON above text (Express's `req.accepts`: by quality,
 * then the client's order); any type, no Accept header, or neither: text.
 */
function prefersJson(req) {
  return typeof req.accepts === 'function' && req.accepts(['text', 'json']) === 'json'
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
 * `report(what, error)`: logs a limiter failure, at most once per REPORT_EVERY_MS (counting the
 * ones it kept quiet), so that an outage is one line a minute and not one per request.
 */
function failureReporter(log) {
  let lastReport = -Infinity
  let unreported = 0
  return function report(what, error) {
    const now = Date.now()
    if (now - lastReport < REPORT_EVERY_MS) {
      unreported++
      return
    }
    const more = unreported > 0 ? ` (${unreported} more failures since the last report)` : ''
    lastReport = now
    unreported = 0
    log(`${PREFIX} the limiter failed (${error?.code ?? error}): ${what}${more}. Reported at most once a minute.`, error)
  }
}

/**
 * See `rateLimit` in index.d.ts.
 */
function rateLimit(options) {
  const settings = readOptions(options)
  const { limiter, modes, statusCode, onError, log, requestPropertyName } = settings
  const windowOf = policyWindow(limiter)
  const refunds = settings.skipFailedRequests || settings.skipSuccessfulRequests
  const keyOf = settings.key ?? ((req) => ipKey(req.ip, settings.ipv6Subnet))
  const weightOf = typeof settings.weight === 'function' ? settings.weight : () => settings.weight
  let checked = !settings.validate || settings.key !== undefined
  const reportFailure = failureReporter(log)

  /** The key and weight of a request, or an error for Express. */
  function identify(req) {
    if (!checked) {
      checked = true
      const warning = proxyWarning(req)
      if (warning) log(warning)
    }
    const id = keyOf(req)
    // Without an id every request would share the limiter's one global limit: refuse instead.
    if (id === undefined || id === null) {
      throw typeError('ERR_INVALID_ID', "`key(req)` gave no id (is `req.ip` set? behind a proxy, set Express's `trust proxy`)")
    }
    const weight = weightOf(req)
    if (!isWeight(weight)) throw rangeError('ERR_INVALID_ARGUMENT', `\`weight(req)\` must give a whole number from 1, got ${shown(weight)}`)
    return { id, weight }
  }

  function setHeaders(req, res, answer, id, remaining, resetAfter) {
    if (modes.length === 0 || res.headersSent) return
    const windowMs = windowOf(answer)
    const name = () => {
      if (settings.identifier === undefined) return policyName(answer.limit, windowMs)
      return typeof settings.identifier === 'function' ? String(settings.identifier(req)) : settings.identifier
    }
    writeHeaders(res, modes, { limit: answer.limit, remaining, resetAfter, windowMs, key: id, name })
  }

  /** Gives the weight back once the response shows that the request is not to be charged. */
  function watchResponse(res, id, weight) {
    let given = false
    const giveBack = () => {
      if (given) return
      given = true
      Promise.resolve()
        .then(() => limiter.reward(id, { weight }))
        .catch((error) => reportFailure('a request was not given back', error))
    }
    res.once('finish', () => {
      const failed = res.statusCode >= 400
      if (failed ? settings.skipFailedRequests : settings.skipSuccessfulRequests) giveBack()
    })
    if (settings.skipFailedRequests) {
      // As express-rate-limit: a connection closed before the response ended, or a response error, failed.
      res.once('close', () => {
        if (!res.writableEnded) giveBack()
      })
      res.once('error', giveBack)
    }
  }

  function refuse(req, res, next, answer) {
    const retryAfter = Number.isFinite(answer.timeLeft) ? Math.ceil(answer.timeLeft / 1000) : null
    if (retryAfter !== null) res.setHeader('Retry-After', String(retryAfter))
    res.statusCode = statusCode
    if (settings.handler) {
      return Promise.resolve()
        .then(() => settings.handler(req, res, next, answer))
        .catch(next)
    }
    let body
    try {
      const { message } = settings
      if (message === undefined) body = defaultBody(req, answer, retryAfter)
      else if (typeof message === 'function') body = serialize(message(answer.timeLeft, req, answer), '`message(timeLeft, req)`', 'ERR_INVALID_ARGUMENT')
      else body = message
    } catch (error) {
      return next(error)
    }
    res.setHeader('Content-Type', body.text === undefined ? 'application/json; charset=utf-8' : 'text/plain; charset=utf-8')
    res.end(body.text ?? body.json)
  }

  function decide(req, res, next, id, weight, verdict) {
    const answer = { ...verdict, key: id }
    req[requestPropertyName] = answer
    if (answer.allowed) {
      if (refunds) watchResponse(res, id, weight)
      setHeaders(req, res, answer, id, answer.remaining, answer.resetAfter)
      return next()
    }
    // A refusal reports no capacity left, and a reset no earlier than its Retry-After.
    const resetAfter = Number.isFinite(answer.timeLeft) ? Math.max(answer.resetAfter, answer.timeLeft) : answer.resetAfter
    setHeaders(req, res, answer, id, 0, resetAfter)
    return refuse(req, res, next, answer)
  }

  function fail(res, next, error) {
    if (REQUEST_ERRORS.has(error?.code) || onError === 'next') return next(error)
    if (onError === 'allow') {
      reportFailure('requests are let through unchecked', error)
      return next()
    }
    reportFailure('requests are refused with 503', error)
    res.statusCode = 503
    res.end('Rate limiter unavailable')
  }

  return function rateLimitMiddleware(req, res, next) {
    let request
    let consumed
    try {
      if (settings.skip && settings.skip(req)) return next()
      request = identify(req)
      consumed = limiter.consume(request.id, { weight: request.weight })
    } catch (error) {
      return next(error)
    }
    Promise.resolve(consumed)
      .then(
        (verdict) => decide(req, res, next, request.id, request.weight, verdict),
        (error) => fail(res, next, error),
      )
      // Whatever else throws on the way (a header, the response) goes to Express, never unhandled.
      .catch(next)
  }
}

module.exports = { rateLimit }
