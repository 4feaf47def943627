'use strict'

const RateLimiterRes = require('./RateLimiterRes.js')
const RateLimiterMemory = require('./RateLimiterMemory.js')
const RateLimiterRedis = require('./RateLimiterRedis.js')
const RateLimiterInsuredAbstract = require('./RateLimiterInsuredAbstract.js')
const RateLimiterStoreAbstract = require('./RateLimiterStoreAbstract.js')
const { isRateLimiterCompatible } = require('./compatible.js')
const { counterOf } = require('./counter.js')
const { wholePoints } = require('./points.js')
const { invalidOption, invalidOptionType } = require('./errors.js')
const { attempt } = require('../attempt.js')

/**
 * rate-limiter-flexible's RateLimiterUnion: a key consumes its points on every limiter at once,
 * and is refused when one of them refuses. Resolves `{ [keyPrefix]: RateLimiterRes }` for every
 * limiter; rejects with `{ [keyPrefix]: RateLimiterRes }` for the limiters that refused (or with
 * the Error a limiter failed with, under its prefix).
 *
 * Atomic, unlike rate-limiter-flexible's (which charges the other limiters all the same): when
 * every limiter is ratekeeper's RateLimiterMemory, or every one is RateLimiterRedis on one store
 * (one `storeClient`), a refused consume charges none of them, and concurrent consumes never
 * admit more than any limiter's points. A refusing limiter's RateLimiterRes then tells what its key
 * holds, uncharged (`consumedPoints`, `remainingPoints`, `msBeforeNext` until its duration ends, 0
 * for a key that holds nothing); one with `blockDuration` is blocked, as it would be alone. A key
 * holding what no limiter wrote (a hash, text) rejects the union with the store's Error under
 * every limiter's prefix, charging none (rate-limiter-flexible charges the others), unless a
 * limiter has an `insuranceLimiter`: then, as when the store is unavailable, each limiter consumes
 * on its own. On
 * Redis the union is one script call, so on a Redis Cluster its keys must share a slot: put a hash
 * tag in the key (`'{user:42}'`). Any other mix of limiters (memory with Redis, custom
 * limiters, subclasses that change `consume`) is consumed one by one, as rate-limiter-flexible
 * does, and `atomic` is false.
 *
 * ```js
 * const perSecond = new RateLimiterRedis({ storeClient, keyPrefix: 'second', points: 5, duration: 1 })
 * const perMinute = new RateLimiterRedis({ storeClient, keyPrefix: 'minute', points: 100, duration: 60 })
 * const union = new RateLimiterUnion(perSecond, perMinute)
 * union.consume('{user:42}').then((res) => res.minute.remainingPoints, (refused) => Object.keys(refused))
 * ```
 */
class RateLimiterUnion {
  #limiters
  /** 'memory', 'redis' or null: how a consume is decided (see the class's comment). */
  #atomic

  constructor(...limiters) {
    if (limiters.length < 1) throw invalidOption('RateLimiterUnion: at least one limiter have to be passed')
    for (const limiter of limiters) {
      if (!isRateLimiterCompatible(limiter)) {
        throw invalidOptionType('RateLimiterUnion: all limiters have to be instance of RateLimiterAbstract or RateLimiterCompatibleAbstract')
      }
    }
    this.#limiters = limiters
    this.#atomic = atomicKind(limiters)
  }

  /** Whether a refused consume charges none of the limiters (see the class's comment). */
  get atomic() {
    return this.#atomic !== null
  }

