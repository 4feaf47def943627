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
