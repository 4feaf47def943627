'use strict'

/**
 * rolling-rate-limiter's API on the native rolling window: the 0.4 classes (`RateLimiter`,
 * `InMemoryRateLimiter`, `RedisRateLimiter` and its aliases) and the original callback form
 * (`RateLimiter(options)` called without `new`). See index.d.ts for the documentation.
 */

const { RollingWindow } = require('./native.js')
const { runner, syncCaller, storeErrorPolicy, inMemory, sendSoon } = require('./engine.js')
const { resolveStore } = require('./store.js')
const { typeError, checkOptionsObject } = require('./errors.js')
const { decodeVerdict, decodeNothing } = require('./verdict.js')
const { wait } = require('./wait.js')
const { blockCacheOption, withBlockCache } = require('./block-cache.js')
const { callOutside } = require('./attempt.js')

const CONTEXT = 'rate limiter options'

// The modes of RollingWindow.run.
const LIMIT = 0
const PEEK = 1
const CLEAR = 2
const CONSUME = 3
const CHECK = 4
const REWARD = 5
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
  [REWARD]: CHECK,
  [LIMIT + GLOBAL_WHEN_NO_ID]: PEEK + GLOBAL_WHEN_NO_ID,
}

/**
 * What `blockCache` answers (lib/block-cache.js): `limit`'s refusals by count alone (flags 1 | 2)
 * with no action left, and the sliding log's refusals with nothing left; each lasts unchanged
 * until its wait is over.
 */
const BLOCK_CACHE_MODES = {
  [LIMIT]: { family: 'info', learn: (values, i) => values[i] === 3 && values[i + 2] === 0 },
  [PEEK]: { family: 'info', learn: (values, i) => values[i] === 3 && values[i + 2] === 0 },
  [CONSUME]: { family: 'verdict', learn: (values, i) => values[i] === 0 && values[i + 2] === 0 },
  [CHECK]: { family: 'verdict', learn: (values, i) => values[i] === 0 && values[i + 2] === 0 },
}

/** Builds the native window of `limiter` on `store` (null: in memory). */
function initialize(limiter, options, store) {
  const policy = storeErrorPolicy(options, store !== null)
  const { onStoreError, blockCache, ...windowOptions } = options
  const cache = blockCacheOption(blockCache, store !== null, limiter.constructor.name)
  if (cache !== null && options.recordBlocked !== false) {
    throw typeError('ERR_INVALID_OPTION', '`blockCache` needs `recordBlocked: false`: with blocked attempts recorded in Redis, each one extends the block, which an answer given in process cannot do')
  }
  limiter.window = new RollingWindow(windowOptions, store)
  const memory = policy === 'reject' ? null : new RollingWindow(inMemory(windowOptions), null)
  const cached = cache === null ? undefined : (call) => withBlockCache(call, cache, BLOCK_CACHE_MODES, [CLEAR, REWARD])
  limiter.run = runner(limiter.window, policy, memory, QUIET_MODES, cached)
  limiter.runSync = syncCaller(limiter.window, store !== null, limiter.constructor.name)
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

/**
 * The methods over the native window, by name: its mode, how its answer is decoded, and whether
 * it takes call options. `consume`, `peek` and `reward` are the counting limiters' shape on the
 * rolling window as a sliding log: only allowed actions are logged (`weight` of them, with
 * `meta`), whatever `recordBlocked` says. Each method has a synchronous twin named with `Sync`
 * (in memory only) that returns the answer, or throws, instead of a Promise.
 */
const METHODS = {
  limitWithInfo: [LIMIT, decodeInfo, true],
  wouldLimitWithInfo: [PEEK, decodeInfo, true],
  limit: [LIMIT, decodeBlocked, true],
  wouldLimit: [PEEK, decodeBlocked, true],
  clear: [CLEAR, decodeNothing, false],
  consume: [CONSUME, decodeVerdict, true],
  peek: [CHECK, decodeVerdict, true],
  reward: [REWARD, decodeVerdict, true],
  reset: [CLEAR, decodeNothing, false],
}

for (const [name, [mode, decode, takesOptions]] of Object.entries(METHODS)) {
  const syncName = `${name}Sync`
  // Named functions, as written out (stack traces name them).
  const methods = {
    [name](id, options) {
      return this.run(mode, id, takesOptions ? options : undefined, decode)
    },
    [syncName](id, options) {
      return this.runSync(mode, id, takesOptions ? options : undefined, decode)
    },
  }
  RateLimiter.prototype[name] = methods[name]
  RateLimiter.prototype[syncName] = methods[syncName]
}

RateLimiter.prototype.wait = function waitFor(id, options) {
  return wait(this, id, options)
}

RateLimiter.prototype.entries = function entries(id, options) {
  const answer = this.window.entries(id, options)
  // On Redis the call is held until the turn ends (see sendSoon).
  sendSoon()
  return answer
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
        callOutside(callback, null, timeLeftOf(info), info.actionsRemaining)
        return timeLeftOf(info)
      },
      (error) => {
        callOutside(callback, error)
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
