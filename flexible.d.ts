/**
 * `ratekeeper/flexible`: rate-limiter-flexible 11's API on ratekeeper's stores. Replace
 * `require('rate-limiter-flexible')` with `require('ratekeeper/flexible')`.
 *
 * ```js
 * const { RateLimiterRedis } = require('ratekeeper/flexible')
 * const limiter = new RateLimiterRedis({ storeClient: ioredisClient, points: 10, duration: 1 })
 * limiter.consume(ip).then((res) => next(), (res) => tooManyRequests(res.msBeforeNext))
 * ```
 */

/** What a limiter resolves with, and rejects with when a key is over its points. */
export class RateLimiterRes {
  constructor(remainingPoints?: number, msBeforeNext?: number, consumedPoints?: number, isFirstInDuration?: boolean)
  /** Milliseconds before the key's duration (or block) ends; -1 when it never does. */
  msBeforeNext: number
  /** Points left in the current duration (never below 0). */
  remainingPoints: number
  /** Points consumed in the current duration, this call's included. */
  consumedPoints: number
  /** Whether this call started the key's duration. */
  isFirstInDuration: boolean
  toString(): string
  toJSON(): { remainingPoints: number; msBeforeNext: number; consumedPoints: number; isFirstInDuration: boolean }
}

/** rate-limiter-flexible's shape of an answer's fields, each optional (a RateLimiterRes has them all). */
export interface IRateLimiterRes {
  /** Milliseconds before the key's duration (or block) ends. */
  msBeforeNext?: number
  /** Points left in the current duration. */
  remainingPoints?: number
  /** Points consumed in the current duration. */
  consumedPoints?: number
  /** Whether the call started the key's duration. */
  isFirstInDuration?: boolean
}

/** A limiter as the wrappers, RateLimiterUnion, RateLimiterQueue and `insuranceLimiter` take it. */
export type RateLimiterLike = RateLimiterAbstract | RateLimiterCompatibleAbstract

/** Options of every limiter. */
export interface IRateLimiterOptions {
  /** Key prefix, default `'rlflx'` (`''`: none). */
  keyPrefix?: string
  /** Points a key may consume per duration (required; any finite number). */
  points: number
  /** Seconds (required; `0`: the count never expires). */
  duration: number
  /** Delay allowed actions to spread them over the duration. Default `false`. */
  execEvenly?: boolean
  /** The shortest delay of `execEvenly`, in ms. Default `duration * 1000 / points`. */
  execEvenlyMinDelayMs?: number
  /** Seconds a key is blocked once over its points. Default `0`: not blocked. */
  blockDuration?: number
  /**
   * Answers calls while the store fails (the limiters on a store and RLWrapperTimeouts); ignored
   * by RateLimiterMemory and RateLimiterCluster. Default none.
   */
  insuranceLimiter?: RateLimiterLike
}

/** Options of the limiters on a store. */
export interface IRateLimiterStoreOptions extends IRateLimiterOptions {
  /** An ioredis or node-redis client, a Redis URL, an options object or a RedisStore (required). */
  storeClient: any
  /** Consumed points at which a key is also blocked in this process's memory. Default `0`: never. */
  inMemoryBlockOnConsumed?: number
  /** Seconds of that block. Default `0`: until the key's duration ends. */
  inMemoryBlockDuration?: number
  /** Consumed points at which a key is blocked in the store for `blockDuration`. Default `0`: once over `points`. */
  blockOnConsumed?: number
  /** Answers calls while the store fails. Default none. */
  insuranceLimiter?: RateLimiterLike
  /** Accepted and ignored (rate-limiter-flexible's other stores' option). */
  storeType?: string
  /** Accepted and ignored (rate-limiter-flexible's SQL and Mongo stores' option). */
  dbName?: string
  /** Accepted and ignored (rate-limiter-flexible's SQL and Mongo stores' option). */
  tableName?: string
  /** Accepted and ignored (rate-limiter-flexible's SQL stores' option). */
  tableCreated?: boolean
}

/** Options of RateLimiterRedis. */
export interface IRateLimiterRedisOptions extends IRateLimiterStoreOptions {
  /** Accepted: ratekeeper's store fails a call at once while its connection is down. Default `false`. */
  rejectIfRedisNotReady?: boolean
  /** Accepted: ratekeeper reads the client's type itself. Default `false`. */
  useRedisPackage?: boolean
  /** Accepted: ratekeeper reads the client's type itself. Default `false`. */
  useRedis3AndLowerPackage?: boolean
  /** Refused with a TypeError: ratekeeper runs its own script. */
  customIncrTtlLuaScript?: never
}

