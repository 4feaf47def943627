// ratekeeper/koa for ESM: the very objects of the CommonJS entry.
import { createRequire } from 'node:module'

const koa = createRequire(import.meta.url)('./koa.js')

export default koa
export const { rateLimit } = koa
