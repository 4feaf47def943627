'use strict'

// One process of the concurrency test: `callers` concurrent limit() calls on one id; reports
// how many were allowed and blocked.

const { RedisRateLimiter } = require('../..')

async function main() {
  const { url, namespace, callers, maxInInterval, recordBlocked } = JSON.parse(process.argv[2])
  const limiter = new RedisRateLimiter({ client: url, namespace, interval: 60_000, maxInInterval, recordBlocked })
  // Open the connection first, so that the callers start together.
  await limiter.wouldLimit('warm-up')
  const answers = await Promise.all(Array.from({ length: callers }, () => limiter.limit('one-id')))
  const blocked = answers.filter(Boolean).length
  process.send({ allowed: callers - blocked, blocked }, () => process.exit(0))
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
