'use strict'

/**
 * What ratekeeper's middlewares share, whatever the framework (Express: express.js, Koa: koa.js):
 * the options and their checks, a request's key and weight, the rate-limit headers of an answer
 * (express-headers.js), the refusal's body, the refunds of skipFailedRequests /
 * skipSuccessfulRequests, and what a store failure leads to. The adapters only move requests and
 * responses: they call `middlewareCore(options, framework)` with their request object (Express's
 * `req`, Koa's `ctx`) and its Node response.
 *
 * `framework` describes the adapter, for the checks and the messages:
 * - `optionsName`: how errors name the options object (`'rateLimit options'`);
 * - `prefix`: what starts every line given to `log` (`'ratekeeper rateLimit:'`);
 * - `request`: how messages name the request object (`'req'`, `'ctx'`);
 * - `handlerShape`: the `handler` option's signature, for its error message;
 * - `ip(request)`: the client's address, the default key before IPv6 grouping;
 * - `missingId`: the message of a request without an id;
 * - `proxyWarning(request)`: the warning `validate` asks for on the first request, or undefined.
 */

const { typeError, rangeError, shown, checkOptionsObject, checkKnownOptions } = require('./errors.js')
const { headerModes, policyWindow, policyName, writeHeaders } = require('./express-headers.js')
const { ipKey } = require('./express-keys.js')

/**
 * Whether the request's Accept header ranks JSON above text (`accepts`, the same package on
 * Express's `req` and Koa's `ctx`: by quality, then the client's order); any type, no Accept
 * header, or neither: text.
 */
function prefersJson(request) {
  return typeof request.accepts === 'function' && request.accepts(['text', 'json']) === 'json'
}

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

/** Errors of the request itself (its key or weight): always the framework's, whatever `onError` says. */
const REQUEST_ERRORS = new Set(['ERR_INVALID_ID', 'ERR_INVALID_ARGUMENT'])

/** The body of `onError: 'block'`'s 503. */
const UNAVAILABLE_BODY = 'Rate limiter unavailable'

/** Reads and checks the options; returns them with defaults filled in. */
function readOptions(options, framework) {
  const context = framework.optionsName
  const r = framework.request
  checkOptionsObject(options, context)
  checkKnownOptions(options, KNOWN, context)
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
  checkFunction(key, 'key', `(${r}) => id`)
  if (key !== undefined && options.ipv6Subnet !== undefined) {
    throw typeError('ERR_INVALID_OPTION', `\`ipv6Subnet\` groups the default key (${r}.ip) only: with your own \`key\`, group IPv6 addresses in it`)
  }
  if (ipv6Subnet !== false && (typeof ipv6Subnet !== 'number' || !Number.isInteger(ipv6Subnet) || ipv6Subnet < 32 || ipv6Subnet > 64)) {
    throw invalid(typeof ipv6Subnet === 'number', `\`ipv6Subnet\` must be false or a whole number from 32 to 64 (usually 48 to 64), got ${shown(ipv6Subnet)}`)
  }
  if (typeof weight !== 'function' && !isWeight(weight)) {
    throw invalid(typeof weight === 'number', `\`weight\` must be a whole number from 1 or a function (${r}) => weight, got ${shown(weight)}`)
  }
  if (identifier !== undefined && typeof identifier !== 'function' && (typeof identifier !== 'string' || identifier === '')) {
    throw typeError('ERR_INVALID_OPTION', `\`identifier\` must be a non-empty string or a function (${r}) => string`)
  }
  if (typeof statusCode !== 'number') throw typeError('ERR_INVALID_OPTION', '`statusCode` must be a number, e.g. 429')
  if (!Number.isInteger(statusCode) || statusCode < 100 || statusCode > 999) {
    throw rangeError('ERR_INVALID_OPTION', `\`statusCode\` must be an HTTP status code (a whole number from 100 to 999), got ${shown(statusCode)}`)
  }
  checkFunction(handler, 'handler', framework.handlerShape)
  if (handler !== undefined && message !== undefined) {
    throw typeError('ERR_INVALID_OPTION', '`message` and `handler` exclude each other: `handler` writes the whole refusal')
  }
  checkFunction(skip, 'skip', `(${r}) => boolean`)
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

/** The Content-Type of a body made by `serialize`. */
const contentType = (body) => (body.text === undefined ? 'application/json; charset=utf-8' : 'text/plain; charset=utf-8')

/**
 * The default refusal: the seed's sentence, or `{ error, timeLeft, retryAfter }` as JSON when the
 * client prefers JSON. A weight that can never pass has no wait (`null`).
 */
function defaultBody(answer, retryAfter, json) {
  const timeLeft = Number.isFinite(answer.timeLeft) ? Math.ceil(answer.timeLeft) : null
  const error =
    timeLeft === null
      ? `This request can never be allowed: it costs more than the limit of ${answer.limit}.`
      : `You must wait ${timeLeft} ms before you can make requests.`
  if (json) return { json: JSON.stringify({ error, timeLeft, retryAfter }) }
  return { text: error }
}

/**
 * `report(what, error)`: logs a limiter failure, at most once per REPORT_EVERY_MS (counting the
 * ones it kept quiet), so that an outage is one line a minute and not one per request.
 */
function failureReporter(log, prefix) {
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
    log(`${prefix} the limiter failed (${error?.code ?? error}): ${what}${more}. Reported at most once a minute.`, error)
  }
}

