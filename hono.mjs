// ratekeeper/hono for ESM: the very objects of the CommonJS entry.
import { createRequire } from 'node:module'

const hono = createRequire(import.meta.url)('./hono.js')

export default hono
export const { Store } = hono
