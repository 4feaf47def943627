'use strict'

/**
 * A store for express-rate-limit 8 (`require('ratekeeper/express-rate-limit')`), so that an app
 * keeps express-rate-limit and swaps rate-limit-redis (or the MemoryStore) for ratekeeper's
 * fixed window, on Redis or in memory. See express-rate-limit.d.ts for the documentation.
 *
 * express-rate-limit counts every request itself (it calls `increment` and compares `totalHits`
 * to its own `limit`), so the window here never refuses: its limit is the largest a fixed window
 * takes, and `totalHits` is what is missing from `remaining`.
 */

const { FixedWindow } = require('./counting.js')
const { resolveStore } = require('./store.js')
const { typeError, rangeError, checkOptionsObject, checkKnownOptions } = require('./errors.js')

const KNOWN = ['client', 'prefix', 'clock', 'onStoreError']
/**
 * Whose store this is, as its errors and its default prefix say: express-rate-limit's here;
 * lib/hono.js gives hono-rate-limiter's (whose `Store` is this one's).
 */
const EXPRESS_RATE_LIMIT = {
  /** How errors name the constructor's options. */
  options: 'express-rate-limit Store options',
  /** Not rate-limit-redis's `'rl:'`: its strings at the same keys would clash with these hashes. */
  defaultPrefix: 'ratekeeper:erl:',
  /** How errors name the options `init` is given, and their `windowMs`. */
  initOptions: 'express-rate-limit options',
  windowMs: "express-rate-limit's `windowMs`",
  /** Where the store goes, so that `init` is called. */
  middleware: "express-rate-limit's rateLimit({ store })",
}
/** express-rate-limit's own default `windowMs`: the window checked at construction. */
const DEFAULT_WINDOW_MS = 60_000
/** The largest limit a fixed window takes (counts stay exact in Lua's doubles): never reached. */
const NEVER_REFUSES = 1e15

class Store {
  /** The RedisStore the counts live on, or null in memory. */
  #store
  #clock
  /** The window's `onStoreError` (what a call answers while Redis is unavailable), if given. */
  #onStoreError
  /** Whether this host's clock (`Date.now()`, which fake timers drive) decides, not Redis's. */
  #localClock
  /** The window `init` built (null before, or after a bad `windowMs`: then `#initError`). */
  #window = null
  #initError = null
  /** Whose store this is (see EXPRESS_RATE_LIMIT). */
  #names

  /** `names` is for lib/hono.js (see EXPRESS_RATE_LIMIT), not part of the API. */
  constructor(options = {}, names = EXPRESS_RATE_LIMIT) {
    this.#names = names
    checkOptionsObject(options, names.options)
    checkKnownOptions(options, KNOWN, names.options)
    const { client, prefix = names.defaultPrefix, clock, onStoreError } = options
    if (typeof prefix !== 'string') throw typeError('ERR_INVALID_OPTION', `\`prefix\` must be a string, e.g. '${names.defaultPrefix}'`)
    this.#store = client == null ? null : resolveStore(client, 'client').store
    this.#clock = clock
    this.#onStoreError = onStoreError
    this.#localClock = this.#store === null || clock === 'local'
    /** Put in front of every key (express-rate-limit's double-count check reads it too). */
    this.prefix = prefix
    /** Whether counts stay in this process: true in memory, false on Redis (shared by every process). */
    this.localKeys = this.#store === null
    // A window is built now so that bad options throw here: express-rate-limit only logs what
    // `init` throws.
    this.#buildWindow(DEFAULT_WINDOW_MS)
  }

  #buildWindow(windowMs) {
    const options = { namespace: this.prefix, limits: [{ duration: windowMs, limit: NEVER_REFUSES }] }
    if (this.#store !== null) options.client = this.#store
    if (this.#clock !== undefined) options.clock = this.#clock
    if (this.#onStoreError !== undefined) options.onStoreError = this.#onStoreError
    try {
      return new FixedWindow(options)
    } catch (error) {
      // The window's own message names `limits[0].duration`, which the user never wrote.
      if (error?.code !== 'ERR_INVALID_OPTION' || !error.message.includes('`limits[0].duration`')) throw error
      const message = error.message.replace('`limits[0].duration`', this.#names.windowMs)
      throw error instanceof RangeError ? rangeError(error.code, message) : typeError(error.code, message)
    }
  }

  /**
   * Called by express-rate-limit with its options when the middleware is created: the window
   * lasts `windowMs`. A bad `windowMs` throws (express-rate-limit logs it), and every call then
   * rejects with that error rather than count in a window of another length.
   */
  init(options) {
    this.#window = null
    try {
      checkOptionsObject(options, this.#names.initOptions)
      const { windowMs } = options
      if (typeof windowMs !== 'number') {
        throw typeError('ERR_INVALID_OPTION', `${this.#names.windowMs} must be a number of milliseconds, got ${typeof windowMs}`)
      }
      // (NaN and Infinity here: the window's own message for them would name its `duration`.)
      if (!Number.isFinite(windowMs)) {
        throw rangeError('ERR_INVALID_OPTION', `${this.#names.windowMs} must be a finite number of milliseconds greater than 0 and at most 1e12, got ${windowMs}`)
      }
      this.#window = this.#buildWindow(windowMs)
      this.#initError = null
    } catch (error) {
      this.#initError = error
      throw error
    }
  }

  /** Counts one hit; resolves `{ totalHits, resetTime }`, the hits of the key's window (this one included). */
  async increment(key) {
    const now = Date.now()
    return clientInfo(await this.#ready().consume(key, this.#callOptions(now)), now)
  }

  /** Takes one hit back: never below 0, and a key without hits stays without. */
  async decrement(key) {
    await this.#ready().reward(key, this.#callOptions(Date.now()))
  }

  /** Forgets the key's hits. */
  async resetKey(key) {
    await this.#ready().reset(key)
  }

  /** Resolves `{ totalHits, resetTime }` of the key's window, or undefined when it holds no hits. */
  async get(key) {
    const now = Date.now()
    const answer = await this.#ready().peek(key, this.#callOptions(now))
    return answer.remaining === answer.limit ? undefined : clientInfo(answer, now)
  }

  #ready() {
    if (this.#window !== null) return this.#window
    throw this.#initError ?? typeError('ERR_INVALID_ARGUMENT', `the store has no window yet: pass it to ${this.#names.middleware}, which calls init(options)`)
  }

  /** A call's options: its instant when this host's clock decides, none for the Redis server's. */
  #callOptions(now) {
    return this.#localClock ? { now } : undefined
  }
}

/**
 * express-rate-limit's `ClientRateLimitInfo` from a window's answer to a call made at `now`.
 * On the Redis server's clock `resetTime` is then early by the time the call took to get there,
 * never late: express-rate-limit's headers round it up to the second, which lands on the
 * window's end when that is on a whole second (counting from the answer, as rate-limit-redis
 * does, would give the second after).
 */
function clientInfo(answer, now) {
  return { totalHits: answer.limit - answer.remaining, resetTime: new Date(now + answer.resetAfter) }
}

module.exports = { Store }
