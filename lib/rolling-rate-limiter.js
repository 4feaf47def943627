'use strict'

/**
 * rolling-rate-limiter's API on the native rolling window: the 0.4 classes (`RateLimiter`,
 * `InMemoryRateLimiter`, `RedisRateLimiter` and its aliases) and the original callback form
 * (`RateLimiter(options)` called without `new`). See index.d.ts for the documentation.
 */

const { RollingWindow } = require('../binding.js')
const { runner, storeErrorPolicy, inMemory } = require('./engine.js')
const { resolveStore } = require('./store.js')
const { typeError, checkOptionsObject } = require('./errors.js')
const { decodeVerdict, decodeNothing } = require('./verdict.js')

const CONTEXT = 'rate limiter options'

// The modes of RollingWindow.run.
const LIMIT = 0
const PEEK = 1
const CLEAR = 2
const CONSUME = 3
const CHECK = 4
/** Added to LIMIT: a missing id is the limiter's one global limit (the callback API only). */
const GLOBAL_WHEN_NO_ID = 16

/** RollingWindow's answer (flags, wait in ms, actions remaining) as rolling-rate-limiter's RateLimitInfo. */
function decodeInfo(values, i) {
  const flags = values[i]
  return {
    blocked: (flags & 1) !== 0,
    blockedDueToCount: (flags & 2) !== 0,
    blockedDueToMinDifference: (flags & 4) !== 0,
    millisecondsUntilAllowed: values[i + 1],
    actionsRemaining: values[i + 2],
  }
}

const decodeBlocked = (values, i) => (values[i] & 1) !== 0

/** The modes that answer like each mode but change nothing (for `onStoreError: 'allow'`). */
const QUIET_MODES = {
  [LIMIT]: PEEK,
  [PEEK]: PEEK,
  [CLEAR]: PEEK,
  [CONSUME]: CHECK,
  [CHECK]: CHECK,
  [LIMIT + GLOBAL_WHEN_NO_ID]: PEEK + GLOBAL_WHEN_NO_ID,
}

/** Builds the native window of `limiter` on `store` (null: in memory). */
function initialize(limiter, options, store) {
  const policy = storeErrorPolicy(options, store !== null)
  const { onStoreError, ...windowOptions } = options
  limiter.window = new RollingWindow(windowOptions, store)
  const memory = policy === 'reject' ? null : new RollingWindow(inMemory(windowOptions), null)
  limiter.run = runner(limiter.window, policy, memory, QUIET_MODES)
  // rolling-rate-limiter 0.4 exposes these, in microseconds.
  limiter.interval = options.interval * 1000
  limiter.maxInInterval = options.maxInInterval
  limiter.minDifference = (options.minDifference ?? 0) * 1000
}

/** Splits `client` off the options and resolves it; `required` for RedisRateLimiter. */
function initializeWithClient(limiter, options, required) {
  checkOptionsObject(options, CONTEXT)
  const { client, ...windowOptions } = options
  if (client == null) {
    if (required) throw typeError('ERR_INVALID_OPTION', '`client` is required: pass a Redis client, URL, options object or RedisStore')
    initialize(limiter, windowOptions, null)
    return
  }
  const { store, clientType } = resolveStore(client, 'client')
  initialize(limiter, windowOptions, store)
  limiter.namespace = windowOptions.namespace ?? 'ratekeeper:'
  limiter.detectedClientType = clientType
}

function RateLimiter(options) {
  if (!new.target) return createLimiterFunction(options)
  initializeWithClient(this, options, false)
}

RateLimiter.prototype.limitWithInfo = function limitWithInfo(id, options) {
  return this.run(LIMIT, id, options, decodeInfo)
}

RateLimiter.prototype.wouldLimitWithInfo = function wouldLimitWithInfo(id, options) {
  return this.run(PEEK, id, options, decodeInfo)
}

RateLimiter.prototype.limit = function limit(id, options) {
  return this.run(LIMIT, id, options, decodeBlocked)
}

RateLimiter.prototype.wouldLimit = function wouldLimit(id, options) {
  return this.run(PEEK, id, options, decodeBlocked)
}

RateLimiter.prototype.clear = function clear(id) {
  return this.run(CLEAR, id, undefined, decodeNothing)
}

