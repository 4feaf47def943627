// ratekeeper/nestjs: a storage for @nestjs/throttler 6, on Redis (single node, Cluster, Sentinel)
// or in memory. An app keeps ThrottlerModule, ThrottlerGuard, @Throttle and @SkipThrottle, and
// passes it as `storage`.
//
// These declarations stand alone (@nestjs/throttler's need @nestjs/common): the storage has the
// shape of @nestjs/throttler's `ThrottlerStorage` and is assignable to it (__test__ checks).

import type { RedisClientLike, RedisStore } from './index'

/** What `increment` resolves: @nestjs/throttler's `ThrottlerStorageRecord`. */
export interface ThrottlerStorageRecord {
  /** The hits the key holds within the ttl, this one included (while blocked: those still within it). */
  totalHits: number
  /** Seconds, rounded up, until the key's reset timer runs out (the guard's `X-RateLimit-Reset`). */
  timeToExpire: number
  /** Whether the request is refused (the guard answers 429). */
  isBlocked: boolean
  /** While blocked, the seconds, rounded up, until the block ends (the guard's `Retry-After`); else 0. */
  timeToBlockExpire: number
}

/**
 * Options of {@link RatekeeperThrottlerStorage}. Errors: `ERR_INVALID_OPTION` (`TypeError` for a
 * wrong type, `RangeError` out of range) and `ERR_UNKNOWN_OPTION` for a key that is no option,
 * thrown by the constructor. The limits (`ttl`, `limit`, `blockDuration`) are the throttlers'
 * options in `ThrottlerModule.forRoot`, not options here.
 */
export interface RatekeeperThrottlerStorageOptions {
  /**
   * Keep the records in Redis, shared by every instance of the app that uses the same Redis and
   * `prefix`: a Redis URL (`redis://`, `rediss://`, `redis+sentinel://`), an options object (a
   * node, a `cluster`, or `sentinels` and `name`), a `RedisStore`, or an ioredis / node-redis
   * client (single node, Cluster, Sentinel) whose connection settings are read (ratekeeper opens
   * its own connection to the same server). Default: in memory, in this process.
   */
  client?: RedisClientLike
  /**
   * Put in front of every Redis key. Default `'ratekeeper:nest:'`. A key and throttler's hits are a
   * sorted set at `prefix + 'hits:' + name + ':' + key`, its reset timer at `prefix + 'reset:' ...`
   * and its block at `prefix + 'block:' ...` (the name URI-encoded), each with a TTL.
   */
  prefix?: string
  /**
   * On Redis, whose clock decides: `'redis'` (the server's; default, so app hosts whose clocks
   * differ still agree) or `'local'` (this host's `Date.now()`, which fake timers can set). In
   * memory, always this host's `Date.now()`, as the official storage.
   */
  clock?: 'redis' | 'local'
  /**
   * On Redis, what `increment` answers while Redis is unavailable (`ERR_STORE_UNAVAILABLE`: down,
   * unreachable, or not answering within the store's `commandTimeoutMs`). @nestjs/throttler has
   * no setting of its own for this; its guard turns a rejection into a 500.
   * - `'reject'` (default): the increment rejects with that error (the request gets a 500);
   * - `'allow'`: every request passes, neither checked nor counted
   *   (`{ totalHits: 0, timeToExpire: 0, isBlocked: false, timeToBlockExpire: 0 }`);
   * - `'memory'`: an in-memory storage decides (each instance then counts on its own, from empty).
   *
   * After a failure, increments go to the fallback for half a second, then Redis is tried again,
   * until it answers. Only with `client` (`ERR_INVALID_OPTION` in memory).
   */
  onStoreError?: 'reject' | 'allow' | 'memory'
}

/**
 * A storage for [@nestjs/throttler](https://www.npmjs.com/package/@nestjs/throttler) 6, on Redis
 * or in memory, that answers as the official in-memory `ThrottlerStorageService`, record for record:
 * per key and throttler name, the hits within the last `ttl` (each hit leaves `ttl` after it was
 * made), a reset timer started at the first hit and again at the first after it has run out,
 * and blocks:
 *
 * - `blockDuration` above 0 (the guard's default is the ttl): every request that is not blocked
 *   is a hit; the one that takes the hits above `limit` is refused and starts a block of
 *   `blockDuration`, during which requests are refused and are not hits; the first request
 *   after the block forgets the hits before it and counts 1.
 * - `blockDuration` 0: a request is a hit when fewer than `limit` are held, else refused until
 *   the oldest leaves (`timeToBlockExpire`).
 *
 * Differences: `timeToBlockExpire` is 0 when not blocked (the official storage's is then a
 * leftover: minus the seconds since its last block, or since 1970); each throttler name has its
 * own timer and block even when a custom `generateKey` gives two names the same key (the
 * official storage shares them); on Redis an increment is two or three atomic script calls
 * (three when a block starts or ends), not one.
 *
 * `increment` rejects with `ERR_INVALID_ID` for a key that is not a non-empty string (at most
 * 1 KiB with the throttler name), and `ERR_INVALID_ARGUMENT` for a `ttl` (1 to 1e12), `limit`
 * (0 to 1e15) or `blockDuration` (0 to 1e12) that is not a whole number in range, or a name that
 * is not a string: the guard then answers 500.
 *
 * ```js
 * const { ThrottlerModule, ThrottlerGuard } = require('@nestjs/throttler')
 * const { RatekeeperThrottlerStorage } = require('ratekeeper/nestjs')
 *
 * ThrottlerModule.forRoot({
 *   throttlers: [{ name: 'short', ttl: 1000, limit: 3 }, { name: 'long', ttl: 60_000, limit: 100 }],
 *   storage: new RatekeeperThrottlerStorage({ client: 'redis://127.0.0.1:6379' }),
 * })
 * ```
 */
export declare class RatekeeperThrottlerStorage {
  constructor(options?: RatekeeperThrottlerStorageOptions)
  /** The Redis key prefix (default `'ratekeeper:nest:'`). */
  readonly prefix: string
  /**
   * The `RedisStore` the records are kept on, or `null` in memory: `storage.store?.on('error', log)`
   * hears of each outage once.
   */
  readonly store: RedisStore | null
  /**
   * Counts a hit for `key` under the throttler `throttlerName` (`ttl` and `blockDuration` in
   * milliseconds; `blockDuration` 0 for no block): what the guard calls for each throttler of
   * each request. Resolves the key's record; `timeToExpire` and `timeToBlockExpire` in seconds,
   * rounded up.
   *
   * ```js
   * const { totalHits, isBlocked, timeToBlockExpire } = await storage.increment('user:42', 60_000, 10, 60_000, 'default')
   * ```
   */
  increment(key: string, ttl: number, limit: number, blockDuration: number, throttlerName: string): Promise<ThrottlerStorageRecord>
}
