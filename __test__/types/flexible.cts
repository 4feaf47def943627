// Code as apps write it against rate-limiter-flexible's types, with only the require changed.
import flexible = require('ratekeeper/flexible')

const { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } = flexible

const memory = new RateLimiterMemory({ points: 10, duration: 1, keyPrefix: 'login' })
const redis = new RateLimiterRedis({ storeClient: 'redis://127.0.0.1:6379', points: 5, duration: 60, blockDuration: 300, insuranceLimiter: memory })

export async function guard(ip: string): Promise<number> {
  try {
    const res: flexible.RateLimiterRes = await redis.consume(ip, 2, { customDuration: 30 })
    return res.remainingPoints
  } catch (rejection) {
    if (rejection instanceof RateLimiterRes) return -Math.ceil(rejection.msBeforeNext / 1000)
    throw rejection
  }
}

export async function manage(key: string): Promise<boolean> {
  await memory.penalty(key, 3)
  await memory.reward(key)
  const res = await memory.get(key)
  if (res !== null && res.isFirstInDuration) await memory.set(key, 0, 10)
  await redis.block(key, 0)
  redis.deleteInMemoryBlockedAll()
  return memory.delete(key)
}

export const key: string = memory.getKey('a') + memory.parseKey('login:a')

// The queue, the bursty limiter and the wrappers, as rate-limiter-flexible's docs use them.
const bursty = new flexible.BurstyRateLimiter(memory, new RateLimiterMemory({ points: 20, duration: 10, keyPrefix: 'burst' }))
const queue = new flexible.RateLimiterQueue(bursty, { maxQueueSize: 100 })
const timeouts = new flexible.RLWrapperTimeouts({ limiter: redis, timeoutMs: 50, insuranceLimiter: memory })
const lists = new flexible.RLWrapperBlackAndWhite({ limiter: timeouts, whiteList: ['127.0.0.1'], isBlackListed: (ip: string) => ip.startsWith('10.') })

export async function wrapped(ip: string): Promise<number> {
  try {
    const remaining: number = await queue.removeTokens(1, ip, Math.floor(Date.now() / 1000) + 5)
    const res: flexible.RateLimiterRes = await lists.consume(ip, 1, { customDuration: 5 })
    const combined: flexible.RateLimiterRes | null = await bursty.get(ip)
    lists.runActionAnyway = lists.isWhiteListedSomewhere(ip)
    return remaining + res.remainingPoints + (combined?.msBeforeNext ?? 0) + bursty.points + (await queue.getTokensRemaining(ip)) + timeouts.timeoutMs
  } catch (error) {
    if (error instanceof flexible.RateLimiterQueueError) return -(error.message.length + (error.extra?.length ?? 0))
    throw error
  }
}

// @ts-expect-error: a wrapper needs its limiter
new flexible.RLWrapperTimeouts({ timeoutMs: 50 })

export async function both(user: string): Promise<number> {
  const union = new flexible.RateLimiterUnion(memory, new RateLimiterMemory({ points: 100, duration: 60, keyPrefix: 'minute' }))
  const answers: Record<string, flexible.RateLimiterRes> = await union.consume(`{${user}}`, 1)
  return answers.minute.remainingPoints + (union.atomic ? 1 : 0)
}

export function snapshot(): number {
  const dump: flexible.IRateLimiterMemoryExport = memory.dump()
  const counts = memory.restore(dump)
  const details = memory.restore(dump, true)
  return (counts?.restored ?? 0) + (details?.expired.keys.length ?? 0)
}

// The cluster limiters, as rate-limiter-flexible's docs set them up.
export function clustered(isPrimary: boolean, pm2: { launchBus(cb: (err: Error, bus: unknown) => void): void; sendDataToProcessId(id: number, packet: object, cb: (err: Error) => void): void }): flexible.RateLimiterCluster | null {
  if (isPrimary) {
    new flexible.RateLimiterClusterMaster()
    new flexible.RateLimiterClusterMasterPM2(pm2)
    // @ts-expect-error: the master takes no options
    new flexible.RateLimiterClusterMaster({ points: 1 })
    return null
  }
  const options: flexible.IRateLimiterClusterOptions = { keyPrefix: 'api', points: 100, duration: 60, timeoutMs: 1000 }
  const worker = new flexible.RateLimiterCluster(options)
  const timeoutMs: number = worker.timeoutMs
  worker.consume('ip', 2).then((res) => res.remainingPoints + timeoutMs, (rejection: flexible.RateLimiterRes | Error) => rejection)
  worker.set('ip', 5, 30)
  return worker
}
