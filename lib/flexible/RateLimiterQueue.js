'use strict'

const RateLimiterQueueError = require('./RateLimiterQueueError.js')
const { attempt } = require('../attempt.js')

/** The key of `removeTokens` and `getTokensRemaining` called without one. */
const DEFAULT_KEY = 'limiter'
/** rate-limiter-flexible's default `maxQueueSize`: 2^32 - 1. */
const MAX_QUEUE_SIZE = 4294967295
/** Node's longest timer (a longer one fires after 1 ms). */
const MAX_TIMER_MS = 2 ** 31 - 1

/**
 * rate-limiter-flexible's RateLimiterQueue: `removeTokens(tokens, key)` waits for the tokens
 * instead of failing. It consumes them from `limiterFlexible` at once when it can; when the
 * limiter refuses, the request waits in the key's queue (first in, first out) and is tried again
 * once the limiter's `msBeforeNext` has passed. Resolves with the points left, as
 * `getTokensRemaining(key)` tells them.
 *
 * - `limiterFlexible`: any limiter of ratekeeper/flexible (RateLimiterMemory, RateLimiterRedis,
 *   a wrapper, one built on their base classes) or a BurstyRateLimiter.
 * - `maxQueueSize`: the requests that may wait per key (default 4294967295). One more rejects
 *   with a RateLimiterQueueError, `Number of requests reached it's maximum <maxQueueSize>`.
 *
 * A request for more tokens than the limiter's `points` rejects with a RateLimiterQueueError;
 * one still waiting at its `expiresUnixAt` (Unix seconds) rejects with one when the queue next
 * wakes up; a failure of the limiter (an `Error`, as the store unreachable) rejects the request
 * it was for and the queue goes on with the next one.
 *
 * Two things rate-limiter-flexible does otherwise: a wait longer than Node's longest timer (24.8
 * days) wakes up then and waits again, where its timer fires after 1 ms, again and again; and a
 * key's queue is forgotten once nothing waits in it, where it keeps one for every key ever used.
 *
 * ```js
 * const limiter = new RateLimiterMemory({ points: 2, duration: 1 })
 * const queue = new RateLimiterQueue(limiter, { maxQueueSize: 100 })
 * const remaining = await queue.removeTokens(1, userId) // waits while userId is over 2 a second
 * ```
 */
class RateLimiterQueue {
  #limiter
  #maxQueueSize
  /** The queue of each key in use, by the key as a property name (1 and '1' share one). */
  #queues = new Map()

  constructor(limiterFlexible, opts = {}) {
    this.#limiter = limiterFlexible
    this.#maxQueueSize = opts.maxQueueSize !== undefined ? opts.maxQueueSize : MAX_QUEUE_SIZE
  }

  /** The points `key` has left (the limiter's `points` when it holds nothing or cannot be read). */
  getTokensRemaining(key = DEFAULT_KEY) {
    return attempt(() => {
      const queue = this.#queues.get(slotOf(key))
      return tokensRemaining(this.#limiter, queue ? queue.key : key)
    })
  }

  /**
   * Takes `tokens` from `key`, waiting in its queue while the limiter refuses them: resolves with
   * the points left. With `expiresUnixAt` (Unix seconds, default 0: never), a request still
   * waiting then rejects with a RateLimiterQueueError.
   */
  removeTokens(tokens, key = DEFAULT_KEY, expiresUnixAt = 0) {
    return attempt(() => {
      const points = this.#limiter.points
      if (tokens > points) throw new RateLimiterQueueError(`Requested tokens ${tokens} exceeds maximum ${points} tokens per interval`)
      return this.#queueOf(key).removeTokens(tokens, expiresUnixAt)
    })
  }

  /** `key`'s queue, made when it has none: dropped again once idle. */
  #queueOf(key) {
    const slot = slotOf(key)
    let queue = this.#queues.get(slot)
    if (queue === undefined) {
      queue = new KeyQueue(this.#limiter, key, this.#maxQueueSize, () => this.#queues.delete(slot))
      this.#queues.set(slot, queue)
    }
    return queue
  }
}

/** A key as the name of an object's property: a string, or a symbol as it is. */
function slotOf(key) {
  return typeof key === 'symbol' ? key : String(key)
}

/** `key`'s remaining points by `limiter.get`: its `points` for a key without any, or when the read fails. */
function tokensRemaining(limiter, key) {
  return attempt(() => limiter.get(key))
    .then((res) => (res !== null ? res.remainingPoints : limiter.points))
    .catch(() => limiter.points)
}

/**
 * One key's queue. A request is tried at once when none waits; refused, it waits, and the queue
 * wakes up after the limiter's `msBeforeNext` to try the first one waiting (then the next, until
 * the limiter refuses again). `onIdle` is called once nothing waits, no timer is set and no call
 * is under way, so that the keys no longer in use are forgotten.
 */
class KeyQueue {
  #limiter
  #key
  #maxQueueSize
  #onIdle
  /** `{ resolve, reject, tokens, expiresUnixAt }` of each waiting request, the first first. */
  #waiting = []
  #timer = null
  /** The limiter's calls under way. */
  #calls = 0
  /**
   * Whether a request with an `expiresUnixAt` was ever queued: until then, waking up checks no
   * deadline. Never cleared: a request being tried is out of `#waiting` and may come back to it.
   */
  #hasDeadlines = false

