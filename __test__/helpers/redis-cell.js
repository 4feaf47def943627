'use strict'

// A reference model for Gcra: redis-cell 0.2.2's CL.THROTTLE (brandur/redis-cell,
// src/cell/mod.rs `RateLimiter::rate_limit` and src/lib.rs), transcribed into BigInt
// nanoseconds with its own truncations.

/**
 * CL.THROTTLE over an in-memory key space.
 *
 * - The emission interval is `Rate::per_period`'s `(period_ns as f64 / count as f64) as i64`;
 *   the tolerance is `interval * (max_burst + 1)`.
 * - `remaining` is `(next_us as f64 / interval_us as f64) as i64` when `next > -interval`
 *   (microseconds truncated from nanoseconds), else 0.
 * - `retry_after` and `reset_after` are `Duration::num_seconds()`: truncated toward zero.
 *
 * With `{ expiry: true }` the keys also expire as Redis expires them: redis-cell sets a TTL of
 * `ttl.num_milliseconds()` (truncated), and Redis drops the key once its millisecond clock
 * passes the write's millisecond plus that. Without it, the store is a plain map: the algorithm
 * alone.
 */
class RedisCell {
  constructor({ expiry = false } = {}) {
    this.expiry = expiry
    this.keys = new Map()
    /** About the last call: its stored TAT had passed (`stale`); its key expired before its TAT. */
    this.stale = false
    this.expiredEarly = false
  }

  /** CL.THROTTLE key max_burst count period quantity at `nowNs`: its five-integer reply. */
  throttle(key, maxBurst, count, periodSeconds, quantity, nowNs) {
    const nowMs = nowNs / 1_000_000n
    const kept = this.keys.get(key)
    const expired = this.expiry && kept !== undefined && nowMs > kept.expiresAt
    this.expiredEarly = expired && kept.tat > nowNs
    if (expired) this.keys.delete(key)

    const interval = BigInt(Math.trunc(Number(BigInt(periodSeconds) * 1_000_000_000n) / count))
    const tolerance = interval * BigInt(maxBurst + 1)
    const increment = interval * BigInt(quantity)
    const tatVal = this.keys.get(key)?.tat ?? -1n
    this.stale = tatVal !== -1n && tatVal < nowNs
    const tat = tatVal === -1n ? nowNs : tatVal
    const newTat = nowNs > tat ? nowNs + increment : tat + increment
    const diff = nowNs - (newTat - tolerance)
    let retryAfter = -1_000_000_000n
    let limited
    let ttl
    if (diff < 0n) {
      if (increment <= tolerance) retryAfter = -diff
      limited = 1
      ttl = tat - nowNs
    } else {
      limited = 0
      ttl = newTat - nowNs
      this.keys.set(key, { tat: newTat, expiresAt: nowMs + ttl / 1_000_000n })
    }
    const next = tolerance - ttl
    let remaining = 0
    if (next > -interval) remaining = Math.trunc(Number(next / 1000n) / Number(interval / 1000n))
    const seconds = (d) => Number(d / 1_000_000_000n)
    return [limited, maxBurst + 1, remaining, seconds(retryAfter), seconds(ttl)]
  }
}

module.exports = { RedisCell }
