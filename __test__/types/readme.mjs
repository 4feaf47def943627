// The README's ES module example (## Install), verbatim, type-checked by types.test.js under
// `module: nodenext`.
import RateLimiter, { FixedWindow, rateLimit } from 'ratekeeper'
import { Store } from 'ratekeeper/express-rate-limit'

const perIp = new FixedWindow({ limits: [{ duration: 60_000, limit: 100 }] })
const callbackStyle = RateLimiter({ interval: 1000, maxInInterval: 10 })

export { perIp, callbackStyle, rateLimit, Store }
