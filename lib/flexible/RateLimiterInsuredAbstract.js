'use strict'

const RateLimiterAbstract = require('./RateLimiterAbstract.js')
const RateLimiterRes = require('./RateLimiterRes.js')
const { abstractMethods, LIMITER_METHODS } = require('./RateLimiterCompatibleAbstract.js')
const { isRateLimiterCompatible } = require('./compatible.js')
const { invalidOptionType } = require('./errors.js')

/**
 * A limiter with an `insuranceLimiter`: when a call fails for any reason but a key over its
 * points (the store unavailable, a timeout), the insurance limiter answers it instead. It takes
 * the limiter's `blockDuration` and `execEvenly`. Subclasses give `_consume`, `_penalty`,
 * `_reward`, `_get`, `_set`, `_block` and `_delete`.
 */
class RateLimiterInsuredAbstract extends RateLimiterAbstract {
  #insuranceLimiter

  constructor(opts = {}) {
    super(opts)
    this.insuranceLimiter = opts.insuranceLimiter
  }

  get insuranceLimiter() {
    return this.#insuranceLimiter
  }

  set insuranceLimiter(value) {
    if (value !== undefined && !isRateLimiterCompatible(value)) {
      throw invalidOptionType('insuranceLimiter must be instance of RateLimiterAbstract or RateLimiterCompatibleAbstract')
    }
    this.#insuranceLimiter = value
    if (value) {
      value.blockDuration = this.blockDuration
      value.execEvenly = this.execEvenly
    }
  }

  /** Settles a failed call: a RateLimiterRes rejects as it is; any other failure goes to the insurance limiter, if any. */
  _handleError(err, funcName, resolve, reject, params) {
    if (err instanceof RateLimiterRes || !isRateLimiterCompatible(this.#insuranceLimiter)) {
      reject(err)
      return
    }
    this.#insuranceLimiter[funcName](...params).then(resolve, reject)
  }

  /** Runs `this[funcName](...params)`; its failure goes through `_handleError`. */
  _operation(funcName, params) {
    return new Promise((resolve, reject) => {
      let promise
      try {
        promise = this[funcName](...params)
      } catch (error) {
        promise = Promise.reject(error)
      }
      promise.then(resolve, (err) => this._handleError(err, funcName.replace(/^_/, ''), resolve, reject, params))
    })
  }

  consume(key, pointsToConsume = 1, options = {}) {
    return this._operation('_consume', [key, pointsToConsume, options])
  }

  penalty(key, points = 1, options = {}) {
    return this._operation('_penalty', [key, points, options])
  }

  reward(key, points = 1, options = {}) {
    return this._operation('_reward', [key, points, options])
  }

  get(key, options = {}) {
    return this._operation('_get', [key, options])
  }

  set(key, points, secDuration, options = {}) {
    return this._operation('_set', [key, points, secDuration, options])
  }

  block(key, secDuration, options = {}) {
    return this._operation('_block', [key, secDuration, options])
  }

  delete(key, options = {}) {
    return this._operation('_delete', [key, options])
  }
}

// What subclasses give: each method's store side.
abstractMethods(RateLimiterInsuredAbstract, LIMITER_METHODS.map((name) => `_${name}`))

module.exports = RateLimiterInsuredAbstract
