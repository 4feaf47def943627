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

/** Options of every limiter. */
export interface IRateLimiterOptions {
  /** Key prefix, default `'rlflx'` (`''`: none). */
  keyPrefix?: string
  /** Points a key may consume per duration (required; any finite number). */
  points?: number
  /** Seconds (required; `0`: the count never expires). */
  duration?: number
  /** Delay allowed actions to spread them over the duration. Default `false`. */
  execEvenly?: boolean
  /** The shortest delay of `execEvenly`, in ms. Default `duration * 1000 / points`. */
  execEvenlyMinDelayMs?: number
  /** Seconds a key is blocked once over its points. Default `0`: not blocked. */
  blockDuration?: number
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
  /** Answers calls while the store fails. */
  insuranceLimiter?: RateLimiterAbstract | RateLimiterCompatibleAbstract
  /** Accepted: ratekeeper's store fails a call at once while its connection is down. */
  rejectIfRedisNotReady?: boolean
  /** Accepted: ratekeeper reads the client's type itself. */
  useRedisPackage?: boolean
  useRedis3AndLowerPackage?: boolean
  /** Refused with a TypeError: ratekeeper runs its own script. */
  customIncrTtlLuaScript?: never
}

export type IRateLimiterRedisOptions = IRateLimiterStoreOptions

/** A call's options: `customDuration` in seconds for a key that starts its duration with it. */
export interface IRateLimiterCallOptions {
  customDuration?: number
  [name: string]: unknown
}

export class RateLimiterCompatibleAbstract {
  get keyPrefix(): string
  get blockDuration(): number
  set blockDuration(value: number)
  get execEvenly(): boolean
  set execEvenly(value: boolean)
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
  readonly msDuration: number
  blockDuration: number
  readonly msBlockDuration: number
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
  constructor(opts: IRateLimiterOptions & { insuranceLimiter?: RateLimiterAbstract | RateLimiterCompatibleAbstract })
  insuranceLimiter: RateLimiterAbstract | RateLimiterCompatibleAbstract | undefined
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
}

/** rate-limiter-flexible's RateLimiterRedis, on its Redis layout (`keyPrefix:key`, the points as a string, TTL the time left). */
export class RateLimiterRedis extends RateLimiterStoreAbstract {
  constructor(opts: IRateLimiterRedisOptions)
}

/** RateLimiterRedis on a Valkey server (an iovalkey client, or any form RateLimiterRedis takes). */
export class RateLimiterValkey extends RateLimiterRedis {}
