'use strict'

// An Express app limited to 5 requests per 10 seconds per client IP, with at least 200 ms
// between two requests. In memory by default; set REDIS_URL to share the limit across processes.
//
//   npm start                      # http://127.0.0.1:3000
//   PORT=0 npm start               # any free port
//   REDIS_URL=redis://127.0.0.1:6379 npm start

const express = require('express')
const { RateLimiter, RedisRateLimiter, rateLimit } = require('..')

const limits = { interval: 10_000, maxInInterval: 5, minDifference: 200 }
const limiter = process.env.REDIS_URL
  ? new RedisRateLimiter({ client: process.env.REDIS_URL, namespace: 'example:', ...limits })
  : new RateLimiter(limits)

const app = express()
app.use(rateLimit({ limiter, key: (req) => req.ip }))
app.get('/', (req, res) => {
  res.json({ hello: 'world', at: new Date().toISOString() })
})

const port = Number(process.env.PORT ?? 3000)
const server = app.listen(port, '127.0.0.1', () => {
  const url = `http://127.0.0.1:${server.address().port}/`
  console.log(`ratekeeper example listening on ${url} (${process.env.REDIS_URL ? 'Redis' : 'in-memory'} store)`)
  console.log(`try: for i in 1 2 3 4 5 6 7; do curl -s -o /dev/null -w '%{http_code} ' ${url}; sleep 0.3; done; echo`)
})
