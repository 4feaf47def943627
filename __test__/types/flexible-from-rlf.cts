// Code written against rate-limiter-flexible 11's own declarations (its types.d.ts), with only the
// module specifier changed: types.test.js compiles this file as it is against ratekeeper/flexible,
// and again with 'rate-limiter-flexible' put back against rate-limiter-flexible's declarations
// (so every line here is real rate-limiter-flexible code), under `module: commonjs` and
// `module: nodenext` (as .ts, .cts and .mts). Nothing here is ratekeeper's own.
import {
  BurstyRateLimiter,
  IRateLimiterClusterOptions,
  IRateLimiterMemoryExport,
  IRateLimiterMemoryRecord,
  IRateLimiterMongoFunctionOptions,
  IRateLimiterOptions,
  IRateLimiterQueueOpts,
  IRateLimiterRedisOptions,
  IRateLimiterRes,
  IRateLimiterRestoreBucketDetail,
  IRateLimiterRestoreDetailResponse,
  IRateLimiterRestoreResponse,
  IRateLimiterRestoreResult,
  IRateLimiterStoreOptions,
  IRateLimiterValkeyOptions,
  IRLWrapperBlackAndWhiteOptions,
  IRLWrapperTimeoutsOptions,
  RateLimiterAbstract,
  RateLimiterCluster,
  RateLimiterClusterMaster,
  RateLimiterClusterMasterPM2,
  RateLimiterCompatibleAbstract,
  RateLimiterInsuredAbstract,
  RateLimiterLike,
  RateLimiterMemory,
  RateLimiterQueue,
  RateLimiterQueueError,
  RateLimiterRedis,
  RateLimiterRes,
  RateLimiterStoreAbstract,
  RateLimiterUnion,
  RateLimiterValkey,
  RLWrapperBlackAndWhite,
  RLWrapperTimeouts,
} from 'ratekeeper/flexible'

// Options as typed variables, the way apps keep them in a config module.
const memoryOptions: IRateLimiterOptions = { keyPrefix: 'login', points: 5, duration: 60, blockDuration: 300, execEvenly: false, execEvenlyMinDelayMs: 10 }
const memory = new RateLimiterMemory(memoryOptions)

declare const redisClient: unknown
const storeOptions: IRateLimiterStoreOptions = {
  storeClient: redisClient,
  storeType: 'redis',
  points: 10,
  duration: 1,
  inMemoryBlockOnConsumed: 20,
  inMemoryBlockDuration: 30,
  blockOnConsumed: 15,
  insuranceLimiter: memory,
}
const redisOptions: IRateLimiterRedisOptions = { ...storeOptions, keyPrefix: 'api', rejectIfRedisNotReady: true, useRedisPackage: false, useRedis3AndLowerPackage: false }
const redis = new RateLimiterRedis(redisOptions)
const valkeyOptions: IRateLimiterValkeyOptions = { storeClient: redisClient, points: 10, duration: 1, rejectIfValkeyNotReady: true }
const valkey = new RateLimiterValkey(valkeyOptions)
const inline = new RateLimiterRedis({ storeClient: redisClient, points: 3, duration: 0, blockDuration: 0, insuranceLimiter: new RateLimiterMemory({ points: 3, duration: 0 }) })

// The limiter's fields, read and written.
export function tune(limiter: RateLimiterAbstract): number {
  limiter.points = limiter.points * 2
  limiter.duration = 2
  limiter.blockDuration = 10
  limiter.execEvenly = true
  limiter.execEvenlyMinDelayMs = 5
  limiter.keyPrefix = `${limiter.keyPrefix}-tuned`
  return limiter.msDuration + limiter.msBlockDuration + limiter.getKey('a').length + limiter.parseKey(limiter.getKey(42)).length
}

