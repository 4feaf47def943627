// ratekeeper: fast, correct, distributed rate limiting on Redis or in memory.
//
// The native classes (RedisStore, RollingWindow) and their option types are documented in
// binding.d.ts, generated from the Rust doc comments. This file documents the JavaScript layer:
// rolling-rate-limiter's API (0.4 classes and the original callback form) and the Express
// middleware.

import type { LogEntry, RedisOptions, RedisStore, RollingWindow } from './binding'

export * from './binding'

/** An id: a non-empty string of at most 1 KiB, or a finite number (`1` and `'1'` are the same id). */
export type Id = string | number

/**
 * Where a Redis-backed limiter keeps its state: a shared {@link RedisStore}, a Redis URL, an
 * options object, or an existing ioredis / node-redis client (single node or cluster), whose
 * connection settings are read so that ratekeeper opens its own connection to the same server.
 * Limiters given the same URL or client object share one connection.
 */
export type RedisClientLike = RedisStore | string | RedisOptions | object

/**
 * Where and how a limiter keeps its state: options every limiter takes.
 */
export interface StoreOptions {
  /**
   * On Redis, what a call answers while Redis is unavailable (`ERR_STORE_UNAVAILABLE`: down,
   * unreachable, or not answering within `commandTimeoutMs`):
   * - `'reject'` (default): the call rejects with that error;
   * - `'allow'`: the call is allowed, unchecked and uncounted; the answer object carries
   *   `reason: 'store-unavailable'` and `store: 'none'`;
   * - `'memory'`: an in-process limiter with the same settings decides (each process then has
   *   its own budget per id, from empty); the answer object carries
   *   `reason: 'store-unavailable'` and `store: 'memory'`.
   *
   * After a failure, calls go to the fallback for half a second, then Redis is tried again,
   * until it answers. Only for limiters on Redis (`ERR_INVALID_OPTION` in memory).
   *
   * ```js
   * new FixedWindow({ client, onStoreError: 'memory', limits: [{ duration: 60_000, limit: 100 }] })
   * ```
   */
  onStoreError?: 'reject' | 'allow' | 'memory'
  /**
   * On Redis: put a hash tag made from the id in front of it in the key
   * (`namespace + '{' + 16 hex digits + '}' + id`), so that ids that hold `{...}` themselves
   * (chosen by a client: `'{victim}1'`, `'{victim}2'`, ...) still spread over a Cluster's slots
   * instead of all landing on the shard the client picked. Default `false`: keys are
   * `namespace + id`, rolling-rate-limiter's and redback's layout, which other apps may share.
   * With `hashIds`, the ids of one multi-id call land on different slots: on a Cluster, give
   * them a common tag in the `namespace` instead (the first `{...}` of a key decides).
   */
  hashIds?: boolean
  /**
   * In memory: the most ids kept. Past it, idle ids are dropped first, then the least recently
   * used eighth is evicted (counted in `evictedIds`); an evicted id starts afresh, so keep it
   * above the ids active within one window. Default: unbounded (idle ids are still dropped as
   * the map grows). Not for limiters on Redis, where keys expire by themselves.
   */
  maxKeys?: number
}

/**
 * What an answer object carries when `onStoreError` answered it instead of Redis.
 */
export interface StoreFallback {
  /** `'store-unavailable'` on an answer that Redis did not give. Absent otherwise. */
  reason?: 'store-unavailable'
  /** `'memory'` (the in-process fallback decided) or `'none'` (allowed unchecked). Absent when the limiter's store decided. */
  store?: 'memory' | 'none'
}

/**
 * rolling-rate-limiter 0.4's options.
 *
 * Errors: `ERR_INVALID_OPTION` (`TypeError` for a wrong type, `RangeError` out of range) and
 * `ERR_UNKNOWN_OPTION` for a key that is no option, thrown by the constructor.
 */
export interface RateLimiterOptions extends StoreOptions {
  /** The window's length in milliseconds (> 0). Required. */
  interval: number
  /** How many actions the window admits: a whole number from 1 to 1,000,000. Required. */
  maxInInterval: number
  /** The least time between two consecutive actions, in milliseconds. Default `0`. */
  minDifference?: number
  /**
   * Whether blocked attempts are recorded and count against later ones. Default `true` (as
   * rolling-rate-limiter); `false` lets a client that keeps calling too fast still get its share,
   * and a refusal then reports the wait and the actions remaining of the log without it.
   */
  recordBlocked?: boolean
  /** Redis key prefix: the key of an id is `namespace + id`. Default `'ratekeeper:'`. */
  namespace?: string
  /**
   * On Redis, whose clock decides when a call gives no `now`: `'redis'` (the server's; default)
   * or `'local'` (this host's).
   */
  clock?: 'redis' | 'local'
  /** Keep state in Redis (see {@link RedisClientLike}). Default: in memory. */
  client?: RedisClientLike
}

