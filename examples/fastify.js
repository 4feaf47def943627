'use strict'

// A Fastify app that keeps @fastify/rate-limit and counts on ratekeeper's store: 100 requests a
// minute per client IP on every route, and on `/login` 5 attempts a minute, then 429 Too Many
// Requests, and 403 Forbidden from the 8th (the plugin's `ban`).
//
// In memory by default; set REDIS_URL to keep the counts on Redis (shared by every process).
//
//   node examples/fastify.js                                   # http://127.0.0.1:3000
//   PORT=0 node examples/fastify.js                            # any free port
//   REDIS_URL=redis://127.0.0.1:6379 node examples/fastify.js
//
//   curl -i -X POST http://127.0.0.1:3000/login                # again and again

const Fastify = require('fastify')
const rateLimit = require('@fastify/rate-limit')
const { ratekeeperStore } = require('ratekeeper/fastify')

async function buildApp() {
  const app = Fastify()
  await app.register(rateLimit, {
    max: 100,
    timeWindow: '1 minute',
    // In memory without REDIS_URL; with it, on Redis (or pass your ioredis client, Cluster too).
    store: ratekeeperStore({ client: process.env.REDIS_URL || undefined }),
    // Redis unavailable: let requests through rather than answer 500.
    skipOnError: true,
  })
  app.get('/', async () => ({ hello: 'world' }))
  // A route's own limit, counted apart from the global one.
  app.post('/login', { config: { rateLimit: { max: 5, timeWindow: '1 minute', ban: 2 } } }, async () => ({ ok: true }))
  return app
}

async function main() {
  const app = await buildApp()
  const address = await app.listen({ port: Number(process.env.PORT ?? 3000), host: '127.0.0.1' })
  console.log(`listening on ${address} (counts ${process.env.REDIS_URL ? 'on Redis' : 'in memory'})`)
  for (const signal of ['SIGINT', 'SIGTERM']) process.once(signal, () => app.close())
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
