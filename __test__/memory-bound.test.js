'use strict'

// The in-memory store stays bounded: `maxKeys` caps it however many ids arrive, and without it
// the memory of ids gone idle is given back, whether calls go on or none comes (measured as RSS
// outside the JS heap, whose young generation V8 sizes by the allocation rate, each scenario in a
// child process).

const { it } = require('node:test')
const assert = require('node:assert/strict')
const { execFileSync } = require('node:child_process')
const path = require('node:path')

const run = (scenario) =>
  JSON.parse(
    execFileSync(process.execPath, ['--expose-gc', path.join(__dirname, 'helpers', 'memory-worker.js'), scenario], {
      encoding: 'utf8',
      timeout: 120_000,
    }),
  )

it('maxKeys: 1,000,000 distinct ids keep at most 100,000 in memory', (t) => {
  const result = run('bounded')
  t.diagnostic(JSON.stringify(result))
  assert.ok(result.maxTracked <= 100_000, `tracked ${result.maxTracked}`)
  assert.equal(result.tracked + result.evicted, 1_000_000)
  // From 200,000 ids on, 800,000 more come and go: the memory of the evicted is reused.
  assert.ok(result.endMiB <= result.atCapMiB * 1.1 + 8, `RSS went from ${result.atCapMiB.toFixed(1)} to ${result.endMiB.toFixed(1)} MiB`)
  assert.ok(result.heapUsedMiB < 32, `the JS heap holds ${result.heapUsedMiB.toFixed(1)} MiB`)
})

it('ids that go idle give their memory back: 5 cycles of 1,000,000 ids, no growth after the first', (t) => {
  const { rssAfterEachCycleMiB: rss, tracked, heapUsedMiB } = run('cycles')
  t.diagnostic(`RSS after each cycle (MiB): ${rss.map((m) => m.toFixed(1)).join(', ')}; ${tracked} ids tracked at the end`)
  assert.ok(tracked < 100_000, `${tracked} ids still tracked`)
  const first = rss[0]
  for (const later of rss.slice(1)) assert.ok(later <= first * 1.1 + 8, `RSS went from ${first.toFixed(1)} to ${later.toFixed(1)} MiB`)
  assert.ok(heapUsedMiB < 32, `the JS heap holds ${heapUsedMiB.toFixed(1)} MiB`)
})

it('a burst of ids gone idle is given back when no call comes at all: the quiet sweep', (t) => {
  const result = run('quiet')
  t.diagnostic(JSON.stringify(result))
  const burst = result.afterBurstMiB - result.beforeMiB
  assert.ok(burst > 50, `the burst took ${burst.toFixed(1)} MiB`)
  assert.deepEqual(result.trackedAfterBurst, { fixedWindow: 300_000, rollingWindow: 300_000, redback: 300_000 })
  // One period without a call: the windows of 1 s are over, redback's 30 s expiry is not.
  assert.deepEqual(result.trackedAfterOneQuietPeriod, { fixedWindow: 0, rollingWindow: 0, redback: 300_000 })
  assert.deepEqual(result.tracked, { fixedWindow: 0, rollingWindow: 0, redback: 0 })
  // Given back to the system, not only to the allocator (most of it, whatever its fragments).
  assert.ok(result.endMiB <= result.beforeMiB + 0.2 * burst + 8, `RSS ${result.beforeMiB.toFixed(1)} -> ${result.afterBurstMiB.toFixed(1)} -> ${result.endMiB.toFixed(1)} MiB`)
})
