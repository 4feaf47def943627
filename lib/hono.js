'use strict'

/**
 * A store for hono-rate-limiter (`require('ratekeeper/hono')`), so that a Hono app keeps
 * hono-rate-limiter's `rateLimiter` and swaps its MemoryStore (or RedisStore) for ratekeeper's
 * fixed window, in memory or on Redis (single node, Cluster, Sentinel). See hono.d.ts for the
 * documentation.
 *
 * hono-rate-limiter's `Store` is express-rate-limit's (it was modelled on it): `init(options)`,
 * then `increment` resolving `{ totalHits, resetTime }`, `decrement`, `resetKey` and `get`; the
 * middleware compares `totalHits` to its own `limit` and writes the headers. So the counting is
 * lib/express-rate-limit.js's Store (a clock-aligned FixedWindow that never refuses), wrapped
 * here for what differs with hono-rate-limiter:
 * - `rateLimiter()` calls `init` and lets what it throws through, so a bad `windowMs` stops the
 *   app where it is built (express-rate-limit only logs it); the errors name hono-rate-limiter
 *   and its `rateLimiter`, not express-rate-limit's.
 * - hono-rate-limiter has no `passOnStoreError`: a store that rejects sends the request to Hono's
 *   `onError` (a 500 by default). Ratekeeper's `onStoreError` ('allow', 'memory') is the
 *   setting that keeps requests going while Redis is unavailable.
 * - The default prefix is 'ratekeeper:hrl:', not hono-rate-limiter RedisStore's 'hrl:' (its
 *   strings at the same keys would clash with these hashes).
 * - hono-rate-limiter 0.5 has no double-count or store-reuse check: `prefix` and `localKeys`
 *   are there because its `Store` type declares them.
 * The library is never loaded here: the app hands this store to its own `rateLimiter`.
 */

const { Store: ExpressRateLimitStore } = require('./express-rate-limit.js')
const { typeError, rangeError, checkOptionsObject, checkKnownOptions } = require('./errors.js')

const KNOWN = ['client', 'prefix', 'clock', 'onStoreError']
const CONTEXT = 'hono-rate-limiter Store options'
const DEFAULT_PREFIX = 'ratekeeper:hrl:'
/** How the express-rate-limit Store's errors name the option that hono-rate-limiter also calls `windowMs`. */
const THEIR_WINDOW = "express-rate-limit's `windowMs`"
const OUR_WINDOW = "hono-rate-limiter's `windowMs`"

class Store {
  /** The express-rate-limit Store that counts: the same window, the same answers. */
  #counts
  /** Whether `init` succeeded (else the calls reject, with `#initError` once it failed). */
  #initialized = false
  #initError = null

  constructor(options = {}) {
    // Checked here so that the messages name this store, not the one that counts.
    checkOptionsObject(options, CONTEXT)
    checkKnownOptions(options, KNOWN, CONTEXT)
    const { prefix = DEFAULT_PREFIX } = options
    if (typeof prefix !== 'string') throw typeError('ERR_INVALID_OPTION', "`prefix` must be a string, e.g. 'ratekeeper:hrl:'")
    this.#counts = new ExpressRateLimitStore({ ...options, prefix })
    /** Put in front of every key. */
    this.prefix = prefix
    /** Whether counts stay in this process: true in memory, false on Redis (shared by every process). */
    this.localKeys = this.#counts.localKeys
  }

  /**
   * Called by hono-rate-limiter's `rateLimiter()` (and `webSocketLimiter()`) with its options:
   * the window lasts `windowMs`. A bad `windowMs` throws, out of `rateLimiter()`; every call then
   * rejects with that error rather than count in a window of another length.
   */
  init(options) {
    this.#initialized = false
    this.#initError = null
    try {
      checkOptionsObject(options, "hono-rate-limiter's options")
      this.#counts.init({ windowMs: checkedWindowMs(options.windowMs) })
      this.#initialized = true
    } catch (error) {
      this.#initError = namingOurWindow(error)
      throw this.#initError
    }
  }

  /** Counts one hit; resolves `{ totalHits, resetTime }`, the hits of the key's window (this one included). */
  async increment(key) {
    return this.#ready().increment(key)
  }

  /** Takes one hit back: never below 0, and a key without hits stays without. */
  async decrement(key) {
    await this.#ready().decrement(key)
  }

  /** Forgets the key's hits. */
  async resetKey(key) {
    await this.#ready().resetKey(key)
  }

  /** Resolves `{ totalHits, resetTime }` of the key's window, or undefined when it holds no hits. */
  async get(key) {
    return this.#ready().get(key)
  }

  #ready() {
    if (this.#initialized) return this.#counts
    throw this.#initError ?? typeError('ERR_INVALID_ARGUMENT', "the store has no window yet: pass it to hono-rate-limiter's rateLimiter({ store }), which calls init(options)")
  }
}

/**
 * `windowMs` when it is a finite number; the window itself checks the range (more than 0, at
 * most 1e12). NaN and Infinity are refused here: the window's message for them would name its
 * own `duration`, which the user never wrote.
 */
function checkedWindowMs(windowMs) {
  if (typeof windowMs !== 'number') {
    throw typeError('ERR_INVALID_OPTION', `${OUR_WINDOW} must be a number of milliseconds, got ${typeof windowMs}`)
  }
  if (!Number.isFinite(windowMs)) {
    throw rangeError('ERR_INVALID_OPTION', `${OUR_WINDOW} must be a finite number of milliseconds greater than 0 and at most 1e12, got ${windowMs}`)
  }
  return windowMs
}

/** `error` with hono-rate-limiter's `windowMs` named where the express-rate-limit Store named its own. */
function namingOurWindow(error) {
  if (typeof error?.message !== 'string' || !error.message.includes(THEIR_WINDOW)) return error
  const message = error.message.replace(THEIR_WINDOW, OUR_WINDOW)
  return error instanceof RangeError ? rangeError(error.code, message) : typeError(error.code, message)
}

module.exports = { Store }
