'use strict'

const RateLimiterInsuredAbstract = require('./RateLimiterInsuredAbstract.js')
const { isRateLimiterCompatible } = require('./compatible.js')
const { invalidOptionType } = require('./errors.js')
const { attempt } = require('../attempt.js')

/**
 * rate-limiter-flexible's RLWrapperTimeouts: `limiter` with a deadline on every call. A call that
 * `limiter` has not answered within `timeoutMs` rejects with `Error('Operation timed out')`;
 * `limiter`'s late answer is dropped. With an `insuranceLimiter`, the insurance limiter answers
 * such a call instead, and any call that `limiter` fails (a refusal, a RateLimiterRes, still
 * rejects as it is).
 *
 * - `limiter` (required): a limiter of ratekeeper/flexible, or one built on its base classes.
 * - `timeoutMs`: milliseconds (default `0`: Node's shortest timer, 1 ms).
 * - `insuranceLimiter`: default `limiter`'s own, when it has one. As for any insured limiter, it
 *   takes this wrapper's `blockDuration` and `execEvenly` (default `0` and `false`).
 * - `keyPrefix`, `blockDuration`, `execEvenly`: this wrapper's own, as rate-limiter-flexible's
 *   (its `points` and `duration` are 0); the calls go to `limiter` with their key as given.
 *
 * ```js
 * const limiter = new RLWrapperTimeouts({
 *   limiter: new RateLimiterRedis({ storeClient, points: 10, duration: 1 }),
 *   timeoutMs: 50,
 *   insuranceLimiter: new RateLimiterMemory({ points: 2, duration: 1 }),
 * })
 * ```
 */
class RLWrapperTimeouts extends RateLimiterInsuredAbstract {
  #limiter
  #timeoutMs

  constructor(opts = {}) {
    super({ ...opts, points: 0, duration: 0 })
    this.limiter = opts.limiter
    this.timeoutMs = opts.timeoutMs || 0
  }

  get limiter() {
    return this.#limiter
  }

  /** Also takes `limiter`'s `insuranceLimiter` when this wrapper has none. */
  set limiter(limiter) {
    if (!isRateLimiterCompatible(limiter)) {
      throw invalidOptionType('limiter must be an instance of RateLimiterAbstract or RateLimiterCompatibleAbstract')
    }
    this.#limiter = limiter
    if (!this.insuranceLimiter && limiter instanceof RateLimiterInsuredAbstract) this.insuranceLimiter = limiter.insuranceLimiter
  }

  get timeoutMs() {
    return this.#timeoutMs
  }

  set timeoutMs(value) {
    if (typeof value !== 'number' || value < 0) throw invalidOptionType('timeoutMs must be a non-negative number')
    this.#timeoutMs = value
  }

  _consume(key, pointsToConsume = 1, options = {}) {
    return this.#run('consume', [key, pointsToConsume, options])
  }

  _penalty(key, points = 1, options = {}) {
    return this.#run('penalty', [key, points, options])
  }

  _reward(key, points = 1, options = {}) {
    return this.#run('reward', [key, points, options])
  }

  _get(key, options = {}) {
    return this.#run('get', [key, options])
  }

  _set(key, points, secDuration, options = {}) {
    return this.#run('set', [key, points, secDuration, options])
  }

  _block(key, secDuration, options = {}) {
    return this.#run('block', [key, secDuration, options])
  }

  _delete(key, options = {}) {
    return this.#run('delete', [key, options])
  }

  /** `limiter[method](...params)`, or a rejection once `timeoutMs` has passed without its answer. */
  #run(method, params) {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('Operation timed out')), this.timeoutMs)
      attempt(() => this.limiter[method](...params)).then(
        (result) => {
          clearTimeout(timer)
          resolve(result)
        },
        (error) => {
          clearTimeout(timer)
          reject(error)
        },
      )
    })
  }
}

module.exports = RLWrapperTimeouts
