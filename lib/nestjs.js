'use strict'

/**
 * A storage for @nestjs/throttler 6 (`require('ratekeeper/nestjs')`): an app keeps
 * ThrottlerModule, its guard and its decorators, and passes this as `storage`, in memory or on
 * Redis (single node, Cluster, Sentinel). See nestjs.d.ts for the documentation.
 *
 * What it reproduces, record for record: the official ThrottlerStorageService
 * (@nestjs/throttler/dist/throttler.service.js). Per key and throttler name it keeps
 * - the hits within `ttl`, each forgotten `ttl` after it was made: a sliding log, not a window
 *   (hits at 0 s and 5 s with a ttl of 10 s count 1 at 11 s);
 * - a reset timer (`timeToExpire`), started at a key's first call and started again by the first
 *   call after it has run out, whatever the hits do;
 * - with `blockDuration` above 0 (the guard's default: the ttl), every call that is not blocked
 *   is a hit, and the hit that takes the count above `limit` starts a block of `blockDuration`:
 *   blocked calls are not hits (the count falls as the older ones leave), and the first call
 *   after the block forgets the hits still held and counts 1;
 * - with `blockDuration` 0, only calls within the limit are hits, and a refused one waits for the
 *   oldest hit to leave.
 *
 * Why the rolling window, not the expiring counter: the expiring counter holds a count for a
 * duration from its first points, which is a window, and the official count is a sliding log.
 * The rolling window as a sliding log (`SlidingLog`) counts exactly the hits within the last
 * `ttl`. The timer and the block are sliding logs too, of one entry (`maxInInterval: 1`): a
 * timer is an entry that is there for `ttl` (its `resetAfter` is `timeToExpire`; a consume
 * starts one only when none is there), and a block an entry that is there for `blockDuration`,
 * and longer when `ttl` is longer (the marker of a block that has ended, for as long as hits
 * from before the block may still be within `ttl`: those the next call must forget). So every
 * part takes the call's `now`: in memory, and on Redis with `clock: 'local'`, the storage
 * follows `Date.now()`, which mock timers drive, as the official storage does.
 *
 * One increment is two or three calls of those logs (three when a block starts or ends): in
 * memory they are made synchronously (an increment is atomic, as the official storage's); on
 * Redis they are script calls in two or three round trips, each call atomic but not the
 * increment. Making it one would take a mode of lua/rolling_window.lua (and of
 * src/rolling_window.rs for memory) over the three keys of one id, doing in one script what
 * `withBlock` below does. The logs' `interval` and `maxInInterval` are options of their engine,
 * not call arguments, so there is one engine per ttl (and block length) in use.
 */

const { SlidingLog } = require('./rolling-rate-limiter.js')
const { resolveStore } = require('./store.js')
const { storeErrorPolicy } = require('./engine.js')
const { typeError, rangeError, shown, checkOptionsObject, checkKnownOptions } = require('./errors.js')

const KNOWN = ['client', 'prefix', 'clock', 'onStoreError']
const CONTEXT = 'RatekeeperThrottlerStorage options'
const DEFAULT_PREFIX = 'ratekeeper:nest:'
/** The longest ttl and block, in ms: the rolling window's longest interval. */
const MAX_DURATION_MS = 1e12
/** The largest limit: the rolling window's largest `maxInInterval`. */
const MAX_LIMIT = 1e15
/** With blocks, every call that is not blocked is a hit: the hits' log never refuses one. */
const NEVER_FULL = MAX_LIMIT
/** A key and a throttler name together make one id of the logs, at most this long. */
const MAX_ID_BYTES = 1024
/**
 * The most log engines kept (one per role and ttl or block length in use); past it the oldest
 * goes, and in memory the counts it held with it. Guard settings give a handful.
 */
const MAX_LOGS = 256
/** After Redis was found unavailable, how long increments go to the fallback (as the limiters'). */
const RETRY_REDIS_AFTER_MS = 500

class RatekeeperThrottlerStorage {
  /** The RedisStore the records live on, or null in memory. */
  #store
  /** Whether calls give `now` (`Date.now()`, which fake timers drive) rather than leave it to Redis's clock. */
  #localClock
  #policy
  /** With `onStoreError: 'memory'`, the in-memory storage that answers while Redis is unavailable. */
  #fallback
  /** Until when increments go to the fallback (0: try Redis). */
  #fallbackUntil = 0
  /** The log engines, by role and settings (see `#log`). */
  #logs = new Map()

