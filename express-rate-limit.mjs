// ratekeeper/express-rate-limit for ESM: the very objects of the CommonJS entry.
import { createRequire } from 'node:module'

const expressRateLimit = createRequire(import.meta.url)('./express-rate-limit.js')

export default expressRateLimit
export const { Store } = expressRateLimit