/** Options of RateLimiterValkey: RateLimiterRedis's. */
export interface IRateLimiterValkeyOptions extends IRateLimiterRedisOptions {
  /** Accepted and ignored: ratekeeper's store fails a call at once while its connection is down. Default `false`. */
  rejectIfValkeyNotReady?: boolean
}

/** A call's options: `customDuration` in seconds for a key that starts its duration with it (default the limiter's `duration`). */
export interface IRateLimiterCallOptions {
  customDuration?: number
  [name: string]: any
}

/**
 * rate-limiter-flexible's options of RateLimiterMongo's calls, which its declarations give
 * `BurstyRateLimiter.consume`: accepted, `attrs` passed on to the limiters and ignored by them.
 */
export interface IRateLimiterMongoFunctionOptions {
  attrs: { [key: string]: any }
}

/**
 * The base of a limiter that is not one of these but answers as they do (a wrapper, an app's
 * own): what `insuranceLimiter`, RateLimiterUnion, RateLimiterQueue and the wrappers take. Every
 * member is the subclass's to give: the base's throw an Error (`code: 'ERR_NOT_IMPLEMENTED'`).
 */
export class RateLimiterCompatibleAbstract {
  readonly keyPrefix: string
  blockDuration: number
  execEvenly: boolean
  consume(key: string | number, pointsToConsume?: number, options?: IRateLimiterCallOptions): Promise<RateLimiterRes>
  penalty(key: string | number, points?: number, options?: IRateLimiterCallOptions): Promise<RateLimiterRes>
  reward(key: string | number, points?: number, options?: IRateLimiterCallOptions): Promise<RateLimiterRes>
  get(key: string | number, options?: IRateLimiterCallOptions): Promise<RateLimiterRes | null>
  set(key: string | number, points: number, secDuration: number, options?: IRateLimiterCallOptions): Promise<RateLimiterRes>
  block(key: string | number, secDuration: number, options?: IRateLimiterCallOptions): Promise<RateLimiterRes>
  delete(key: string | number, options?: IRateLimiterCallOptions): Promise<boolean>
}

export class RateLimiterAbstract {
  constructor(opts: IRateLimiterOptions)
  points: number
  duration: number
  /** `duration` in milliseconds. */
  get msDuration(): number
  blockDuration: number
  /** `blockDuration` in milliseconds. */
  get msBlockDuration(): number
  execEvenly: boolean
  execEvenlyMinDelayMs: number
  keyPrefix: string
  getKey(key: string | number): string
  parseKey(rlKey: string): string
  consume(key: string | number, pointsToConsume?: number, options?: IRateLimiterCallOptions): Promise<RateLimiterRes>
  penalty(key: string | number, points?: number, options?: IRateLimiterCallOptions): Promise<RateLimiterRes>
  reward(key: string | number, points?: number, options?: IRateLimiterCallOptions): Promise<RateLimiterRes>
  get(key: string | number, options?: IRateLimiterCallOptions): Promise<RateLimiterRes | null>
  set(key: string | number, points: number, secDuration?: number, options?: IRateLimiterCallOptions): Promise<RateLimiterRes>
  block(key: string | number, secDuration: number, options?: IRateLimiterCallOptions): Promise<RateLimiterRes>
  delete(key: string | number, options?: IRateLimiterCallOptions): Promise<boolean>
}

export class RateLimiterInsuredAbstract extends RateLimiterAbstract {
  constructor(opts: IRateLimiterOptions)
  insuranceLimiter: RateLimiterLike | undefined
}

export class RateLimiterStoreAbstract extends RateLimiterInsuredAbstract {
  constructor(opts: IRateLimiterStoreOptions)
  blockOnConsumed: number
  inMemoryBlockOnConsumed: number
  inMemoryBlockDuration: number
  readonly msInMemoryBlockDuration: number
  getInMemoryBlockMsBeforeExpire(rlKey: string): number
  /** Forgets every block held in memory. */
  deleteInMemoryBlockedAll(): void
}

