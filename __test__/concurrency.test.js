'use strict'

// Concurrent callers never get more than the limit: 4 processes x 64 concurrent callers on one
// id with maxInInterval 100 get exactly 100 actions through.

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
    const args = { url: redis.server.url, namespace: `race-${recordBlocked}:`, callers: 64, maxInInterval: 100, recordBlocked }
    const results = await Promise.all([1, 2, 3, 4].map(() => runWorker(args)))
    const allowed = results.reduce((sum, r) => sum + r.allowed, 0)
    const blocked = results.reduce((sum, r) => sum + r.blocked, 0)
    assert.equal(allowed, 100)
    assert.equal(blocked, 4 * 64 - 100)
    assert.equal(await redis.server.cli('ZCARD', `race-${recordBlocked}:one-id`), '100')
  })
}