// Headers from the options and the answer, as middlewares set them.
export function headers(options: IRateLimiterOptions, res: RateLimiterRes): Record<string, string> {
  return {
    'Retry-After': String(Math.ceil(res.msBeforeNext / 1000)),
    'X-RateLimit-Limit': String(options.points),
    'X-RateLimit-Used': String(options.points - res.remainingPoints),
    'X-RateLimit-Reset': new Date(Date.now() + res.msBeforeNext).toISOString(),
  }
}

export function fields(answer: IRateLimiterRes): number {
  return (answer.remainingPoints ?? 0) + (answer.msBeforeNext ?? 0) + (answer.consumedPoints ?? 0) + (answer.isFirstInDuration ? 1 : 0)
}

// consume, and the rejection narrowed: a RateLimiterRes when over the points, an Error when the store fails.
export async function guard(ip: string): Promise<number> {
  try {
    const res: RateLimiterRes = await redis.consume(ip, 2, { customDuration: 30 })
    return fields(res) + (res.isFirstInDuration ? 1 : 0)
  } catch (rejRes) {
    if (rejRes instanceof Error) throw rejRes
    const res = rejRes as RateLimiterRes
    return -res.msBeforeNext
  }
}

export function guardThen(ip: string): Promise<number> {
  return memory.consume(ip).then(
    (res) => res.remainingPoints,
    (rejRes: RateLimiterRes | Error) => (rejRes instanceof RateLimiterRes ? -rejRes.msBeforeNext : Promise.reject(rejRes)),
  )
}

export async function manage(key: string | number, store: RateLimiterStoreAbstract): Promise<boolean> {
  await memory.penalty(key, 3)
  await memory.reward(key, 1, {})
  const res: RateLimiterRes | null = await memory.get(key)
  if (res !== null && !res.isFirstInDuration) await memory.set(key, 0, 10)
  await redis.block(key, 0)
  const json: { remainingPoints: number; msBeforeNext: number; consumedPoints: number; isFirstInDuration: boolean } = (await valkey.consume(key)).toJSON()
  store.blockOnConsumed = json.consumedPoints + store.points
  store.deleteInMemoryBlockedAll()
  await inline.get(key)
  return (await memory.delete(key)) && String(new RateLimiterRes(0, 1000, 5, false)).length > 0
}

export function kinds(limiter: RateLimiterLike): string {
  if (limiter instanceof RateLimiterStoreAbstract) return `store ${limiter.blockOnConsumed}`
  if (limiter instanceof RateLimiterInsuredAbstract) return `insured ${limiter.points}`
  if (limiter instanceof RateLimiterAbstract) return `limiter ${limiter.duration}`
  if (limiter instanceof RateLimiterCompatibleAbstract) return `compatible ${limiter.keyPrefix}`
  return 'never'
}

// dump and restore of RateLimiterMemory.
export function snapshot(): number {
  const dump: IRateLimiterMemoryExport = memory.dump()
  const records: IRateLimiterMemoryRecord[] = dump.storage.filter((record) => record.expiresAt === null || record.expiresAt > dump.dumpedAt)
  const counts: IRateLimiterRestoreResponse | undefined = memory.restore(dump)
  const again: IRateLimiterRestoreResult<number> | undefined = memory.restore({ version: dump.version, storage: records }, false)
  const details: IRateLimiterRestoreDetailResponse | undefined = memory.restore({ version: 1, storage: [{ key: 'a', value: 2, expiresAt: null }] }, true)
  const restored: IRateLimiterRestoreBucketDetail | undefined = details?.restored
  return (counts?.invalid ?? 0) + (again?.expired ?? 0) + (restored?.keys.length ?? 0) + (restored?.count ?? 0)
}

// RateLimiterUnion: a record by keyPrefix, resolved and rejected.
const perSecond = new RateLimiterMemory({ keyPrefix: 'second', points: 2, duration: 1 })
const perMinute = new RateLimiterMemory({ keyPrefix: 'minute', points: 20, duration: 60 })
const union = new RateLimiterUnion(perSecond, perMinute)