export interface RedisRateLimiterOptions extends RateLimiterOptions {
  /** Required. */
  client: RedisClientLike
}

/** Per-call options. */
export interface CallOptions {
  /**
   * The instant of the call in milliseconds since the epoch (fractions allowed, 0 to 4e12),
   * instead of the clock. Tests use it to control time without sleeping.
   */
  now?: number
}

/** rolling-rate-limiter's answer to `limitWithInfo` and `wouldLimitWithInfo`. */
export interface RateLimitInfo extends StoreFallback {
  /** Whether the action is (or would be) refused. */
  blocked: boolean
  /** Refused because `maxInInterval` actions already happened within `interval`. */
  blockedDueToCount: boolean
  /** Refused because the previous action was less than `minDifference` ago. */
  blockedDueToMinDifference: boolean
  /**
   * Milliseconds until the next action would be allowed, rounded up. As in rolling-rate-limiter,
   * this is at least `minDifference` even when the action is allowed, and counts from this
   * attempt when it was recorded.
   */
  millisecondsUntilAllowed: number
  /** How many more actions fit in the window now. */
  actionsRemaining: number
}

/**
 * rolling-rate-limiter's rate limiter: at most `maxInInterval` actions in any rolling `interval`,
 * and at least `minDifference` between two actions, per id. In memory unless `client` is given.
 *
 * Called without `new`, it is the original callback API of the ClassDojo post (see
 * {@link LimiterFunction}).
 *
 * ```js
 * const { RateLimiter } = require('ratekeeper')
 * const limiter = new RateLimiter({ interval: 60_000, maxInInterval: 10, minDifference: 1000 })
 * if (await limiter.limit(userId)) return res.status(429).end()
 * ```
 */
export declare const RateLimiter: {
  new (options: RateLimiterOptions): RateLimiter
  (options: CallbackLimiterOptions): LimiterFunction
  prototype: RateLimiter
}
export interface RateLimiter {
  /** The window in microseconds, as rolling-rate-limiter exposes it. */
  readonly interval: number
  readonly maxInInterval: number
  /** In microseconds, as rolling-rate-limiter exposes it. */
  readonly minDifference: number
  /** The native limiter underneath. */
  readonly window: RollingWindow
  /**
   * Attempts an action for `id`; resolves `true` when it is blocked. The attempt is recorded
   * (blocked ones too, unless `recordBlocked: false`). Without an id, one global limit is used.
   *
   * ```js
   * if (await limiter.limit(req.ip)) return res.status(429).end()
   * ```
   */
  limit(id?: Id, options?: CallOptions): Promise<boolean>
  /**
   * Attempts an action for `id` and explains the answer.
   *
   * ```js
   * const { blocked, millisecondsUntilAllowed, actionsRemaining } = await limiter.limitWithInfo('user-1')
   * ```
   */
  limitWithInfo(id?: Id, options?: CallOptions): Promise<RateLimitInfo>
  /** Whether an action would be blocked now; records nothing. */
  wouldLimit(id?: Id, options?: CallOptions): Promise<boolean>
  /** What `limitWithInfo` would answer now; records nothing. */
  wouldLimitWithInfo(id?: Id, options?: CallOptions): Promise<RateLimitInfo>
  /** Forgets every action of `id`. */
  clear(id?: Id): Promise<void>
  /**
   * The counting limiters' shape on the rolling window, as a sliding log: logs `weight` actions
   * (with `meta`) only when all of them fit and `minDifference` has passed; refusals are never
   * logged, whatever `recordBlocked` says.
   *
   * ```js
   * const { allowed, timeLeft } = await limiter.consume(`ip:${req.ip}`, { meta: userId })
   * ```
   */
  consume(id: Id, options?: LogOptions): Promise<Verdict>
  /** What `consume` would answer now, logging nothing. */
  peek(id: Id, options?: LogOptions): Promise<Verdict>
  /** Forgets every action of `id` (as `clear`). */
  reset(id: Id): Promise<void>
  /**
   * The actions of `id` still in the window, oldest first, with the `meta` they were logged
   * with: who filled the limit. At most `maxInInterval` of them.
   *
   * ```js
   * for (const { at, meta } of await limiter.entries('ip:10.0.0.1')) console.log(new Date(at), meta)
   * ```
   */
  entries(id: Id, options?: CallOptions): Promise<LogEntry[]>
}

