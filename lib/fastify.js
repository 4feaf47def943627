'use strict'

/**
 * A store for @fastify/rate-limit 11 (`require('ratekeeper/fastify')`), so that a Fastify app
 * keeps the plugin and swaps its LocalStore or RedisStore for ratekeeper's expiring counter, in
 * memory or on any Redis ratekeeper takes. See fastify.d.ts for the documentation.
 *
 * The plugin counts and judges itself: it asks the store for a key's count after a hit and the
 * time left (`{ current, ttl }`), and compares `current` to its `max`. The expiring counter
 * (lib/flexible/counter.js) is the plugin's window exactly: a count that starts at a key's first
 * hit and lives `timeWindow` from then. Over `max`, `continueExceeding` and `exponentialBackoff`
 * restart the window: on Redis in the same script call as the hit (the counter's `addOver`); in
 * memory as the plugin's LocalStore does, a `set` after the `add`, back to back.
 */

const { ExpiringCounter } = require('./flexible/counter.js')
const { resolveStore } = require('./store.js')
const { typeError, rangeError, shown, checkOptionsObject, checkKnownOptions } = require('./errors.js')

const KNOWN = ['client', 'nameSpace']
const CONTEXT = 'ratekeeperStore options'
/**
 * The plugin's own RedisStore prefix (its `nameSpace` default): the layout is the same too (a
 * whole number at the key, its TTL the time left), so that both count together while a fleet
 * switches over.
 */
const DEFAULT_NAMESPACE = 'fastify-rate-limit-'
/** The longest key prefix the native engines take, in UTF-8 bytes. */
const MAX_NAMESPACE_BYTES = 1024
/** The longest duration the expiring counter takes (src/time.rs `MAX_DURATION_MS`: 31.7 years). */
const MAX_DURATION_MS = 1e12

/**
 * Returns the class to give @fastify/rate-limit as its `store` option, with its counts in memory
 * or, given `client`, on Redis.
 */
function ratekeeperStore(options = {}) {
  checkOptionsObject(options, CONTEXT)
  checkKnownOptions(options, KNOWN, CONTEXT)
  const { client, nameSpace = DEFAULT_NAMESPACE } = options
  if (typeof nameSpace !== 'string') {
    throw typeError('ERR_INVALID_OPTION', `\`nameSpace\` must be a string, e.g. '${DEFAULT_NAMESPACE}', got ${shown(nameSpace)}`)
  }
  if (Buffer.byteLength(nameSpace) > MAX_NAMESPACE_BYTES) {
    throw rangeError('ERR_INVALID_OPTION', `\`nameSpace\` must be at most ${MAX_NAMESPACE_BYTES} bytes`)
  }
  const redisStore = client == null ? null : resolveStore(client, 'client').store
  // On Redis, every store of the app (the global one and each route's) calls one engine, so that
  // the calls of a turn leave in one batch; in memory each has its own, as the plugin's LocalStore.
  const sharedCounter = redisStore === null ? null : new ExpiringCounter(redisStore, 0)
  const counterFor = (timeWindow) => sharedCounter ?? new ExpiringCounter(null, typeof timeWindow === 'number' ? timeWindow : 0)
  return storeClass(nameSpace, counterFor)
}