  /** Consumes `points` (default 1) of `key` on every limiter, or on none when one refuses. */
  consume(key, points = 1) {
    if (this.#atomic === 'memory') return attempt(() => this.#consumeInMemory(key, wholePoints(points)))
    if (this.#atomic === 'redis') return attempt(() => this.#consumeOnRedis(key, wholePoints(points)))
    return this.#consumeEach(key, points)
  }

  /** rate-limiter-flexible's way: each limiter consumes on its own. */
  #consumeEach(key, points) {
    const outcomes = this.#limiters.map((limiter) =>
      attempt(() => limiter.consume(key, points)).then(
        (res) => ({ res }),
        (refusal) => ({ refusal }),
      ),
    )
    return Promise.all(outcomes).then((settled) => {
      const refused = settled.some((outcome) => 'refusal' in outcome)
      const answers = {}
      settled.forEach((outcome, i) => {
        if (!refused) answers[this.#limiters[i].keyPrefix] = outcome.res
        else if ('refusal' in outcome) answers[this.#limiters[i].keyPrefix] = outcome.refusal
      })
      if (refused) throw answers
      return answers
    })
  }

  /** In memory: read every key, then charge all or none, with no await between (atomic). */
  #consumeInMemory(key, points) {
    const entries = this.#limiters.map((limiter) => ({ limiter, counter: limiter[counterOf], rlKey: limiter.getKey(key) }))
    const after = new Counts()
    for (const entry of entries) {
      entry.reading = entry.counter.getNow(entry.rlKey)
      const count = after.add(entry.counter, entry.rlKey, entry.reading === null ? 0 : entry.reading.points, points)
      entry.over = count > entry.limiter.points
    }
    if (entries.some((entry) => entry.over)) {
      const refusals = {}
      for (const { limiter, counter, rlKey, reading, over } of entries) {
        if (over) refusals[limiter.keyPrefix] = refusedInMemory(limiter, counter, rlKey, reading)
      }
      return Promise.reject(refusals)
    }
    const allowed = entries.map(({ limiter, counter, rlKey }) => {
      const reading = counter.addNow(rlKey, points, limiter.msDuration)
      return limiter._resolveEvenly(new RateLimiterRes(Math.max(limiter.points - reading.points, 0), reading.msLeft, reading.points, reading.fresh))
    })
    return this.#byPrefix(allowed)
  }

  /** On Redis: one script call charges every key or none. */
  async #consumeOnRedis(key, points) {
    const limiters = this.#limiters
    const rlKeys = limiters.map((limiter) => limiter.getKey(key))
    // Keys blocked in this process's memory are refused without asking Redis: nothing is charged.
    const blocked = {}
    limiters.forEach((limiter, i) => {
      const msBlocked = limiter.getInMemoryBlockMsBeforeExpire(rlKeys[i])
      if (msBlocked > 0) blocked[limiter.keyPrefix] = new RateLimiterRes(0, msBlocked)
    })
    if (Object.keys(blocked).length > 0) throw blocked
    let readings
    try {
      readings = await limiters[0][counterOf].union(
        rlKeys,
        points,
        limiters.map((limiter) => limiter.points),
        limiters.map((limiter) => limiter.msDuration),
      )
    } catch (error) {
      // A bad call (its keys on several Cluster slots) fails as it is; when the store fails, each
      // limiter answers as it does alone: through its insurance limiter, if it has one. A key
      // Redis refused (one holding what no limiter wrote: ERR_STORE_ERROR, nothing written)
      // fails the union as a whole, charging none, unless an insurance limiter is there to answer.
      if (error instanceof TypeError || error instanceof RangeError) throw error
      if (error.code === 'ERR_STORE_ERROR' && !limiters.some((limiter) => isRateLimiterCompatible(limiter.insuranceLimiter))) {
        throw Object.fromEntries(limiters.map((limiter) => [limiter.keyPrefix, error]))
      }
      return this.#consumeEach(key, points)
    }
    if (readings.some((reading) => reading.refused)) {
      const refusals = {}
      await Promise.all(
        limiters.map(async (limiter, i) => {
          if (readings[i].refused) refusals[limiter.keyPrefix] = await refusedOnRedis(limiter, rlKeys[i], readings[i], points)
        }),
      )
      throw refusals
    }
    return this.#byPrefix(
      limiters.map((limiter, i) => new Promise((resolve, reject) => limiter._afterConsume(resolve, reject, rlKeys[i], points, readings[i]))),
    )
  }

  /** `{ [keyPrefix]: res }` from the limiters' answers, in order. */
  #byPrefix(answers) {
    return Promise.all(answers).then((resList) => {
      const answers = {}
      resList.forEach((res, i) => {
        answers[this.#limiters[i].keyPrefix] = res
      })
      return answers
    })
  }
}

/** Counts of keys as a union adds its points, so that a key given twice takes them twice. */
class Counts {
  #byCounter = new Map()

  /** Adds `points` to `rlKey` of `counter`, which held `held` before the union: its count now. */
  add(counter, rlKey, held, points) {
    let counts = this.#byCounter.get(counter)
    if (counts === undefined) this.#byCounter.set(counter, (counts = new Map()))
    const count = (counts.has(rlKey) ? counts.get(rlKey) : held) + points
    counts.set(rlKey, count)
    return count
  }
}

/**
 * The answer of a RateLimiterMemory that refused in a union: its key blocked for `blockDuration`
 * when the union's points would have taken it over for the first time; otherwise what it holds.
 */
function refusedInMemory(limiter, counter, rlKey, reading) {
  const held = reading === null ? 0 : reading.points
  if (limiter.blockDuration > 0 && held <= limiter.points) {
    const block = counter.setNow(rlKey, limiter.points + 1, limiter.msBlockDuration)
    return new RateLimiterRes(0, block.msLeft, block.points)
  }
  return heldRes(limiter, reading === null ? 0 : reading.msLeft, held)
}

/** The same for a RateLimiterRedis (its blocks as its own consume writes them). */
function refusedOnRedis(limiter, rlKey, reading, points) {
  if (limiter.blockDuration > 0 && limiter._crossedBlockThreshold(reading.points + points, points)) {
    return limiter._block(rlKey, limiter._getBlockedPoints(), limiter.msBlockDuration)
  }
  return heldRes(limiter, reading.found ? reading.msLeft : 0, reading.points)
}

function heldRes(limiter, msLeft, held) {
  return new RateLimiterRes(Math.max(limiter.points - held, 0), msLeft, held, false)
}

/**
 * 'memory' when every limiter is ratekeeper's RateLimiterMemory, 'redis' when every one is its
 * RateLimiterRedis on one store, with `consume` as those classes have it; else null.
 */
function atomicKind(limiters) {
  const memory = limiters.every((limiter) => limiter instanceof RateLimiterMemory && limiter.consume === RateLimiterMemory.prototype.consume)
  if (memory) return 'memory'
  const store = limiters[0] instanceof RateLimiterRedis ? limiters[0][counterOf].store : null
  const redis = limiters.every(
    (limiter) =>
      limiter instanceof RateLimiterRedis &&
      limiter[counterOf].store === store &&
      limiter.consume === RateLimiterInsuredAbstract.prototype.consume &&
      limiter._consume === RateLimiterStoreAbstract.prototype._consume &&
      limiter._upsert === RateLimiterRedis.prototype._upsert,
  )
  return redis ? 'redis' : null
}

module.exports = RateLimiterUnion
