'use strict'

// Run by __test__/memory-bound.test.js in a child process of its own (so that RSS is this
// scenario's alone): hits a FixedWindow in memory with many distinct ids and prints what it
// measured as JSON. `node memory-worker.js bounded`, `cycles` or `quiet`.

const { FixedWindow, InMemoryRateLimiter, createRateLimit } = require('../..')
// The quiet sweep's timer tick, called here rather than waited for (lib/engine.js).
const { sweepQuietStores } = require('../../lib/engine.js')

const MiB = 1024 * 1024
/**
 * RSS after GC, less the JS heap's reserved size (V8 grows its young generation with the
 * allocation rate, up to tens of MiB, whatever the store holds): the store's memory and the rest.
 * What the JS heap really holds is checked apart (`heapUsed`).
 */
const rss = () => {
  global.gc()
  const { rss: total, heapTotal } = process.memoryUsage()
  return total - heapTotal
}
const heapUsedMiB = () => process.memoryUsage().heapUsed / MiB

async function hit(limiter, first, count, now) {
  for (let i = first; i < first + count; i += 1000) {
    const calls = []
    for (let j = i; j < Math.min(i + 1000, first + count); j++) calls.push(limiter.consume(`user-${j}`, { now }))
    await Promise.all(calls)
  }
}

async function bounded() {
  // 1,000,000 distinct ids, all active in one window, kept to 100,000.
  const limiter = new FixedWindow({ maxKeys: 100_000, limits: [{ duration: 3_600_000, limit: 10 }] })
  let maxTracked = 0
  let atCap
  for (let first = 0; first < 1_000_000; first += 50_000) {
    await hit(limiter, first, 50_000, 0)
    maxTracked = Math.max(maxTracked, limiter.trackedIds)
    // Past the cap (and past the first evictions), memory must stop growing.
    if (first === 150_000) atCap = rss()
  }
  return { maxTracked, tracked: limiter.trackedIds, evicted: limiter.evictedIds, atCapMiB: atCap / MiB, endMiB: rss() / MiB, heapUsedMiB: heapUsedMiB() }
}

async function cycles() {
  // 5 cycles of 1,000,000 ids that each act once and go idle (a 1 s window, time moving on).
  const limiter = new FixedWindow({ limits: [{ duration: 1000, limit: 10 }] })
  const after = []
  for (let cycle = 0; cycle < 5; cycle++) {
    for (let step = 0; step < 100; step++) {
      await hit(limiter, cycle * 1_000_000 + step * 10_000, 10_000, (cycle * 100 + step) * 2000)
    }
    after.push(rss() / MiB)
  }
  return { rssAfterEachCycleMiB: after, tracked: limiter.trackedIds, heapUsedMiB: heapUsedMiB() }
}

async function quiet() {
  // A burst of 300,000 ids on three kinds of limiter in memory, then no call at all.
  const now = Date.now()
  const limiters = {
    fixedWindow: [new FixedWindow({ limits: [{ duration: 1000, limit: 10 }] }), (l, id) => l.consume(id, { now })],
    rollingWindow: [new InMemoryRateLimiter({ interval: 1000, maxInInterval: 10 }), (l, id) => l.limit(id, { now })],
    redback: [createRateLimit('hits', { bucket_span: 60, bucket_interval: 5, subject_expiry: 30 }), (l, id) => l.add(id, { now })],
  }
  const before = rss()
  for (const [limiter, call] of Object.values(limiters)) {
    for (let i = 0; i < 300_000; i += 1000) {
      await Promise.all(Array.from({ length: 1000 }, (_, j) => call(limiter, `user-${i + j}`)))
    }
  }
  // (redback's RateLimit shows no count of its own: its engine's.)
  const trackedIds = () => Object.fromEntries(Object.entries(limiters).map(([name, [l]]) => [name, (l.engine ?? l).trackedIds]))
  const trackedAfterBurst = trackedIds()
  const afterBurst = rss()
  // Two ticks of the timer: the first sees that calls came since the start, the second that
  // none came for a whole period (30 s, past the windows of 1 s, not redback's subject expiry)...
  sweepQuietStores()
  sweepQuietStores()
  const trackedAfterOneQuietPeriod = trackedIds()
  // ...and one more, 60 s without a call: past redback's expiry of 30 s after its last bucket.
  sweepQuietStores()
  const tracked = trackedIds()
  return { beforeMiB: before / MiB, afterBurstMiB: afterBurst / MiB, endMiB: rss() / MiB, trackedAfterBurst, trackedAfterOneQuietPeriod, tracked }
}

const scenarios = { bounded, cycles, quiet }
scenarios[process.argv[2]]().then((result) => process.stdout.write(JSON.stringify(result)))
