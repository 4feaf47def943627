// The package from a CommonJS module under `module: nodenext`, by its name, through
// package.json's `exports`: `require('ratekeeper')` is callable. Compiled by types.test.js.
import RateLimiter = require('ratekeeper')
import erl = require('ratekeeper/express-rate-limit')

const limiter: RateLimiter.LimiterFunction = RateLimiter({ interval: 1000, maxInInterval: 10 })
const limits: RateLimiter.FixedWindowLimit[] = [{ duration: 1000, limit: 10 }]
const fixed = new RateLimiter.FixedWindow({ limits })
const store = new erl.Store({ prefix: 'rl:' })
void limiter('user').then((timeLeft) => console.log(timeLeft, fixed.limits, store.prefix))
// @ts-expect-error the callback form takes rolling-rate-limiter's options, no `limits`
RateLimiter({ limits })
