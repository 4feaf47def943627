'use strict'

/**
 * The counting limiters' classes: `consume`, `peek`, `reward`, `reset` and `wait` over one id or
 * several, answered with `{ allowed, timeLeft, remaining, limit, resetAfter }` (see index.d.ts).
 * Each class has its native engine (ENGINES); the rest is shared.
 */

const binding = require('./native.js')
const { runner, syncCaller, storeErrorPolicy, inMemory } = require('./engine.js')
const { resolveStore } = require('./store.js')
const { checkOptionsObject, typeError } = require('./errors.js')
const { decodeVerdict, decodeNothing } = require('./verdict.js')
const { wait } = require('./wait.js')
const { blockCacheOption, withBlockCache } = require('./block-cache.js')

// The modes of the engines' `run`.
const CONSUME = 0
const PEEK = 1
const RESET = 2
const REWARD = 3
/** The modes that answer like each mode but change nothing (for `onStoreError: 'allow'`). */
const QUIET_MODES = { [CONSUME]: PEEK, [PEEK]: PEEK, [RESET]: PEEK, [REWARD]: PEEK }
/** What `blockCache` answers (lib/block-cache.js): refusals with nothing left last until their wait is over. */
const refusedWithNothingLeft = (values, i) => values[i] === 0 && values[i + 2] === 0
const BLOCK_CACHE_MODES = {
  [CONSUME]: { family: 'verdict', learn: refusedWithNothingLeft },
  [PEEK]: { family: 'verdict', learn: refusedWithNothingLeft },
}

class CountingLimiter {
  constructor(options) {
    const name = new.target.name
    checkOptionsObject(options, `${name} options`)
    const { client, onStoreError, blockCache, ...rest } = options
    const store = client == null ? null : resolveStore(client, 'client').store
    const policy = storeErrorPolicy(options, store !== null)
    const cache = blockCacheOption(blockCache, store !== null, name)
    const Engine = engineOf(new.target)
    this.engine = new Engine(rest, store)
    // The windows' limits, as given (the buckets and GCRA show their own options).
    if (Array.isArray(rest.limits)) this.limits = rest.limits.map((limit) => ({ ...limit }))
    const memory = policy === 'reject' ? null : new Engine(inMemory(rest), null)
    const cached = cache === null ? undefined : (call) => withBlockCache(call, cache, BLOCK_CACHE_MODES, [RESET, REWARD])
    this.run = runner(this.engine, policy, memory, QUIET_MODES, cached)
    this.runSync = syncCaller(this.engine, store !== null, name)
  }

  wait(ids, options) {
    return wait(this, ids, options)
  }

  /** How many ids hold state in memory (0 on Redis). */
  get trackedIds() {
    return this.engine.trackedIds
  }

  /** How many active ids the in-memory store evicted to stay within `maxKeys`. */
  get evictedIds() {
    return this.engine.evictedIds
  }
}

/**
 * The methods over the engine, by name: its mode and how its answer is decoded. Each has a
 * synchronous twin named with `Sync` (in memory only) that returns the answer, or throws,
 * instead of a Promise.
 */
const METHODS = {
  consume: [CONSUME, decodeVerdict],
  peek: [PEEK, decodeVerdict],
  reward: [REWARD, decodeVerdict],
  reset: [RESET, decodeNothing],
}

for (const [name, [mode, decode]] of Object.entries(METHODS)) {
  const syncName = `${name}Sync`
  const takesOptions = mode !== RESET
  // Named functions, as written out (stack traces name them).
  const methods = {
    [name](ids, options) {
      return this.run(mode, ids, takesOptions ? options : undefined, decode)
    },
    [syncName](ids, options) {
      return this.runSync(mode, ids, takesOptions ? options : undefined, decode)
    },
  }
  Object.defineProperty(CountingLimiter.prototype, name, { value: methods[name], writable: true, configurable: true })
  Object.defineProperty(CountingLimiter.prototype, syncName, { value: methods[syncName], writable: true, configurable: true })
}

/** Shows the limiter's settings (the options given, defaults filled in) as read-only properties. */
function showOptions(limiter, settings) {
  for (const [name, value] of Object.entries(settings)) Object.defineProperty(limiter, name, { value, enumerable: true })
}

class FixedWindow extends CountingLimiter {}

class SlidingWindow extends CountingLimiter {}

class SlidingTail extends CountingLimiter {}

class LeakyBucket extends CountingLimiter {
  constructor(options) {
    super(options)
    const { capacity, leakAmount = 1, leakInterval } = options
    showOptions(this, { capacity, leakAmount, leakInterval })
  }
}

class TokenBucket extends CountingLimiter {
  constructor(options) {
    super(options)
    const { capacity, refillAmount = 1, refillInterval, initial = capacity, forgetAfter = 86_400_000 } = options
    showOptions(this, { capacity, refillAmount, refillInterval, initial, forgetAfter })
  }
}

class Gcra extends CountingLimiter {
  constructor(options) {
    super(options)
    const { limit, period, burst = limit } = options
    showOptions(this, { limit, period, burst })
  }
}

/** Each class's native engine: internal, so not a property of the class. */
const ENGINES = new Map([
  [FixedWindow, binding.FixedWindowEngine],
  [SlidingWindow, binding.SlidingWindowEngine],
  [SlidingTail, binding.SlidingTailEngine],
  [LeakyBucket, binding.LeakyBucketEngine],
  [TokenBucket, binding.TokenBucketEngine],
  [Gcra, binding.GcraEngine],
])

/** The engine of a limiter class, or of the class it extends (a user's subclass). */
function engineOf(limiterClass) {
  for (let c = limiterClass; c !== null; c = Object.getPrototypeOf(c)) {
    const engine = ENGINES.get(c)
    if (engine !== undefined) return engine
  }
  throw typeError('ERR_INVALID_ARGUMENT', `${limiterClass.name} is not a limiter class: extend FixedWindow, SlidingWindow, SlidingTail, LeakyBucket, TokenBucket or Gcra`)
}

module.exports = { FixedWindow, SlidingWindow, SlidingTail, LeakyBucket, TokenBucket, Gcra }
