'use strict'

const { abstractMethods, LIMITER_METHODS } = require('./RateLimiterCompatibleAbstract.js')
const { invalidOption, invalidOptionType } = require('./errors.js')

/**
 * The options every rate-limiter-flexible limiter takes, checked as rate-limiter-flexible checks
 * them (its messages, with a `code`), and the keys: `getKey(key)` is `keyPrefix:key` (`key`
 * alone when `keyPrefix` is `''`).
 *
 * - `points` (required): the points a key may consume per duration, any finite number.
 * - `duration` (required): seconds, `0` for a count that never expires.
 * - `blockDuration`: seconds a key is blocked once over its points (default `0`: not blocked).
 * - `execEvenly`, `execEvenlyMinDelayMs`: delay allowed actions to spread them over the duration.
 * - `keyPrefix`: default `'rlflx'`.
 */
class RateLimiterAbstract {
  #points
  #duration
  #blockDuration = 0
  #execEvenly = false
  #execEvenlyMinDelayMs
  #keyPrefix = 'rlflx'

  constructor(opts = {}) {
    this.points = opts.points
    this.duration = opts.duration
    this.blockDuration = opts.blockDuration
    this.execEvenly = opts.execEvenly
    this.execEvenlyMinDelayMs = opts.execEvenlyMinDelayMs
    this.keyPrefix = opts.keyPrefix
  }

  get points() {
    return this.#points
  }

  set points(value) {
    if (!Number.isFinite(value)) throw invalidOption('points must be set and must be a finite number')
    this.#points = value
  }

  get duration() {
    return this.#duration
  }

  set duration(value) {
    if (!(typeof value === 'number' && Number.isFinite(value) && value >= 0)) {
      throw invalidOption('duration must be set and must be a finite, non-negative number')
    }
    this.#duration = value
  }

  get msDuration() {
    return this.#duration * 1000
  }

  get blockDuration() {
    return this.#blockDuration
  }

  set blockDuration(value) {
    this.#blockDuration = value === undefined ? 0 : value
  }

  get msBlockDuration() {
    return this.#blockDuration * 1000
  }

  get execEvenly() {
    return this.#execEvenly
  }

  set execEvenly(value) {
    this.#execEvenly = value === undefined ? false : Boolean(value)
  }

  /** Default: the duration shared out over the points, in whole milliseconds. */
  get execEvenlyMinDelayMs() {
    if (this.#execEvenlyMinDelayMs !== undefined) return this.#execEvenlyMinDelayMs
    return this.points > 0 ? Math.ceil(this.msDuration / this.points) : 0
  }

  set execEvenlyMinDelayMs(value) {
    this.#execEvenlyMinDelayMs = value
  }

  get keyPrefix() {
    return this.#keyPrefix
  }

  set keyPrefix(value) {
    if (value === undefined) value = 'rlflx'
    if (typeof value !== 'string') throw invalidOptionType('keyPrefix must be string')
    this.#keyPrefix = value
  }

  /** The duration of a call in seconds: its `customDuration` when given (0 or more), else `duration`. */
  _getKeySecDuration(options = {}) {
    return options && options.customDuration >= 0 ? options.customDuration : this.duration
  }

  /**
   * Resolves with an allowed action's `res`: at once, or with `execEvenly` after a delay that
   * spreads the actions over the duration (`res.msBeforeNext` then tells the time left after it).
   */
  _resolveEvenly(res) {
    if (!(this.execEvenly && this.points > 0 && res.msBeforeNext > 0 && !res.isFirstInDuration)) return Promise.resolve(res)
    let delay = Math.ceil(res.msBeforeNext / (res.remainingPoints + 2))
    if (delay < this.execEvenlyMinDelayMs) delay = res.consumedPoints * this.execEvenlyMinDelayMs
    res.msBeforeNext = Math.max(res.msBeforeNext - delay, 0)
    return new Promise((resolve) => setTimeout(resolve, delay, res))
  }

  getKey(key) {
    return this.keyPrefix.length > 0 ? `${this.keyPrefix}:${key}` : `${key}`
  }

  parseKey(rlKey) {
    return this.keyPrefix.length > 0 ? rlKey.substring(this.keyPrefix.length + 1) : rlKey
  }
}

abstractMethods(RateLimiterAbstract, LIMITER_METHODS)

module.exports = RateLimiterAbstract