/** Per-call options of `consume` and `peek` on a rolling window (sliding log). */
export interface LogOptions extends CallOptions {
  /** How many actions this call is: a whole number from 1. Default `1`. */
  weight?: number
  /** Metadata kept with the actions (at most 1 KiB), read back by `entries`. */
  meta?: string
}

/**
 * The sliding log: the rolling window counting allowed actions only (`recordBlocked` is always
 * `false`). Exact, at a memory cost: one entry per allowed action, up to `maxInInterval` per id
 * (a fixed or sliding window keeps a few counters instead). Same Redis layout as
 * rolling-rate-limiter, which still counts its entries; metadata rides in the members.
 *
 * ```js
 * const { SlidingLog } = require('ratekeeper')
 * const log = new SlidingLog({ interval: 60_000, maxInInterval: 3 })
 * await log.consume('ip:10.0.0.1', { meta: 'user:alice' })
 * await log.entries('ip:10.0.0.1') // [{ at: 1515120005000, meta: 'user:alice' }]
 * ```
 */
export declare const SlidingLog: {
  new (options: Omit<RateLimiterOptions, 'recordBlocked'>): RateLimiter
  prototype: RateLimiter
}

/** rolling-rate-limiter's in-memory limiter (the default store of {@link RateLimiter}). */
export interface InMemoryRateLimiter extends RateLimiter {
  /** How many ids hold state in memory; idle ones are dropped as the map grows. */
  readonly trackedIds: number
  /** How many active ids were evicted to stay within `maxKeys` (0 without it). */
  readonly evictedIds: number
}
export declare const InMemoryRateLimiter: {
  new (options: Omit<RateLimiterOptions, 'client' | 'clock' | 'onStoreError'>): InMemoryRateLimiter
  prototype: InMemoryRateLimiter
}

/**
 * rolling-rate-limiter's Redis limiter. The key layout is the same (a sorted set per id at
 * `namespace + id`, scored in microseconds), so both libraries can share live data.
 *
 * Calls reject with `ERR_STORE_UNAVAILABLE` (the redis error as `cause`) when Redis does not
 * answer within `commandTimeoutMs` (default 1000), and work again once Redis is back.
 *
 * ```js
 * const Redis = require('ioredis')
 * const limiter = new RedisRateLimiter({ client: new Redis(), namespace: 'push:', interval: 3000, maxInInterval: 2 })
 * ```
 */
export interface RedisRateLimiter extends RateLimiter {
  readonly namespace: string
  /** The kind of client given as `client` (`'ioredis'`, `'node-redis'`, their cluster forms), or `null` for a URL, options or a RedisStore. */
  readonly detectedClientType: string | null
}
export declare const RedisRateLimiter: {
  new (options: RedisRateLimiterOptions): RedisRateLimiter
  prototype: RedisRateLimiter
  /** rolling-rate-limiter's duck typing: `'ioredis'`, `'node-redis'`, their cluster forms, or `null`. */
  determineRedisClientType(client: unknown): string | null
}
/** Alias of {@link RedisRateLimiter} (rolling-rate-limiter 0.4's node-redis class). */
export declare const NodeRedisRateLimiter: typeof RedisRateLimiter
/** Alias of {@link RedisRateLimiter} (rolling-rate-limiter 0.4's ioredis class). */
export declare const IORedisRateLimiter: typeof RedisRateLimiter

/** Options of the callback form: as {@link RateLimiterOptions}, with `redis` instead of `client`. */
export interface CallbackLimiterOptions extends Omit<RateLimiterOptions, 'client'> {
  /** Keep state in Redis (see {@link RedisClientLike}). Default: in memory. */
  redis?: RedisClientLike
}

