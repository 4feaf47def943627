'use strict'

// One host of a mixed fleet (flexible.test.js): rate-limiter-flexible's RateLimiterRedis or
// ratekeeper/flexible's, on its own ioredis client. Once the parent says go, it sends `calls`
// consumes over `keys` keys at once and reports how many each key was allowed.

const IORedis = require('ioredis')

const packages = { rlf: () => require('rate-limiter-flexible'), ratekeeper: () => require('../../flexible.js') }

async function main() {
  const { library, port, calls, keys, points, duration, keyPrefix } = JSON.parse(process.argv[2])
  const { RateLimiterRedis, RateLimiterRes } = packages[library]()
  const client = new IORedis(port, '127.0.0.1')
  const limiter = new RateLimiterRedis({ storeClient: client, points, duration, keyPrefix })
  await limiter.get('warm-up') // connected before the fleet starts together
  const go = new Promise((resolve) => process.once('message', resolve))
  process.send({ ready: true })
  await go
  const allowed = {}
  await Promise.all(
    Array.from({ length: calls }, (_, i) => {
      const key = `user${i % keys}`
      return limiter.consume(key).then(
        () => (allowed[key] = (allowed[key] ?? 0) + 1),
        (res) => {
          if (!(res instanceof RateLimiterRes)) throw res
        },
      )
    }),
  )
  client.disconnect()
  process.send({ allowed }, () => process.exit(0))
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
