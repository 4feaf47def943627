'use strict'

// Concurrent callers never get more than the limit: 4 processes x 64 concurrent callers on one
// id with room for 100 get exactly 100 actions through, on the rolling window, the token bucket
// (the seed's race of two workers spending the last token cannot happen) and GCRA.

const { it } = require('node:test')
const assert = require('node:assert/strict')
const { fork } = require('node:child_process')
const path = require('node:path')

const { useRedisServer } = require('./helpers/redis-server.js')

const redis = useRedisServer()

function runWorker(args) {
  return new Promise((resolve, reject) => {
    const child = fork(path.join(__dirname, 'helpers', 'concurrent-worker.js'), [JSON.stringify(args)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
    let result
    child.on('message', (message) => {
      result = message
    })
    child.on('error', reject)
    child.on('exit', (code) => (code === 0 && result ? resolve(result) : reject(new Error(`worker exited with ${code}`))))
  })
}

for (const recordBlocked of [true, false]) {
  it(`admits exactly maxInInterval across 4 processes x 64 callers (recordBlocked: ${recordBlocked})`, async () => {
    const args = { kind: 'rolling', url: redis.server.url, namespace: `race-${recordBlocked}:`, callers: 64, options: { maxInInterval: 100, recordBlocked } }
    const results = await Promise.all([1, 2, 3, 4].map(() => runWorker(args)))
    const allowed = results.reduce((sum, r) => sum + r.allowed, 0)
    const blocked = results.reduce((sum, r) => sum + r.blocked, 0)
    assert.equal(allowed, 100)
    assert.equal(blocked, 4 * 64 - 100)
    assert.equal(await redis.server.cli('ZCARD', `race-${recordBlocked}:one-id`), '100')
  })
}

// 100 at once, then 1 more per hour (GCRA: 100 per hour, burst 100): in a test that lasts seconds,
// the refill adds nothing, so exactly 100 actions (or 100 weight, at most) may pass.
const BUCKETS = {
  TokenBucket: { capacity: 100, refillAmount: 1, refillInterval: 3_600_000 },
  Gcra: { limit: 100, period: 3_600_000, burst: 100 },
}

for (const [kind, options] of Object.entries(BUCKETS)) {
  it(`${kind}: admits exactly its capacity across 4 processes x 64 callers`, async () => {
    const args = { kind, url: redis.server.url, namespace: `race-${kind}:`, callers: 64, options }
    const results = await Promise.all([1, 2, 3, 4].map(() => runWorker(args)))
    assert.equal(results.reduce((sum, r) => sum + r.allowed, 0), 100)
    assert.equal(results.reduce((sum, r) => sum + r.blocked, 0), 4 * 64 - 100)
  })

  it(`${kind}: admits at most its capacity in weight across 4 processes x 64 callers of weights 1 to 3`, async () => {
    const args = { kind, url: redis.server.url, namespace: `race-weights-${kind}:`, callers: 64, options, weights: true }
    const results = await Promise.all([1, 2, 3, 4].map(() => runWorker(args)))
    const weight = results.reduce((sum, r) => sum + r.weight, 0)
    // Every refusal wanted more than was left, so at most 2 went unused.
    assert.ok(weight <= 100 && weight >= 98, `${weight} admitted`)
  })
}