/** The store class over the counters `counterFor(timeWindow)` gives, its keys under `nameSpace`. */
function storeClass(nameSpace, counterFor) {
  return class RatekeeperFastifyStore {
    #counter
    #continueExceeding
    #exponentialBackoff
    /** Put in front of every key (a route's store adds its method and URL). */
    #prefix = nameSpace

    /**
     * Called by the plugin with its options (`child` with a route's): reads `continueExceeding`,
     * `exponentialBackoff` and `timeWindow`, checked here so that a bad one fails the plugin's
     * registration (or the route's).
     */
    constructor(params = {}) {
      checkOptionsObject(params, '@fastify/rate-limit options')
      this.#continueExceeding = booleanParam(params, 'continueExceeding')
      this.#exponentialBackoff = booleanParam(params, 'exponentialBackoff')
      this.#counter = counterFor(checkedTimeWindowParam(params.timeWindow))
    }

    /** What this store puts in front of every key: its Redis keys are `prefix + key`. */
    get prefix() {
      return this.#prefix
    }

    /**
     * The store of a route (or of `fastify.rateLimit(options)` / `createRateLimit(options)`), with
     * the plugin's options merged with the route's: its keys apart from the others'.
     */
    child(routeOptions) {
      const child = new this.constructor(routeOptions)
      // The plugin's RedisStore's key for a route, to the character (`undefined` included, for
      // createRateLimit's, whose routeInfo is empty): both count together on one Redis.
      const { method, url } = routeOptions.routeInfo ?? {}
      child.#prefix = `${this.#prefix}${method}${url}-`
      return child
    }

    /**
     * Counts one hit for `key` in a window of `timeWindow` ms; calls back `{ current, ttl }`: the
     * key's hits in its window, this one included, and the ms until the window ends.
     */
    incr(key, callback, timeWindow, max) {
      checkCallback(callback)
      answerWith(callback, () => {
        const id = this.#idOf(key)
        checkTimeWindow(timeWindow)
        checkMax(max)
        // A window of 0 ms ends as it starts: every hit is the first of its own (as the plugin's
        // stores answer), and a duration of 0 would be "never expires" to the counter.
        if (timeWindow === 0) return { current: 1, ttl: 0 }
        return this.#counter.store === null ? this.#incrInMemory(id, timeWindow, max) : this.#incrOnRedis(id, timeWindow, max)
      })
    }

    /**
     * For the plugin's `{ increment: false }`: calls back `{ current, ttl }` of `key` without
     * counting a hit, `{ current: 0, ttl: 0 }` when it has none. `timeWindow` and `max` are not
     * needed: the window's end is stored with the count.
     */
    read(key, callback, timeWindow, max) {
      checkCallback(callback)
      answerWith(callback, () => {
        const id = this.#idOf(key)
        return this.#counter.store === null ? readAnswer(this.#counter.getNow(id)) : this.#counter.get(id).then(readAnswer)
      })
    }

    /**
     * The plugin's LocalStore, step for step: the window restarts on a hit over `max` with
     * `continueExceeding`; with `exponentialBackoff` too, but it answers a `ttl` that doubles with
     * each further hit (as LocalStore does: its window still ends `timeWindow` after that hit).
     */
    #incrInMemory(id, timeWindow, max) {
      const { points, msLeft, fresh } = this.#counter.addNow(id, 1, timeWindow)
      if (!this.#restartsWindow(points, fresh, max)) return { current: points, ttl: msLeft }
      this.#counter.setNow(id, points, timeWindow)
      return { current: points, ttl: this.#continueExceeding ? timeWindow : backoffMs(timeWindow, points, max) }
    }

    /**
     * The plugin's RedisStore: as in memory, but with `exponentialBackoff` the key lives as long as
     * the `ttl` answered (at most 1e12 ms). One script call: the add, and the window's restart over
     * `max` (the counter's `addOver`, whose growth is 1 for `continueExceeding`, 2 for
     * `exponentialBackoff`).
     */
    async #incrOnRedis(id, timeWindow, max) {
      const restarts = this.#continueExceeding || this.#exponentialBackoff
      const { points, msLeft } = restarts
        ? await this.#counter.addOver(id, 1, timeWindow, max, this.#continueExceeding ? 1 : 2)
        : await this.#counter.add(id, 1, timeWindow)
      return { current: points, ttl: msLeft }
    }

    /**
     * In memory, whether a hit that brought a key to `points` starts its window again: over `max`,
     * with `continueExceeding` or `exponentialBackoff`. Not a `fresh` key's (its window has just
     * started, as long as a restart would make it).
     */
    #restartsWindow(points, fresh, max) {
      return !fresh && points > max && (this.#continueExceeding || this.#exponentialBackoff)
    }

    /** The counter's id of the plugin's `key`: a string, or a finite number (as its string). */
    #idOf(key) {
      if (typeof key === 'string') return this.#prefix + key
      if (typeof key === 'number') {
        if (Number.isFinite(key)) return this.#prefix + key
        throw rangeError('ERR_INVALID_ID', `a key must be a string or a finite number, got ${key}`)
      }
      throw typeError('ERR_INVALID_ID', `a key must be a string or a finite number (what the plugin's \`keyGenerator\` returns), got ${shown(key)}`)
    }
  }
}