export async function both(user: string): Promise<number> {
  try {
    const res: Record<string, RateLimiterRes> = await union.consume(user, 2)
    return res.second.remainingPoints + res['minute'].remainingPoints
  } catch (rejected) {
    if (rejected instanceof Error) throw rejected
    const refusals = rejected as Record<string, RateLimiterRes>
    return -Math.max(...Object.values(refusals).map((res) => res.msBeforeNext))
  }
}

// BurstyRateLimiter and RateLimiterQueue.
const bursty = new BurstyRateLimiter(perSecond, new RateLimiterMemory({ keyPrefix: 'burst', points: 5, duration: 10 }))
const mongoLikeOptions: IRateLimiterMongoFunctionOptions = { attrs: { route: '/login' } }
const queueOptions: IRateLimiterQueueOpts = { maxQueueSize: 100 }
const queue = new RateLimiterQueue(perMinute, queueOptions)
const burstyQueue = new RateLimiterQueue(bursty)

export async function throttled(user: string): Promise<number> {
  await bursty.consume(user)
  await bursty.consume(user, 1, mongoLikeOptions)
  try {
    const remaining: number = await queue.removeTokens(1)
    const remainingForUser: number = await queue.removeTokens(2, user, Math.floor(Date.now() / 1000) + 5)
    return remaining + remainingForUser + (await queue.getTokensRemaining()) + (await burstyQueue.getTokensRemaining(user))
  } catch (error) {
    if (error instanceof RateLimiterQueueError) {
      const detail = error.extra
      return -(error.name.length + error.message.length + (detail ? 1 : 0))
    }
    throw error
  }
}

// The wrappers.
const blackAndWhiteOptions: IRLWrapperBlackAndWhiteOptions = {
  limiter: redis,
  whiteList: ['127.0.0.1'],
  blackList: ['13.35.67.49'],
  isWhiteListed: (ip: string) => ip.startsWith('10.'),
  isBlackListed: (ip) => String(ip).endsWith('.66'),
  runActionAnyway: false,
}
const blackAndWhite = new RLWrapperBlackAndWhite(blackAndWhiteOptions)
const timeoutsOptions: IRLWrapperTimeoutsOptions = { limiter: redis, timeoutMs: 100, insuranceLimiter: memory, keyPrefix: 'timeouts', blockDuration: 0 }
const timeouts = new RLWrapperTimeouts(timeoutsOptions)
const listedTimeouts = new RLWrapperBlackAndWhite({ limiter: timeouts, blackList: [1, 2, 3] })

export async function wrapped(ip: string): Promise<number> {
  const limiter: RateLimiterLike = blackAndWhite.limiter
  blackAndWhite.runActionAnyway = true
  blackAndWhite.blockDuration = 60
  blackAndWhite.execEvenly = false
  const listed = blackAndWhite.isBlackListed(ip) || blackAndWhite.isWhiteListed(ip) || blackAndWhite.whiteList.length + blackAndWhite.blackList.length > 0
  const res = await blackAndWhite.consume(ip)
  await listedTimeouts.penalty(1)
  await timeouts.consume(ip, 1, { customDuration: 10 })
  return res.remainingPoints + (listed ? 1 : 0) + limiter.keyPrefix.length + blackAndWhite.keyPrefix.length + timeouts.points
}

// The cluster limiters: the master in the primary (or a PM2 process), the limiter in the workers.
export function clustered(isPrimary: boolean, pm2: unknown): RateLimiterAbstract | null {
  if (isPrimary) {
    new RateLimiterClusterMaster()
    new RateLimiterClusterMasterPM2(pm2)
    return null
  }
  const options: IRateLimiterClusterOptions = { keyPrefix: 'cluster', points: 100, duration: 60, timeoutMs: 3000 }
  const worker = new RateLimiterCluster(options)
  worker.consume('ip', 2).then(
    (res) => res.remainingPoints,
    (rejRes: RateLimiterRes | Error) => rejRes,
  )
  return worker
}

