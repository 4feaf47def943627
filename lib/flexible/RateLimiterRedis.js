'use strict'

const RateLimiterStoreAbstract = require('./RateLimiterStoreAbstract.js')
const RateLimiterRes = require('./RateLimiterRes.js')
const { ExpiringCounter, counterOf } = require('./counter.js')
const { wholePoints } = require('./points.js')
const { resolveStore } = require('../store.js')
const { invalidOptionType } = require('./errors.js')
const { attempt } = require('../attempt.js')

/**
 * rate-limiter-flexible's RateLimiterRedis on ratekeeper's Redis store: the same options,
 * answers and keys (`keyPrefix:key`, a string of the consumed points whose TTL is the time left),
 * so that rate-limiter-flexible's processes and these count together on one Redis.
 *
 * `storeClient` is an ioredis client (single node, Cluster or Sentinel), a node-redis client, or
 * any client form ratekeeper's limiters take (a Redis URL, an options object, a `RedisStore`):
 * ratekeeper opens its own connection to the same server and runs its own script there.
 */
class RateLimiterRedis extends RateLimiterStoreAbstract {
  #counter

  constructor(opts = {}) {
    super(opts)
    if (opts.customIncrTtlLuaScript !== undefined) {
      throw invalidOptionType(
        'customIncrTtlLuaScript is not supported by ratekeeper/flexible: ratekeeper runs its own script (lua/expiring_counter.lua), which keeps the layout of rate-limiter-flexible\'s default one; remove the option',
      )
    }
    this.client = opts.storeClient
    this.#counter = new ExpiringCounter(resolveStore(opts.storeClient, 'storeClient').store)
    /**
     * Accepted for rate-limiter-flexible's sake: ratekeeper's store fails a call at once while
     * its connection is down (ERR_STORE_UNAVAILABLE), which is what this option asks for.
     */
    this.rejectIfRedisNotReady = Boolean(opts.rejectIfRedisNotReady)
    /** Accepted for rate-limiter-flexible's sake; ratekeeper reads the client's type itself. */
    this.useRedisPackage = Boolean(opts.useRedisPackage)
    this.useRedis3AndLowerPackage = opts.useRedis3AndLowerPackage
  }

  /** Its counter, for RateLimiterUnion. */
  get [counterOf]() {
    return this.#counter
  }

  _getRateLimiterRes(rlKey, changedPoints, result) {
    const res = new RateLimiterRes()
    res.consumedPoints = result.points
    // As rate-limiter-flexible's RateLimiterRedis: the first points of a duration are the count.
    res.isFirstInDuration = res.consumedPoints === changedPoints
    res.remainingPoints = Math.max(this.points - res.consumedPoints, 0)
    res.msBeforeNext = result.msLeft
    return res
  }

  /**
   * The counter's Promise, or a rejected one for points that are not a number. (Not an `async`
   * function: returning the counter's Promise from one costs each call a Promise and two more
   * turns of the microtask queue.)
   */
  _upsert(rlKey, points, msDuration, forceExpire = false) {
    return attempt(() => {
      const whole = wholePoints(points)
      // A negative duration (a `set` or `block` of less than 0 seconds) never expires, as 0.
      const durationMs = msDuration < 0 ? 0 : msDuration
      if (forceExpire) return this.#counter.set(rlKey, whole, durationMs)
      return this.#counter.add(rlKey, whole, durationMs)
    })
  }

  _get(rlKey) {
    return this.#counter.get(rlKey)
  }

  _delete(rlKey) {
    return this.#counter.delete(rlKey)
  }
}

module.exports = RateLimiterRedis
