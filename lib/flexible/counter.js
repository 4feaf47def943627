'use strict'

/**
 * The native expiring counter (src/expiring_counter.rs, lua/expiring_counter.lua) under the
 * rate-limiter-flexible layer: a key's points and the time before they expire, counted from the
 * key's first points, in memory or on Redis in rate-limiter-flexible's own layout.
 */

const { ExpiringCounterEngine } = require('../native.js')
const { runner } = require('../engine.js')

// The modes of ExpiringCounterEngine.run.
const ADD = 0
const SET = 1
const GET = 2
const DELETE = 3

/** `{ points, msLeft, fresh }` (msLeft -1: never expires), or null when the key holds nothing. */
const decodeReading = (values, i) => (values[i + 3] === 1 ? { points: values[i], msLeft: values[i + 1], fresh: values[i + 2] === 1 } : null)
const decodeDeleted = (values, i) => values[i] === 1

class ExpiringCounter {
  #call
  /** In memory, the app's clock decides (`Date.now()`, which fake timers drive); on Redis, the keys' TTLs. */
  #local

  /** In memory, or on `store` (a RedisStore) when one is given. */
  constructor(store) {
    const engine = new ExpiringCounterEngine({}, store)
    this.#call = runner(engine, 'reject', null, {})
    this.#local = store === null
  }

  #options(points, durationMs) {
    return this.#local ? { points, durationMs, now: Date.now() } : { points, durationMs }
  }

  /** Adds `points` to `key`'s count; a key without one starts one for `durationMs` (0: never expires). */
  add(key, points, durationMs) {
    return this.#call(ADD, key, this.#options(points, durationMs), decodeReading)
  }

  /** Sets `key`'s count to `points` for `durationMs` (0: never expires), whatever it held. */
  set(key, points, durationMs) {
    return this.#call(SET, key, this.#options(points, durationMs), decodeReading)
  }

  /** What `key` holds, or null. */
  get(key) {
    return this.#call(GET, key, this.#options(0, 0), decodeReading)
  }

  /** Deletes `key`: resolves whether it held a count. */
  delete(key) {
    return this.#call(DELETE, key, this.#options(0, 0), decodeDeleted)
  }
}

module.exports = { ExpiringCounter }