/** The plugin's exponential backoff: `timeWindow` doubled for each hit over `max` after the first. */
function backoffMs(timeWindow, current, max) {
  const ms = timeWindow * 2 ** (current - max - 1)
  return Number.isSafeInteger(ms) ? ms : Number.MAX_SAFE_INTEGER
}

/** `{ current, ttl }` of what a key holds (a reading or null), as the plugin's `read` answers. */
function readAnswer(reading) {
  return reading === null ? { current: 0, ttl: 0 } : { current: reading.points, ttl: Math.max(0, reading.msLeft) }
}

/**
 * Calls `callback` back with what `compute()` answers: at once (in memory, or an error), or once
 * its Promise settles (on Redis). An error thrown by the callback itself is not caught here.
 */
function answerWith(callback, compute) {
  let answer
  try {
    answer = compute()
  } catch (error) {
    callback(error)
    return
  }
  if (answer instanceof Promise) answer.then((value) => callback(null, value), callback)
  else callback(null, answer)
}

function booleanParam(params, name) {
  const value = params[name]
  if (value === undefined) return false
  if (typeof value !== 'boolean') throw typeError('ERR_INVALID_OPTION', `@fastify/rate-limit's \`${name}\` must be a boolean, got ${shown(value)}`)
  return value
}

/** The plugin's `timeWindow` at registration: milliseconds, or a function of the request. */
function checkedTimeWindowParam(timeWindow) {
  if (typeof timeWindow !== 'number') return timeWindow
  if (!Number.isInteger(timeWindow) || timeWindow < 0 || timeWindow > MAX_DURATION_MS) {
    throw rangeError('ERR_INVALID_OPTION', `@fastify/rate-limit's \`timeWindow\` must be whole milliseconds from 0 to ${MAX_DURATION_MS} (31 years), got ${timeWindow}`)
  }
  return timeWindow
}

function checkCallback(callback) {
  if (typeof callback !== 'function') throw typeError('ERR_INVALID_ARGUMENT', `the callback must be a function, got ${shown(callback)}`)
}

function checkTimeWindow(timeWindow) {
  if (typeof timeWindow !== 'number') {
    throw typeError('ERR_INVALID_ARGUMENT', `\`timeWindow\` must be a number of milliseconds (what the plugin's \`timeWindow\` gives), got ${shown(timeWindow)}`)
  }
  if (!Number.isInteger(timeWindow) || timeWindow < 0 || timeWindow > MAX_DURATION_MS) {
    throw rangeError('ERR_INVALID_ARGUMENT', `\`timeWindow\` must be whole milliseconds from 0 to ${MAX_DURATION_MS}, got ${timeWindow}`)
  }
}

function checkMax(max) {
  if (typeof max !== 'number') throw typeError('ERR_INVALID_ARGUMENT', `\`max\` must be a number (what the plugin's \`max\` gives), got ${shown(max)}`)
  if (!Number.isSafeInteger(max) || max < 0) throw rangeError('ERR_INVALID_ARGUMENT', `\`max\` must be a whole number from 0 to 2^53 - 1, got ${max}`)
}

module.exports = { ratekeeperStore }
