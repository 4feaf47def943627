'use strict'

const RateLimiterRes = require('./RateLimiterRes.js')
const { attempt } = require('../attempt.js')

/**
 * rate-limiter-flexible's BurstyRateLimiter: a steady rate with room for bursts. A consume goes
 * to `rateLimiter`; when it refuses, to `burstLimiter` (usually more points over a longer
 * duration), which allows or refuses it. Either way the answer is `rateLimiter`'s, with
 * `msBeforeNext` the smaller of the two limiters' (`burstLimiter`'s points are not shown). A
 * failure of either (an `Error`) rejects as it is.
 *
 * `points` is `rateLimiter`'s, so that a RateLimiterQueue can take a BurstyRateLimiter.
 *
 * ```js
 * const bursty = new BurstyRateLimiter(
 *   new RateLimiterMemory({ points: 2, duration: 1 }),
 *   new RateLimiterMemory({ keyPrefix: 'burst', points: 5, duration: 10 }),
 * )
 * await bursty.consume(ip) // 2 a second, and 5 more once in 10 seconds
 * ```
 */
class BurstyRateLimiter {
  #rateLimiter
  #burstLimiter

  constructor(rateLimiter, burstLimiter) {
    this.#rateLimiter = rateLimiter
    this.#burstLimiter = burstLimiter
  }

  /** `rateLimiter`'s points. */
  get points() {
    return this.#rateLimiter.points
  }

  /**
   * Consumes `pointsToConsume` of `key` from `rateLimiter`, or, when it refuses, from
   * `burstLimiter`: resolves with `rateLimiter`'s answer, or rejects with it when both refuse.
   */
  consume(key, pointsToConsume = 1, options = {}) {
    return attempt(() => this.#rateLimiter.consume(key, pointsToConsume, options)).catch((rateRefusal) => {
      if (!(rateRefusal instanceof RateLimiterRes)) throw rateRefusal
      return attempt(() => this.#burstLimiter.consume(key, pointsToConsume, options)).then(
        (burstRes) => combined(rateRefusal, burstRes),
        (burstRefusal) => {
          throw burstRefusal instanceof RateLimiterRes ? combined(rateRefusal, burstRefusal) : burstRefusal
        },
      )
    })
  }

  /** `key`'s answer as `consume` gives it, without consuming; null when `rateLimiter` holds nothing for it. */
  get(key) {
    return Promise.all([attempt(() => this.#rateLimiter.get(key)), attempt(() => this.#burstLimiter.get(key))]).then(([rateRes, burstRes]) =>
      combined(rateRes, burstRes),
    )
  }
}

/**
 * `rateRes` with the smaller `msBeforeNext` of the two (0 when `burstRes` is null); null when
 * `rateRes` is.
 */
function combined(rateRes, burstRes) {
  if (!rateRes) return null
  return new RateLimiterRes(
    rateRes.remainingPoints,
    Math.min(rateRes.msBeforeNext, burstRes ? burstRes.msBeforeNext : 0),
    rateRes.consumedPoints,
    rateRes.isFirstInDuration,
  )
}

module.exports = BurstyRateLimiter