/**
 * The steps of one middleware built from `options`, for the adapter of `framework` (see above).
 * `request` is the framework's request object, `res` the Node response.
 */
function middlewareCore(options, framework) {
  const settings = readOptions(options, framework)
  const { limiter, modes, onError } = settings
  const r = framework.request
  const windowOf = policyWindow(limiter)
  const keyOf = settings.key ?? ((request) => ipKey(framework.ip(request), settings.ipv6Subnet))
  const weightOf = typeof settings.weight === 'function' ? settings.weight : () => settings.weight
  let checked = !settings.validate || settings.key !== undefined
  const reportFailure = failureReporter(settings.log, framework.prefix)

  /** The key and weight of a request; a TypeError or RangeError with `code` for a bad one. */
  function identify(request) {
    if (!checked) {
      checked = true
      const warning = framework.proxyWarning(request)
      if (warning) settings.log(warning)
    }
    const id = keyOf(request)
    // Without an id every request would share the limiter's one global limit: refuse instead.
    if (id === undefined || id === null) throw typeError('ERR_INVALID_ID', framework.missingId)
    const weight = weightOf(request)
    if (!isWeight(weight)) throw rangeError('ERR_INVALID_ARGUMENT', `\`weight(${r})\` must give a whole number from 1, got ${shown(weight)}`)
    return { id, weight }
  }

  /** The limiter's answer as the request sees it: the verdict and the key it was asked for. */
  const answerOf = (verdict, id) => ({ ...verdict, key: id })

  /** Writes the rate-limit headers of `answer` on `res` (anything with `setHeader` and `appendHeader`). */
  function writeRateLimitHeaders(request, res, answer) {
    if (modes.length === 0 || res.headersSent) return
    // A refusal reports no capacity left, and a reset no earlier than its Retry-After.
    const refusedWithWait = !answer.allowed && Number.isFinite(answer.timeLeft)
    const windowMs = windowOf(answer)
    const name = () => {
      if (settings.identifier === undefined) return policyName(answer.limit, windowMs)
      return typeof settings.identifier === 'function' ? String(settings.identifier(request)) : settings.identifier
    }
    writeHeaders(res, modes, {
      limit: answer.limit,
      remaining: answer.allowed ? answer.remaining : 0,
      resetAfter: refusedWithWait ? Math.max(answer.resetAfter, answer.timeLeft) : answer.resetAfter,
      windowMs,
      key: answer.key,
      name,
    })
  }

  /** A refusal's Retry-After in seconds (rounded up), or null when no wait lets it through. */
  const retryAfterOf = (answer) => (Number.isFinite(answer.timeLeft) ? Math.ceil(answer.timeLeft / 1000) : null)

  /**
   * The body of a refusal without `handler`: `{ text }` or `{ json }` (see `contentType`). What a
   * `message` function throws, or gives that JSON cannot hold, is thrown for the framework.
   */
  function refusalBody(request, answer, retryAfter) {
    const { message } = settings
    if (message === undefined) return defaultBody(answer, retryAfter, prefersJson(request))
    if (typeof message === 'function') return serialize(message(answer.timeLeft, request, answer), `\`message(timeLeft, ${r})\``, 'ERR_INVALID_ARGUMENT')
    return message
  }

  /** Gives the weight back once the response `res` shows that the request is not to be charged. */
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

  /**
   * What the limiter's failure (a rejected `consume`) leads to: `'next'` (the error goes to the
   * framework), `'allow'` or `'block'` (503), the last two reported through `log`.
   */
  function failureOutcome(error) {
    if (REQUEST_ERRORS.has(error?.code) || onError === 'next') return 'next'
    reportFailure(onError === 'allow' ? 'requests are let through unchecked' : 'requests are refused with 503', error)
    return onError
  }

  return {
    settings,
    refunds: settings.skipFailedRequests || settings.skipSuccessfulRequests,
    identify,
    answerOf,
    writeRateLimitHeaders,
    retryAfterOf,
    refusalBody,
    watchResponse,
    failureOutcome,
  }
}

module.exports = { middlewareCore, contentType, UNAVAILABLE_BODY }
