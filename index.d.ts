// ratekeeper: fast, correct, distributed rate limiting on Redis or in memory.
//
// The native RedisStore and its option types are documented in binding.d.ts, generated from the
// Rust doc comments (its engine classes are internal: not exported). This file documents the JavaScript layer:
// rolling-rate-limiter's API (0.4 classes and the original callback form) and the Express
// middleware.
//
// `module.exports` is the callback API's `RateLimiter` with every other export as a property, so
// these declarations say `export =`: the function, merged with the namespace of the rest. That
// describes `import RateLimiter = require('ratekeeper')` (callable), `import RateLimiter, { FixedWindow }
// from 'ratekeeper'` in ESM (index.mjs) and under `esModuleInterop` alike.

import binding = require('./binding')
import type { RollingWindow } from './binding'

/**
 * The original callback API: `RateLimiter(options)` returns a {@link RateLimiter.LimiterFunction}
 * (the default export, and `module.exports` itself). `new RateLimiter.RateLimiter(...)` is the 0.4 class.
 *
 * ```js
 * const RateLimiter = require('ratekeeper') // or: import RateLimiter from 'ratekeeper'
 * const limiter = RateLimiter({ interval: 1000, maxInInterval: 10, redis: 'redis://127.0.0.1:6379' })
 * const timeLeft = await limiter(userId) // 0: allowed
 * ```
 */
declare function RateLimiter(options: RateLimiter.CallbackLimiterOptions): RateLimiter.LimiterFunction

