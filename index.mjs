// ratekeeper for ESM: the very objects of the CommonJS entry (index.js), so that `import` and
// `require` share one class of each limiter and one in-memory state (no dual-package hazard).
// Every name index.d.ts documents is exported by name; the default export is the callback API's
// `RateLimiter`, as `require('ratekeeper')` is. __test__/esm.test.js checks the two lists agree.
import { createRequire } from 'node:module'

// Loaded with require, not `import ... from './index.js'`: Node 20 would throw a failed load (no
// binary for the platform) a second time, uncaught, after rejecting the import.
const ratekeeper = createRequire(import.meta.url)('./index.js')

export default ratekeeper
export const {
  RateLimiter,
  SlidingLog,
  InMemoryRateLimiter,
  RedisRateLimiter,
  NodeRedisRateLimiter,
  IORedisRateLimiter,
  RedisStore,
  FixedWindow,
  SlidingWindow,
  SlidingTail,
  LeakyBucket,
  TokenBucket,
  Gcra,
  createRateLimit,
  createClient,
  use,
  rateLimit,
  getCurrentMicroseconds,
  millisecondsToMicroseconds,
  microsecondsToMilliseconds,
  microsecondsToSeconds,
} = ratekeeper
