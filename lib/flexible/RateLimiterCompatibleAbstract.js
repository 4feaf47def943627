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
}

/** rate-limiter-flexible's message for a member a subclass must give. */
function missing(what) {
  const error = new Error(`You have to implement ${what}!`)
  error.code = 'ERR_NOT_IMPLEMENTED'
  return error
}

/**
 * Gives `Class` the methods `names` for its subclasses to give: each throws rate-limiter-flexible's
 * "You have to implement the method '<name>'!" (`ERR_NOT_IMPLEMENTED`) until one does.
 */
function abstractMethods(Class, names) {
  for (const name of names) {
    Object.defineProperty(Class.prototype, name, {
      value: function () {
        throw missing(`the method '${name}'`)
      },
      writable: true,
      configurable: true,
    })
  }
}

/** The methods every limiter answers with. */
const LIMITER_METHODS = ['consume', 'penalty', 'reward', 'get', 'set', 'block', 'delete']

abstractMethods(RateLimiterCompatibleAbstract, LIMITER_METHODS)

module.exports = RateLimiterCompatibleAbstract
module.exports.abstractMethods = abstractMethods
module.exports.LIMITER_METHODS = LIMITER_METHODS
