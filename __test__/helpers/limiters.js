'use strict'

// Every limiter with `consume`, in one table, for the tests that hold for all of them (exact
// timeLeft, reward, wait). Each entry builds a limiter of capacity 5 (what a fresh id may take at
// once) on the given extra options ({ client, namespace } for Redis).

const ratekeeper = require('../..')

const CAPACITY = 5

const LIMITERS = {
  FixedWindow: (o) => new ratekeeper.FixedWindow({ limits: [{ duration: 1000, limit: CAPACITY }, { duration: 4000, limit: 12 }], ...o }),
  SlidingWindow: (o) =>
    new ratekeeper.SlidingWindow({ limits: [{ duration: 1000, limit: CAPACITY, precision: 100 }, { duration: 4000, limit: 12, precision: 500 }], ...o }),
  SlidingLog: (o) => new ratekeeper.SlidingLog({ interval: 1000, maxInInterval: CAPACITY, ...o }),
  'RateLimiter (consume, minDifference)': (o) => new ratekeeper.RateLimiter({ interval: 1000, maxInInterval: CAPACITY, minDifference: 30, ...o }),
  SlidingTail: (o) => new ratekeeper.SlidingTail({ limits: [{ duration: 1000, limit: CAPACITY }, { duration: 3000, limit: 12 }], ...o }),
  LeakyBucket: (o) => new ratekeeper.LeakyBucket({ capacity: CAPACITY, leakAmount: 2, leakInterval: 300, ...o }),
  TokenBucket: (o) => new ratekeeper.TokenBucket({ capacity: CAPACITY, refillAmount: 3, refillInterval: 1000, ...o }),
  Gcra: (o) => new ratekeeper.Gcra({ limit: 3, period: 1000, burst: CAPACITY, ...o }),
}

/** Whether a limiter's `remaining` is 0 right after an allowed action (its minDifference). */
const SPACED = new Set(['RateLimiter (consume, minDifference)'])

/** The rolling windows take one id per call. */
const ONE_ID = new Set(['SlidingLog', 'RateLimiter (consume, minDifference)'])

module.exports = { LIMITERS, CAPACITY, SPACED, ONE_ID }
