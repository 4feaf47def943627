// ratekeeper/flexible for ESM: the very objects of the CommonJS entry.
import { createRequire } from 'node:module'

const flexible = createRequire(import.meta.url)('./flexible.js')

export default flexible
export const {
  RateLimiterRes,
  RateLimiterAbstract,
  RateLimiterCompatibleAbstract,
  RateLimiterInsuredAbstract,
  RateLimiterStoreAbstract,
  RateLimiterMemory,
  RateLimiterRedis,
  RateLimiterValkey,
  RateLimiterQueue,
  RateLimiterQueueError,
  BurstyRateLimiter,
  RLWrapperBlackAndWhite,
  RLWrapperTimeouts,
  RateLimiterCluster,
  RateLimiterClusterMaster,
  RateLimiterClusterMasterPM2,
  RateLimiterUnion,
} = flexible
