// ratekeeper/fastify: a store for @fastify/rate-limit 11 on ratekeeper's expiring counter, in
// memory or on Redis (single node, Cluster or Sentinel). An app keeps the plugin and its options
// and swaps the plugin's LocalStore or RedisStore for this one.
//
// These declarations stand alone (no import of fastify's or the plugin's types): the class
// `ratekeeperStore()` returns has the shape of the plugin's `FastifyRateLimitStoreCtor` and is
// accepted as its `store` option (__test__/types/fastify.ts checks it against their types).

import type { RedisClientLike } from './index'

/**
 * Options of {@link ratekeeperStore}. Errors, thrown by `ratekeeperStore`: `ERR_INVALID_OPTION`
 * (`TypeError` for a wrong type, `RangeError` out of range) and `ERR_UNKNOWN_OPTION` for a key
 * that is no option. The limit and the window are the plugin's options (`max`, `timeWindow`,
 * `continueExceeding`, `exponentialBackoff`, per route too), not options here.
 */
export interface RatekeeperStoreOptions {
  /**
   * Keep the counts in Redis, shared by every process and app on the same Redis and `nameSpace`:
   * a Redis URL, an options object (a Cluster's or Sentinel's too), a `RedisStore`, or an
   * ioredis / node-redis client (single node, Cluster or Sentinel) whose connection settings
   * are read (ratekeeper opens its own connection to the same server). Default (`undefined` or
   * `null`): in memory, in this process.
   */
  client?: RedisClientLike | null
  /**
   * Put in front of every key. Default `'fastify-rate-limit-'`, the plugin's own RedisStore's
   * (`nameSpace`): the key layout is the same too (`<nameSpace><key>` for the global limit,
   * `<nameSpace><method><url>-<key>` for a route's), a whole number with the window's end as
   * its TTL, so that both stores count together while a fleet switches over. At most 1024 bytes.
   */
  nameSpace?: string
}

/** A key's count and its window: what the plugin reads. */
export interface RateLimitCount {
  /** The key's hits in its window (this one included, for `incr`). */
  current: number
  /** Milliseconds until the window ends (0 for a key without hits). */
  ttl: number
}

/**
 * Called back with `(error)` when the store fails (the plugin then answers 500, or lets the
 * request through with `skipOnError: true`), else `(null, { current, ttl })`.
 */
export type RateLimitCallback = (error: Error | null, result?: RateLimitCount) => void

/**
 * A store of {@link ratekeeperStore}'s class: one for the plugin's global limit, one per route
 * with its own `config.rateLimit` (from `child`). The plugin calls it; an app does not need to.
 */
export interface RatekeeperFastifyStore {
  /**
   * Counts one hit for `key` (a string, or a finite number counted as its string: else
   * `ERR_INVALID_ID`) in a window of `timeWindow` ms (whole, 0 to 1e12) and calls back its
   * `{ current, ttl }`. The window starts at the key's first hit. Over `max` (a whole number from
   * 0), with `continueExceeding` it starts again from the hit; with `exponentialBackoff` the
   * `ttl` answered is `timeWindow * 2 ** (current - max - 1)`. Bad arguments call back a
   * `TypeError` or `RangeError` with `code` `ERR_INVALID_ARGUMENT` (a callback that is no
   * function throws it); Redis trouble calls back `ERR_STORE_UNAVAILABLE` / `ERR_STORE_ERROR`.
   */
  incr(key: string | number, callback: RateLimitCallback, timeWindow: number, max: number): void
  /**
   * For the plugin's `createRateLimit()(req, { increment: false })`: calls back `key`'s
   * `{ current, ttl }` without counting a hit, `{ current: 0, ttl: 0 }` when it has none.
   * `timeWindow` and `max` are not read.
   */
  read(key: string | number, callback: RateLimitCallback, timeWindow?: number, max?: number): void
  /**
   * The store of a route (called by the plugin with the route's options merged with its own):
   * its keys are apart, under `prefix + method + url + '-'`.
   */
  child(routeOptions: object): RatekeeperFastifyStore
  /** What this store puts in front of every key (its Redis keys are `prefix + key`). */
  readonly prefix: string
}

/**
 * The class the plugin's `store` option takes: the plugin constructs it with its options, of
 * which it reads `continueExceeding`, `exponentialBackoff` (booleans, default `false`) and
 * `timeWindow` (whole ms from 0 to 1e12, or a function); a bad one throws `ERR_INVALID_OPTION`
 * at registration (at the route's, for a route's option).
 */
export interface RatekeeperFastifyStoreClass {
  new (params?: object): RatekeeperFastifyStore
}

/**
 * Returns the class to give [@fastify/rate-limit](https://github.com/fastify/fastify-rate-limit)
 * 11 as its `store` option: its counts in memory, or on Redis given `client`. Every option of the
 * plugin works as with its own stores (`max`, `timeWindow`, per-route limits, `ban`,
 * `keyGenerator`, `allowList`, `groupId`, `continueExceeding`, `exponentialBackoff`,
 * `skipOnError`, `createRateLimit` with `{ increment: false }`, the headers); the plugin's
 * `redis`, `nameSpace` and `cache` options are for its own stores and are not read.
 *
 * In memory the windows follow `Date.now()` (an app's tests with mock timers work as with the
 * plugin's LocalStore), and the answers are LocalStore's; on Redis, the server's clock, and the
 * answers are the plugin's RedisStore's. A store failure (Redis unavailable: `ERR_STORE_UNAVAILABLE`
 * within `commandTimeoutMs`) follows the plugin's `skipOnError`: a 500, or the request let
 * through uncounted.
 *
 * ```js
 * const rateLimit = require('@fastify/rate-limit')
 * const { ratekeeperStore } = require('ratekeeper/fastify')
 *
 * await app.register(rateLimit, {
 *   max: 100,
 *   timeWindow: '1 minute',
 *   store: ratekeeperStore({ client: 'redis://127.0.0.1:6379' }), // was: redis: new Redis()
 * })
 * ```
 */
export declare function ratekeeperStore(options?: RatekeeperStoreOptions): RatekeeperFastifyStoreClass
