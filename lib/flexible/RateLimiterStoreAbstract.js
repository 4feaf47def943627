'use strict'

const RateLimiterInsuredAbstract = require('./RateLimiterInsuredAbstract.js')
const RateLimiterRes = require('./RateLimiterRes.js')
const BlockedKeys = require('./BlockedKeys.js')
const { abstractMethods } = require('./RateLimiterCompatibleAbstract.js')
const { invalidOption, invalidOptionType } = require('./errors.js')
const { attempt } = require('../attempt.js')

/**
 * A limiter whose counts live in a store (Redis), as rate-limiter-flexible's store limiters:
 * besides RateLimiterInsuredAbstract's options,
 *
 * - `blockOnConsumed`: the consumed points at which a key is blocked in the store for
 *   `blockDuration` (default `0`: once over `points`);
 * - `inMemoryBlockOnConsumed`: the consumed points at which a key is also blocked in this
 *   process's memory, so that its next calls are refused without asking the store (default `0`:
 *   never), for `inMemoryBlockDuration` seconds (default `0`: until the key's duration ends).
 *
 * Subclasses give the store's side: `_upsert(rlKey, points, msDuration, forceExpire, options)`
 * (add the points, or with `forceExpire` set them for `msDuration`), `_get(rlKey, options)`,
 * `_delete(rlKey, options)` and `_getRateLimiterRes(rlKey, changedPoints, storeResult)`.
 */
class RateLimiterStoreAbstract extends RateLimiterInsuredAbstract {
  #client
  #blockOnConsumed = 0
  #inMemoryBlockOnConsumed = 0
  #inMemoryBlockDuration = 0
  #inMemoryBlockedKeys = new BlockedKeys()

  constructor(opts = {}) {
    super(opts)
    this.blockOnConsumed = opts.blockOnConsumed
    this.inMemoryBlockOnConsumed = opts.inMemoryBlockOnConsumed
    this.inMemoryBlockDuration = opts.inMemoryBlockDuration
  }

  get client() {
    return this.#client
  }

  set client(value) {
    if (value === undefined) throw invalidOptionType('storeClient is not set')
    this.#client = value
  }

  get blockOnConsumed() {
    return this.#blockOnConsumed
  }

  set blockOnConsumed(value) {
    this.#blockOnConsumed = value ? parseInt(value, 10) : 0
    if (this.#blockOnConsumed > 0 && this.points > this.#blockOnConsumed) {
      throw invalidOption('blockOnConsumed option must be greater or equal "points" option')
    }
  }

  get inMemoryBlockOnConsumed() {
    return this.#inMemoryBlockOnConsumed
  }

  set inMemoryBlockOnConsumed(value) {
    this.#inMemoryBlockOnConsumed = value ? parseInt(value, 10) : 0
    if (this.#inMemoryBlockOnConsumed > 0 && this.points > this.#inMemoryBlockOnConsumed) {
      throw invalidOption('inMemoryBlockOnConsumed option must be greater or equal "points" option')
    }
  }

  get inMemoryBlockDuration() {
    return this.#inMemoryBlockDuration
  }

  set inMemoryBlockDuration(value) {
    this.#inMemoryBlockDuration = value ? parseInt(value, 10) : 0
    if (this.#inMemoryBlockDuration > 0 && this.#inMemoryBlockOnConsumed === 0) {
      throw invalidOption('inMemoryBlockOnConsumed option must be set up')
    }
  }

  get msInMemoryBlockDuration() {
    return this.#inMemoryBlockDuration * 1000
  }

