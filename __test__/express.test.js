'use strict'

// The Express middleware (its refusals, options, store failures and limiters), and the example
// app that `npm start` runs. Headers: middleware-headers.test.js; keys, refunds and warnings:
// middleware-requests.test.js.

const { describe, it, after } = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const path = require('node:path')
const express = require('express')

const { RateLimiter, RedisRateLimiter, FixedWindow, TokenBucket, rateLimit } = require('..')
const { LIMITERS, CAPACITY, SPACED } = require('./helpers/limiters.js')
const { useRedisServer } = require('./helpers/redis-server.js')
const { withApp, clocked } = require('./helpers/express-app.js')

const redis = useRedisServer()

function appWith(middlewareOptions) {
  const app = express()
  app.use(rateLimit(middlewareOptions))
  app.get('/', (req, res) => res.send('ok'))
  app.use((error, req, res, next) => res.status(500).send(`error: ${error.code}`))
  return app
}

describe('rateLimit refusals', () => {
  it('answers 429 with Retry-After, the draft-7 headers and the seed\'s sentence by default', async () => {
    const clock = { now: 1_000_000 }
    const limiter = clocked(new RateLimiter({ interval: 60_000, maxInInterval: 2 }), clock)
    await withApp(appWith({ limiter }), async (url) => {
      const first = await fetch(url)
      assert.equal(first.status, 200)
      assert.equal(first.headers.get('ratelimit'), 'limit=2, remaining=1, reset=60')
      assert.equal(first.headers.get('ratelimit-policy'), '2;w=60')
      assert.equal(first.headers.get('ratelimit-limit'), null, 'draft-7 only by default')
      clock.now += 12_345.5
      const second = await fetch(url)
      assert.equal(second.headers.get('ratelimit'), 'limit=2, remaining=0, reset=60')
      clock.now += 0.25
      const third = await fetch(url)
      assert.equal(third.status, 429)
      assert.equal(third.headers.get('retry-after'), '48')
      assert.equal(third.headers.get('ratelimit'), 'limit=2, remaining=0, reset=60')
      assert.equal(third.headers.get('content-type'), 'text/plain; charset=utf-8')
      // The first action leaves the window at 1_060_000: 47_654.25 ms from now, rounded up.
      assert.equal(await third.text(), 'You must wait 47655 ms before you can make requests.')
    })
  })

  it('reports no capacity left on a refusal (minDifference; a weight above what is left)', async () => {
    const clock = { now: 5000 }
    const spaced = clocked(new RateLimiter({ interval: 60_000, maxInInterval: 5, minDifference: 10_000 }), clock)
    await withApp(appWith({ limiter: spaced, headers: ['draft-6', 'x-rate-limit'] }), async (url) => {
      assert.equal((await fetch(url)).status, 200)
      clock.now += 1000
      const refused = await fetch(url)
      assert.equal(refused.status, 429)
      assert.equal(refused.headers.get('ratelimit-remaining'), '0')
      assert.equal(refused.headers.get('x-rate-limit-remaining'), '0')
      assert.equal(refused.headers.get('retry-after'), '9')
    })
    const window = clocked(new FixedWindow({ limits: [{ duration: 60_000, limit: 3 }] }), clock)
    await withApp(appWith({ limiter: window, weight: 2, headers: 'draft-7' }), async (url) => {
      assert.equal((await fetch(url)).headers.get('ratelimit'), 'limit=3, remaining=1, reset=54')
      const refused = await fetch(url) // 1 is left, the request costs 2
      assert.equal(refused.status, 429)
      assert.equal(refused.headers.get('ratelimit'), 'limit=3, remaining=0, reset=54')
      assert.equal(refused.headers.get('retry-after'), '54')
    })
  })

  it('answers JSON { error, timeLeft, retryAfter } when the Accept header ranks JSON above text', async () => {
    const clock = { now: 0 }
    const limiter = clocked(new FixedWindow({ limits: [{ duration: 10_000, limit: 1 }] }), clock)
    await withApp(appWith({ limiter }), async (url) => {
      assert.equal((await fetch(url)).status, 200)
      clock.now = 2500.5
      const text = 'You must wait 7500 ms before you can make requests.'
      const json = JSON.stringify({ error: text, timeLeft: 7500, retryAfter: 8 })
      for (const [accept, type, body] of [
        ['application/json', 'application/json; charset=utf-8', json],
        ['application/json, text/plain;q=0.5', 'application/json; charset=utf-8', json],
        ['text/plain', 'text/plain; charset=utf-8', text],
        ['*/*', 'text/plain; charset=utf-8', text],
        ['application/json, text/plain', 'application/json; charset=utf-8', json], // the client's order, on a tie
        ['text/plain, application/json', 'text/plain; charset=utf-8', text],
        ['text/html', 'text/plain; charset=utf-8', text],
        [undefined, 'text/plain; charset=utf-8', text],
      ]) {
        const refused = await fetch(url, { headers: accept === undefined ? {} : { accept } })
        assert.equal(refused.status, 429, accept)
        assert.equal(refused.headers.get('content-type'), type, accept)
        assert.equal(await refused.text(), body, accept)
      }
    })
  })

  it('refuses a weight above the capacity without a Retry-After: no wait would let it through', async () => {
    const limiter = new TokenBucket({ capacity: 3, refillInterval: 1000 })
    const app = appWith({ limiter, weight: (req) => Number(req.query.cost) })
    await withApp(app, async (url) => {
      const refused = await fetch(`${url}/?cost=4`, { headers: { accept: 'application/json' } })
      assert.equal(refused.status, 429)
      assert.equal(refused.headers.get('retry-after'), null)
      assert.deepEqual(await refused.json(), { error: 'This request can never be allowed: it costs more than the limit of 3.', timeLeft: null, retryAfter: null })
      // A weight that is no whole number from 1 is Express's error, before the limiter is asked.
      for (const cost of ['0', '1.5', 'x']) assert.equal(await (await fetch(`${url}/?cost=${cost}`)).text(), 'error: ERR_INVALID_ARGUMENT', cost)
      assert.equal((await fetch(`${url}/?cost=3`)).status, 200)
    })
  })

  it("sends the user's message (text, JSON or a function of the wait) or lets the handler answer", async () => {
    const clock = { now: 0 }
    const limiter = () => clocked(new FixedWindow({ limits: [{ duration: 10_000, limit: 1 }] }), clock)
    const refusal = async (options, init) =>
      withApp(appWith({ limiter: limiter(), ...options }), async (url) => {
        assert.equal((await fetch(url)).status, 200)
        const refused = await fetch(url, init)
        return { status: refused.status, type: refused.headers.get('content-type'), retryAfter: refused.headers.get('retry-after'), body: await refused.text() }
      })
    assert.deepEqual(await refusal({ message: 'slow down' }, { headers: { accept: 'application/json' } }), { status: 429, type: 'text/plain; charset=utf-8', retryAfter: '10', body: 'slow down' })
    assert.deepEqual(await refusal({ message: { error: 'slow down' }, statusCode: 503 }), { status: 503, type: 'application/json; charset=utf-8', retryAfter: '10', body: '{"error":"slow down"}' })
    const seen = []
    const message = (timeLeft, req, answer) => {
      seen.push(answer)
      return { timeLeft, path: req.path }
    }
    assert.deepEqual(await refusal({ message }), { status: 429, type: 'application/json; charset=utf-8', retryAfter: '10', body: '{"timeLeft":10000,"path":"/"}' })
    assert.deepEqual(seen, [{ allowed: false, timeLeft: 10_000, remaining: 0, limit: 1, resetAfter: 10_000, key: '127.0.0.1' }])
    const handler = (req, res, next, answer) => res.status(418).json({ teapot: answer.timeLeft, key: answer.key })
    assert.deepEqual(await refusal({ handler }), { status: 418, type: 'application/json; charset=utf-8', retryAfter: '10', body: '{"teapot":10000,"key":"127.0.0.1"}' })
    // The handler gets the status to send and may keep it; what it throws or rejects goes to Express.
    assert.deepEqual(await refusal({ handler: (req, res) => res.end('bye') }), { status: 429, type: null, retryAfter: '10', body: 'bye' })
    const failing = Object.assign(new Error('no handler'), { code: 'HANDLER_FAILED' })
    for (const broken of [() => { throw failing }, async () => { throw failing }]) {
      assert.equal((await refusal({ handler: broken })).body, 'error: HANDLER_FAILED')
    }
  })

  it('checks statusCode, and hands what the message throws to Express instead of leaving the request hanging', async () => {
    const limiter = new RateLimiter({ interval: 60_000, maxInInterval: 1 })
    assert.throws(() => rateLimit({ limiter, statusCode: 'abc' }), { name: 'TypeError', code: 'ERR_INVALID_OPTION' })
    assert.throws(() => rateLimit({ limiter, statusCode: 42 }), { name: 'RangeError', code: 'ERR_INVALID_OPTION' })
    // A fixed message that JSON cannot hold is an option error.
    assert.throws(() => rateLimit({ limiter, message: { big: 1n } }), { name: 'TypeError', code: 'ERR_INVALID_OPTION' })
    const failing = Object.assign(new Error('no message'), { code: 'MESSAGE_FAILED' })
    for (const message of [() => { throw failing }, () => ({ big: 1n })]) {
      await withApp(appWith({ limiter: new RateLimiter({ interval: 60_000, maxInInterval: 1 }), message }), async (url) => {
        assert.equal((await fetch(url)).status, 200)
        const refused = await fetch(url)
        assert.equal(refused.status, 500)
        assert.match(await refused.text(), /^error: (MESSAGE_FAILED|ERR_INVALID_ARGUMENT)$/)
      })
    }
  })
})