// The namespace of every other export. (Its body is not indented: the declarations keep their history.)
declare namespace RateLimiter {
/** Redis connections shared by limiters: see binding.d.ts. Default: each limiter opens its own. */
export import RedisStore = binding.RedisStore
/** How to reach Redis (a URL, a host and port, a Cluster, TLS): see binding.d.ts. */
export import RedisOptions = binding.RedisOptions
/** TLS options (`ca`, `cert`, `key`, `servername`, `rejectUnauthorized`): see binding.d.ts. */
export import RedisTlsOptions = binding.RedisTlsOptions
/** What `store.stats()` answers. */
export import RedisStoreStats = binding.RedisStoreStats
/** Failed calls by error code, in {@link RedisStoreStats}. */
export import StoreFailures = binding.StoreFailures
/** One action of a sliding log: `{ at, meta }`, from `entries(id)`. */
export import LogEntry = binding.LogEntry

/** An id: a non-empty string of at most 1 KiB, or a finite number (`1` and `'1'` are the same id). */
export type Id = string | number

/**
 * Where a Redis-backed limiter keeps its state: a shared {@link RedisStore}, a Redis URL
 * (`redis://`, `rediss://`, `redis+unix://`, `redis+sentinel://`), an options object (a node,
 * a unix socket `path`, a `cluster`, or `sentinels` and `name`), or an existing ioredis /
 * node-redis client (single node, unix socket, cluster, or ioredis in Sentinel mode), whose
 * connection settings are read so that ratekeeper opens its own connection to the same server.
 * Limiters given the same URL or client object share one connection.
 *
 * ```js
 * new FixedWindow({ client: 'redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/mymaster', limits })
 * new FixedWindow({ client: new IORedis({ sentinels: [{ host: '10.0.0.1', port: 26379 }], name: 'mymaster' }), limits })
 * ```
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
 * The option of the limiters on Redis that answer refusals in process (not redback's).
 */
export interface BlockCacheOptions {
  /**
   * On Redis: once Redis refuses an id with nothing left until some instant, later calls for
   * that id before it are answered in this process, with the answer Redis would give (the wait
   * and reset counting down), and no round trip: against a hot-key attack (a few ids sending
   * everything, all over their limit) Redis and the network are spared almost all the traffic.
   * Answered so: calls with one string id, weight 1, and no `now` or a whole-millisecond one;
   * others go to Redis. `reset` and `reward` through this limiter forget their ids; done
   * through another process they are not seen here, so such an id stays refused here until
   * the instant learned. With the Redis server's clock, a wait answered in process can be
   * shorter than Redis's by the round trip of the call it was learned from (and of the reply
   * the direct lane learned that clock from: see {@link LimiterOptions.clock}), never longer, and
   * an entry never outlives the refusal. On rolling-rate-limiter's API it needs
   * `recordBlocked: false` (recorded blocked attempts extend the block in Redis, which an answer
   * in process cannot do: `ERR_INVALID_OPTION`). `maxIds`: the most ids remembered (default
   * 10,000; the oldest learned goes first). Default `false`. `ERR_INVALID_OPTION` in memory.
   *
   * ```js
   * new FixedWindow({ client, blockCache: true, limits: [{ duration: 60_000, limit: 100 }] })
   * ```
   */
  blockCache?: boolean | { maxIds?: number }
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
export interface RateLimiterOptions extends StoreOptions, BlockCacheOptions {
  /** The window's length in milliseconds (> 0). Required. */
  interval: number
  /**
   * How many actions the window admits: a whole number from 1 to 1e15. Required. Every action
   * in the window is an entry of the id's log, so a full log costs memory per id: about 24 to 48
   * bytes an action in memory, about 140 on Redis (a million an hour: 24-48 MB, or 140 MB on
   * Redis, for an id that uses it all). A counter limiter (`FixedWindow`, `SlidingWindow`)
   * keeps a few numbers instead.
   */
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
export const RateLimiter: {
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
  /**
   * Gives back `weight` actions (an action that turned out free): the newest logged actions of
   * `id` are forgotten. Never below empty; an id with no log gets none. Resolves what `peek`
   * answers afterwards.
   */
  reward(id: Id, options?: ConsumeOptions): Promise<Verdict>
  /**
   * Waits until `consume` allows the action (logging it), and resolves its answer; see
   * {@link Limiter.wait}.
   */
  wait(id: Id, options?: WaitOptions): Promise<Verdict>
  /** Forgets every action of `id` (as `clear`). */
  reset(id: Id): Promise<void>
  /**
   * `limit`, answered synchronously: for code that cannot afford a Promise per decision. In
   * memory only: on Redis it throws `ERR_SYNC_ON_REDIS` (a `TypeError`). Bad arguments throw
   * what `limit` rejects with. Every Promise method has such a twin, named with `Sync`.
   *
   * ```js
   * const limiter = new InMemoryRateLimiter({ interval: 1000, maxInInterval: 10 })
   * if (limiter.limitSync(userId)) return drop(message)
   * ```
   */
  limitSync(id: Id, options?: CallOptions): boolean
  /** `limitWithInfo`, answered synchronously (in memory only, as `limitSync`). */
  limitWithInfoSync(id: Id, options?: CallOptions): RateLimitInfo
  /** `wouldLimit`, answered synchronously (in memory only, as `limitSync`). */
  wouldLimitSync(id: Id, options?: CallOptions): boolean
  /** `wouldLimitWithInfo`, answered synchronously (in memory only, as `limitSync`). */
  wouldLimitWithInfoSync(id: Id, options?: CallOptions): RateLimitInfo
  /** `clear`, done synchronously (in memory only, as `limitSync`). */
  clearSync(id: Id): void
  /** `consume`, answered synchronously (in memory only, as `limitSync`). */
  consumeSync(id: Id, options?: LogOptions): Verdict
  /** `peek`, answered synchronously (in memory only, as `limitSync`). */
  peekSync(id: Id, options?: LogOptions): Verdict
  /** `reward`, answered synchronously (in memory only, as `limitSync`). */
  rewardSync(id: Id, options?: ConsumeOptions): Verdict
  /** `reset`, done synchronously (in memory only, as `limitSync`). */
  resetSync(id: Id): void
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
  /**
   * How many actions this call is: a whole number from 1 to 10,000. Default `1`. Each is an
   * entry of the log, written by one Redis script, so one call logs at most 10,000 (about 30 ms
   * of Redis's time); more is a `RangeError` with code `ERR_INVALID_ARGUMENT`, whatever the
   * limit. (`reward` takes any weight: it only forgets.)
   */
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
export const SlidingLog: {
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
export const InMemoryRateLimiter: {
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
export const RedisRateLimiter: {
  new (options: RedisRateLimiterOptions): RedisRateLimiter
  prototype: RedisRateLimiter
  /** rolling-rate-limiter's duck typing: `'ioredis'`, `'node-redis'`, their cluster forms, or `null`. */
  determineRedisClientType(client: unknown): string | null
}
/** Alias of {@link RedisRateLimiter} (rolling-rate-limiter 0.4's node-redis class). */
export const NodeRedisRateLimiter: typeof RedisRateLimiter
/** Alias of {@link RedisRateLimiter} (rolling-rate-limiter 0.4's ioredis class). */
export const IORedisRateLimiter: typeof RedisRateLimiter

/** Options of the callback form: as {@link RateLimiterOptions}, with `redis` instead of `client`. */
export interface CallbackLimiterOptions extends Omit<RateLimiterOptions, 'client'> {
  /** Keep state in Redis (see {@link RedisClientLike}). Default: in memory. */
  redis?: RedisClientLike
}

/**
 * The callback of a {@link LimiterFunction}, Node-style: `callback(err)` when the call failed,
 * else `callback(null, timeLeft, actionsLeft)` (`timeLeft` 0 when the action is allowed). Typed
 * as Node's own callbacks are (`timeLeft` is only read once `err` is checked), so every usual form
 * compiles: parameters inferred, `(err: Error | null, timeLeft: number)`, fewer parameters,
 * optional ones. {@link PreciseLimiterCallback} is the form that narrows `timeLeft` by `err`.
 *
 * ```ts
 * limiter(userId, (err, timeLeft, actionsLeft) => (err ? log(err) : timeLeft > 0 ? wait(timeLeft) : go(actionsLeft)))
 * ```
 */
export type LimiterCallback = (err: Error | null, timeLeft: number, actionsLeft: number) => void

/**
 * The callback of a {@link LimiterFunction} as a tuple of what it is called with: `timeLeft` and
 * `actionsLeft` are `undefined` when `err` is set, numbers once `err` is checked.
 *
 * ```ts
 * const onLimit: PreciseLimiterCallback = (...[err, timeLeft]) => (err ? log(err) : wait(timeLeft))
 * ```
 */
export type PreciseLimiterCallback = (...args: [err: Error, timeLeft: undefined, actionsLeft: undefined] | [err: null, timeLeft: number, actionsLeft: number]) => void

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
  (id?: Id, callback?: LimiterCallback): Promise<number | undefined>
  (id: Id | undefined, callback: PreciseLimiterCallback): Promise<number | undefined>
  (callback: LimiterCallback): Promise<number | undefined>
  (callback: PreciseLimiterCallback): Promise<number | undefined>
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
  /**
   * How many actions of weight 1 would be allowed right now (after this call, for an allowed
   * `consume`), whole actions rounded down, under the tightest limit. 0 while a rolling
   * window's `minDifference` has not passed.
   */
  remaining: number
  /** That tightest limit (a bucket's capacity, GCRA's burst). */
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

/** Options every limiter with `consume` takes besides its own. */
export interface LimiterOptions extends StoreOptions, BlockCacheOptions {
  /** Keep the state in Redis (see {@link RedisClientLike}). Default: in memory. */
  client?: RedisClientLike
  /** Redis key prefix: an id's state is one key at `namespace + id`. Each limiter has its own default. */
  namespace?: string
  /**
   * On Redis, whose clock decides when a call gives no `now`: `'redis'` (the server's, default:
   * every host of a fleet counts on one clock) or `'local'` (this host's). On the server's
   * clock, the window limiters', buckets' and GCRA's lone calls (one at a time, by the direct
   * lane) carry the lane's estimate of that clock once it learned it, instead of having Redis
   * read it (`TIME`): never ahead of the server's clock, never behind an instant this process
   * was answered with before, and behind the server's clock by at most the round trip it was
   * learned from (under a millisecond); their waits count from the latest instant the clock
   * may have been at, so none ends later than with `TIME` (docs/deployments.md, "The server's
   * clock").
   */
  clock?: 'redis' | 'local'
}

/** Options of the window limiters. */
export interface CountingLimiterOptions<Limit> extends LimiterOptions {
  /** 1 to 16 limits, all checked together: a call is counted only when every one admits it. Required. */
  limits: Limit[]
}

/** Options of `wait`. */
export interface WaitOptions {
  /** What the action costs: a whole number from 1. Default `1`. */
  weight?: number
  /**
   * The longest wait in milliseconds. A wait that the limiter's `timeLeft` shows would end
   * later rejects at once with `ERR_WAIT_TIMEOUT` (a waiter queued behind others, when its time
   * is up). Default `Infinity`.
   */
  timeoutMs?: number
  /** Aborts the wait: it rejects with `ERR_ABORTED` (the signal's reason as `cause`). */
  signal?: AbortSignal
}

/**
 * What every limiter with `consume` shares: `consume`, `peek`, `reward`, `reset` and `wait`
 * over one id or several (all judged and charged in one atomic step: when one id refuses,
 * nothing is charged to any).
 *
 * On a Redis Cluster, the ids of one call must share a hash tag (`'{user:42}ip:10.0.0.1'`,
 * `'{user:42}user:42'`); otherwise the call rejects with `ERR_INVALID_ID`.
 */
export interface Limiter {
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
  /**
   * What `consume` would answer now, counting nothing (`remaining` is what is left now).
   */
  peek(ids: Ids, options?: ConsumeOptions): Promise<Verdict>
  /**
   * Gives `weight` back to each id (an action that turned out free, a failed request not to be
   * charged): never below empty, never to an id without state (it gets none created), and
   * every key keeps its TTL. Resolves what `peek(ids)` answers afterwards.
   *
   * ```js
   * const answer = await limiter.consume(userId)
   * if (answer.allowed && (await send(push)).failed) await limiter.reward(userId)
   * ```
   */
  reward(ids: Ids, options?: ConsumeOptions): Promise<Verdict>
  /** Forgets the state of the ids. */
  reset(ids: Ids): Promise<void>
  /**
   * Waits until the action is allowed and charged, and resolves `consume`'s answer: for
   * workers that would rather wait than drop. Waits for the same ids are served in arrival
   * order within the process; the oldest sleeps for `timeLeft` (no polling) and asks again,
   * since another process may have taken the capacity first. Rejects with `ERR_WAIT_TIMEOUT`
   * when the wait would pass `timeoutMs` (at once when `timeLeft` shows it), `ERR_ABORTED` on
   * `signal`, `ERR_INVALID_ARGUMENT` (a `RangeError`) for a weight that can never be allowed.
   * Timers keep the process alive only while a wait is pending.
   *
   * ```js
   * const limiter = new TokenBucket({ capacity: 5, refillInterval: 1000 })
   * for (const push of pushes) {
   *   await limiter.wait(push.userId, { timeoutMs: 60_000 })
   *   await send(push)
   * }
   * ```
   */
  wait(ids: Ids, options?: WaitOptions): Promise<Verdict>
  /**
   * `consume`, answered synchronously: for code that cannot afford a Promise per decision. In
   * memory only: on a limiter with a `client` it throws `ERR_SYNC_ON_REDIS` (a `TypeError`). Bad
   * arguments throw what `consume` rejects with.
   *
   * ```js
   * const limiter = new FixedWindow({ limits: [{ duration: 1000, limit: 100 }] })
   * if (!limiter.consumeSync(userId).allowed) return drop(message)
   * ```
   */
  consumeSync(ids: Ids, options?: ConsumeOptions): Verdict
  /** `peek`, answered synchronously (in memory only, as `consumeSync`). */
  peekSync(ids: Ids, options?: ConsumeOptions): Verdict
  /** `reward`, answered synchronously (in memory only, as `consumeSync`). */
  rewardSync(ids: Ids, options?: ConsumeOptions): Verdict
  /** `reset`, done synchronously (in memory only, as `consumeSync`). */
  resetSync(ids: Ids): void
}

/**
 * The window limiters (`FixedWindow`, `SlidingWindow`, `SlidingTail`): one or several limits
 * of `limit` weight per `duration`, judged together.
 */
export interface CountingLimiter<Limit> extends Limiter {
  /** The limits, as given. */
  readonly limits: ReadonlyArray<Limit>
}

/** A fixed-window limit: at most `limit` weight (a whole number) per `duration` milliseconds. */
export interface FixedWindowLimit {
  duration: number
  limit: number
}

/**
 * Fixed window counters, in windows aligned to the clock (`floor(now / duration)`): every id's
 * window resets at the same instants. On Redis, one hash per id holds all its limits, each at
 * field `<duration µs>:<window index>` (namespace default `'ratekeeper:fixed:'`); limiters that
 * share a namespace share the hashes. A call of one id under one limit counts first (HINCRBY,
 * then gives the weight back if refused); others read the hash first. A call whose `now` is
 * behind the window an id's counter is in (a host with a slow clock, with `clock: 'local'`)
 * counts in that newer window, and its `timeLeft` and `resetAfter` run to that window's end.
 *
 * ```js
 * const { FixedWindow } = require('ratekeeper')
 * const limiter = new FixedWindow({ limits: [{ duration: 1000, limit: 10 }, { duration: 60_000, limit: 120 }] })
 * const { allowed, timeLeft } = await limiter.consume([req.ip, userId])
 * ```
 */
export class FixedWindow {
  constructor(options: CountingLimiterOptions<FixedWindowLimit>)
}
export interface FixedWindow extends CountingLimiter<FixedWindowLimit> {}

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
export class SlidingWindow {
  constructor(options: CountingLimiterOptions<SlidingWindowLimit>)
}
export interface SlidingWindow extends CountingLimiter<SlidingWindowLimit> {}

/**
 * A sliding-tail limit: at most `limit` weight (a whole number from 1 to 1e15) per `duration`
 * milliseconds (> 0, at least 0.001, at most 1e12), the previous window counting pro rata.
 */
export interface SlidingTailLimit {
  duration: number
  limit: number
}

/** Options of {@link SlidingTail}. */
export interface SlidingTailOptions extends CountingLimiterOptions<SlidingTailLimit> {
  /** 1 to 16 limits, all checked (and counted) together. Required. */
  limits: SlidingTailLimit[]
  /** Redis key prefix: an id's counters are one hash at `namespace + id`. Default `'ratekeeper:tail:'`. */
  namespace?: string
}

/**
 * The sliding tail: fixed windows aligned to the clock (`floor(now / duration)`), with the
 * previous window counted pro rata as if it had been spread evenly. At `elapsed` into a window,
 * the weighted count is `floor(previous * (duration - elapsed) / duration) + current`, and a
 * call is allowed when that plus its weight is at most `limit`. Two counters per limit, one hash
 * per id (namespace default `'ratekeeper:tail:'`). No reset for everyone at the top of the
 * window; the price is that an interval of one `duration` may admit up to twice the limit (all
 * of a window spent at its very end, then the next one filling as that share falls). Random
 * traffic passes the limit by far less (a few percent at a sustained overload).
 *
 * ```js
 * const { SlidingTail } = require('ratekeeper')
 * const limiter = new SlidingTail({ limits: [{ duration: 60_000, limit: 100 }] })
 * const { allowed, remaining, timeLeft } = await limiter.consume(userId)
 * ```
 */
export class SlidingTail {
  constructor(options: SlidingTailOptions)
}
export interface SlidingTail extends CountingLimiter<SlidingTailLimit> {}

/**
 * Options of {@link LeakyBucket}. Errors: `ERR_INVALID_OPTION` (`TypeError` for a wrong type or
 * a missing `capacity` / `leakInterval`, `RangeError` out of range) and `ERR_UNKNOWN_OPTION`,
 * thrown by the constructor.
 */
export interface LeakyBucketOptions extends LimiterOptions {
  /** The most weight an id's bucket holds: a whole number from 1 to 1e15. Required. */
  capacity: number
  /** The weight that leaks out every `leakInterval`: a whole number from 1 to 1e15. Default `1`. */
  leakAmount?: number
  /**
   * Milliseconds between leaks: more than 0, a whole number of microseconds (fractions down to
   * 0.001), at most 1e12. The time a full bucket takes to drain,
   * `ceil(capacity / leakAmount) * leakInterval`, must stay below 2^53 microseconds (about 285
   * years). Required.
   */
  leakInterval: number
  /** Redis key prefix: an id's bucket is a string at `namespace + id`. Default `'ratekeeper:leaky:'`. */
  namespace?: string
}

/**
 * The leaky bucket as a meter: each id has a bucket of `capacity` that every allowed action
 * fills by its weight, and that leaks `leakAmount` every `leakInterval` milliseconds. An action
 * is allowed when it fits (`level + weight <= capacity`); refused actions add nothing. Leaks
 * keep their phase (they fall at `ts + k * leakInterval` from the bucket's start, whenever the
 * calls come), and a bucket that drains to empty is forgotten. In any interval of `t` ms it
 * admits at most `capacity + leakAmount * ceil(t / leakInterval)` when calls come in time order.
 *
 * `limit` in answers is the capacity; `resetAfter` the time until the bucket is empty. One string
 * per id on Redis, `<level>:<ts>` (`ts` in microseconds), with a TTL of the time to drain a full
 * bucket plus a second (an earlier version's hash of `level` and `ts` is read, and replaced at the
 * next write).
 *
 * ```js
 * const { LeakyBucket } = require('ratekeeper')
 * // Bursts of 3, then 1 every 20 s:
 * const limiter = new LeakyBucket({ capacity: 3, leakInterval: 20_000 })
 * const { allowed, timeLeft } = await limiter.consume(`user:${userId}`)
 * ```
 */
export class LeakyBucket {
  constructor(options: LeakyBucketOptions)
  /** The capacity. */
  readonly capacity: number
  /** The leak amount (1 unless given). */
  readonly leakAmount: number
  /** The leak interval in milliseconds. */
  readonly leakInterval: number
}
export interface LeakyBucket extends Limiter {}

/** Options of a {@link TokenBucket}. */
export interface TokenBucketOptions extends LimiterOptions {
  /** The most tokens a bucket holds (the largest burst): a whole number from 1 to 1e15. Required. */
  capacity: number
  /**
   * Tokens added per `refillInterval`, credited continuously (every microsecond, exactly): a
   * whole number from 1 to 1e15. Default `1`.
   */
  refillAmount?: number
  /**
   * Milliseconds in which `refillAmount` tokens are added: more than 0 (at least 0.001, one
   * microsecond) and at most 1e12. Required. The bucket is kept in scaled integers (a token is
   * `refillInterval` in µs / gcd(`refillAmount`, that) units), and `capacity` times that unit may
   * not pass 2^53 (`ERR_INVALID_OPTION` says so).
   */
  refillInterval: number
  /**
   * Tokens a bucket starts with: a whole number from 0 to `capacity`. Default `capacity`. An id's
   * bucket starts at its first `consume`, allowed or refused, holding `initial` as of that call,
   * and refills from then on: with `initial: 0` a new id is refused with the `timeLeft` of one
   * token, and allowed then. Only a consume starts a bucket: `peek` answers for an id without
   * one as if it started now, and writes nothing (nor does `reward`, nor a weight above
   * `capacity`). On Redis a refused consume of a new id therefore writes its bucket when `initial <
   * capacity`.
   */
  initial?: number
  /**
   * Milliseconds a full bucket is kept before it is forgotten: more than 0 (at least 0.001, one
   * microsecond) and at most 1e12. Default `86_400_000` (a day). Once a bucket has been full
   * this long it counts as none, and the id's next consume starts it again from `initial`, like
   * a new id's; until then it answers as full (a client calling less often than the refill time
   * finds a full bucket each time). Memory and Redis agree by logic: when the bucket became full
   * follows from its stored level and instant, not from the key's expiry. Meaningless when
   * `initial` is `capacity`: a full bucket is then the same as none, forgotten at once. Keep it
   * at least 1 ms (the unit of `timeLeft`, which a weight of `capacity` could otherwise overshoot)
   * and longer than the time to refill (else ids checked together may keep forgetting each other's
   * buckets while the other refills).
   */
  forgetAfter?: number
  /** Redis key prefix: an id's bucket is a string at `namespace + id`. Default `'ratekeeper:token:'`. */
  namespace?: string
}

/**
 * A token bucket per id: up to `capacity` tokens, refilled by `refillAmount` every
 * `refillInterval` ms, credited every microsecond from the elapsed time in the same atomic step
 * that spends (no timer, no rounding: scaled integers, exact over any run). A call of weight `w`
 * takes `w` tokens, or is refused with the exact `timeLeft` until they are there. A bucket
 * starts at an id's first consume with `initial` tokens (default `capacity`), and is forgotten
 * after being full for `forgetAfter`. In any span of `t` ms at most
 * `capacity + floor(refillAmount * t / refillInterval)` weight passes (a bucket never holds more
 * than `capacity`, and one started again holds `initial`). `limit` is `capacity`; `resetAfter`
 * is the time until the bucket is full (for an id without a bucket, one starting now).
 *
 * ```js
 * const { TokenBucket } = require('ratekeeper')
 * // Bursts of 10, then 3 per second.
 * const limiter = new TokenBucket({ capacity: 10, refillAmount: 3, refillInterval: 1000 })
 * const { allowed, timeLeft } = await limiter.consume(userId)
 * ```
 */
export class TokenBucket {
  constructor(options: TokenBucketOptions)
  /** The settings, defaults filled in (`refillAmount` 1, `initial` the capacity, `forgetAfter` a day). */
  readonly capacity: number
  readonly refillAmount: number
  readonly refillInterval: number
  readonly initial: number
  readonly forgetAfter: number
}
export interface TokenBucket extends Limiter {}

/** Options of {@link Gcra}. */
export interface GcraOptions extends LimiterOptions {
  /**
   * The sustained rate: `limit` weight per `period`. A whole number from 1 to 1e15. Required.
   */
  limit: number
  /**
   * The period of `limit`, in milliseconds: more than 0 (at least one microsecond), at most
   * 1e12. One weight costs the emission interval `T = period / limit`, in whole microseconds
   * rounded up (3 per second: 333,334 µs), so no period ever admits more than `limit` past the
   * burst; at most one per microsecond. Required.
   */
  period: number
  /**
   * The most weight admitted at once: a whole number from 1 to 1e15. Default `limit`.
   * redis-cell's `max_burst` is `burst - 1`. The burst's drain time `T * burst` may be at most
   * 1e12 ms.
   */
  burst?: number
}

/**
 * The generic cell rate algorithm (GCRA), as redis-cell's `CL.THROTTLE` runs it: `limit`
 * actions per `period` sustained, up to `burst` at once, from one number per id, the theoretical
 * arrival time (TAT). On Redis, a plain string at `namespace + id` (default
 * `'ratekeeper:gcra:'`) holds the TAT in microseconds, with a TTL until the TAT plus a second.
 * In any interval of `t` ms, at most `burst + floor(t / T)` weight is admitted (rewards aside).
 * `limit` in the answer is `burst`. The emission interval is rounded up to a whole microsecond:
 * use `TokenBucket` for a rate that must be exact to the action.
 *
 * ```js
 * const { Gcra } = require('ratekeeper')
 * // CL.THROTTLE user123 15 30 60: 30 per minute, bursts of 16.
 * const limiter = new Gcra({ client: 'redis://127.0.0.1:6379', limit: 30, period: 60_000, burst: 16 })
 * const { allowed, timeLeft, remaining } = await limiter.consume('user123')
 * ```
 */
export class Gcra {
  constructor(options: GcraOptions)
  /** The settings, defaults filled in (`burst` the limit unless given). */
  readonly limit: number
  readonly period: number
  readonly burst: number
}
export interface Gcra extends Limiter {}

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
export function createRateLimit(action: string, options?: RedbackRateLimitOptions): RedbackRateLimit

/**
 * redback's `createClient(redisOptions?, { namespace? })`: rate limits on one Redis (default
 * `redis://127.0.0.1:6379`, as redback).
 *
 * ```js
 * const redback = require('ratekeeper').createClient('redis://127.0.0.1:6379', { namespace: 'app' })
 * const ratelimit = redback.createRateLimit('requests')
 * ```
 */
export function createClient(
  redisOptions?: RedisClientLike,
  options?: { namespace?: string },
): { namespace: string; createRateLimit(action: string, options?: Omit<RedbackRateLimitOptions, 'client'>): RedbackRateLimit }
/** Alias of {@link createClient} (redback's `use(client, options)`). */
export const use: typeof createClient

/**
 * The rate-limit headers the middleware writes (see {@link RateLimitMiddlewareOptions.headers}).
 * `limit` is the answer's limit, `remaining` what is left (0 on a refusal), `reset` the seconds
 * until the limiter holds nothing for the key (`resetAfter`, rounded up), `w` the policy's window
 * in seconds (rounded up):
 * - `'draft-6'`: `RateLimit-Policy: 100;w=60`, `RateLimit-Limit: 100`, `RateLimit-Remaining: 99`,
 *   `RateLimit-Reset: 60`;
 * - `'draft-7'`: `RateLimit-Policy: 100;w=60`, `RateLimit: limit=100, remaining=99, reset=60`;
 * - `'draft-8'`: `RateLimit: "100-in-1min"; r=99; t=60` and
 *   `RateLimit-Policy: "100-in-1min"; q=100; w=60; pk=:<partition key>:` (appended, so that
 *   several middlewares on one route list their policies side by side);
 * - `'legacy'`: `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (the reset
 *   instant in epoch seconds, rounded up), and a `Date` of the same instant;
 * - `'x-rate-limit'`: `X-Rate-Limit-Limit` and `X-Rate-Limit-Remaining`.
 *
 * The drafts and `'legacy'` are byte for byte what express-rate-limit 8 writes for the same
 * limit, window and remaining (its `standardHeaders` and `legacyHeaders`).
 */
export type RateLimitHeaders = 'draft-6' | 'draft-7' | 'draft-8' | 'legacy' | 'x-rate-limit'

/** The limiter's answer to a request, and the key it was asked for: `req.rateLimit`. */
export interface RateLimitAnswer extends Verdict {
  /** The request's key (for the default key, the IP address or its IPv6 subnet: `'2001:db8:1:200::/56'`). */
  key: Id
}

/**
 * Options of {@link rateLimit}. Errors: `ERR_INVALID_OPTION` (`TypeError` for a wrong type,
 * `RangeError` out of range) and `ERR_UNKNOWN_OPTION` for a key that is no option, thrown by
 * `rateLimit`.
 */
export interface RateLimitMiddlewareOptions {
  /**
   * The limiter to ask: any with `consume` (`RateLimiter`, `SlidingLog`, `FixedWindow`,
   * `SlidingWindow`, `SlidingTail`, `LeakyBucket`, `TokenBucket`, `Gcra`). Each request consumes
   * its `weight`; refused ones are not counted. Required.
   */
  limiter: { consume(id: Id, options?: { weight?: number }): Promise<Verdict>; reward?(id: Id, options?: { weight?: number }): Promise<unknown> }
  /**
   * The id of a request. Default: `req.ip`, an IPv6 address grouped by its `ipv6Subnet`
   * (`'2001:db8:1:200::/56'`) and an IPv4-mapped one (`::ffff:10.0.0.1`) as its IPv4 address,
   * the keys of express-rate-limit 8's `ipKeyGenerator`. A request for which it gives `undefined`
   * or `null` is passed to Express as an `ERR_INVALID_ID` error (it would otherwise share one
   * global limit with every other such request).
   *
   * ```js
   * rateLimit({ limiter, key: (req) => req.user?.id ?? req.ip })
   * ```
   */
  key?: (req: any) => Id
  /**
   * The prefix length by which the default key groups IPv6 addresses (one client commonly holds
   * a /64 or more): a whole number from 32 to 64, or `false` for each address apart. Default
   * `56`. Not with `key` (`ERR_INVALID_OPTION`).
   */
  ipv6Subnet?: number | false
  /**
   * What a request costs: a whole number from 1, or a function of the request. Default `1`.
   * A function giving anything else passes an `ERR_INVALID_ARGUMENT` error to Express; a weight
   * above the limiter's capacity is refused (429, no `Retry-After`: no wait lets it through).
   *
   * ```js
   * app.use('/user', rateLimit({ limiter, weight: (req) => (req.method === 'POST' ? 2 : 1) }))
   * ```
   */
  weight?: number | ((req: any) => number)
  /**
   * Which rate-limit headers to write on every limited response (see {@link RateLimitHeaders}):
   * one mode, an array of them (`['draft-7', 'legacy']`), or `false` for none. `true` is
   * `'draft-6'`. Default `'draft-7'`. `'draft-8'` does not go with `'draft-6'` or `'draft-7'`
   * (they write `RateLimit` and `RateLimit-Policy` differently).
   *
   * The policy's window `w`: a window limiter's duration of the limit that decided (the
   * answer's `limit`; of several limits with that value, the longest); a rolling window's
   * `interval`; a token bucket's `refillInterval * capacity / refillAmount` (refilling from
   * empty); a leaky bucket's `leakInterval * capacity / leakAmount` (draining when full);
   * GCRA's `period * burst / limit`. A limiter of another kind: the policy has no `w`.
   * A refusal always reports `remaining` 0, and carries `Retry-After` (seconds, rounded up),
   * whatever this option says.
   */
  headers?: RateLimitHeaders | RateLimitHeaders[] | boolean
  /**
   * draft-8's policy name. Default express-rate-limit's: `<limit>-in-<window>` (`100-in-1min`,
   * `10-in-1sec`, `1000-in-1day`).
   */
  identifier?: string | ((req: any) => string)
  /** Status of a refused request. Default `429`. */
  statusCode?: number
  /**
   * Body of a refused request: a string (sent as text), an object (sent as JSON) or a function
   * `(timeLeft, req, answer)` giving either. Default: `You must wait <timeLeft> ms before you can
   * make requests.` (whole milliseconds, rounded up), or, when the request's `Accept` ranks JSON
   * above text (Express's `req.accepts`), `{ "error": "You must wait ...", "timeLeft": 1234,
   * "retryAfter": 2 }`. What a function throws goes to Express.
   */
  message?: string | object | ((timeLeft: number, req: any, answer: RateLimitAnswer) => string | object)
  /**
   * Writes the whole refusal instead of `message` (not both): called with the headers and
   * `Retry-After` set and `res.statusCode` at `statusCode`. What it throws or rejects goes to Express.
   *
   * ```js
   * rateLimit({ limiter, handler: (req, res, next, answer) => res.status(429).render('slow-down', answer) })
   * ```
   */
  handler?: (req: any, res: any, next: (err?: unknown) => void, answer: RateLimitAnswer) => unknown
  /** Requests for which this returns true are not limited (nor counted, nor given headers). */
  skip?: (req: any) => boolean
  /**
   * Give a failed request's weight back (`limiter.reward`) once its response is done: a status
   * of 400 or more, a connection closed before the response ended, or a response error (as
   * express-rate-limit). Only allowed requests were charged, so only they are given back.
   * Default `false`. Needs a limiter with `reward`.
   */
  skipFailedRequests?: boolean
  /** Give a successful request's weight back (a status below 400) once its response is done. Default `false`. */
  skipSuccessfulRequests?: boolean
  /** Where the answer goes on the request: `req[requestPropertyName]`. Default `'rateLimit'`. */
  requestPropertyName?: string
  /**
   * When the limiter fails (Redis down): `'next'` passes the error to Express (default), `'allow'`
   * lets the request through (fail open), `'block'` answers 503 (fail closed); with `'allow'` and
   * `'block'` the failure goes to `log` at most once a minute. Errors of the request itself (an
   * invalid key or weight: `ERR_INVALID_ID`, `ERR_INVALID_ARGUMENT`) always go to Express, so
   * that no client escapes the limit with a bad id.
   */
  onError?: 'next' | 'allow' | 'block'
  /**
   * Where warnings go: the startup checks (`validate`) as `log(message)`, store failures as
   * `log(message, error)`. Default `console.warn`.
   */
  log?: (message: string, error?: unknown) => void
  /**
   * Check Express's `trust proxy` on the first request, when the key is the default one (like
   * express-rate-limit's validations), and warn through `log`: when requests carry
   * `X-Forwarded-For` but `trust proxy` is off (every client shares the proxy's limit), and when
   * it is `true` (any client chooses its own key). Each warning names the fix. Default `true`;
   * `false` silences them.
   */
  validate?: boolean
}

/**
 * Express (or Connect) middleware: each request consumes its weight for its key; a refused one
 * gets 429 with `Retry-After` (seconds) and the wait in its body. Every limited response carries
 * the rate-limit headers chosen (IETF draft-7 by default), and `req.rateLimit` holds the answer.
 *
 * ```js
 * const { TokenBucket, rateLimit } = require('ratekeeper')
 * const limiter = new TokenBucket({ client: process.env.REDIS_URL, capacity: 10, refillAmount: 1, refillInterval: 1000 })
 * app.set('trust proxy', 1) // behind one proxy
 * app.use(rateLimit({ limiter, headers: ['draft-7', 'legacy'], skipFailedRequests: true }))
 * ```
 */
export function rateLimit(options: RateLimitMiddlewareOptions): (req: any, res: any, next: (err?: unknown) => void) => void

/**
 * The time now in microseconds (rolling-rate-limiter 0.4's helper).
 *
 * ```js
 * const { getCurrentMicroseconds } = require('ratekeeper')
 * await limiter.limit(userId, { now: getCurrentMicroseconds() / 1000 })
 * ```
 */
export function getCurrentMicroseconds(): number
/** `1000 * milliseconds` (rolling-rate-limiter 0.4's helper): `millisecondsToMicroseconds(2) === 2000`. */
export function millisecondsToMicroseconds(milliseconds: number): number
/** Rounds up (rolling-rate-limiter 0.4's helper): `microsecondsToMilliseconds(1001) === 2`. */
export function microsecondsToMilliseconds(microseconds: number): number
/** Rounds up (rolling-rate-limiter 0.4's helper): `microsecondsToSeconds(1_000_001) === 2`. */
export function microsecondsToSeconds(microseconds: number): number
}

export = RateLimiter

declare global {
  namespace Express {
    interface Request {
      /**
       * The answer of ratekeeper's `rateLimit` middleware for this request (`allowed`, `timeLeft`,
       * `remaining`, `limit`, `resetAfter`, and `key`), under its default `requestPropertyName`;
       * `undefined` on a route the middleware does not cover.
       *
       * ```js
       * app.get('/user', (req, res) => res.json({ left: req.rateLimit?.remaining }))
       * ```
       */
      rateLimit?: RateLimiter.RateLimitAnswer
    }
  }
}

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
