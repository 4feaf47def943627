'use strict'

/**
 * The base of limiters that are not rate-limiter-flexible's own but answer as they do (a wrapper,
 * a custom limiter): what an `insuranceLimiter`, `RateLimiterUnion` and the wrappers accept.
 * Every member is for the subclass to give.
 */
class RateLimiterCompatibleAbstract {
  get keyPrefix() {
    throw missing("the getter 'keyPrefix'")
  }

  get blockDuration() {
    throw missing("the getter 'blockDuration'")
  }

  set blockDuration(value) {
    throw missing("the setter 'blockDuration'")
  }

  get execEvenly() {
    throw missing("the getter 'execEvenly'")
  }

  set execEvenly(value) {
    throw missing("the setter 'execEvenly'")
  }

  consume() {
    throw missing("the method 'consume'")
  }

  penalty() {
    throw missing("the method 'penalty'")
  }

  reward() {
    throw missing("the method 'reward'")
  }

  get() {
    throw missing("the method 'get'")
  }

  set() {
    throw missing("the method 'set'")
  }

  block() {
    throw missing("the method 'block'")
  }

  delete() {
    throw missing("the method 'delete'")
  }
}

/** rate-limiter-flexible's message for a member a subclass must give. */
function missing(what) {
  const error = new Error(`You have to implement ${what}!`)
  error.code = 'ERR_NOT_IMPLEMENTED'
  return error
}

module.exports = RateLimiterCompatibleAbstract
module.exports.missing = missing
