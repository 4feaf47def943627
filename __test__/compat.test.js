'use strict'

// A fleet can switch from rolling-rate-limiter while live: actions written by the
// rolling-rate-limiter npm package are counted by ratekeeper, and the reverse.

const { describe, it, before, after } = require('node:test')
const assert = require('node:assert/strict')
const IORedis = require('ioredis')
const { createClient } = require('redis')
const upstream = require('rolling-rate-limiter')

const ratekeeper = require('..')
const { startRedis } = require('./helpers/redis-server.js')

let server
let ioredis
let nodeRedis
before(async () => {
  server = await startRedis()
  ioredis = new IORedis(server.port, '127.0.0.1')
  nodeRedis = createClient({ url: server.url })
  await nodeRedis.connect()
})
after(async () => {
  ioredis.disconnect()
  await nodeRedis.quit()
  await server.stop()
})

// Both libraries use real time here (rolling-rate-limiter has no `now`): a minute-long window
// keeps the test free of timing.
const options = { interval: 60_000, maxInInterval: 3 }

const upstreamClients = {
  ioredis: (namespace) => new upstream.RedisRateLimiter({ client: ioredis, namespace, ...options }),
  'node-redis': (namespace) => new upstream.RedisRateLimiter({ client: nodeRedis, namespace, ...options }),
}

for (const [clientName, createUpstream] of Object.entries(upstreamClients)) {
  describe(`rolling-rate-limiter on ${clientName}`, () => {
    it('writes actions that ratekeeper counts', async () => {
      const namespace = `up-${clientName}:`
      const theirs = createUpstream(namespace)
      const ours = new ratekeeper.RedisRateLimiter({ client: ioredis, namespace, ...options })
      assert.equal(await theirs.limit('user'), false)
      assert.equal(await theirs.limit('user'), false)
      const info = await ours.limitWithInfo('user')
      assert.equal(info.blocked, false)
      assert.equal(info.actionsRemaining, 0)
      assert.equal(await ours.limit('user'), true)
    })

    it('counts actions that ratekeeper writes', async () => {
      const namespace = `down-${clientName}:`
      const theirs = createUpstream(namespace)
      const ours = new ratekeeper.RedisRateLimiter({ client: ioredis, namespace, ...options })
      assert.equal(await ours.limit('user'), false)
      assert.equal(await ours.limit('user'), false)
      assert.deepEqual(await theirs.wouldLimitWithInfo('user').then((i) => [i.blocked, i.actionsRemaining]), [false, 0])
      assert.equal(await ours.limit('user'), false)
      assert.equal(await theirs.limit('user'), true)
    })

    it('agrees on the wait, to the millisecond rounding', async () => {
      const namespace = `wait-${clientName}:`
      const theirs = createUpstream(namespace)
      const ours = new ratekeeper.RedisRateLimiter({ client: ioredis, namespace, clock: 'local', ...options })
      for (let i = 0; i < 3; i++) await theirs.limit('user')
      const a = await theirs.wouldLimitWithInfo('user')
      const b = await ours.wouldLimitWithInfo('user')
      assert.equal(a.blocked, true)
      assert.equal(b.blocked, true)
      assert.equal(a.blockedDueToCount, b.blockedDueToCount)
      // Both measure from the same stored timestamp; the calls are a few ms apart.
      assert.ok(Math.abs(a.millisecondsUntilAllowed - b.millisecondsUntilAllowed) < 1000)
    })

    it('clears what the other wrote', async () => {
      const namespace = `clear-${clientName}:`
      const theirs = createUpstream(namespace)
      const ours = new ratekeeper.RedisRateLimiter({ client: ioredis, namespace, ...options })
      for (let i = 0; i < 3; i++) await theirs.limit('user')
      await ours.clear('user')
      assert.equal(await theirs.wouldLimit('user'), false)
      for (let i = 0; i < 3; i++) await ours.limit('user')
      await theirs.clear('user')
      assert.equal(await ours.wouldLimit('user'), false)
    })
  })
}

describe('limits above 100,000, as rolling-rate-limiter takes them', () => {
  it('answer alike in memory and on Redis: a million an hour', async () => {
    const big = { interval: 3_600_000, maxInInterval: 1_000_000 }
    const pairs = [
      [new upstream.InMemoryRateLimiter(big), new ratekeeper.InMemoryRateLimiter(big)],
      [new upstream.RedisRateLimiter({ client: ioredis, namespace: 'big-up:', ...big }), new ratekeeper.RedisRateLimiter({ client: ioredis, namespace: 'big-ours:', ...big })],
    ]
    for (const [theirs, ours] of pairs) {
      for (let i = 0; i < 3; i++) {
        const [a, b] = [await theirs.limitWithInfo('user'), await ours.limitWithInfo('user')]
        assert.deepEqual([b.blocked, b.actionsRemaining], [a.blocked, a.actionsRemaining])
        assert.equal(b.actionsRemaining, 999_999 - i)
      }
      // (The in-memory package keeps a timer per id for the interval: an hour.)
      await theirs.clear('user')
    }
  })
})