/**
 * The limiter function of the original callback API: attempts an action for `id` (or for the one
 * global limit when `id` is omitted) and resolves `timeLeft`, the milliseconds until an action
 * would be allowed (`0` when this one is). Given a callback, it also calls
 * `callback(err, timeLeft, actionsLeft)`; the promise then never rejects.
 *
 * ```js
 * const RateLimiter = require('ratekeeper')
 * const limiter = RateLimiter({ redis: 'redis://127.0.0.1:6379', namespace: 'UserLoginLimiter', interval: 1000, maxInInterval: 10, minDifference: 100 })
 * limiter(userId, (err, timeLeft) => {
 *   if (err) { // redis failed or similar
 *   } else if (timeLeft > 0) { // limit exceeded: wait timeLeft ms
 *   } else { // allowed
 *   }
 * })
 * ```
 */
export interface LimiterFunction {
  (id?: Id, callback?: (err: Error | null, timeLeft?: number, actionsLeft?: number) => void): Promise<number | undefined>
  (callback: (err: Error | null, timeLeft?: number, actionsLeft?: number) => void): Promise<number | undefined>
  /** The class instance underneath. */
  readonly limiter: InMemoryRateLimiter | RedisRateLimiter
}

/** The answer of every counting limiter (`consume`, `peek`). */
export interface Verdict extends StoreFallback {
  /** Whether the action is (for `peek`: would be) allowed; an allowed `consume` was counted. */
  allowed: boolean
  /**
   * Milliseconds until the same call would be allowed, rounded up: 0 when allowed, `Infinity`
   * when its weight exceeds a limit (it never will be).
   */
  timeLeft: number
  /** The weight the tightest limit still admits after this call. */
  remaining: number
  /** That tightest limit. */
  limit: number
  /** Milliseconds until every counter of the call is back to zero (0 when none holds anything). */
  resetAfter: number
}

/** Per-call options of the counting limiters. */
export interface ConsumeOptions extends CallOptions {
  /** What the action costs: a whole number from 1. Default `1`. */
  weight?: number
}

/** One id, or an array of 1 to 16 ids judged and counted together (e.g. an IP and a user id). */
export type Ids = Id | Id[]

/** Options every counting limiter takes besides its `limits`. */
export interface CountingLimiterOptions<Limit> extends StoreOptions {
  /** 1 to 16 limits, all checked together: a call is counted only when every one admits it. Required. */
  limits: Limit[]
  /** Keep the counters in Redis (see {@link RedisClientLike}). Default: in memory. */
  client?: RedisClientLike
  /** Redis key prefix: an id's counters are one hash at `namespace + id`. */
  namespace?: string
  /** On Redis, whose clock decides when a call gives no `now`: `'redis'` (default) or `'local'`. */
  clock?: 'redis' | 'local'
}

/**
 * What the counting limiters share: `consume`, `peek` and `reset` over one id or several (all
 * judged and counted in one atomic step; only allowed actions are counted).
 *
 * On a Redis Cluster, the ids of one call must share a hash tag (`'{user:42}ip:10.0.0.1'`,
 * `'{user:42}user:42'`); otherwise the call rejects with `ERR_INVALID_ID`.
 */
export declare class CountingLimiter<Limit> {
  constructor(options: CountingLimiterOptions<Limit>)
  /** The limits, as given. */
  readonly limits: ReadonlyArray<Limit>
  /** How many ids hold state in memory (0 on Redis). */
  readonly trackedIds: number
  /** How many active ids were evicted to stay within `maxKeys` (0 without it, and on Redis). */
  readonly evictedIds: number
  /**
   * Counts the action when every limit of every id admits it; answers either way.
   *
   * ```js
   * const { allowed, timeLeft } = await limiter.consume([`ip:${req.ip}`, `user:${userId}`], { weight: 2 })
   * ```
   */
  consume(ids: Ids, options?: ConsumeOptions): Promise<Verdict>
  /** What `consume` would answer now, counting nothing. */
  peek(ids: Ids, options?: ConsumeOptions): Promise<Verdict>
  /** Forgets the counters of the ids. */
  reset(ids: Ids): Promise<void>
}

/** A fixed-window limit: at most `limit` weight (a whole number) per `duration` milliseconds. */
export interface FixedWindowLimit {
  duration: number
  limit: number
}

/**
 * Fixed window counters, in windows aligned to the clock (`floor(now / duration)`): every id's
 * window resets at the same instants. One hash per id holds all its limits
 * (namespace default `'ratekeeper:fixed:'`).
 *
 * ```js
 * const { FixedWindow } = require('ratekeeper')
 * const limiter = new FixedWindow({ limits: [{ duration: 1000, limit: 10 }, { duration: 60_000, limit: 120 }] })
 * const { allowed, timeLeft } = await limiter.consume([req.ip, userId])
 * ```
 */
