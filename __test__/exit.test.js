'use strict'

// Limiters never keep Node running: a script that builds limiters and uses them ends by itself.

const { it } = require('node:test')
const assert = require('node:assert/strict')

const { useRedisServer } = require('./helpers/redis-server.js')
const { runScript } = require('./helpers/run-script.js')

const redis = useRedisServer()

it('exits with in-memory and Redis limiters alive and their connections open', async () => {
  const { code, output } = await runScript(`
    const { RateLimiter, RedisRateLimiter, RedisStore } = require('.')
    ;(async () => {
      const memory = new RateLimiter({ interval: 60000, maxInInterval: 5 })
      const store = await RedisStore.connect('${redis.server.url}')
      const redis = new RedisRateLimiter({ client: store, interval: 60000, maxInInterval: 5 })
      const other = new RedisRateLimiter({ client: '${redis.server.url}', interval: 60000, maxInInterval: 5 })
      console.log(await memory.limit('a'), await redis.limit('a'), await other.limit('b'))
    })()
  `)
  assert.equal(code, 0)
  assert.equal(output.trim(), 'false false false')
})

it('exits when Redis cannot be reached', async () => {
  const { code, output } = await runScript(`
    const { RedisRateLimiter } = require('.')
    const limiter = new RedisRateLimiter({ client: { port: 1, commandTimeoutMs: 200 }, interval: 1000, maxInInterval: 1 })
    limiter.limit('a').catch((error) => console.log(error.code))
  `)
  assert.equal(code, 0)
  assert.equal(output.trim(), 'ERR_STORE_UNAVAILABLE')
})

it('serves limiters of a module loaded twice (as Jest does), then exits', async () => {
  const { code, output } = await runScript(`
    const first = require('.')
    for (const key of Object.keys(require.cache)) if (!key.endsWith('.node')) delete require.cache[key]
    const second = require('.')
    ;(async () => {
      const a = new first.RedisRateLimiter({ client: '${redis.server.url}', interval: 60000, maxInInterval: 1 })
      const b = new second.RedisRateLimiter({ client: '${redis.server.url}', namespace: 'other:', interval: 60000, maxInInterval: 1 })
      console.log(await a.limit('x'), await b.limit('x'), await a.limit('x'), await b.limit('x'))
    })()
  `)
  assert.equal(code, 0)
  assert.equal(output.trim(), 'false false true true')
})