// An app's own limiter: a subclass of RateLimiterAbstract giving every method.
export class RateLimiterNoop extends RateLimiterAbstract {
  constructor(opts: IRateLimiterOptions) {
    super(opts)
  }

  consume(key: string | number, pointsToConsume = 1, options: { [key: string]: any } = {}): Promise<RateLimiterRes> {
    return Promise.resolve(new RateLimiterRes(this.points - pointsToConsume, options.customDuration ?? this.msDuration, pointsToConsume, true))
  }

  penalty(key: string | number, points = 1, options: { [key: string]: any } = {}): Promise<RateLimiterRes> {
    return this.consume(key, points, options)
  }

  reward(key: string | number, points = 1, options: { [key: string]: any } = {}): Promise<RateLimiterRes> {
    return this.consume(key, -points, options)
  }

  get(key: string | number, options: { [key: string]: any } = {}): Promise<RateLimiterRes | null> {
    return Promise.resolve(null)
  }

  set(key: string | number, points: number, secDuration: number, options: { [key: string]: any } = {}): Promise<RateLimiterRes> {
    return Promise.resolve(new RateLimiterRes(this.points - points, secDuration * 1000, points, false))
  }

  block(key: string | number, secDuration: number, options: { [key: string]: any } = {}): Promise<RateLimiterRes> {
    return this.set(key, this.points + 1, secDuration, options)
  }

  delete(key: string | number, options: { [key: string]: any } = {}): Promise<boolean> {
    return Promise.resolve(false)
  }
}

// An app's own wrapper: a subclass of RateLimiterCompatibleAbstract giving every member.
export class CountingLimiter extends RateLimiterCompatibleAbstract {
  readonly keyPrefix = 'counting'
  blockDuration = 0
  execEvenly = false
  calls = 0

  constructor(private readonly inner: RateLimiterLike) {
    super()
  }

  consume(key: string | number, pointsToConsume?: number, options?: { [key: string]: any }): Promise<RateLimiterRes> {
    this.calls++
    return this.inner.consume(key, pointsToConsume, options)
  }

  penalty(key: string | number, points?: number, options?: { [key: string]: any }): Promise<RateLimiterRes> {
    return this.inner.penalty(key, points, options)
  }

  reward(key: string | number, points?: number, options?: { [key: string]: any }): Promise<RateLimiterRes> {
    return this.inner.reward(key, points, options)
  }

  get(key: string | number, options?: { [key: string]: any }): Promise<RateLimiterRes | null> {
    return this.inner.get(key, options)
  }

  set(key: string | number, points: number, secDuration: number, options?: { [key: string]: any }): Promise<RateLimiterRes> {
    return this.inner.set(key, points, secDuration, options)
  }

  block(key: string | number, secDuration: number, options?: { [key: string]: any }): Promise<RateLimiterRes> {
    return this.inner.block(key, secDuration, options)
  }

  delete(key: string | number, options?: { [key: string]: any }): Promise<boolean> {
    return this.inner.delete(key, options)
  }
}

// The app's limiters wherever rate-limiter-flexible takes a limiter.
const counting = new CountingLimiter(new RateLimiterNoop({ points: 1, duration: 1 }))
const limiters: RateLimiterLike[] = [counting, blackAndWhite, perSecond]
export const everywhere = [
  new RateLimiterUnion(...limiters),
  new RateLimiterQueue(counting, { maxQueueSize: 1 }),
  new BurstyRateLimiter(counting, blackAndWhite),
  new RLWrapperTimeouts({ limiter: counting, insuranceLimiter: counting }),
  new RLWrapperBlackAndWhite({ limiter: counting }),
  new RateLimiterMemory({ points: 1, duration: 1, insuranceLimiter: counting }),
  new RateLimiterRedis({ storeClient: redisClient, points: 1, duration: 1, insuranceLimiter: counting }),
]