/** rate-limiter-flexible's RateLimiterMemory, on the app's clock (`Date.now()`), with no timer per key. */
export class RateLimiterMemory extends RateLimiterAbstract {
  constructor(opts: IRateLimiterOptions)
  /**
   * A snapshot of every live key, as rate-limiter-flexible's `dump` gives it (`expiresAt` in ms
   * since the epoch, `null` for never), in no particular order.
   *
   * ```ts
   * fs.writeFileSync('limits.json', JSON.stringify(limiter.dump()))
   * ```
   */
  dump(): IRateLimiterMemoryExport
  /**
   * Loads a snapshot of `dump` (this one's or rate-limiter-flexible's): answers how many items
   * were invalid (a value must be a whole number here), expired and restored, with their keys
   * when `detailResponse` is true; undefined for data that is not a version 1 snapshot.
   */
  restore(data: Omit<IRateLimiterMemoryExport, 'dumpedAt'>, detailResponse: true): IRateLimiterRestoreDetailResponse | undefined
  restore(data: Omit<IRateLimiterMemoryExport, 'dumpedAt'>, detailResponse?: false): IRateLimiterRestoreResponse | undefined
  restore(
    data: Omit<IRateLimiterMemoryExport, 'dumpedAt'>,
    detailResponse?: boolean,
  ): IRateLimiterRestoreResponse | IRateLimiterRestoreDetailResponse | undefined
}

/** One key of a `RateLimiterMemory.dump` (`expiresAt` in ms since the epoch, `null` for never). */
export interface IRateLimiterMemoryRecord {
  key: string | number
  value: number
  expiresAt: number | null
}

/** What `RateLimiterMemory.dump` gives and `restore` takes (version 1). */
export interface IRateLimiterMemoryExport {
  version: number
  dumpedAt: number
  storage: IRateLimiterMemoryRecord[]
}

/** `restore`'s answer: per bucket, a count (or with `detailResponse` the count and keys). */
export interface IRateLimiterRestoreResult<T> {
  invalid: T
  expired: T
  restored: T
}

export type IRateLimiterRestoreResponse = IRateLimiterRestoreResult<number>

export interface IRateLimiterRestoreBucketDetail {
  count: number
  keys: Array<string | number>
}

export type IRateLimiterRestoreDetailResponse = IRateLimiterRestoreResult<IRateLimiterRestoreBucketDetail>

/** rate-limiter-flexible's RateLimiterRedis, on its Redis layout (`keyPrefix:key`, the points as a string, TTL the time left). */
export class RateLimiterRedis extends RateLimiterStoreAbstract {
  constructor(opts: IRateLimiterRedisOptions)
}

/** RateLimiterRedis on a Valkey server (an iovalkey client, or any form RateLimiterRedis takes). */
export class RateLimiterValkey extends RateLimiterRedis {
  constructor(opts: IRateLimiterValkeyOptions)
}

/** Options of RateLimiterQueue. */
export interface IRateLimiterQueueOpts {
  /** Requests that may wait per key; one more rejects with a RateLimiterQueueError. Default `4294967295`. */
  maxQueueSize?: number
}

/**
 * rate-limiter-flexible's RateLimiterQueue: `removeTokens` waits, first in first out per key,
 * while the limiter refuses, instead of failing. Rejects with a RateLimiterQueueError for more
 * tokens than the limiter's `points`, a full queue, or a request still waiting at its
 * `expiresUnixAt`; with the limiter's Error when it fails.
 *
 * ```ts
 * const queue = new RateLimiterQueue(new RateLimiterMemory({ points: 2, duration: 1 }), { maxQueueSize: 100 })
 * const remaining: number = await queue.removeTokens(1, userId)
 * ```
 */
export class RateLimiterQueue {
  constructor(limiterFlexible: RateLimiterLike | BurstyRateLimiter, opts?: IRateLimiterQueueOpts)
  /** The points `key` (default `'limiter'`) has left: the limiter's `points` when it holds nothing or cannot be read. */
  getTokensRemaining(key?: string | number): Promise<number>
  /**
   * Takes `tokens` from `key` (default `'limiter'`), waiting while the limiter refuses them;
   * resolves with the points left. `expiresUnixAt`: a deadline in Unix seconds (default `0`: none).
   */
  removeTokens(tokens: number, key?: string | number, expiresUnixAt?: number): Promise<number>
}

