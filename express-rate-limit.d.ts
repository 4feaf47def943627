// ratekeeper/express-rate-limit: a store for express-rate-limit 8 on ratekeeper's fixed window,
// on Redis or in memory. An app keeps express-rate-limit and swaps rate-limit-redis for it.
//
// These declarations stand alone (express-rate-limit's own need @types/express): `Store` has the
// shape of express-rate-limit's `Store` type and is assignable to it (__test__ checks).

import type { RedisClientLike } from './index'

/** A client's hits and its window's end: express-rate-limit's `ClientRateLimitInfo`. */
export interface ClientRateLimitInfo {
  /** The hits counted in the key's current window. */
  totalHits: number
  /** When the window ends (the count starts again from 0). */
  resetTime: Date
}

/**
 * Options of {@link Store}. Errors: `ERR_INVALID_OPTION` (`TypeError` for a wrong type,
 * `RangeError` out of range) and `ERR_UNKNOWN_OPTION` for a key that is no option, thrown by
 * the constructor. The window's length is express-rate-limit's `windowMs`, and its limit
 * express-rate-limit's `limit`: neither is an option here.
 */
export interface StoreOptions {
  /**
   * Keep the counts in Redis, shared by every process and app that uses the same Redis and
   * `prefix`: a Redis URL, an options object, a `RedisStore`, or an ioredis / node-redis client
   * (single node or cluster) whose connection settings are read (ratekeeper opens its own
   * connection to the same server). Default: in memory, in this process (`localKeys` true).
   */
  client?: RedisClientLike
  /**
   * Put in front of every key: a client's count is one hash at `prefix + key`. Default
   * `'ratekeeper:erl:'`, not rate-limit-redis's `'rl:'` (its strings and these hashes cannot
   * share keys, so both can run side by side while a fleet switches). At most 1024 bytes.
   */
  prefix?: string
  /**
   * On Redis, whose clock the windows follow: `'redis'` (the server's; default, so app hosts
   * whose clocks differ still agree) or `'local'` (this host's `Date.now()`, which fake timers
   * can set). In memory, always this host's `Date.now()`.
   */
  clock?: 'redis' | 'local'
  /**
   * On Redis, what a call answers while Redis is unavailable, as for every limiter: `'reject'`
   * (default: it rejects with `ERR_STORE_UNAVAILABLE`, which express-rate-limit passes to
   * Express, or lets through with `passOnStoreError`), `'allow'` (counted as 0 hits: the
   * request goes through) or `'memory'` (this process counts alone until Redis is back).
   * `ERR_INVALID_OPTION` in memory.
   */
  onStoreError?: 'reject' | 'allow' | 'memory'
}

/**
 * A store for [express-rate-limit](https://www.npmjs.com/package/express-rate-limit) 8 on
 * ratekeeper's fixed window (`FixedWindow`), on Redis or in memory.
 *
 * Windows last `windowMs` and are aligned to the clock (`floor(now / windowMs)`): every client's
 * window ends at the same instants (on the minute, for `windowMs: 60_000`), where
 * express-rate-limit's MemoryStore and rate-limit-redis start a client's window at its first
 * request. The store counts every request express-rate-limit gives it, the refused ones
 * included, as they do; express-rate-limit compares the count to its `limit`.
 *
 * - `increment` counts one hit in one atomic step and resolves `{ totalHits, resetTime }`
 *   (the window's end).
 * - `decrement` (for `skipFailedRequests` / `skipSuccessfulRequests`) takes one back: never below
 *   0, and a key without hits gets no key created.
 * - `get` (express-rate-limit's `getKey`) resolves `undefined` for a key without hits in the
 *   current window, as the MemoryStore does.
 * - `localKeys` is `false` on Redis and `true` in memory, and `prefix` is the key prefix: what
 *   express-rate-limit's checks for a store shared by two limiters and for a key counted twice read.
 *
 * One store per limiter (express-rate-limit checks it). On Redis, a call rejects with
 * `ERR_STORE_UNAVAILABLE` while Redis is unavailable: express-rate-limit passes it to Express,
 * or lets the request through with `passOnStoreError: true`.
 *
 * ```js
 * const { rateLimit } = require('express-rate-limit')
 * const { Store } = require('ratekeeper/express-rate-limit')
 *
 * app.use(rateLimit({
 *   windowMs: 60_000,
 *   limit: 100,
 *   standardHeaders: 'draft-8',
 *   store: new Store({ client: 'redis://127.0.0.1:6379' }), // was: new RedisStore({ sendCommand })
 * }))
 * ```
 */
export declare class Store {
  constructor(options?: StoreOptions)
  /** The key prefix (default `'ratekeeper:erl:'`). */
  readonly prefix: string
  /** `true` in memory (counts stay in this process), `false` on Redis. */
  readonly localKeys: boolean
  /**
   * Called by express-rate-limit when the middleware is created: the window lasts `windowMs`
   * (more than 0, at most 1e12). A bad `windowMs` throws `ERR_INVALID_OPTION`, which
   * express-rate-limit logs; every call then rejects with that error. Calls made before `init`
   * reject with `ERR_INVALID_ARGUMENT`.
   */
  init(options: { windowMs: number }): void
  /**
   * Counts one hit for `key`; resolves its hits in the current window (this one included) and
   * the window's end. A key is a non-empty string of at most 1 KiB (else the call rejects with
   * `ERR_INVALID_ID`, which express-rate-limit passes to Express).
   */
  increment(key: string): Promise<ClientRateLimitInfo>
  /** Takes one hit back from `key`: never below 0, and a key without hits stays without. */
  decrement(key: string): Promise<void>
  /** Forgets `key`'s hits. */
  resetKey(key: string): Promise<void>
  /** `key`'s hits in the current window and the window's end, or `undefined` when it has none. */
  get(key: string): Promise<ClientRateLimitInfo | undefined>
}
