'use strict'

// One process of the concurrency test: `callers` concurrent calls on one id; reports how many
// (and how much weight) were allowed and refused. `kind` picks the limiter: the rolling window's
// limit(), or consume() on a TokenBucket or a Gcra.

const ratekeeper = require('../..')

function limiterOf({ kind, url, namespace, options }) {
  if (kind === 'rolling') return new ratekeeper.RedisRateLimiter({ client: url, namespace, interval: 60_000, ...options })
  return new ratekeeper[kind]({ client: url, namespace, ...options })
}

async function main() {
  const args = JSON.parse(process.argv[2])
  const limiter = limiterOf(args)
  const attempt =
    args.kind === 'rolling'
      ? () => limiter.limit('one-id').then((blocked) => ({ allowed: !blocked, weight: 1 }))
      : (i) => {
          const weight = args.weights ? 1 + (i % 3) : 1
          return limiter.consume('one-id', { weight }).then((answer) => ({ allowed: answer.allowed, weight }))
        }
  // Open the connection first, so that the callers start together.
  await (args.kind === 'rolling' ? limiter.wouldLimit('warm-up') : limiter.peek('warm-up'))
  const answers = await Promise.all(Array.from({ length: args.callers }, (_, i) => attempt(i)))
  const allowed = answers.filter((a) => a.allowed)
  process.send(
    { allowed: allowed.length, blocked: answers.length - allowed.length, weight: allowed.reduce((sum, a) => sum + a.weight, 0) },
    () => process.exit(0),
  )
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