export declare class FixedWindow extends CountingLimiter<FixedWindowLimit> {}

/**
 * A sliding-window limit: at most `limit` weight in any `duration` milliseconds, counted in
 * buckets of `precision` milliseconds (default a tenth of `duration`, at most 3600 buckets):
 * weight comes back bucket by bucket as the window slides.
 */
export interface SlidingWindowLimit {
  duration: number
  limit: number
  precision?: number
}

/**
 * The precision sliding window: no reset for everyone at the top of the window. Many limits
 * share one hash per id, in the layout of the seed's `over_limit_sliding_window`
 * (namespace default `'ratekeeper:sliding:'`). Like the seed, it expects an id's calls to come in
 * time order: keep the default Redis clock rather than `clock: 'local'` on hosts whose clocks
 * differ (a late call may count against buckets that were already forgotten).
 *
 * ```js
 * const { SlidingWindow } = require('ratekeeper')
 * // A burst of 1000 in a second, 5000 in 10 s, 7000 in 15 s:
 * const limiter = new SlidingWindow({ limits: [
 *   { duration: 1000, limit: 1000, precision: 100 },
 *   { duration: 10_000, limit: 5000, precision: 1000 },
 *   { duration: 15_000, limit: 7000, precision: 1000 },
 * ] })
 * ```
 */
export declare class SlidingWindow extends CountingLimiter<SlidingWindowLimit> {}

/** redback's `RateLimit` options (seconds, as redback), plus where to keep the counts. */
export interface RedbackRateLimitOptions extends StoreOptions {
  /** The circle's size in seconds. Default `600`. */
  bucket_span?: number
  /** Each bucket's size in seconds; `bucket_span` must be a multiple of it. Default `5`. */
  bucket_interval?: number
  /** Seconds an idle subject is kept. Default `1200`. */
  subject_expiry?: number
  /** Keep the counts in Redis (see {@link RedisClientLike}). Default: in memory. */
  client?: RedisClientLike
  /** Key prefix: a subject's hash is at `[namespace:]action:subject`, as in redback. Default none. */
  namespace?: string
  /** On Redis, whose clock decides when a call gives no `now`: `'redis'` (default) or `'local'`. */
  clock?: 'redis' | 'local'
}

type NodeCallback<T> = (err: Error | null, value?: T) => void

/** What redback's methods return: a Promise that also chains (`add(ip).count(ip, 20)`). */
export type RedbackResult<T> = Promise<T> & Pick<RedbackRateLimit, 'add' | 'count' | 'addCount'>

/**
 * redback's `RateLimit`, drop-in: counts per subject in a circle of buckets, in redback's Redis
 * layout (redback's data keeps counting, and redback reads ours). Unlike redback, a pause does not
 * bring an earlier lap's counts back, and an `interval` longer than `bucket_span` is a
 * `RangeError` (`ERR_INVALID_ARGUMENT`) instead of double counting. Each method returns a Promise
 * and, given a callback, calls it node-style (the Promise then never rejects); a trailing
 * `{ now }` (milliseconds) sets the time.
 *
 * ```js
 * const ratelimit = require('ratekeeper').createRateLimit('requests', { client: 'redis://127.0.0.1:6379' })
 * ratelimit.add('127.0.0.1')
 * ratelimit.count('127.0.0.1', 20, (err, requests) => { if (requests > 30) throttle() })
 * ```
 */
export interface RedbackRateLimit {
  /** `[namespace:]action`, as redback. */
  readonly key: string
  /** Counts one action of `subject` (of each, for an array). */
  add(subject: Id | Id[], callback?: NodeCallback<void>, options?: CallOptions): RedbackResult<void>
  add(subject: Id | Id[], options?: CallOptions, callback?: NodeCallback<void>): RedbackResult<void>
  /** How many actions `subject` did in the last `interval` seconds (at most `bucket_span`). */
  count(subject: Id, interval: number, callback?: NodeCallback<number>, options?: CallOptions): RedbackResult<number>
  count(subject: Id, interval: number, options?: CallOptions, callback?: NodeCallback<number>): RedbackResult<number>
  /** `add`, then `count`, in one atomic step. */
  addCount(subject: Id, interval: number, callback?: NodeCallback<number>, options?: CallOptions): RedbackResult<number>
  addCount(subject: Id, interval: number, options?: CallOptions, callback?: NodeCallback<number>): RedbackResult<number>
}

