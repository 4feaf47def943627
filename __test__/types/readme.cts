// The README's TypeScript example (## Install), verbatim, type-checked by types.test.js under
// `module: nodenext`, as CommonJS.
import RateLimiter = require('ratekeeper')
const limiter: RateLimiter.LimiterFunction = RateLimiter({ interval: 1000, maxInInterval: 10 })
const windows = new RateLimiter.FixedWindow({ limits: [{ duration: 1000, limit: 10 }] })

export = { limiter, windows }
