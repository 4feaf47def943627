'use strict'

/**
 * What RateLimiterQueue's `removeTokens` rejects with when it cannot take a request: more tokens
 * asked for than the limiter's `points`, a key's queue full (`maxQueueSize`), or a request still
 * waiting at its `expiresUnixAt`. An `Error` with rate-limiter-flexible's fields, for apps that
 * match them: `name` (`'CustomError'`, as rate-limiter-flexible names it), `message` and, when
 * given, `extra`.
 *
 * ```js
 * queue.removeTokens(1).catch((error) => {
 *   if (error instanceof RateLimiterQueueError) return tooBusy(error.message)
 *   throw error
 * })
 * ```
 */
class RateLimiterQueueError extends Error {
  constructor(message, extra) {
    super()
    if (Error.captureStackTrace) Error.captureStackTrace(this, this.constructor)
    // Own, enumerable fields, as rate-limiter-flexible sets them (JSON.stringify(error) shows them).
    this.name = 'CustomError'
    this.message = message
    if (extra) this.extra = extra
  }
}

module.exports = RateLimiterQueueError