describe('rateLimit requests', () => {
  it("charges each route its weight from one budget (the seed's GET /user 1, POST /user 2)", async () => {
    const clock = { now: 30_000 }
    const limiter = clocked(new FixedWindow({ limits: [{ duration: 60_000, limit: 5 }] }), clock)
    const app = express()
    app.use('/user', rateLimit({ limiter, weight: (req) => (req.method === 'POST' ? 2 : 1) }))
    app.all('/user', (req, res) => res.send(req.method))
    await withApp(app, async (url) => {
      const steps = []
      for (const method of ['GET', 'POST', 'GET', 'POST', 'GET', 'GET']) {
        const response = await fetch(`${url}/user`, { method })
        steps.push(`${method} ${response.status} ${response.headers.get('ratelimit')}`)
      }
      assert.deepEqual(steps, [
        'GET 200 limit=5, remaining=4, reset=30',
        'POST 200 limit=5, remaining=2, reset=30',
        'GET 200 limit=5, remaining=1, reset=30',
        'POST 429 limit=5, remaining=0, reset=30', // costs 2, 1 is left: refused, not counted
        'GET 200 limit=5, remaining=0, reset=30',
        'GET 429 limit=5, remaining=0, reset=30',
      ])
    })
  })

  it('puts the answer and its key on req.rateLimit (or requestPropertyName), and skips what skip says', async () => {
    const clock = { now: 0 }
    const limiter = clocked(new TokenBucket({ capacity: 4, refillAmount: 2, refillInterval: 1000 }), clock)
    const app = express()
    app.use(rateLimit({ limiter, requestPropertyName: 'quota', skip: (req) => req.query.free === '1', weight: 3 }))
    app.get('/', (req, res) => res.json({ quota: req.quota ?? null, rateLimit: req.rateLimit ?? null }))
    await withApp(app, async (url) => {
      assert.deepEqual(await (await fetch(url)).json(), {
        quota: { allowed: true, timeLeft: 0, remaining: 1, limit: 4, resetAfter: 1500, key: '127.0.0.1' },
        rateLimit: null,
      })
      const free = await fetch(`${url}/?free=1`)
      assert.deepEqual(await free.json(), { quota: null, rateLimit: null })
      assert.equal(free.headers.get('ratelimit'), null)
      assert.equal((await fetch(url)).status, 429)
    })
  })

  it('refuses a request whose key is missing instead of sharing one global limit', async () => {
    const limiter = new RateLimiter({ interval: 60_000, maxInInterval: 1 })
    await withApp(appWith({ limiter, key: (req) => req.query.user }), async (url) => {
      const response = await fetch(url)
      assert.equal(response.status, 500)
      assert.equal(await response.text(), 'error: ERR_INVALID_ID')
      assert.equal((await fetch(`${url}/?user=a`)).status, 200)
    })
  })

  it('keys by the function given, and sends objects as JSON', async () => {
    const limiter = new RateLimiter({ interval: 60_000, maxInInterval: 1 })
    await withApp(appWith({ limiter, key: (req) => req.query.user, message: (timeLeft) => ({ error: 'slow down', timeLeft }) }), async (url) => {
      assert.equal((await fetch(`${url}/?user=a`)).status, 200)
      assert.equal((await fetch(`${url}/?user=b`)).status, 200)
      const refused = await fetch(`${url}/?user=a`)
      assert.equal(refused.status, 429)
      const body = await refused.json()
      assert.equal(body.error, 'slow down')
      assert.ok(body.timeLeft > 59_000)
    })
  })
})

