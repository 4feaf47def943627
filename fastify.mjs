// ratekeeper/fastify for ESM: the very objects of the CommonJS entry.
import { createRequire } from 'node:module'

const fastify = createRequire(import.meta.url)('./fastify.js')

export default fastify
export const { ratekeeperStore } = fastify
