'use strict'

const RateLimiterAbstract = require('./RateLimiterAbstract.js')
const RateLimiterRes = require('./RateLimiterRes.js')
const { ExpiringCounter } = require('./counter.js')
const { wholePoints } = require('./points.js')
const { attempt } = require('../attempt.js')

/**
 * rate-limiter-flexible's RateLimiterMemory on ratekeeper's in-memory store: the same options and
 * answers, on the app's clock (`Date.now()`, which fake timers drive). No timer per key: a key's
 * count is dropped once its duration has ended, by the store's sweep, and any duration works.
 */
class RateLimiterMemory extends RateLimiterAbstract {
  #counter = new ExpiringCounter(null)

  constructor(opts = {}) {
    super(opts)
  }

  /**
   * Consumes `pointsToConsume` of `key`: resolves with a RateLimiterRes, or rejects with one when
   * the key is over its points (the points are counted all the same).
   */
  consume(key, pointsToConsume = 1, options = {}) {
    return this.#add(key, pointsToConsume, options).then(([rlKey, res]) => {
      if (res.consumedPoints > this.points) {
        // Blocked the first time it goes over.
        if (this.blockDuration > 0 && res.consumedPoints <= this.points + pointsToConsume) {
          return this.#counter.set(rlKey, res.consumedPoints, this.msBlockDuration).then((block) => {
            throw new RateLimiterRes(0, block.msLeft, block.points, true)
          })
        }
        throw res
      }
      return this._resolveEvenly(res)
    })
  }

  /** Adds `points` to `key` without judging. */
  penalty(key, points = 1, options = {}) {
    return this.#add(key, points, options).then(([, res]) => res)
  }

  /** Takes `points` from `key` (a key without a count starts one below 0). */
  reward(key, points = 1, options = {}) {
    return this.#add(key, points, options, -1).then(([, res]) => res)
  }

  /** Blocks `key` for `secDuration` seconds (0: for good). */
  block(key, secDuration) {
    const initPoints = this.points + 1
    return this.#setKey(key, initPoints, secDuration * 1000)
  }

  /** Sets `key`'s points for `secDuration` seconds (0: for good; default `duration`). */
  set(key, points, secDuration) {
    return this.#setKey(key, points, (secDuration >= 0 ? secDuration : this.duration) * 1000)
  }

  /** `key`'s RateLimiterRes, or null when it holds nothing. */
  get(key) {
    return attempt(() => this.#counter.get(this.getKey(key))).then((reading) =>
      reading === null ? null : this.#res(reading, false),
    )
  }

  /** Deletes `key`: resolves whether it held a count. */
  delete(key) {
    return attempt(() => this.#counter.delete(this.getKey(key)))
  }

  /** Adds `points` (taken away with `sign` -1) to `key`: resolves `[rlKey, res]`. */
  #add(key, points, options, sign = 1) {
    return attempt(() => {
      const rlKey = this.getKey(key)
      const durationMs = this._getKeySecDuration(options) * 1000
      return this.#counter.add(rlKey, sign * wholePoints(points), durationMs).then((reading) => [rlKey, this.#res(reading, reading.fresh)])
    })
  }

  #setKey(key, points, msDuration) {
    return attempt(() => this.#counter.set(this.getKey(key), wholePoints(points), msDuration > 0 ? msDuration : 0)).then(
      (reading) => new RateLimiterRes(0, msDuration > 0 ? msDuration : -1, reading.points),
    )
  }

  #res(reading, isFirstInDuration) {
    return new RateLimiterRes(Math.max(this.points - reading.points, 0), reading.msLeft, reading.points, isFirstInDuration)
  }
}

module.exports = RateLimiterMemory