  /**
   * Settles a consume from the store's answer: rejects with the RateLimiterRes when the key is
   * over its points (blocking it in the store the first time it crosses the threshold, and in
   * memory past `inMemoryBlockOnConsumed`); with `execEvenly`, resolves after a delay that
   * spreads the allowed actions over the duration.
   */
  _afterConsume(resolve, reject, rlKey, changedPoints, storeResult, options = {}) {
    const res = this._getRateLimiterRes(rlKey, changedPoints, storeResult)
    const over = res.consumedPoints > this.points
    const blocksInMemory = this.#inMemoryBlockOnConsumed > 0 && res.consumedPoints >= this.#inMemoryBlockOnConsumed
    if (blocksInMemory && !(this.#inMemoryBlockDuration > 0)) {
      // Blocked in memory until the key's duration ends.
      this.#inMemoryBlockedKeys.addMs(rlKey, res.msBeforeNext)
      if (over) reject(res)
      else resolve(res)
      return
    }
    if (over) {
      let blocked = Promise.resolve()
      if (this.blockDuration > 0 && this._crossedBlockThreshold(res.consumedPoints, changedPoints)) {
        res.msBeforeNext = this.msBlockDuration
        blocked = this._block(rlKey, res.consumedPoints, this.msBlockDuration, options)
      }
      if (blocksInMemory) {
        this.#inMemoryBlockedKeys.addMs(rlKey, this.msInMemoryBlockDuration)
        res.msBeforeNext = this.msInMemoryBlockDuration
      }
      blocked.then(() => reject(res), reject)
      return
    }
    this._resolveEvenly(res).then(resolve)
  }

  /** Whether `blockOnConsumed` is on: above 0 and above `points`. */
  _isBlockOnConsumedEnabled() {
    return this.#blockOnConsumed > 0 && this.#blockOnConsumed > this.points
  }

  /** Whether the consume of `changedPoints` that brought the key to `consumedPoints` crossed the block threshold. */
  _crossedBlockThreshold(consumedPoints, changedPoints) {
    if (!this._isBlockOnConsumedEnabled()) {
      return consumedPoints > this.points && consumedPoints <= this.points + changedPoints
    }
    return consumedPoints >= this.#blockOnConsumed && consumedPoints - changedPoints < this.#blockOnConsumed
  }

  /** Milliseconds left of `rlKey`'s block in memory (0: none). */
  getInMemoryBlockMsBeforeExpire(rlKey) {
    return this.#inMemoryBlockOnConsumed > 0 ? this.#inMemoryBlockedKeys.msBeforeExpire(rlKey) : 0
  }

  /** The points a block writes: `blockOnConsumed` when on, else one over `points`. */
  _getBlockedPoints() {
    return this._isBlockOnConsumedEnabled() ? this.#blockOnConsumed : this.points + 1
  }

  /** Blocks `key` for `secDuration` seconds (0: for good). */
  block(key, secDuration, options = {}) {
    return this._block(this.getKey(key), this._getBlockedPoints(), secDuration * 1000, options)
  }

  /** Sets `key`'s points for `secDuration` seconds (0: for good; default `duration`). */
  set(key, points, secDuration, options = {}) {
    const msDuration = (secDuration >= 0 ? secDuration : this.duration) * 1000
    return this._set(this.getKey(key), points, msDuration, options)
  }

  _consume(key, pointsToConsume = 1, options = {}) {
    const rlKey = this.getKey(key)
    const blockedMs = this.getInMemoryBlockMsBeforeExpire(rlKey)
    if (blockedMs > 0) return Promise.reject(new RateLimiterRes(0, blockedMs))
    return new Promise((resolve, reject) => {
      attempt(() => this._upsert(rlKey, pointsToConsume, this._getKeySecDuration(options) * 1000, false, options)).then(
        (result) => this._afterConsume(resolve, reject, rlKey, pointsToConsume, result, options),
        reject,
      )
    })
  }

  _penalty(key, points = 1, options = {}) {
    const rlKey = this.getKey(key)
    return attempt(() => this._upsert(rlKey, points, this._getKeySecDuration(options) * 1000, false, options)).then((result) =>
      this._getRateLimiterRes(rlKey, points, result),
    )
  }

  _reward(key, points = 1, options = {}) {
    const rlKey = this.getKey(key)
    return attempt(() => this._upsert(rlKey, -points, this._getKeySecDuration(options) * 1000, false, options)).then((result) =>
      this._getRateLimiterRes(rlKey, -points, result),
    )
  }

  /** `key`'s RateLimiterRes, or null when it holds nothing. */
  get(key, options = {}) {
    const rlKey = this.getKey(key)
    return new Promise((resolve, reject) => {
      attempt(() => this._get(rlKey, options)).then(
        (result) => resolve(result === null || result === undefined ? null : this._getRateLimiterRes(rlKey, 0, result)),
        (err) => this._handleError(err, 'get', resolve, reject, [key, options]),
      )
    })
  }

  /** Deletes `key` (and its block in memory): resolves whether it held anything. */
  delete(key, options = {}) {
    const rlKey = this.getKey(key)
    return new Promise((resolve, reject) => {
      attempt(() => this._delete(rlKey, options)).then(
        (deleted) => {
          this.#inMemoryBlockedKeys.delete(rlKey)
          resolve(deleted)
        },
        (err) => this._handleError(err, 'delete', resolve, reject, [key, options]),
      )
    })
  }

  /** Forgets every block held in memory. */
  deleteInMemoryBlockedAll() {
    this.#inMemoryBlockedKeys.delete()
  }

  _block(rlKey, initPoints, msDuration, options = {}) {
    return new Promise((resolve, reject) => {
      attempt(() => this._upsert(rlKey, initPoints, msDuration, true, options)).then(
        () => resolve(new RateLimiterRes(0, msDuration > 0 ? msDuration : -1, initPoints)),
        (err) => this._handleError(err, 'block', resolve, reject, [this.parseKey(rlKey), msDuration / 1000, options]),
      )
    })
  }

  _set(rlKey, points, msDuration, options = {}) {
    return new Promise((resolve, reject) => {
      attempt(() => this._upsert(rlKey, points, msDuration, true, options)).then(
        () => resolve(new RateLimiterRes(0, msDuration > 0 ? msDuration : -1, points)),
        (err) => this._handleError(err, 'set', resolve, reject, [this.parseKey(rlKey), points, msDuration / 1000, options]),
      )
    })
  }
}

abstractMethods(RateLimiterStoreAbstract, ['_getRateLimiterRes', '_get', '_delete', '_upsert'])

module.exports = RateLimiterStoreAbstract