/** RateLimiterQueue's rejection: an Error with rate-limiter-flexible's fields (`name` is `'CustomError'`). */
export class RateLimiterQueueError extends Error {
  constructor(message?: string, extra?: string)
  readonly name: string
  readonly message: string
  readonly extra?: string
}

/**
 * rate-limiter-flexible's BurstyRateLimiter: a consume `rateLimiter` refuses goes to `burstLimiter`.
 * Answers with `rateLimiter`'s RateLimiterRes, `msBeforeNext` the smaller of both limiters'.
 *
 * ```ts
 * const bursty = new BurstyRateLimiter(perSecond, new RateLimiterMemory({ keyPrefix: 'burst', points: 5, duration: 10 }))
 * ```
 */
export class BurstyRateLimiter {
  constructor(rateLimiter: RateLimiterLike, burstLimiter: RateLimiterLike)
  /** `rateLimiter`'s points. */
  readonly points: number
  consume(key: string | number, pointsToConsume?: number, options?: IRateLimiterCallOptions): Promise<RateLimiterRes>
  /** The combined answer without consuming; null when `rateLimiter` holds nothing for `key`. */
  get(key: string | number): Promise<RateLimiterRes | null>
}

/** Options of RLWrapperBlackAndWhite. */
export interface IRLWrapperBlackAndWhiteOptions {
  /** The limiter of the keys on neither list (required). */
  limiter: RateLimiterLike
  /** Keys always refused, matched as given. Default none. */
  blackList?: string[] | number[]
  /** Keys always allowed, matched as given (this list wins). Default none. */
  whiteList?: string[] | number[]
  /** Whether a key is always refused, besides `blackList`. */
  isBlackListed?(key: any): boolean
  /** Whether a key is always allowed, besides `whiteList`. */
  isWhiteListed?(key: any): boolean
  /** Also run the call on `limiter` for a listed key (its answer ignored); `get` then asks `limiter`. Default `false`. */
  runActionAnyway?: boolean
}

/**
 * rate-limiter-flexible's RLWrapperBlackAndWhite: white-listed keys resolve with
 * `remainingPoints` Number.MAX_SAFE_INTEGER; black-listed ones are refused by `consume` (a
 * RateLimiterRes with `msBeforeNext` Number.MAX_SAFE_INTEGER) and resolve with that answer
 * elsewhere. `delete` always goes to `limiter`.
 *
 * ```ts
 * const limiter = new RLWrapperBlackAndWhite({ limiter: perSecond, whiteList: ['127.0.0.1'], isBlackListed: (ip) => banned.has(ip) })
 * ```
 */
export class RLWrapperBlackAndWhite extends RateLimiterCompatibleAbstract {
  constructor(opts: IRLWrapperBlackAndWhiteOptions)
  limiter: RateLimiterLike
  blackList: string[] | number[]
  whiteList: string[] | number[]
  isBlackListed: (key: any) => boolean
  isWhiteListed: (key: any) => boolean
  runActionAnyway: boolean
  isBlackListedSomewhere(key: any): boolean
  isWhiteListedSomewhere(key: any): boolean
  getBlackRes(): RateLimiterRes
  getWhiteRes(): RateLimiterRes
  rejectBlack(): Promise<never>
  resolveBlack(): Promise<RateLimiterRes>
  resolveWhite(): Promise<RateLimiterRes>
}

/** Options of RLWrapperTimeouts: the wrapper's own `keyPrefix`, `blockDuration` and `execEvenly`, besides these. */
export interface IRLWrapperTimeoutsOptions extends Omit<IRateLimiterOptions, 'points' | 'duration'> {
  /** The limiter to give a deadline (required). */
  limiter: RateLimiterLike
  /** Milliseconds a call may take. Default `0` (Node's shortest timer, 1 ms). */
  timeoutMs?: number
  /** Answers a call that timed out or failed. Default `limiter`'s own. */
  insuranceLimiter?: RateLimiterLike
}

/**
 * rate-limiter-flexible's RLWrapperTimeouts: a call `limiter` has not answered within `timeoutMs`
 * rejects with `Error('Operation timed out')`, or is answered by the `insuranceLimiter`.
 *
 * ```ts
 * const limiter = new RLWrapperTimeouts({ limiter: redisLimiter, timeoutMs: 50, insuranceLimiter: memoryLimiter })
 * ```
 */
