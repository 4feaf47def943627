'use strict'

const RateLimiterCompatibleAbstract = require('./RateLimiterCompatibleAbstract.js')
const RateLimiterRes = require('./RateLimiterRes.js')
const { invalidOptionType } = require('./errors.js')
const { attempt } = require('../attempt.js')

/**
 * rate-limiter-flexible's RLWrapperBlackAndWhite: `limiter` with keys let through or kept out.
 *
 * - `limiter` (required): the limiter for the keys on neither list.
 * - `whiteList`, `isWhiteListed(key)`: keys always allowed (default none). A white-listed key's
 *   calls resolve with `getWhiteRes()`: `remainingPoints` Number.MAX_SAFE_INTEGER, `msBeforeNext` 0.
 * - `blackList`, `isBlackListed(key)`: keys always refused (default none; the white list wins).
 *   `consume` rejects with `getBlackRes()` (`remainingPoints` 0, `msBeforeNext`
 *   Number.MAX_SAFE_INTEGER); `penalty`, `reward`, `get`, `set` and `block` resolve with it.
 * - `runActionAnyway`: also run the call on `limiter` for a listed key, its answer ignored (default
 *   `false`); `get` then answers from `limiter` for every key.
 *
 * The lists match a key as it is given (`'1'` is not `1`). `delete` always goes to `limiter`.
 *
 * ```js
 * const limiter = new RLWrapperBlackAndWhite({
 *   limiter: new RateLimiterRedis({ storeClient, points: 10, duration: 1 }),
 *   whiteList: ['127.0.0.1'],
 *   isBlackListed: (ip) => bannedIps.has(ip),
 * })
 * ```
 */
class RLWrapperBlackAndWhite extends RateLimiterCompatibleAbstract {
  #limiter
  #whiteList
  #blackList
  #isWhiteListed
  #isBlackListed
  #runActionAnyway

  constructor(opts = {}) {
    super()
    this.limiter = opts.limiter
    this.blackList = opts.blackList
    this.whiteList = opts.whiteList
    this.isBlackListed = opts.isBlackListed
    this.isWhiteListed = opts.isWhiteListed
    this.runActionAnyway = opts.runActionAnyway
  }

  get limiter() {
    return this.#limiter
  }

  set limiter(value) {
    if (value === undefined) throw invalidOptionType('limiter is not set')
    this.#limiter = value
  }

  /** `limiter`'s. */
  get keyPrefix() {
    return this.limiter.keyPrefix
  }

  /** `limiter`'s. */
  get blockDuration() {
    return this.limiter.blockDuration
  }

  set blockDuration(value) {
    this.limiter.blockDuration = value
  }

  /** `limiter`'s. */
  get execEvenly() {
    return this.limiter.execEvenly
  }

  set execEvenly(value) {
    this.limiter.execEvenly = value
  }

  get runActionAnyway() {
    return this.#runActionAnyway
  }

  set runActionAnyway(value) {
    this.#runActionAnyway = value === undefined ? false : value
  }

  /** The keys always refused (anything but an array: none). */
  get blackList() {
    return this.#blackList
  }

  set blackList(value) {
    this.#blackList = Array.isArray(value) ? value : []
  }

  /** Whether a key is always refused, besides `blackList` (default: none is). */
  get isBlackListed() {
    return this.#isBlackListed
  }

  set isBlackListed(func) {
    this.#isBlackListed = listFunction(func, 'isBlackListed')
  }

  /** The keys always allowed (anything but an array: none). */
  get whiteList() {
    return this.#whiteList
  }

  set whiteList(value) {
    this.#whiteList = Array.isArray(value) ? value : []
  }

  /** Whether a key is always allowed, besides `whiteList` (default: none is). */
  get isWhiteListed() {
    return this.#isWhiteListed
  }

  set isWhiteListed(func) {
    this.#isWhiteListed = listFunction(func, 'isWhiteListed')
  }

  isBlackListedSomewhere(key) {
    return this.blackList.indexOf(key) >= 0 || this.isBlackListed(key)
  }

  isWhiteListedSomewhere(key) {
    return this.whiteList.indexOf(key) >= 0 || this.isWhiteListed(key)
  }

  /** The answer for a black-listed key. */
  getBlackRes() {
    return new RateLimiterRes(0, Number.MAX_SAFE_INTEGER, 0, false)
  }

  /** The answer for a white-listed key. */
  getWhiteRes() {
    return new RateLimiterRes(Number.MAX_SAFE_INTEGER, 0, 0, false)
  }

  rejectBlack() {
    return Promise.reject(this.getBlackRes())
  }

  resolveBlack() {
    return Promise.resolve(this.getBlackRes())
  }

  resolveWhite() {
    return Promise.resolve(this.getWhiteRes())
  }

  consume(key, pointsToConsume = 1, options = {}) {
    return this.#run('consume', key, [pointsToConsume, options], true)
  }

  block(key, secDuration, options = {}) {
    return this.#run('block', key, [secDuration, options])
  }

  penalty(key, points = 1, options = {}) {
    return this.#run('penalty', key, [points, options])
  }

  reward(key, points = 1, options = {}) {
    return this.#run('reward', key, [points, options])
  }

  /** With `runActionAnyway`, `limiter`'s answer for every key. */
  get(key, options = {}) {
    if (this.runActionAnyway) return attempt(() => this.limiter.get(key, options))
    return this.#run('get', key, [options])
  }

  set(key, points, secDuration, options = {}) {
    return this.#run('set', key, [points, secDuration, options])
  }

  /** Always `limiter`'s. */
  delete(key, options = {}) {
    return attempt(() => this.limiter.delete(key, options))
  }

  /**
   * `limiter[method](key, ...args)` for a key on neither list; for a listed one, the white or
   * black answer (a black `consume` rejects), and with `runActionAnyway` the call made all the same.
   */
  #run(method, key, args, rejectBlack = false) {
    return attempt(() => {
      let answer
      if (this.isWhiteListedSomewhere(key)) answer = this.resolveWhite()
      else if (this.isBlackListedSomewhere(key)) answer = rejectBlack ? this.rejectBlack() : this.resolveBlack()
      if (answer === undefined) return this.limiter[method](key, ...args)
      if (this.runActionAnyway) attempt(() => this.limiter[method](key, ...args)).catch(() => {})
      return answer
    })
  }
}

/** A list's function: `() => false` for undefined; anything else but a function throws. */
function listFunction(func, name) {
  if (func === undefined) return () => false
  if (typeof func !== 'function') throw invalidOptionType(`${name} must be function`)
  return func
}

module.exports = RLWrapperBlackAndWhite
