// ratekeeper/express-rate-limit for ESM: the very objects of the CommonJS entry.
import expressRateLimit from './express-rate-limit.js'

export default expressRateLimit
export const { Store } = expressRateLimit
