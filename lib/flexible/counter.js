'use strict'

/**
 * The native expiring counter (src/expiring_counter.rs, lua/expiring_counter.lua) under the
 * rate-limiter-flexible layer: a key's points and the time before they expire, counted from the
 * key's first points, in memory or on Redis in rate-limiter-flexible's own layout.
 */

const { ExpiringCounterEngine } = require('../native.js')
const { runner, runTogether, syncCaller } = require('../engine.js')

// The modes of ExpiringCounterEngine.run.
const ADD = 0
const SET = 1
const GET = 2
const DELETE = 3
const ADD_OVER = 4

/** `{ points, msLeft, fresh }` (msLeft -1: never expires), or null when the key holds nothing. */
const decodeReading = (values, i) => (values[i + 3] === 1 ? { points: values[i], msLeft: values[i + 1], fresh: values[i + 2] === 1 } : null)
const decodeDeleted = (values, i) => values[i] === 1
/** A union's answer for one key: `{ points, msLeft, fresh, found, refused }`. */
const decodeUnion = (values, i) => ({
  points: values[i],
  msLeft: values[i + 1],
  fresh: values[i + 2] === 1,
  found: values[i + 3] === 1,
  refused: values[i + 4] === 1,
})

/** Where the in-memory fast path writes its answers (src/binding/fast.rs). */
const out = new Float64Array(5)

/** A call's numbers (see `#numbers`). */
const callNumbers = new Float64Array(5)

/** The limiters' own counter, for RateLimiterUnion: `limiter[counterOf]` (undefined for others). */
const counterOf = Symbol('ratekeeper/flexible counter')

class ExpiringCounter {
  #engine
  #call
  #callNow
  /** In memory: `(mode, key, points, now) => boolean`, for calls of `durationMs`. */
  #fast
  #durationMs
  #store
  /** In memory, the app's clock decides (`Date.now()`, which fake timers drive); on Redis, the keys' TTLs. */
  #local

  /**
   * In memory, or on `store` (a RedisStore) when one is given. `durationMs`: the duration most
   * calls give (the limiter's), which the in-memory fast path takes.
   */
  constructor(store, durationMs = 0) {
    this.#engine = new ExpiringCounterEngine({ durationMs }, store)
    this.#call = runner(this.#engine, 'reject', null, {})
    this.#callNow = syncCaller(this.#engine, store !== null, 'ExpiringCounter')
    this.#fast = store === null ? this.#engine.fastPath(out) : null
    this.#durationMs = durationMs
    this.#store = store
    this.#local = store === null
  }

  /** The RedisStore the counts are on, or null in memory. */
  get store() {
    return this.#store
  }

  /**
   * A call's numbers as the engine reads them (src/binding/expiring_counter.rs `run`):
   * `[points, durationMs, now, limit, growth]`, NaN for none, in one array that every call
   * reuses (the engine reads it before the call returns).
   */
  #numbers(points, durationMs, limit = NaN, growth = NaN) {
    callNumbers[0] = points
    callNumbers[1] = durationMs
    callNumbers[2] = this.#local ? Date.now() : NaN
    callNumbers[3] = limit
    callNumbers[4] = growth
    return callNumbers
  }

  /** Adds `points` to `key`'s count; a key without one starts one for `durationMs` (0: never expires). */
  add(key, points, durationMs) {
    return this.#call(ADD, key, this.#numbers(points, durationMs), decodeReading)
  }

  /**
   * `add`, and then, when the key held a count already and now holds more than `limit`, its
   * window starts again: `durationMs` times `growth` (1 to 1e6) to the power of how far the count
   * is past `limit + 1`, at most 1e12 ms. One script call on Redis (@fastify/rate-limit's
   * `continueExceeding`: growth 1; its `exponentialBackoff`: 2).
   */
  addOver(key, points, durationMs, limit, growth) {
    return this.#call(ADD_OVER, key, this.#numbers(points, durationMs, limit, growth), decodeReading)
  }

  /** Sets `key`'s count to `points` for `durationMs` (0: never expires), whatever it held. */
  set(key, points, durationMs) {
    return this.#call(SET, key, this.#numbers(points, durationMs), decodeReading)
  }

  /** What `key` holds, or null. */
  get(key) {
    return this.#call(GET, key, this.#numbers(0, 0), decodeReading)
  }

  /** Deletes `key`: resolves whether it held a count. */
  delete(key) {
    return this.#call(DELETE, key, this.#numbers(0, 0), decodeDeleted)
  }

  /** In memory: `add`, answered at once. */
  addNow(key, points, durationMs) {
    if (durationMs === this.#durationMs && typeof key === 'string' && this.#fast(ADD, key, points, Date.now())) return decodeReading(out, 0)
    return this.#callNow(ADD, key, this.#numbers(points, durationMs), decodeReading)
  }

  /** In memory: `set`, answered at once. */
  setNow(key, points, durationMs) {
    return this.#callNow(SET, key, this.#numbers(points, durationMs), decodeReading)
  }

  /** In memory: `get`, answered at once. */
  getNow(key) {
    return this.#callNow(GET, key, this.#numbers(0, 0), decodeReading)
  }

  /** In memory: every live count at `nowMs`, as `[{ key, points, endsAtMs }]` (no `endsAtMs`: never ends). */
  dump(nowMs) {
    return this.#engine.dump(nowMs)
  }

  /**
   * On Redis, in one script call: adds `points` to each of `keys` (each starting its count for
   * `durationsMs[i]` when absent), or to none when one would go over `limits[i]`. Resolves each
   * key's `{ points, msLeft, fresh, found, refused }`: what it holds after the call, and whether
   * it is one that refused.
   */
  union(keys, points, limits, durationsMs) {
    return runTogether(keys.length, (tickets) => this.#engine.union(keys, points, limits, durationsMs, tickets), decodeUnion)
  }
}

module.exports = { ExpiringCounter, counterOf }
