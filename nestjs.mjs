// ratekeeper/nestjs for ESM: the very objects of the CommonJS entry.
import { createRequire } from 'node:module'

const nestjs = createRequire(import.meta.url)('./nestjs.js')

export default nestjs
export const { RatekeeperThrottlerStorage } = nestjs