  constructor(limiter, key, maxQueueSize, onIdle) {
    this.#limiter = limiter
    this.#key = key
    this.#maxQueueSize = maxQueueSize
    this.#onIdle = onIdle
  }

  /** The key this queue was made for (the limiter is called with it). */
  get key() {
    return this.#key
  }

  getTokensRemaining() {
    return tokensRemaining(this.#limiter, this.#key)
  }

  removeTokens(tokens, expiresUnixAt) {
    return new Promise((resolve, reject) => {
      const request = { resolve, reject, tokens, expiresUnixAt }
      // Behind the ones waiting, so that the first come are the first served.
      if (this.#waiting.length > 0) {
        this.#enqueue(request)
        return
      }
      this.#consume(
        tokens,
        (remaining) => {
          resolve(remaining)
          this.#forgetIfIdle()
        },
        (error) => {
          reject(error)
          this.#forgetIfIdle()
        },
        (res) => {
          this.#enqueue(request)
          this.#wakeAfter(res)
        },
      )
    })
  }

  /**
   * Consumes `tokens`: `allowed(remainingPoints)`, `failed(error)` when the limiter fails with an
   * `Error`, `refused(res)` when it refuses the tokens (rejects with anything else).
   */
  #consume(tokens, allowed, failed, refused) {
    this.#calls++
    attempt(() => this.#limiter.consume(this.#key, tokens))
      // A limiter resolving with nothing fails here, with a TypeError.
      .then((res) => res.remainingPoints)
      .then(
        (remaining) => {
          this.#calls--
          allowed(remaining)
        },
        (rejection) => {
          this.#calls--
          if (rejection instanceof Error) failed(rejection)
          else refused(rejection)
        },
      )
  }

  #enqueue(request) {
    if (this.#waiting.length < this.#maxQueueSize) {
      this.#waiting.push(request)
      if (request.expiresUnixAt > 0) this.#hasDeadlines = true
    } else {
      request.reject(new RateLimiterQueueError(`Number of requests reached it's maximum ${this.#maxQueueSize}`))
    }
  }

  /** Wakes up after the `msBeforeNext` of the limiter's refusal `res`, unless a wake-up is set already. */
  #wakeAfter(res) {
    if (this.#timer !== null) return
    const ms = res === null || res === undefined ? 0 : res.msBeforeNext
    this.#timer = setTimeout(() => this.#next(), Math.min(ms, MAX_TIMER_MS))
  }

  /** Rejects the requests past their deadline, then tries the first one waiting. */
  #next() {
    if (this.#timer !== null) {
      clearTimeout(this.#timer)
      this.#timer = null
    }
    if (this.#hasDeadlines) {
      const nowSecs = Math.floor(Date.now() / 1000)
      this.#waiting = this.#waiting.filter((request) => {
        if (!(request.expiresUnixAt > 0 && nowSecs >= request.expiresUnixAt)) return true
        request.reject(new RateLimiterQueueError('The request to remove tokens expired before it could be fulfilled'))
        return false
      })
    }
    const request = this.#waiting.shift()
    if (request === undefined) {
      this.#forgetIfIdle()
      return
    }
    this.#consume(
      request.tokens,
      (remaining) => {
        request.resolve(remaining)
        this.#next()
      },
      (error) => {
        request.reject(error)
        this.#next()
      },
      (res) => {
        // First again, to be tried first when the queue wakes up.
        this.#waiting.unshift(request)
        this.#wakeAfter(res)
      },
    )
  }

  #forgetIfIdle() {
    if (this.#waiting.length === 0 && this.#timer === null && this.#calls === 0) this.#onIdle()
  }
}

module.exports = RateLimiterQueue