export class RLWrapperTimeouts extends RateLimiterInsuredAbstract {
  constructor(opts: IRLWrapperTimeoutsOptions)
  limiter: RateLimiterLike
  timeoutMs: number
}

/** Options of RateLimiterCluster: RateLimiterMemory's, and `timeoutMs`. */
export interface IRateLimiterClusterOptions extends IRateLimiterOptions {
  /**
   * Milliseconds a call waits for the master's answer before it rejects with an Error ("RateLimiterCluster
   * timeout: no answer from master in time", `code: 'ERR_CLUSTER_TIMEOUT'`). Default `5000`.
   */
  timeoutMs?: number
}

/**
 * rate-limiter-flexible's RateLimiterCluster: a limiter in a cluster worker whose counts the
 * master (RateLimiterClusterMaster, in the primary) keeps in memory for all the workers; its
 * messages are rate-limiter-flexible's, so either side may be rate-limiter-flexible's own. Give
 * each set of options its own `keyPrefix` (default `'rlflx'`): the master keeps the first options
 * it is given for one (a worker whose own differ emits a process warning,
 * `code: 'RATEKEEPER_CLUSTER_OPTIONS'`). Throws `ERR_NOT_SUPPORTED` (a TypeError) in a process
 * without an IPC channel, or in the primary that runs the master.
 *
 * ```js
 * const cluster = require('node:cluster')
 * const { RateLimiterClusterMaster, RateLimiterCluster } = require('ratekeeper/flexible')
 * if (cluster.isPrimary) {
 *   new RateLimiterClusterMaster()
 *   for (let i = 0; i < 4; i++) cluster.fork()
 * } else {
 *   const limiter = new RateLimiterCluster({ keyPrefix: 'api', points: 100, duration: 60, timeoutMs: 1000 })
 *   // limiter.consume(ip): resolves, or rejects with a RateLimiterRes (over the points) or an Error (no answer)
 * }
 * ```
 */
export class RateLimiterCluster extends RateLimiterAbstract {
  constructor(opts: IRateLimiterClusterOptions)
  /** Milliseconds a call waits for the master. Default `5000`. */
  timeoutMs: number
}

/**
 * The master of every RateLimiterCluster: create it once in the primary, without options; it
 * holds one RateLimiterMemory per `keyPrefix`, made of the options of the first worker that names
 * it. A singleton: `new` gives the process's master again.
 */
export class RateLimiterClusterMaster {
  constructor()
}

/**
 * RateLimiterClusterMaster for apps PM2 runs (cluster or fork mode): create it in a process of its
 * own with the `pm2` module, connected (`pm2.connect()`); it answers the apps' RateLimiterCluster
 * through PM2's bus. A singleton, as RateLimiterClusterMaster.
 */
export class RateLimiterClusterMasterPM2 {
  /** `pm2`: the `pm2` module (its `launchBus` and `sendDataToProcessId` are used). */
  constructor(pm2: any)
}

/**
 * rate-limiter-flexible's RateLimiterUnion: a key consumes on every limiter at once. Resolves
 * `{ [keyPrefix]: RateLimiterRes }` for every limiter; rejects with the same for the limiters that
 * refused (or the Error a limiter failed with). Atomic when every limiter is RateLimiterMemory, or
 * every one RateLimiterRedis on one `storeClient`: a refused consume charges none (on a Redis
 * Cluster its keys must then share a hash tag, e.g. `'{user:42}'`); a refusing limiter's answer
 * tells what its key holds, and one with `blockDuration` is blocked; a key holding what no limiter
 * wrote rejects with the store's Error under every limiter's prefix, charging none (unless a
 * limiter has an `insuranceLimiter`). Any other mix consumes one by one, as rate-limiter-flexible
 * does.
 *
 * ```ts
 * const union = new RateLimiterUnion(perSecond, perMinute)
 * const res = await union.consume('{user:42}') // { second: RateLimiterRes, minute: RateLimiterRes }
 * ```
 */
export class RateLimiterUnion {
  constructor(...limiters: RateLimiterLike[])
  /** Whether a refused consume charges none of the limiters. */
  readonly atomic: boolean
  /** Consumes `points` (default 1) of `key` on every limiter, or on none when one refuses. */
  consume(key: string | number, points?: number): Promise<Record<string, RateLimiterRes>>
}