  constructor(options = {}) {
    checkOptionsObject(options, CONTEXT)
    checkKnownOptions(options, KNOWN, CONTEXT)
    const { client, prefix = DEFAULT_PREFIX, clock = 'redis' } = options
    if (typeof prefix !== 'string') throw typeError('ERR_INVALID_OPTION', `\`prefix\` must be a string, e.g. '${DEFAULT_PREFIX}', got ${shown(prefix)}`)
    if (clock !== 'redis' && clock !== 'local') throw rangeError('ERR_INVALID_OPTION', `\`clock\` must be 'redis' or 'local', got ${shown(clock)}`)
    this.#store = client == null ? null : resolveStore(client, 'client').store
    this.#policy = storeErrorPolicy(options, this.#store !== null)
    this.#localClock = this.#store === null || clock === 'local'
    this.#fallback = this.#policy === 'memory' ? new RatekeeperThrottlerStorage({ prefix }) : null
    /** Put in front of every Redis key. */
    this.prefix = prefix
    // One log now, so that a prefix the logs refuse (too long) throws here.
    this.#log('reset', 1000, 1)
  }

  /** The RedisStore the records are kept on (its `on('error')` reports outages), or null in memory. */
  get store() {
    return this.#store
  }

  /**
   * Counts a hit for `key` under the throttler `throttlerName`: what @nestjs/throttler's guard
   * calls once per throttler and request. Resolves `{ totalHits, timeToExpire, isBlocked,
   * timeToBlockExpire }` (the two times in seconds, rounded up).
   */
  async increment(key, ttl, limit, blockDuration, throttlerName) {
    const call = checkedCall(key, ttl, limit, blockDuration, throttlerName)
    if (this.#store === null) return this.#runNow(call)
    if (this.#policy === 'reject') return this.#runOnRedis(call)
    if (this.#fallbackUntil !== 0 && Date.now() < this.#fallbackUntil) return this.#fallbackRecord(call)
    try {
      const record = await this.#runOnRedis(call)
      this.#fallbackUntil = 0
      return record
    } catch (error) {
      if (error?.code !== 'ERR_STORE_UNAVAILABLE') throw error
      this.#fallbackUntil = Date.now() + RETRY_REDIS_AFTER_MS
      return this.#fallbackRecord(call)
    }
  }

  /** In memory: every call at once, so that an increment is atomic. */
  #runNow(call) {
    const steps = this.#steps(call)
    const options = { now: Date.now() }
    let step = steps.next()
    while (!step.done) step = steps.next(step.value.map(({ log, method, id }) => log[`${method}Sync`](id, options)))
    return step.value
  }

  /** On Redis: the calls of each step together (one round trip), the steps one after the other. */
  async #runOnRedis(call) {
    const steps = this.#steps(call)
    const options = this.#localClock ? { now: Date.now() } : undefined
    let step = steps.next()
    while (!step.done) step = steps.next(await Promise.all(step.value.map(({ log, method, id }) => log[method](id, options))))
    return step.value
  }

  /** What an increment answers while Redis is unavailable, by `onStoreError`. */
  #fallbackRecord(call) {
    if (this.#fallback !== null) return this.#fallback.#runNow(call)
    // 'allow': the request passes, neither checked nor counted.
    return record(0, 0, false, 0)
  }

  #steps({ key, ttl, limit, blockDuration, throttlerName }) {
    // The name first, escaped, so that no two (name, key) pairs make one id.
    const id = `${encodeURIComponent(throttlerName)}:${key}`
    if (Buffer.byteLength(id) > MAX_ID_BYTES) {
      throw rangeError('ERR_INVALID_ID', `the key and the throttler name (URI-encoded) must be at most ${MAX_ID_BYTES - 1} bytes together, got ${Buffer.byteLength(id) - 1}`)
    }
    const timer = this.#log('reset', ttl, 1)
    if (blockDuration === 0) return withoutBlock(id, timer, limit === 0 ? null : this.#log('hits', ttl, limit), limit)
    // The block's marker stays until every hit from before the block has left the window.
    const markerLife = Math.max(blockDuration, ttl)
    return withBlock(id, timer, this.#log('hits', ttl, NEVER_FULL), this.#log('block', markerLife, 1), limit, blockDuration, markerLife)
  }

  /** The sliding log of `role` (`'hits'`, `'reset'` or `'block'`) with these settings, made on first use. */
  #log(role, interval, maxInInterval) {
    const name = `${role} ${interval} ${maxInInterval}`
    let log = this.#logs.get(name)
    if (log === undefined) {
      if (this.#logs.size >= MAX_LOGS) this.#logs.delete(this.#logs.keys().next().value)
      const options = { interval, maxInInterval, namespace: `${this.prefix}${role}:` }
      if (this.#store !== null) options.client = this.#store
      log = new SlidingLog(options)
      this.#logs.set(name, log)
    }
    return log
  }
}

/** A call of one of the logs' methods, as the steps yield them. */
const consume = (log, id) => ({ log, method: 'consume', id })
const peek = (log, id) => ({ log, method: 'peek', id })
const reset = (log, id) => ({ log, method: 'reset', id })

/** The hits a log holds, from its answer. */
const hitsOf = (verdict) => verdict.limit - verdict.remaining
/** Milliseconds as the official storage reports them: seconds, rounded up. */
const seconds = (ms) => Math.ceil(ms / 1000)

function record(totalHits, timeToExpire, isBlocked, timeToBlockExpire) {
  return { totalHits, timeToExpire, isBlocked, timeToBlockExpire }
}

/**
 * An increment with blocks: yields the calls of each step (answered in order) and returns the
 * record. The marker lives `markerLife`, the block the first `blockDuration` of it.
 */
function* withBlock(id, timer, hits, marker, limit, blockDuration, markerLife) {
  const [window, block] = yield [consume(timer, id), peek(marker, id)]
  const timeToExpire = seconds(window.resetAfter)
  if (!block.allowed) {
    const blockLeft = block.timeLeft - (markerLife - blockDuration)
    if (blockLeft > 0) {
      // Blocked: not a hit; the count is what is still within the ttl.
      const [held] = yield [peek(hits, id)]
      return record(hitsOf(held), timeToExpire, true, seconds(blockLeft))
    }
    // The block is over: its hits are forgotten and this one counts 1, allowed whatever the
    // limit (as the official storage: with a limit of 0, one call passes after each block).
    yield [reset(hits, id), reset(marker, id)]
    const [fresh] = yield [consume(hits, id)]
    return record(hitsOf(fresh), timeToExpire, false, 0)
  }
  const [counted] = yield [consume(hits, id)]
  const totalHits = hitsOf(counted)
  if (totalHits <= limit) return record(totalHits, timeToExpire, false, 0)
  yield [consume(marker, id)]
  return record(totalHits, timeToExpire, true, seconds(blockDuration))
}

/**
 * An increment without blocks (`blockDuration` 0): a hit when within the limit; a refused call
 * reports the limit plus itself, and the wait until the oldest hit leaves. `hits` is null for a
 * limit of 0, which refuses every call and logs nothing.
 */
function* withoutBlock(id, timer, hits, limit) {
  if (hits === null) {
    const [window] = yield [consume(timer, id)]
    const timeToExpire = seconds(window.resetAfter)
    return record(1, timeToExpire, true, timeToExpire)
  }
  const [window, counted] = yield [consume(timer, id), consume(hits, id)]
  const timeToExpire = seconds(window.resetAfter)
  if (counted.allowed) return record(hitsOf(counted), timeToExpire, false, 0)
  return record(limit + 1, timeToExpire, true, seconds(counted.timeLeft))
}

/** The arguments of `increment`, checked; `blockDuration` 0 for no block. */
function checkedCall(key, ttl, limit, blockDuration, throttlerName) {
  if (typeof key !== 'string') throw typeError('ERR_INVALID_ID', `the key must be a string (what the guard's \`generateKey\` returns), got ${shown(key)}`)
  if (key === '') throw rangeError('ERR_INVALID_ID', 'the key must not be empty')
  if (typeof throttlerName !== 'string') throw typeError('ERR_INVALID_ARGUMENT', `the throttler name must be a string, got ${shown(throttlerName)}`)
  // Whole milliseconds: the logs answer in whole milliseconds, which then stay exact.
  checkWholeNumber('ttl', ttl, 1, MAX_DURATION_MS)
  checkWholeNumber('limit', limit, 0, MAX_LIMIT)
  checkWholeNumber('blockDuration', blockDuration, 0, MAX_DURATION_MS)
  return { key, ttl, limit, blockDuration, throttlerName }
}

function checkWholeNumber(name, value, min, max) {
  if (typeof value !== 'number') throw typeError('ERR_INVALID_ARGUMENT', `\`${name}\` must be a number, got ${shown(value)}`)
  if (!Number.isInteger(value) || value < min || value > max) {
    throw rangeError('ERR_INVALID_ARGUMENT', `\`${name}\` must be a whole number from ${min} to ${max}, got ${value}`)
  }
}

module.exports = { RatekeeperThrottlerStorage }