// The counting limiters' shape, on the rolling window as a sliding log: only allowed actions
// are logged (`weight` of them, with `meta`), whatever `recordBlocked` says.

RateLimiter.prototype.consume = function consume(id, options) {
  return this.run(CONSUME, id, options, decodeVerdict)
}

RateLimiter.prototype.peek = function peek(id, options) {
  return this.run(CHECK, id, options, decodeVerdict)
}

RateLimiter.prototype.reset = function reset(id) {
  return this.run(CLEAR, id, undefined, decodeNothing)
}

RateLimiter.prototype.entries = function entries(id, options) {
  return this.window.entries(id, options)
}

/**
 * The sliding log: the rolling window counting allowed actions only (`recordBlocked: false`).
 * One entry per allowed action, up to `maxInInterval` per id: exact, at a memory cost that grows
 * with the limit (counters and buckets do not).
 */
class SlidingLog extends RateLimiter {
  constructor(options) {
    checkOptionsObject(options, 'SlidingLog options')
    if (options.recordBlocked !== undefined) {
      throw typeError('ERR_UNKNOWN_OPTION', 'SlidingLog takes no `recordBlocked`: it logs allowed actions only')
    }
    super({ ...options, recordBlocked: false })
  }
}

class InMemoryRateLimiter extends RateLimiter {
  constructor(options) {
    checkOptionsObject(options, CONTEXT)
    if (options.client != null) {
      throw typeError('ERR_INVALID_OPTION', 'InMemoryRateLimiter takes no `client`: use RedisRateLimiter')
    }
    super(options)
  }

  /** How many ids hold state in memory (idle ones are dropped as the map grows). */
  get trackedIds() {
    return this.window.trackedIds
  }

  /** How many active ids the in-memory store evicted to stay within `maxKeys`. */
  get evictedIds() {
    return this.window.evictedIds
  }
}

class RedisRateLimiter extends RateLimiter {
  constructor(options) {
    checkOptionsObject(options, CONTEXT)
    if (options.client == null) {
      throw typeError('ERR_INVALID_OPTION', '`client` is required: pass a Redis client, URL, options object or RedisStore')
    }
    super(options)
  }

  /** rolling-rate-limiter's client detection: `'ioredis'`, `'node-redis'`, ... or `null`. */
  static determineRedisClientType(client) {
    return require('./redis-client.js').detectClientType(client)
  }
}

/**
 * The callback API of the ClassDojo post: `RateLimiter({ redis?, namespace?, interval,
 * maxInInterval, minDifference? })` returns `limiter(id?, cb?)`.
 */
function createLimiterFunction(options) {
  checkOptionsObject(options, CONTEXT)
  const { redis, ...rest } = options
  if (rest.client !== undefined) {
    throw typeError('ERR_INVALID_OPTION', 'the callback form takes `redis`, not `client`; use `new RateLimiter({ client })` for the class form')
  }
  const limiter = redis == null ? new InMemoryRateLimiter(rest) : new RedisRateLimiter({ ...rest, client: redis })

  function limit(id, callback) {
    if (typeof id === 'function' && callback === undefined) {
      callback = id
      id = undefined
    }
    if (callback !== undefined && typeof callback !== 'function') {
      const error = typeError('ERR_INVALID_ARGUMENT', 'the callback must be a function')
      return Promise.reject(error)
    }
    const answer = limiter.run(LIMIT + GLOBAL_WHEN_NO_ID, id, undefined, decodeInfo)
    if (!callback) return answer.then(timeLeftOf)
    // The callback runs outside the promise chain, so an exception it throws is not swallowed;
    // the promise then never rejects (the error went to the callback).
    return answer.then(
      (info) => {
        process.nextTick(callback, null, timeLeftOf(info), info.actionsRemaining)
        return timeLeftOf(info)
      },
      (error) => {
        process.nextTick(callback, error)
        return undefined
      },
    )
  }
  limit.limiter = limiter
  return limit
}

function timeLeftOf(info) {
  return info.blocked ? info.millisecondsUntilAllowed : 0
}

module.exports = {
  RateLimiter,
  SlidingLog,
  InMemoryRateLimiter,
  RedisRateLimiter,
  NodeRedisRateLimiter: RedisRateLimiter,
  IORedisRateLimiter: RedisRateLimiter,
}
