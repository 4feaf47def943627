// The callback API through `import = require`, as a CommonJS TypeScript app writes it: the
// package itself is callable (`module.exports` is `RateLimiter`), and carries every other export.
// Compiled by types.test.js under `module: commonjs` and `module: nodenext` (a CommonJS .ts file).
import RateLimiter = require('../..')

async function callbackApi(): Promise<void> {
  const limiter: RateLimiter.LimiterFunction = RateLimiter({ interval: 1000, maxInInterval: 10, minDifference: 100, namespace: 'UserLoginLimiter' })
  limiter('user', (err, timeLeft, actionsLeft) => {
    if (err) console.error(err.message)
    else console.log((timeLeft ?? 0) > 0 ? 'limited' : 'allowed', actionsLeft)
  })
  const timeLeft: number | undefined = await limiter('user')
  const global: number | undefined = await limiter()
  const underneath: RateLimiter.InMemoryRateLimiter | RateLimiter.RedisRateLimiter = limiter.limiter
  console.log(timeLeft, global, underneath.maxInInterval)

  // The other exports are properties of the same object.
  const fixed = new RateLimiter.FixedWindow({ limits: [{ duration: 1000, limit: 5 }] })
  const answer: RateLimiter.Verdict = fixed.consumeSync('ip', { now: 5 })
  const classic = new RateLimiter.RateLimiter({ interval: 1000, maxInInterval: 2 })
  const blocked: boolean = await classic.limit('ip')
  const store: RateLimiter.RedisStore = new RateLimiter.RedisStore('redis://127.0.0.1:6380')
  console.log(answer.remaining, blocked, store.stats().calls)

  // @ts-expect-error the callback form takes `redis`, not the classes' `client`
  RateLimiter({ interval: 1000, maxInInterval: 10, client: 'redis://127.0.0.1:6380' })
  // @ts-expect-error maxInInterval is a number
  RateLimiter({ interval: 1000, maxInInterval: '10' })
  // @ts-expect-error an unknown option
  RateLimiter({ interval: 1000, maxInInterval: 10, maxRequests: 5 })
  // @ts-expect-error the native engines are internal
  RateLimiter.FixedWindowEngine
  // @ts-expect-error the limiters' shared shape is a type, not a class at run time
  new RateLimiter.Limiter()
}

void callbackApi
