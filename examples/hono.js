'use strict'

// A Hono app that keeps hono-rate-limiter and counts on ratekeeper's store: `/` takes 5 requests
// per minute per client IP (the 6th gets a 429 with `RateLimit-*` and `Retry-After` headers),
// and `/quota` tells a client its count without counting.
//
// In memory by default; set REDIS_URL to keep the counts on Redis (shared across processes).
//
//   node examples/hono.js                      # http://127.0.0.1:3000
//   PORT=0 node examples/hono.js               # any free port
//   REDIS_URL=redis://127.0.0.1:6379 node examples/hono.js

const { Hono } = require('hono')
const { serve } = require('@hono/node-server')
const { getConnInfo } = require('@hono/node-server/conninfo')
const { rateLimiter } = require('hono-rate-limiter')
const { Store } = require('ratekeeper/hono')

const clientIp = (c) => getConnInfo(c).remote.address ?? 'unknown'

const store = new Store({
  client: process.env.REDIS_URL || undefined, // in memory when unset
  prefix: 'example:hono:',
  // On Redis: while it is unavailable this process counts alone (hono-rate-limiter would
  // otherwise send every request to app.onError).
  ...(process.env.REDIS_URL ? { onStoreError: 'memory' } : {}),
})

const app = new Hono()

app.get('/quota', async (c) => {
  const info = await store.get(clientIp(c))
  return c.json({ used: info?.totalHits ?? 0, resetTime: info?.resetTime ?? null })
})

app.use(
  '/',
  rateLimiter({
    windowMs: 60_000, // windows aligned to the clock: every client's ends on the minute
    limit: 5,
    standardHeaders: 'draft-7',
    keyGenerator: clientIp,
    store,
  }),
)
app.get('/', (c) => c.text(`hello, ${c.get('rateLimit').remaining} left this minute\n`))

app.onError((error, c) => c.text(`error: ${error.code ?? error.message}\n`, 500))

const port = Number(process.env.PORT ?? 3000)
serve({ fetch: app.fetch, port, hostname: '127.0.0.1' }, (info) => {
  const url = `http://127.0.0.1:${info.port}`
  console.log(`listening on ${url} (${process.env.REDIS_URL ? 'counts on Redis' : 'counts in memory'})`)
  console.log(`try: for i in 1 2 3 4 5 6; do curl -i ${url}/; done`)
})
