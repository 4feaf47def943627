'use strict'

// A Koa app limited by ratekeeper/koa: each client (its IP address) holds 5 tokens, one coming
// back every 12 seconds (5 a minute); a GET costs 1, a POST 2. A request that fails downstream
// (a 404 here, or an error thrown) is given back. /health is never limited.
//
//   node examples/koa.js                                    # in memory, http://127.0.0.1:3000
//   PORT=0 node examples/koa.js                             # any free port
//   REDIS_URL=redis://127.0.0.1:6379 node examples/koa.js   # the counts on Redis, shared by every process
//
// (REDIS_URL unset, not empty, for memory.)
//
// It prints its URL and a curl line to try.

const Koa = require('koa')
const { TokenBucket } = require('ratekeeper')
const { rateLimit } = require('ratekeeper/koa')

const app = new Koa() // behind one proxy: new Koa({ proxy: true, maxIpsCount: 1 })
const limiter = new TokenBucket({ client: process.env.REDIS_URL, capacity: 5, refillAmount: 1, refillInterval: 12_000 })

// A GET costs 1, a POST 2; a request that fails downstream is given back; /health is never limited.
app.use(rateLimit({ limiter, weight: (ctx) => (ctx.method === 'POST' ? 2 : 1), skip: (ctx) => ctx.path === '/health', skipFailedRequests: true }))
app.use((ctx) => {
  if (ctx.path === '/health') ctx.body = 'ok'
  else if (ctx.path === '/hello') ctx.body = { hello: 'world', left: ctx.state.rateLimit?.remaining }
  else ctx.throw(404) // a failure: its token is given back
})

const port = Number(process.env.PORT ?? 3000)
const server = app.listen(port, '127.0.0.1', () => {
  const url = `http://127.0.0.1:${server.address().port}/`
  console.log(`ratekeeper Koa example listening on ${url} (${process.env.REDIS_URL ? 'Redis' : 'in-memory'} store)`)
  console.log(`try: for i in 1 2 3 4 5 6; do curl -s -w ' %{http_code}\\n' ${url}hello; done`)
})