describe('rateLimit when the limiter fails', () => {
  const unreachable = () => new RedisRateLimiter({ client: { port: 1, commandTimeoutMs: 200 }, interval: 1000, maxInInterval: 1 })

  it('passes Redis errors to Express, or fails open or closed as asked', async () => {
    const limiter = unreachable()
    for (const [onError, status, body] of [['next', 500, 'error: ERR_STORE_UNAVAILABLE'], ['allow', 200, 'ok'], ['block', 503, 'Rate limiter unavailable']]) {
      await withApp(appWith({ limiter, onError, log: () => {} }), async (url) => {
        const response = await fetch(url)
        assert.equal(response.status, status, onError)
        assert.equal(await response.text(), body)
      })
    }
  })

  it("reports the failure through log once a minute, not once per request ('allow' and 'block')", async () => {
    const limiter = unreachable()
    for (const [onError, status] of [['allow', 200], ['block', 503]]) {
      const logged = []
      await withApp(appWith({ limiter, onError, log: (...args) => logged.push(args) }), async (url) => {
        for (let i = 0; i < 25; i++) assert.equal((await fetch(url)).status, status, onError)
      })
      assert.equal(logged.length, 1, onError)
      const [message, error] = logged[0]
      assert.match(message, /^ratekeeper rateLimit: the limiter failed \(ERR_STORE_UNAVAILABLE\): requests are (let through unchecked|refused with 503)\. Reported at most once a minute\.$/)
      assert.equal(error.code, 'ERR_STORE_UNAVAILABLE')
    }
  })

  it("sends an invalid key to Express even with onError: 'allow' (a client must not escape the limit with a bad id)", async () => {
    const limiter = new RateLimiter({ interval: 60_000, maxInInterval: 1 })
    const logged = []
    const app = appWith({ limiter, key: (req) => req.get('x-api-key'), onError: 'allow', log: (...args) => logged.push(args) })
    await withApp(app, async (url) => {
      const tooLong = await fetch(url, { headers: { 'x-api-key': 'k'.repeat(2000) } })
      assert.equal(tooLong.status, 500)
      assert.equal(await tooLong.text(), 'error: ERR_INVALID_ID')
    })
    assert.deepEqual(logged, [])
  })
})

