'use strict'

// The example `npm start` runs: an Express app on ratekeeper's middleware.
//
// - `/` is a page that shows the algorithms side by side (examples/public/): it fires requests at
//   `/api/<algorithm>`, six routes limited to the same 10 requests per 10 s by six limiters, and
//   plots which were allowed and which refused.
// - `/hello` is limited to 5 requests per 10 seconds per client IP, with at least 200 ms between
//   two requests (the curl line it prints).
//
// In memory by default; set REDIS_URL to keep the counts on Redis (shared across processes).
//
//   npm start                      # http://127.0.0.1:3000
//   PORT=0 npm start               # any free port
//   REDIS_URL=redis://127.0.0.1:6379 npm start

const path = require('node:path')
const express = require('express')
const { RateLimiter, FixedWindow, SlidingWindow, SlidingTail, TokenBucket, Gcra, rateLimit } = require('..')

const client = process.env.REDIS_URL || undefined
/** Where a limiter keeps its counts: in memory, or on Redis under its own key prefix. */
const store = (name) => (client ? { client, namespace: `example:${name}:` } : {})

const WINDOW = 10_000
const LIMIT = 10

/**
 * The page's algorithms: the same limit, 10 per 10 s (the buckets: 10 at once, refilled at that
 * rate). `aligned`: its windows follow the clock (…:00, …:10, …), which the page draws.
 */
const ALGORITHMS = [
  {
    name: 'rolling-window',
    title: 'Rolling window',
    Class: RateLimiter,
    // Only allowed requests count, as in the others (the default also counts refused ones).
    options: { interval: WINDOW, maxInInterval: LIMIT, recordBlocked: false },
    note: 'At most 10 in any 10 s: each allowed request counts for exactly 10 s.',
  },
  {
    name: 'fixed-window',
    title: 'Fixed window',
    Class: FixedWindow,
    options: { limits: [{ duration: WINDOW, limit: LIMIT }] },
    aligned: true,
    note: '10 per window of the clock: the count starts again at every boundary.',
  },
  {
    name: 'sliding-window',
    title: 'Sliding window',
    Class: SlidingWindow,
    options: { limits: [{ duration: WINDOW, limit: LIMIT, precision: 1000 }] },
    note: 'At most 10 in any 10 s, counted in 1 s buckets that come back one by one.',
  },
  {
    name: 'sliding-tail',
    title: 'Sliding tail',
    Class: SlidingTail,
    options: { limits: [{ duration: WINDOW, limit: LIMIT }] },
    aligned: true,
    note: "This window's count plus the previous one's, pro rata: up to 20 in the worst 10 s.",
  },
  {
    name: 'token-bucket',
    title: 'Token bucket',
    Class: TokenBucket,
    options: { capacity: LIMIT, refillAmount: LIMIT, refillInterval: WINDOW },
    note: '10 at once, then a token back every second.',
  },
  {
    name: 'gcra',
    title: 'GCRA',
    Class: Gcra,
    options: { limit: LIMIT, period: WINDOW, burst: LIMIT },
    note: 'The token bucket in one number per id: 10 at once, then 1 per second.',
  },
]
for (const algorithm of ALGORITHMS) {
  algorithm.limiter = new algorithm.Class({ ...algorithm.options, ...store(algorithm.name) })
}

const app = express()
app.use(express.static(path.join(__dirname, 'public')))

const hello = new RateLimiter({ interval: 10_000, maxInInterval: 5, minDifference: 200, ...store('hello') })
app.get('/hello', rateLimit({ limiter: hello, key: (req) => req.ip }), (req, res) => {
  res.json({ hello: 'world', at: new Date().toISOString() })
})

// The page's routes key by the id each page load makes (`?session=`), so that two pages, or a
// page and the tests, never share counts.
const SESSION = /^[A-Za-z0-9_-]{1,64}$/

function requireSession(req, res, next) {
  if (typeof req.query.session === 'string' && SESSION.test(req.query.session)) return next()
  res.status(400).json({ error: '`session` must be 1 to 64 letters, digits, `-` or `_`' })
}

app.get('/api/algorithms', (req, res) => {
  res.json({
    store: client ? 'redis' : 'memory',
    limit: LIMIT,
    window: WINDOW,
    algorithms: ALGORITHMS.map(({ name, title, Class, options, aligned = false, note }) => ({
      name,
      title,
      className: Class.name,
      options,
      aligned,
      note,
      route: `/api/${name}`,
    })),
  })
})

for (const { name, limiter } of ALGORITHMS) {
  app.get(`/api/${name}`, requireSession, rateLimit({ limiter, key: (req) => req.query.session }), (req, res) => {
    res.json({ allowed: true })
  })
}

app.post('/api/reset', requireSession, async (req, res) => {
  await Promise.all(ALGORITHMS.map(({ limiter }) => limiter.reset(req.query.session)))
  res.status(204).end()
})

const port = Number(process.env.PORT ?? 3000)
const server = app.listen(port, '127.0.0.1', () => {
  const url = `http://127.0.0.1:${server.address().port}/`
  console.log(`ratekeeper example listening on ${url} (${client ? 'Redis' : 'in-memory'} store)`)
  console.log(`open ${url} in a browser to see the algorithms side by side`)
  console.log(`try: for i in 1 2 3 4 5 6 7; do curl -s -o /dev/null -w '%{http_code} ' ${url}hello; sleep 0.3; done; echo`)
})
