'use strict'

/**
 * A store for hono-rate-limiter (`require('ratekeeper/hono')`), so that a Hono app keeps
 * hono-rate-limiter's `rateLimiter` and swaps its MemoryStore (or RedisStore) for ratekeeper's
 * fixed window, in memory or on Redis (single node, Cluster, Sentinel). See hono.d.ts for the
 * documentation.
 *
 * hono-rate-limiter's `Store` is express-rate-limit's (it was modelled on it): `init(options)`,
 * then `increment` resolving `{ totalHits, resetTime }`, `decrement`, `resetKey` and `get`; the
 * middleware compares `totalHits` to its own `limit` and writes the headers. So this is
 * lib/express-rate-limit.js's Store (a clock-aligned FixedWindow that never refuses), with
 * hono-rate-limiter's names in its errors and its own default prefix. What differs for the app:
 * - `rateLimiter()` calls `init` and lets what it throws through, so a bad `windowMs` stops the
 *   app where it is built (express-rate-limit only logs it).
 * - hono-rate-limiter has no `passOnStoreError`: a store that rejects sends the request to Hono's
 *   `onError` (a 500 by default). Ratekeeper's `onStoreError` ('allow', 'memory') is the
 *   setting that keeps requests going while Redis is unavailable.
 * - The default prefix is 'ratekeeper:hrl:', not hono-rate-limiter RedisStore's 'hrl:' (its
 *   strings at the same keys would clash with these hashes).
 * - hono-rate-limiter 0.5 has no double-count or store-reuse check: `prefix` and `localKeys`
 *   are there because its `Store` type declares them.
 * The library is never loaded here: the app hands this store to its own `rateLimiter`.
 */

const { Store: ExpressRateLimitStore } = require('./express-rate-limit.js')

/** How the errors name hono-rate-limiter's options and middleware (see lib/express-rate-limit.js). */
const HONO_RATE_LIMITER = {
  options: 'hono-rate-limiter Store options',
  defaultPrefix: 'ratekeeper:hrl:',
  initOptions: "hono-rate-limiter's options",
  windowMs: "hono-rate-limiter's `windowMs`",
  middleware: "hono-rate-limiter's rateLimiter({ store })",
}

class Store extends ExpressRateLimitStore {
  constructor(options = {}) {
    super(options, HONO_RATE_LIMITER)
  }
}

module.exports = { Store }