describe('rateLimit options', () => {
  it('validates every option, with codes', () => {
    assert.throws(() => rateLimit(), { code: 'ERR_INVALID_OPTION' })
    assert.throws(() => rateLimit({ limiter: {} }), { code: 'ERR_INVALID_OPTION' })
    assert.throws(() => rateLimit({ limiter: { limitWithInfo() {} } }), { code: 'ERR_INVALID_OPTION' })
    const limiter = new RateLimiter({ interval: 1000, maxInInterval: 1 })
    const bad = {
      TypeError: [
        { key: 'ip' },
        { ipv6Subnet: '56' },
        { ipv6Subnet: true },
        { key: (req) => req.ip, ipv6Subnet: 48 },
        { weight: '2' },
        { weight: null },
        // Values an error message cannot print as themselves (found by a long fuzz run: an
        // object without a prototype threw a TypeError without a code).
        { weight: Object.create(null) },
        { weight: Symbol('w') },
        { ipv6Subnet: Object.create(null) },
        { statusCode: Object.create(null) },
        { headers: 'draft-9' },
        { headers: ['draft-7', 'legacy', 'ietf'] },
        { headers: ['draft-7', 'draft-8'] },
        { headers: ['draft-6', 'draft-8'] },
        { headers: null },
        { identifier: '' },
        { identifier: 5 },
        { message: 'slow', handler: () => {} },
        { handler: 'refuse' },
        { skip: 'always' },
        { skipFailedRequests: 'yes' },
        { skipSuccessfulRequests: 1 },
        { skipFailedRequests: true, limiter: { consume: async () => ({}) } },
        { requestPropertyName: '' },
        { requestPropertyName: Symbol('x') },
        { onError: 'explode' },
        { log: console },
        { validate: 'no' },
      ],
      RangeError: [{ ipv6Subnet: 31 }, { ipv6Subnet: 65 }, { ipv6Subnet: 56.5 }, { weight: 0 }, { weight: 1.5 }, { weight: -1 }],
    }
    for (const [name, list] of Object.entries(bad)) {
      for (const options of list) {
        assert.throws(() => rateLimit({ limiter, ...options }), { name, code: 'ERR_INVALID_OPTION' }, String(Object.keys(options)))
      }
    }
    assert.throws(() => rateLimit({ limiter, keyz: () => 1 }), { name: 'TypeError', code: 'ERR_UNKNOWN_OPTION', message: /unknown option `keyz`/ })
    assert.throws(() => rateLimit({ limiter, windowMs: 1000 }), { code: 'ERR_UNKNOWN_OPTION' })
    // Every option, valid; `undefined` is the default.
    for (const options of [
      { key: (req) => req.ip, weight: (req) => 1, headers: ['draft-6', 'draft-7', 'legacy', 'x-rate-limit'], identifier: (req) => 'api' },
      { ipv6Subnet: false, weight: 3, headers: false, identifier: 'api', statusCode: 503, message: { error: 'slow' } },
      { ipv6Subnet: 32, headers: true, handler: () => {}, skip: () => false, skipFailedRequests: true, skipSuccessfulRequests: true },
      { ipv6Subnet: 64, headers: [], requestPropertyName: 'quota', onError: 'allow', log: () => {}, validate: false },
      { key: undefined, ipv6Subnet: undefined, headers: undefined, message: undefined, handler: undefined },
    ]) {
      assert.equal(typeof rateLimit({ limiter, ...options }), 'function')
    }
  })
})