/** redback's `createRateLimit(action, options)`; in memory unless `client` is given. */
export declare function createRateLimit(action: string, options?: RedbackRateLimitOptions): RedbackRateLimit

/**
 * redback's `createClient(redisOptions?, { namespace? })`: rate limits on one Redis (default
 * `redis://127.0.0.1:6379`, as redback).
 *
 * ```js
 * const redback = require('ratekeeper').createClient('redis://127.0.0.1:6379', { namespace: 'app' })
 * const ratelimit = redback.createRateLimit('requests')
 * ```
 */
export declare function createClient(
  redisOptions?: RedisClientLike,
  options?: { namespace?: string },
): { namespace: string; createRateLimit(action: string, options?: Omit<RedbackRateLimitOptions, 'client'>): RedbackRateLimit }
/** Alias of {@link createClient} (redback's `use(client, options)`). */
export declare const use: typeof createClient

export interface RateLimitMiddlewareOptions {
  /**
   * The limiter to ask: any with `consume` (`RateLimiter`, `SlidingLog`, `FixedWindow`,
   * `SlidingWindow`). Each request consumes one action; refused ones are not counted. Required.
   */
  limiter: { consume(id: Id): Promise<Verdict> }
  /**
   * The id of a request. Default `req => req.ip`. A request for which it gives `undefined` or
   * `null` is passed to Express as an `ERR_INVALID_ID` error (it would otherwise share one
   * global limit with every other such request).
   */
  key?: (req: any) => Id
  /**
   * Set `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset` (seconds until the
   * limiter's counters are back to zero) on every response. Default `true`.
   */
  headers?: boolean
  /** Status of a refused request. Default `429`. */
  statusCode?: number
  /**
   * Body of a refused request: a string, an object (sent as JSON) or a function of the wait in
   * milliseconds. Default: `Too many requests: you must wait N ms before you can make requests.`
   */
  message?: string | object | ((timeLeft: number, req: any) => string | object)
  /**
   * When the limiter fails (Redis down): `'next'` passes the error to Express (default), `'allow'`
   * lets the request through (fail open), `'block'` answers 503 (fail closed).
   */
  onError?: 'next' | 'allow' | 'block'
  /** Requests for which this returns true are not limited. */
  skip?: (req: any) => boolean
}

/**
 * Express middleware: refuses requests over the limit with 429, a `Retry-After` header (seconds)
 * and the wait in the body, and sets the `RateLimit-*` headers on every response.
 *
 * ```js
 * const { RateLimiter, rateLimit } = require('ratekeeper')
 * app.use(rateLimit({ limiter: new RateLimiter({ interval: 60_000, maxInInterval: 100 }) }))
 * ```
 */
export declare function rateLimit(options: RateLimitMiddlewareOptions): (req: any, res: any, next: (err?: unknown) => void) => void

/** The time now in microseconds (rolling-rate-limiter 0.4's helper). */
export declare function getCurrentMicroseconds(): number
export declare function millisecondsToMicroseconds(milliseconds: number): number
/** Rounds up. */
export declare function microsecondsToMilliseconds(microseconds: number): number
/** Rounds up. */
export declare function microsecondsToSeconds(microseconds: number): number

export default RateLimiter

declare module './binding' {
  interface RedisStore {
    /**
     * Once per outage of a node (its connection lost, or not opened): `listener(error)`, an
     * `Error` with `code: 'ERR_STORE_UNAVAILABLE'` and `node` (`'host:port'`). Calls that fail
     * meanwhile still reject one by one; this lets an app log an outage once. Returns the store.
     *
     * ```js
     * store.on('error', (error) => log.warn(error.message)).on('reconnect', ({ node }) => log.info(`Redis at ${node} is back`))
     * ```
     */
    on(event: 'error', listener: (error: Error & { code: 'ERR_STORE_UNAVAILABLE'; node: string }) => void): this
    /** Once when a node whose connection had failed is connected again. Returns the store. */
    on(event: 'reconnect', listener: (event: { node: string }) => void): this
    /** Removes a listener added with `on`. */
    off(event: 'error' | 'reconnect', listener: (...args: any[]) => void): this
  }
}
