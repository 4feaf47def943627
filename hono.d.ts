// ratekeeper/hono: a store for hono-rate-limiter on ratekeeper's fixed window, in memory or on
// Redis (single node, Cluster, Sentinel). A Hono app keeps hono-rate-limiter's `rateLimiter` and
// swaps its MemoryStore or RedisStore for this one.
//
// These declarations stand alone (they need neither hono nor hono-rate-limiter): `Store` has the
// shape of hono-rate-limiter's `Store` type and is assignable to it (__test__/types/hono.ts
// checks it against hono-rate-limiter's own declarations).

import type { RedisClientLike } from './index'

/** A client's hits and its window's end: hono-rate-limiter's `ClientRateLimitInfo`. */
export interface ClientRateLimitInfo {
  /** The hits counted in the key's current window. */
  totalHits: number
  /** When the window ends (the count starts again from 0). Always set, unlike hono-rate-limiter's type. */
  resetTime: Date
}

/**
 * Options of {@link Store}. Errors: `ERR_INVALID_OPTION` (`TypeError` for a wrong type,
 * `RangeError` out of range) and `ERR_UNKNOWN_OPTION` for a key that is no option, thrown by
 * the constructor. The window's length is hono-rate-limiter's `windowMs` and its limit
 * hono-rate-limiter's `limit`: neither is an option here.
 */
export interface StoreOptions {
  /**
   * Keep the counts in Redis, shared by every process and app that uses the same Redis and
   * `prefix`: a Redis URL, an options object, a `RedisStore` (single node, Cluster or Sentinel),
   * or an ioredis / node-redis client whose connection settings are read (ratekeeper opens its
   * own connection to the same server). Default: in memory, in this process (`localKeys` true).
   *
   * ```js
   * new Store({ client: process.env.REDIS_URL })
   * ```
   */
  client?: RedisClientLike
  /**
   * Put in front of every key: a client's count is one hash at `prefix + key`. Default
   * `'ratekeeper:hrl:'`, not hono-rate-limiter RedisStore's `'hrl:'` (its strings and these
   * hashes cannot share keys, so both can run side by side while a fleet switches). At most
   * 1024 bytes.
   */
  prefix?: string
  /**
   * On Redis, whose clock the windows follow: `'redis'` (the server's; default, so app hosts
   * whose clocks differ still agree) or `'local'` (this host's `Date.now()`, which fake timers
   * can set). In memory, always this host's `Date.now()`.
   */
  clock?: 'redis' | 'local'
  /**
   * On Redis, what a call answers while Redis is unavailable (hono-rate-limiter has no setting
   * of its own for a failing store):
   * - `'reject'` (default): the call rejects with `ERR_STORE_UNAVAILABLE`, which the middleware
   *   throws: Hono's `app.onError` answers (a 500 unless the app says otherwise);
   * - `'allow'`: counted as 0 hits, so every request goes through (the headers show the whole
   *   `limit` remaining);
   * - `'memory'`: this process counts alone, from 0, until Redis is back (each process then has
   *   its own `limit`).
   *
   * Redis is tried again half a second after a failure. `ERR_INVALID_OPTION` in memory.
   *
   * ```js
   * new Store({ client: process.env.REDIS_URL, onStoreError: 'memory' })
   * ```
   */
  onStoreError?: 'reject' | 'allow' | 'memory'
}

/**
 * A store for [hono-rate-limiter](https://www.npmjs.com/package/hono-rate-limiter) on
 * ratekeeper's fixed window (`FixedWindow`), in memory or on Redis.
 *
 * Windows last `windowMs` and are aligned to the clock (`floor(now / windowMs)`): every client's
 * window ends at the same instants (on the minute, for `windowMs: 60_000`), where
 * hono-rate-limiter's MemoryStore and RedisStore start a client's window at its first request.
 * The store counts every request the middleware gives it, the refused ones included, as they do;
 * hono-rate-limiter compares the count to its `limit` and writes the `RateLimit-*` and
 * `Retry-After` headers from `totalHits` and `resetTime`.
 *
 * - `increment` counts one hit in one atomic step and resolves `{ totalHits, resetTime }`
 *   (the window's end).
 * - `decrement` (for `skipFailedRequests` / `skipSuccessfulRequests`) takes one back: never below
 *   0, and a key without hits gets no key created.
 * - `get` (the `getKey` of `c.get('rateLimitStore')`) resolves `undefined` for a key without hits
 *   in the current window (hono-rate-limiter's MemoryStore can answer an ended window's count, or
 *   `totalHits: 0`).
 * - No `resetAll` or `shutdown` (both optional in hono-rate-limiter's `Store`): there is no timer
 *   to stop, and in-memory keys are dropped once their window has ended.
 *
 * Bad `windowMs` (not a number, not more than 0, more than 1e12) throws `ERR_INVALID_OPTION` out
 * of `rateLimiter()`; a key that is not a non-empty string of at most 1 KiB (from your
 * `keyGenerator`) makes the call reject with `ERR_INVALID_ID`.
 *
 * ```js
 * const { rateLimiter } = require('hono-rate-limiter')
 * const { Store } = require('ratekeeper/hono')
 *
 * app.use(rateLimiter({
 *   windowMs: 60_000,
 *   limit: 100,
 *   keyGenerator: (c) => c.req.header('x-api-key') ?? 'anonymous',
 *   store: new Store({ client: process.env.REDIS_URL }), // was: new RedisStore({ client })
 * }))
 * ```
 */
export declare class Store {
  constructor(options?: StoreOptions)
  /** The key prefix (default `'ratekeeper:hrl:'`). */
  readonly prefix: string
  /** `true` in memory (counts stay in this process), `false` on Redis. */
  readonly localKeys: boolean
  /**
   * Called by hono-rate-limiter's `rateLimiter()` (and `webSocketLimiter()`): the window lasts
   * `windowMs` (more than 0, at most 1e12). A bad `windowMs` throws `ERR_INVALID_OPTION` out of
   * `rateLimiter()`, and every call then rejects with that error. Calls made before `init`
   * reject with `ERR_INVALID_ARGUMENT`.
   */
  init(options: { windowMs: number }): void
  /**
   * Counts one hit for `key`; resolves its hits in the current window (this one included) and
   * the window's end. A key is a non-empty string of at most 1 KiB (else the call rejects with
   * `ERR_INVALID_ID`).
   */
  increment(key: string): Promise<ClientRateLimitInfo>
  /** Takes one hit back from `key`: never below 0, and a key without hits stays without. */
  decrement(key: string): Promise<void>
  /** Forgets `key`'s hits. */
  resetKey(key: string): Promise<void>
  /** `key`'s hits in the current window and the window's end, or `undefined` when it has none. */
  get(key: string): Promise<ClientRateLimitInfo | undefined>
}