describe('rateLimit with every limiter', () => {
  for (const store of ['memory', 'Redis']) {
    it(`limits with each, on ${store}: 429 once the capacity is spent`, async () => {
      // At one instant: no refill or leak between the requests (a rolling window's minDifference
      // then admits one).
      const clock = { now: Date.now() }
      for (const [name, create] of Object.entries(LIMITERS)) {
        const extra = store === 'Redis' ? { client: redis.server.url, namespace: `express:${name}:` } : {}
        const limiter = clocked(create(extra), clock)
        const capacity = SPACED.has(name) ? 1 : CAPACITY
        await withApp(appWith({ limiter, headers: ['draft-6', 'x-rate-limit'] }), async (url) => {
          const answers = []
          for (let i = 0; i <= capacity; i++) {
            const response = await fetch(url)
            answers.push([response.status, response.headers.get('ratelimit-remaining'), response.headers.get('x-rate-limit-limit')])
          }
          const expected = [...Array(capacity).keys()].map((i) => [200, String(SPACED.has(name) ? 0 : capacity - 1 - i), String(CAPACITY)])
          assert.deepEqual(answers, [...expected, [429, '0', String(CAPACITY)]], `${name} on ${store}`)
        })
      }
    })
  }
})

describe('the example app (npm start)', () => {
  let child
  after(() => child && child.kill())

  it('listens on PORT=0, prints its URL and a curl line, limits /hello, and serves the page at /', async () => {
    child = spawn(process.execPath, [path.join(__dirname, '..', 'examples', 'express.js')], {
      env: { ...process.env, PORT: '0', REDIS_URL: '' },
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    let output = ''
    const url = await new Promise((resolve, reject) => {
      child.stdout.on('data', (chunk) => {
        output += chunk
        const match = output.match(/listening on (http:\/\/127\.0\.0\.1:\d+\/)/)
        if (match && output.includes('curl')) resolve(match[1])
      })
      child.on('exit', (code) => reject(new Error(`example exited with ${code}: ${output}`)))
    })
    assert.match(output, new RegExp(`curl .*${url}hello`))
    const first = await fetch(`${url}hello`)
    assert.equal(first.status, 200)
    assert.equal((await first.json()).hello, 'world')
    // minDifference is 200 ms: a second request right away is refused.
    const second = await fetch(`${url}hello`)
    assert.equal(second.status, 429)
    assert.ok(second.headers.get('retry-after'))
    // The limit, 5, in whichever rate-limit headers the middleware sends.
    const limitHeaders = [...second.headers].filter(([name]) => /^(x-)?rate-?limit/.test(name))
    assert.ok(limitHeaders.some(([, value]) => /\b5\b/.test(value)), JSON.stringify(limitHeaders))
    // `/` is the page that compares the algorithms (__test__/page.test.js runs it in a browser).
    const page = await fetch(url)
    assert.equal(page.status, 200)
    assert.match(page.headers.get('content-type'), /^text\/html/)
    assert.match(await page.text(), /<script src="page.js"><\/script>/)
  })
})
