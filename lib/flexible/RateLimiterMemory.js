'use strict'

const RateLimiterAbstract = require('./RateLimiterAbstract.js')
const RateLimiterRes = require('./RateLimiterRes.js')
const { ExpiringCounter, counterOf } = require('./counter.js')
const { wholePoints } = require('./points.js')
const { attempt, rejectSoon } = require('../attempt.js')

/**
 * rate-limiter-flexible's RateLimiterMemory on ratekeeper's in-memory store: the same options and
 * answers, on the app's clock (`Date.now()`, which fake timers drive). No timer per key: a key's
 * count is dropped once its duration has ended, by the store's sweep, and any duration works.
 */
class RateLimiterMemory extends RateLimiterAbstract {
  #counter

  constructor(opts = {}) {
    super(opts)
    this.#counter = new ExpiringCounter(null, this.msDuration)
  }

  /** Its counter, for RateLimiterUnion. */
  get [counterOf]() {
    return this.#counter
  }

  /**
   * Consumes `pointsToConsume` of `key`: resolves with a RateLimiterRes, or rejects with one when
   * the key is over its points (the points are counted all the same).
   */
  consume(key, pointsToConsume = 1, options = {}) {
    // Answered at once, in memory: one Promise, made at the end.
    let rlKey, reading
    try {
      rlKey = this.getKey(key)
      reading = this.#counter.addNow(rlKey, wholePoints(pointsToConsume), this._getKeySecDuration(options) * 1000)
    } catch (error) {
      return Promise.reject(error)
    }
    const res = this.#res(reading, reading.fresh)
    if (res.consumedPoints <= this.points) return this._resolveEvenly(res)
    // Blocked the first time it goes over.
    if (this.blockDuration > 0 && res.consumedPoints <= this.points + pointsToConsume) {
      const block = this.#counter.setNow(rlKey, res.consumedPoints, this.msBlockDuration)
      return rejectSoon(new RateLimiterRes(0, block.msLeft, block.points, true))
    }
    return rejectSoon(res)
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

  /**
   * A snapshot of every live key, as rate-limiter-flexible's `dump` gives it:
   * `{ version: 1, dumpedAt, storage: [{ key, value, expiresAt }] }` (`expiresAt` in ms since the
   * epoch, `null` for a key that never expires), in no particular order. For `restore`, here or in
   * rate-limiter-flexible's RateLimiterMemory.
   *
   * ```js
   * fs.writeFileSync('limits.json', JSON.stringify(limiter.dump()))
   * ```
   */
  dump() {
    const now = Date.now()
    const storage = this.#counter.dump(now).map(({ key, points, endsAtMs }) => ({
      key: this.parseKey(key),
      value: points,
      expiresAt: endsAtMs === undefined ? null : endsAtMs,
    }))
    return { version: 1, dumpedAt: now, storage }
  }

  /**
   * Loads a snapshot of `dump` (this one's or rate-limiter-flexible's): each valid, unexpired item
   * sets its key's points until its `expiresAt`. Answers how many items were `invalid` (not an
   * object; a key not a string or number; a value not a whole number of at most 2^53 - 1 in
   * size, where rate-limiter-flexible takes any finite number; an `expiresAt` neither null nor
   * finite), `expired` and `restored`, with their keys when `detailResponse` is true; undefined
   * for data that is not a version 1 snapshot.
   *
   * ```js
   * limiter.restore(JSON.parse(fs.readFileSync('limits.json', 'utf8'))) // { invalid: 0, expired: 2, restored: 40 }
   * ```
   */
  restore(data, detailResponse = false) {
    if (!data || typeof data !== 'object' || data.version !== 1) return undefined
    const buckets = ['invalid', 'expired', 'restored']
    const response = Object.fromEntries(buckets.map((bucket) => [bucket, detailResponse ? { count: 0, keys: [] } : 0]))
    const record = (bucket, key) => {
      if (!detailResponse) response[bucket] += 1
      else {
        response[bucket].count += 1
        response[bucket].keys.push(key)
      }
    }
    if (!Array.isArray(data.storage)) return response
    for (const item of data.storage) {
      if (!item || typeof item !== 'object') {
        record('invalid', 'N/A')
        continue
      }
      const { key, value, expiresAt } = item
      const valid =
        (typeof key === 'string' || typeof key === 'number') &&
        Number.isSafeInteger(value) &&
        (expiresAt === null || Number.isFinite(expiresAt))
      if (!valid) record('invalid', key)
      else if (expiresAt !== null && expiresAt <= Date.now()) record('expired', key)
      else {
        this.#counter.setNow(this.getKey(key), value, expiresAt === null ? 0 : expiresAt - Date.now())
        record('restored', key)
      }
    }
    return response
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
