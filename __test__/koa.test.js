'use strict'

// ratekeeper/koa in real Koa apps on free ports, in memory and on a private redis-server:
// - against ratekeeper's Express middleware, the oracle: the same random sequences of requests
//   through both give the same statuses, rate-limit headers and bodies, option set by option set;
// - what only Koa has: errors thrown downstream (Koa's own error handler, `err.headers`),
//   `ctx.status` set downstream for the refunds, `ctx.state`, the proxy settings, the handler as
//   a Koa middleware;
// - store failures (onError, the limiter's onStoreError), bad options and bad requests, the
//   entries (CommonJS, ESM) and examples/koa.js.

const { describe, it, mock, after } = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const path = require('node:path')
const Koa = require('koa')
const express = require('express')

const ratekeeper = require('..')
const { FixedWindow, SlidingWindow, TokenBucket, RedisRateLimiter, RateLimiter } = ratekeeper
const koa = require('../koa.js')
const { rateLimit } = koa
const { LIMITERS, CAPACITY, SPACED } = require('./helpers/limiters.js')
const { useRedisServer, startRedis } = require('./helpers/redis-server.js')
const { serve, withApp, clocked, spyingRewards } = require('./helpers/express-app.js')
const { random } = require('./helpers/random.js')

const redis = useRedisServer()

/** A fresh namespace on the test's redis-server, or nothing in memory. */
const storeOptions = (store) => (store === 'Redis' ? { client: redis.server.url, namespace: `koa:${Math.random()}:` } : {})

/**
 * Tracks the requests of an app and the refunds of its limiter: `settled()` resolves once every
 * response so far has closed (the middleware's own listeners, which come first, have run) and
 * every `reward` called meanwhile has settled, so that the next request sees the refunds.
 */
function tracker(limiter) {
  const closed = []
  const { limiter: spy, rewards } = spyingRewards(limiter)
  return {
    limiter: spy,
    rewards,
    watch: (res) => closed.push(new Promise((resolve) => res.once('close', resolve))),
    async settled() {
      await Promise.all(closed)
      await Promise.all(rewards)
    },
  }
}

/**
 * What the options of a scenario need of each framework's request object, so that one scenario
 * gives the same options to both middlewares; and each framework's app around a middleware.
 */
const FRAMEWORKS = {
  express: {
    header: (req, name) => req.get(name),
    path: (req) => req.path,
    method: (req) => req.method,
    teapot: (req, res, next, answer) => res.status(418).json({ teapot: answer.timeLeft, key: answer.key }),
    rateLimit: ratekeeper.rateLimit,
    /** An Express app: `track`, the middleware, the routes, then an error handler answering `error: <code>`. */
    app(middleware, { track, property }) {
      const app = express()
      app.use((req, res, next) => {
        track(res)
        next()
      })
      app.use(middleware)
      app.all('/ok', (req, res) => res.json({ answer: req[property] ?? null }))
      app.all('/free', (req, res) => res.json({ answer: req[property] ?? null }))
      app.all('/created', (req, res) => res.status(201).type('text').send('created'))
      app.all('/fail', (req, res) => res.status(500).type('text').send('failed'))
      app.all('/gone', (req, res) => res.status(404).type('text').send('gone'))
      app.all('/boom', (req, res, next) => next(Object.assign(new Error('boom'), { code: 'BOOM' })))
      app.use((error, req, res, next) => res.status(500).type('text').send(`error: ${error.code}`))
      return app
    },
  },
  koa: {
    header: (ctx, name) => ctx.get(name) || undefined,
    path: (ctx) => ctx.path,
    method: (ctx) => ctx.method,
    teapot: (ctx, next, answer) => {
      ctx.status = 418
      ctx.body = { teapot: answer.timeLeft, key: answer.key }
    },
    rateLimit,
    /** The same app in Koa: `track` and the error handler (answering `error: <code>`) first, the middleware, the routes. */
    app(middleware, { track, property }) {
      const app = new Koa()
      app.use(async (ctx, next) => {
        track(ctx.res)
        try {
          await next()
        } catch (error) {
          ctx.status = 500
          ctx.type = 'text'
          ctx.body = `error: ${error.code}`
        }
      })
      app.use(middleware)
      app.use((ctx) => {
        switch (ctx.path) {
          case '/ok':
          case '/free':
            ctx.body = { answer: ctx.state[property] ?? null }
            break
          case '/created':
            ctx.status = 201
            ctx.body = 'created'
            break
          case '/fail':
            ctx.status = 500
            ctx.body = 'failed'
            break
          case '/gone':
            ctx.status = 404
            ctx.body = 'gone'
            break
          case '/boom':
            throw Object.assign(new Error('boom'), { code: 'BOOM' })
        }
      })
      return app
    },
  },
}

/**
 * The option sets the two middlewares are compared on: each a function of the framework (its
 * request's accessors), giving the options besides `limiter`.
 */
const SCENARIOS = {
  defaults: () => ({}),
  'every header but draft-8, keys, weights, skip, skipFailedRequests': (fw) => ({
    headers: ['draft-6', 'draft-7', 'legacy', 'x-rate-limit'],
    key: (r) => fw.header(r, 'x-user'),
    weight: (r) => (fw.header(r, 'x-cost') === undefined ? (fw.method(r) === 'POST' ? 2 : 1) : Number(fw.header(r, 'x-cost'))),
    skip: (r) => fw.path(r) === '/free',
    skipFailedRequests: true,
  }),
  'draft-8 named, a message function, skipSuccessfulRequests, statusCode, requestPropertyName': (fw) => ({
    headers: 'draft-8',
    key: (r) => fw.header(r, 'x-user') ?? 'anonymous',
    weight: 2,
    identifier: (r) => `per "${fw.method(r)}"`,
    message: (timeLeft, r, answer) => ({ timeLeft, path: fw.path(r), key: answer.key, remaining: answer.remaining }),
    skipSuccessfulRequests: true,
    statusCode: 503,
    requestPropertyName: 'quota',
  }),
  'draft-8 and legacy, a text message, skipFailedRequests': (fw) => ({
    headers: ['draft-8', 'legacy'],
    key: (r) => fw.header(r, 'x-user') ?? 'anonymous',
    message: 'slow down',
    skipFailedRequests: true,
  }),
  'no headers, a JSON message, weights': (fw) => ({
    headers: false,
    ipv6Subnet: 48,
    weight: (r) => (fw.method(r) === 'POST' ? 3 : 1),
    message: { error: 'slow down' },
  }),
  'a handler of its own': (fw) => ({ headers: true, key: (r) => fw.header(r, 'x-user') ?? 'anonymous', handler: fw.teapot }),
}

/** The limiters the sequences run on (capacities small enough to be spent). */
const SEQUENCE_LIMITERS = {
  FixedWindow: (extra) => new FixedWindow({ limits: [{ duration: 10_000, limit: 4 }, { duration: 60_000, limit: 9 }], ...extra }),
  TokenBucket: (extra) => new TokenBucket({ capacity: 4, refillAmount: 1, refillInterval: 3000, ...extra }),
  SlidingWindow: (extra) => new SlidingWindow({ limits: [{ duration: 10_000, limit: 5, precision: 1000 }], ...extra }),
}

const COMPARED_HEADER = /^(ratelimit|x-ratelimit-|x-rate-limit-|retry-after$|content-type$)/

/**
 * A response as the comparison sees it: the status, the headers of COMPARED_HEADER, the body; and
 * the `Date` the legacy headers set (Node's own, on the other responses, is the real clock's).
 */
async function summary(response) {
  const legacy = response.headers.has('x-ratelimit-reset')
  const headers = Object.fromEntries([...response.headers].filter(([name]) => COMPARED_HEADER.test(name) || (legacy && name === 'date')))
  return { status: response.status, ...headers, body: await response.text() }
}

/** `count` random requests: a path, a method, an Accept, a user, sometimes a cost, and the time that passes before. */
function randomRequests(seed, count) {
  const next = random(seed)
  const pick = (list) => list[Math.floor(next() * list.length)]
  return Array.from({ length: count }, () => ({
    advance: pick([0, 0, 0, 0, 250, 1500, 2999, 7000]),
    path: pick(['/ok', '/ok', '/ok', '/fail', '/gone', '/created', '/boom', '/free']),
    method: pick(['GET', 'GET', 'POST']),
    accept: pick([undefined, undefined, 'application/json', 'text/plain', 'application/json, text/plain;q=0.5', '*/*']),
    user: pick(['alice', 'alice', 'bob', undefined]),
    cost: next() < 0.08 ? pick(['0', '1.5', 'x', '2', '9']) : undefined,
  }))
}

/**
 * Runs `requests` through the Express middleware and the Koa middleware, each with its own
 * limiter made by `createLimiter` on `store`, both on one clock (`Date`, mocked: the limiters and
 * the legacy headers read it), and returns both lists of responses.
 */
async function bothOver({ scenario, createLimiter, store, requests }) {
  const start = 1_800_000_000_000
  mock.timers.enable({ apis: ['Date'], now: start })
  const clock = {
    get now() {
      return Date.now()
    },
  }
  const servers = {}
  const trackers = {}
  try {
    for (const [name, fw] of Object.entries(FRAMEWORKS)) {
      const options = scenario(fw)
      const track = tracker(clocked(createLimiter(storeOptions(store)), clock))
      trackers[name] = track
      const middleware = fw.rateLimit({ limiter: track.limiter, validate: false, log: () => {}, ...options })
      servers[name] = await serve(fw.app(middleware, { track: track.watch, property: options.requestPropertyName ?? 'rateLimit' }))
    }
    const answers = { express: [], koa: [] }
    for (const request of requests) {
      mock.timers.setTime(Date.now() + request.advance)
      const headers = { 'x-user': request.user, 'x-cost': request.cost, accept: request.accept }
      for (const name of Object.keys(headers)) if (headers[name] === undefined) delete headers[name]
      for (const name of ['express', 'koa']) {
        const response = await fetch(servers[name].url + request.path, { method: request.method, headers })
        answers[name].push(await summary(response))
        await trackers[name].settled()
      }
    }
    return { ...answers, rewards: { express: trackers.express.rewards.length, koa: trackers.koa.rewards.length } }
  } finally {
    mock.timers.reset()
    await Promise.all(Object.values(servers).map((server) => server.close()))
  }
}

/** A Koa app limited by `rateLimit(options)`, whose first middleware answers `error: <code>` for what is thrown to Koa. */
function catchingApp(options) {
  const app = new Koa()
  app.use(async (ctx, next) => {
    try {
      await next()
    } catch (error) {
      ctx.status = 500
      ctx.body = `error: ${error.code}`
    }
  })
  app.use(rateLimit(options))
  app.use((ctx) => (ctx.body = 'ok'))
  return app
}

describe('the Koa middleware against the Express middleware (the same requests, the same answers)', () => {
  for (const store of ['memory', 'Redis']) {
    for (const [name, scenario] of Object.entries(SCENARIOS)) {
      it(`${name}, on ${store}`, async () => {
        const options = scenario(FRAMEWORKS.koa)
        const statuses = new Set()
        let refunds = 0
        for (const [i, [limiterName, createLimiter]] of Object.entries(SEQUENCE_LIMITERS).entries()) {
          const requests = randomRequests(1000 * i + name.length, 50)
          const { express: theirs, koa: ours, rewards } = await bothOver({ scenario, createLimiter, store, requests })
          for (let i = 0; i < requests.length; i++) {
            assert.deepEqual(ours[i], theirs[i], `${limiterName}, request ${i}: ${JSON.stringify(requests[i])}`)
          }
          assert.equal(rewards.koa, rewards.express, `${limiterName}: the refunds`)
          for (const answer of ours) statuses.add(answer.status)
          refunds += rewards.koa
        }
        // The sequences reach what the comparison is about: refusals, and refunds where asked.
        const refusal = options.handler ? 418 : (options.statusCode ?? 429)
        assert.ok(statuses.has(200) && statuses.has(refusal), [...statuses].join())
        assert.equal(refunds > 0, options.skipFailedRequests || options.skipSuccessfulRequests || false)
      })
    }
  }

  it('the numbers of one sequence, for the record (every header but draft-8)', async () => {
    const requests = [
      { advance: 0, path: '/ok', method: 'GET', user: 'alice' },
      { advance: 0, path: '/ok', method: 'POST', user: 'alice' },
      { advance: 0, path: '/fail', method: 'GET', user: 'alice' }, // given back
      { advance: 0, path: '/ok', method: 'GET', user: 'alice' },
      { advance: 1500, path: '/ok', method: 'POST', user: 'alice', accept: 'application/json' }, // 0 left
      { advance: 0, path: '/free', method: 'GET', user: 'alice' },
      { advance: 0, path: '/ok', method: 'GET' }, // no user: no id
      { advance: 0, path: '/ok', method: 'GET', user: 'alice', cost: '1.5' },
    ]
    const { express: theirs, koa: ours } = await bothOver({
      scenario: SCENARIOS['every header but draft-8, keys, weights, skip, skipFailedRequests'],
      createLimiter: SEQUENCE_LIMITERS.FixedWindow,
      store: 'memory',
      requests,
    })
    assert.deepEqual(ours, theirs)
    const row = ({ status, ratelimit, 'retry-after': retryAfter, 'x-ratelimit-reset': reset, body }) => [status, ratelimit, retryAfter, reset, body]
    // 4 per 10 s decides (`limit`), and the key holds counts until the minute's end (`reset`).
    const end = (1_800_000_000_000 + 60_000) / 1000
    const answer = (remaining) => JSON.stringify({ answer: { allowed: true, timeLeft: 0, remaining, limit: 4, resetAfter: 60_000, key: 'alice' } })
    assert.deepEqual(ours.map(row), [
      [200, 'limit=4, remaining=3, reset=60', undefined, String(end), answer(3)],
      [200, 'limit=4, remaining=1, reset=60', undefined, String(end), answer(1)],
      [500, 'limit=4, remaining=0, reset=60', undefined, String(end), 'failed'],
      [200, 'limit=4, remaining=0, reset=60', undefined, String(end), answer(0)],
      [429, 'limit=4, remaining=0, reset=59', '9', String(end), JSON.stringify({ error: 'You must wait 8500 ms before you can make requests.', timeLeft: 8500, retryAfter: 9 })],
      [200, undefined, undefined, undefined, JSON.stringify({ answer: null })],
      [500, undefined, undefined, undefined, 'error: ERR_INVALID_ID'],
      [500, undefined, undefined, undefined, 'error: ERR_INVALID_ARGUMENT'],
    ])
  })

  for (const store of ['memory', 'Redis']) {
    it(`every limiter of the table, on ${store}: the same answers up to the refusal`, async () => {
      for (const [name, create] of Object.entries(LIMITERS)) {
        const capacity = SPACED.has(name) ? 1 : CAPACITY
        const requests = Array.from({ length: capacity + 1 }, () => ({ advance: 0, path: '/ok', method: 'GET' }))
        const scenario = () => ({ headers: ['draft-6', 'x-rate-limit'] })
        const { express: theirs, koa: ours } = await bothOver({ scenario, createLimiter: create, store, requests })
        assert.deepEqual(ours, theirs, name)
        assert.deepEqual(
          ours.map((answer) => [answer.status, answer['ratelimit-remaining'], answer['x-rate-limit-limit']]),
          [...[...Array(capacity).keys()].map((i) => [200, String(SPACED.has(name) ? 0 : capacity - 1 - i), String(CAPACITY)]), [429, '0', String(CAPACITY)]],
          name,
        )
      }
    })
  }
})

/** A Koa app: the middleware of `options` (on `limiter`), then `route`; Koa's own error handler, silenced. */
function koaApp(options, route = (ctx) => (ctx.body = 'ok')) {
  const app = new Koa()
  app.silent = true
  app.use(rateLimit({ validate: false, ...options }))
  app.use(route)
  return app
}

describe('errors thrown downstream', () => {
  it("reach Koa's own error handler with the rate-limit headers (the error's own headers win), and are given back with skipFailedRequests", async () => {
    const clock = { now: 0 }
    const track = tracker(clocked(new FixedWindow({ limits: [{ duration: 10_000, limit: 5 }] }), clock))
    const app = koaApp({ limiter: track.limiter, key: () => 'k', headers: ['draft-7', 'x-rate-limit'], skipFailedRequests: true }, (ctx) => {
      track.watch(ctx.res)
      if (ctx.path === '/boom') throw new Error('boom')
      if (ctx.path === '/forbidden') ctx.throw(403, 'not you', { headers: { 'WWW-Authenticate': 'Basic', 'X-Rate-Limit-Limit': 'mine' } })
      if (ctx.path === '/string') throw 'not an error' // eslint-disable-line no-throw-literal
      ctx.body = 'ok'
    })
    const errors = []
    app.on('error', (error) => errors.push(error.message))
    await withApp(app, async (url) => {
      const seen = []
      for (const path of ['/ok', '/boom', '/forbidden', '/string', '/ok']) {
        const response = await fetch(url + path)
        seen.push([path, response.status, response.headers.get('ratelimit'), response.headers.get('x-rate-limit-limit'), response.headers.get('www-authenticate'), await response.text()])
        await track.settled()
      }
      assert.deepEqual(seen, [
        ['/ok', 200, 'limit=5, remaining=4, reset=10', '5', null, 'ok'],
        ['/boom', 500, 'limit=5, remaining=3, reset=10', '5', null, 'Internal Server Error'],
        ['/forbidden', 403, 'limit=5, remaining=3, reset=10', 'mine', 'Basic', 'not you'],
        // Koa wraps what is no Error in one of its own: nothing to add headers to.
        ['/string', 500, null, null, null, 'Internal Server Error'],
        ['/ok', 200, 'limit=5, remaining=3, reset=10', '5', null, 'ok'],
      ])
      // The three failures were given back: only the two /ok count.
      assert.equal(track.rewards.length, 3)
      assert.equal((await track.limiter.peek('k')).remaining, 3)
    })
    assert.deepEqual(errors, ['boom', 'not you', 'non-error thrown: "not an error"'])
  })

  it('reach an error handler upstream as they are, the headers still on the response', async () => {
    const app = new Koa()
    const caught = []
    app.use(async (ctx, next) => {
      try {
        await next()
      } catch (error) {
        caught.push([error.message, error.headers])
        ctx.status = 502
        ctx.body = 'upstream caught it'
      }
    })
    app.use(rateLimit({ limiter: new FixedWindow({ limits: [{ duration: 60_000, limit: 3 }] }), key: () => 'k', headers: 'draft-8' }))
    app.use(rateLimit({ limiter: new FixedWindow({ limits: [{ duration: 1000, limit: 9 }] }), key: () => 'k', headers: 'draft-8', identifier: 'burst' }))
    app.use(() => {
      throw new Error('downstream')
    })
    await withApp(app, async (url) => {
      const response = await fetch(url)
      assert.equal(response.status, 502)
      assert.equal(await response.text(), 'upstream caught it')
      // Both middlewares' draft-8 policies, appended, as under Express.
      assert.match(response.headers.get('ratelimit'), /^"3-in-1min"; r=2; t=\d+, "burst"; r=8; t=1$/)
    })
    assert.equal(caught.length, 1)
    assert.equal(caught[0][0], 'downstream')
    assert.deepEqual(Object.keys(caught[0][1]), ['RateLimit', 'RateLimit-Policy'])
    assert.match(caught[0][1].RateLimit.join(', '), /^"3-in-1min"; r=2; t=\d+, "burst"; r=8; t=1$/)
  })
})

describe('ctx.status set downstream decides the refunds', () => {
  const ROUTES = {
    '/created': (ctx) => ((ctx.status = 201), (ctx.body = 'created')),
    '/redirect': (ctx) => ctx.redirect('/elsewhere'),
    '/invalid': (ctx) => ((ctx.status = 422), (ctx.body = { error: 'invalid' })),
    '/nothing': () => {}, // Koa's 404
    '/empty': (ctx) => (ctx.status = 204),
  }

  for (const store of ['memory', 'Redis']) {
    for (const [option, givenBack] of [
      ['skipFailedRequests', ['/invalid', '/nothing']],
      ['skipSuccessfulRequests', ['/created', '/redirect', '/empty']],
    ]) {
      it(`${option}, on ${store}: gives back ${givenBack.join(', ')}`, async () => {
        const track = tracker(new FixedWindow({ limits: [{ duration: 3_600_000, limit: 20 }], ...storeOptions(store) }))
        const app = koaApp({ limiter: track.limiter, key: () => 'k', weight: 2, [option]: true }, (ctx) => {
          track.watch(ctx.res)
          ROUTES[ctx.path](ctx)
        })
        await withApp(app, async (url) => {
          const seen = []
          for (const path of Object.keys(ROUTES)) {
            const response = await fetch(url + path, { redirect: 'manual' })
            await response.text()
            await track.settled()
            seen.push([path, response.status, (await track.limiter.peek('k')).remaining])
          }
          let remaining = 20
          const expected = Object.keys(ROUTES).map((path) => {
            if (!givenBack.includes(path)) remaining -= 2
            return [path, { '/created': 201, '/redirect': 302, '/invalid': 422, '/nothing': 404, '/empty': 204 }[path], remaining]
          })
          assert.deepEqual(seen, expected)
        })
      })
    }
  }

  it('a client that gives up before the response: failed, given back', async () => {
    const track = tracker(new FixedWindow({ limits: [{ duration: 3_600_000, limit: 10 }] }))
    let arrived
    const arrival = new Promise((resolve) => (arrived = resolve))
    const app = koaApp({ limiter: track.limiter, key: () => 'k', skipFailedRequests: true }, async (ctx) => {
      track.watch(ctx.res)
      arrived()
      await new Promise((resolve) => ctx.req.once('close', resolve))
    })
    await withApp(app, async (url) => {
      const controller = new AbortController()
      const hanging = fetch(url, { signal: controller.signal })
      await arrival
      controller.abort()
      await assert.rejects(hanging, { name: 'AbortError' })
      await track.settled()
      assert.equal(track.rewards.length, 1)
      assert.equal((await track.limiter.peek('k')).remaining, 10)
    })
  })
})

describe('ctx.state and the refusal', () => {
  it('puts the answer on ctx.state.rateLimit (or requestPropertyName), none when skipped; a refusal goes no further', async () => {
    const clock = { now: 0 }
    const limiter = clocked(new TokenBucket({ capacity: 4, refillAmount: 2, refillInterval: 1000 }), clock)
    let downstream = 0
    const seen = []
    const app = koaApp({ limiter, requestPropertyName: 'quota', skip: (ctx) => ctx.query.free === '1', weight: 3 }, (ctx) => {
      downstream++
      seen.push({ quota: ctx.state.quota ?? null, rateLimit: ctx.state.rateLimit ?? null })
      ctx.body = 'ok'
    })
    await withApp(app, async (url) => {
      assert.equal((await fetch(url)).status, 200)
      const free = await fetch(`${url}/?free=1`)
      assert.equal(free.status, 200)
      assert.equal(free.headers.get('ratelimit'), null)
      const refused = await fetch(url)
      assert.equal(refused.status, 429)
      assert.equal(refused.headers.get('retry-after'), '1')
      assert.equal(await refused.text(), 'You must wait 1000 ms before you can make requests.')
    })
    assert.equal(downstream, 2)
    assert.deepEqual(seen, [
      { quota: { allowed: true, timeLeft: 0, remaining: 1, limit: 4, resetAfter: 1500, key: '127.0.0.1' }, rateLimit: null },
      { quota: null, rateLimit: null },
    ])
  })

  it('a handler is a Koa middleware with the answer, awaited; what it or a message throws goes to Koa', async () => {
    const clock = { now: 0 }
    const limiter = () => clocked(new FixedWindow({ limits: [{ duration: 10_000, limit: 1 }] }), clock)
    const refusal = async (options) =>
      withApp(catchingApp({ limiter: limiter(), ...options }), async (url) => {
        assert.equal((await fetch(url)).status, 200)
        const refused = await fetch(url)
        return [refused.status, refused.headers.get('retry-after'), refused.headers.get('ratelimit'), await refused.text()]
      })
    const handler = async (ctx, next, answer) => {
      await new Promise((resolve) => setImmediate(resolve))
      assert.equal(ctx.status, 429) // statusCode, set before
      ctx.body = { retryInMs: answer.timeLeft, key: answer.key, remaining: answer.remaining }
    }
    assert.deepEqual(await refusal({ handler }), [429, '10', 'limit=1, remaining=0, reset=10', '{"retryInMs":10000,"key":"127.0.0.1","remaining":0}'])
    const failing = Object.assign(new Error('no handler'), { code: 'HANDLER_FAILED' })
    for (const broken of [() => { throw failing }, async () => { throw failing }]) {
      assert.deepEqual(await refusal({ handler: broken }), [500, '10', 'limit=1, remaining=0, reset=10', 'error: HANDLER_FAILED'])
    }
    for (const [message, code] of [[() => { throw Object.assign(new Error('no message'), { code: 'MESSAGE_FAILED' }) }, 'MESSAGE_FAILED'], [() => ({ big: 1n }), 'ERR_INVALID_ARGUMENT']]) {
      assert.deepEqual(await refusal({ message }), [500, '10', 'limit=1, remaining=0, reset=10', `error: ${code}`])
    }
  })
})

describe('the key, and the proxy settings', () => {
  it("is ctx.ip, with IPv6 clients grouped by /56 behind a proxy (app.proxy, app.maxIpsCount); ipv6Subnet 64 or false splits them", async () => {
    const keysOf = async (options, addresses) => {
      const app = new Koa({ proxy: true, maxIpsCount: 1 })
      app.use(rateLimit({ limiter: new TokenBucket({ capacity: 100, refillInterval: 1000 }), ...options }))
      app.use((ctx) => (ctx.body = [ctx.state.rateLimit.key, ctx.state.rateLimit.remaining]))
      return withApp(app, async (url) => {
        const seen = []
        // The client's own first entry is ignored: maxIpsCount 1 reads the proxy's, the last.
        for (const ip of addresses) seen.push(await (await fetch(url, { headers: { 'x-forwarded-for': `6.6.6.6, ${ip}` } })).json())
        return seen
      })
    }
    const addresses = ['2001:db8:1:2ab::1', '2001:db8:1:2cd:ffff::9', '2001:db8:1:300::1', '::ffff:10.0.0.1', '10.0.0.1']
    assert.deepEqual(await keysOf({}, addresses), [
      ['2001:db8:1:200::/56', 99],
      ['2001:db8:1:200::/56', 98],
      ['2001:db8:1:300::/56', 99],
      ['10.0.0.1', 99],
      ['10.0.0.1', 98],
    ])
    assert.deepEqual((await keysOf({ ipv6Subnet: 64 }, addresses.slice(0, 2))).map(([key]) => key), ['2001:db8:1:2ab::/64', '2001:db8:1:2cd::/64'])
    assert.deepEqual((await keysOf({ ipv6Subnet: false }, addresses.slice(0, 2))).map(([key]) => key), ['2001:db8:1:2ab::1', '2001:db8:1:2cd:ffff::9'])
  })

  it('refuses a request without an address (an empty ctx.ip) instead of putting it in one shared limit', async () => {
    const thrown = []
    const app = new Koa()
    app.use(async (ctx, next) => {
      try {
        await next()
      } catch (error) {
        thrown.push([error.name, error.code, error.message])
        ctx.status = 500
      }
    })
    app.use((ctx, next) => {
      // What Koa's ctx.ip gives when the socket has no address (any more).
      if (ctx.query.anonymous) Object.defineProperty(ctx.request, 'ip', { get: () => '' })
      return next()
    })
    app.use(rateLimit({ limiter: new FixedWindow({ limits: [{ duration: 60_000, limit: 5 }] }) }))
    app.use((ctx) => (ctx.body = ctx.state.rateLimit.key))
    await withApp(app, async (url) => {
      assert.equal((await fetch(`${url}/?anonymous=1`)).status, 500)
      assert.equal(await (await fetch(url)).text(), '127.0.0.1')
    })
    assert.deepEqual(thrown, [['TypeError', 'ERR_INVALID_ID', '`key(ctx)` gave no id (is `ctx.ip` set? behind a proxy, set `app.proxy` and `app.maxIpsCount`)']])
  })

  /** What `log` received over `requests` (each a headers object) to a Koa app made with `koaOptions`. */
  async function warnings(options, koaOptions, requests) {
    const logged = []
    const app = new Koa(koaOptions)
    app.use(rateLimit({ limiter: new FixedWindow({ limits: [{ duration: 60_000, limit: 100 }] }), log: (...args) => logged.push(args), ...options }))
    app.use((ctx) => (ctx.body = ctx.ip))
    await withApp(app, async (url) => {
      for (const headers of requests) assert.equal((await fetch(url, { headers })).status, 200)
    })
    return logged
  }
  const forwarded = Array(5).fill({ 'x-forwarded-for': '203.0.113.7' })

  it("warns once when requests carry X-Forwarded-For and app.proxy is off (every client shares the proxy's limit)", async () => {
    const logged = await warnings({}, {}, forwarded)
    assert.equal(logged.length, 1)
    assert.equal(logged[0].length, 1)
    assert.match(logged[0][0], /^ratekeeper\/koa rateLimit: requests carry an X-Forwarded-For header but Koa's app\.proxy is false/)
    assert.match(logged[0][0], /new Koa\(\{ proxy: true, maxIpsCount: 1 \}\)/)
    // Koa's proxyIpHeader is the header watched.
    const custom = await warnings({}, { proxyIpHeader: 'X-Real-IP' }, [{ 'x-real-ip': '203.0.113.7' }])
    assert.match(custom[0][0], /carry an X-Real-IP header/)
  })

  it('warns once when app.proxy is on with maxIpsCount 0 (clients choose their own key)', async () => {
    const logged = await warnings({}, { proxy: true }, forwarded)
    assert.equal(logged.length, 1)
    assert.match(logged[0][0], /^ratekeeper\/koa rateLimit: Koa's app\.proxy is true and app\.maxIpsCount is 0/)
    assert.match(logged[0][0], /new Koa\(\{ proxy: true, maxIpsCount: 1 \}\)/)
  })

  it('is silent with validate: false, with a key of your own, with maxIpsCount set, with a header a client cannot write, and without a proxy', async () => {
    assert.deepEqual(await warnings({ validate: false }, {}, forwarded), [])
    assert.deepEqual(await warnings({ validate: false }, { proxy: true }, forwarded), [])
    assert.deepEqual(await warnings({ key: (ctx) => ctx.get('x-user') || 'anonymous' }, {}, forwarded), [])
    assert.deepEqual(await warnings({}, { proxy: true, maxIpsCount: 1 }, forwarded), [])
    assert.deepEqual(await warnings({}, { proxy: true, proxyIpHeader: 'X-Real-IP' }, [{ 'x-real-ip': '203.0.113.7' }]), [])
    assert.deepEqual(await warnings({}, {}, [{}, {}]), [])
  })
})

describe('when the limiter fails', () => {
  const unreachable = () => new RedisRateLimiter({ client: { port: 1, commandTimeoutMs: 200 }, interval: 1000, maxInInterval: 1 })

  it("throws Redis errors to Koa, or fails open or closed as asked, and logs once a minute ('allow' and 'block')", async () => {
    const limiter = unreachable()
    for (const [onError, status, body] of [['next', 500, 'error: ERR_STORE_UNAVAILABLE'], ['allow', 200, 'ok'], ['block', 503, 'Rate limiter unavailable']]) {
      const logged = []
      await withApp(catchingApp({ limiter, onError, log: (...args) => logged.push(args) }), async (url) => {
        for (let i = 0; i < 6; i++) {
          const response = await fetch(url)
          assert.equal(response.status, status, onError)
          assert.equal(await response.text(), body, onError)
        }
      })
      if (onError === 'next') {
        assert.deepEqual(logged, [])
        continue
      }
      assert.equal(logged.length, 1, onError)
      assert.match(logged[0][0], /^ratekeeper\/koa rateLimit: the limiter failed \(ERR_STORE_UNAVAILABLE\): requests are (let through unchecked|refused with 503)\. Reported at most once a minute\.$/)
      assert.equal(logged[0][1].code, 'ERR_STORE_UNAVAILABLE')
    }
  })

  it("follows the limiter's onStoreError: answers from memory while its redis-server is down", async () => {
    const server = await startRedis()
    try {
      const clock = { now: 1000 }
      const options = { client: { url: server.url, commandTimeoutMs: 500 }, namespace: 'koa:fallback:', onStoreError: 'memory', limits: [{ duration: 3_600_000, limit: 2 }] }
      const limiter = clocked(new FixedWindow(options), clock)
      const answers = []
      const answerApp = new Koa()
      answerApp.use(rateLimit({ limiter, key: () => 'k' }))
      answerApp.use((ctx) => (ctx.body = { store: ctx.state.rateLimit.store ?? 'redis', remaining: ctx.state.rateLimit.remaining }))
      await withApp(answerApp, async (url) => {
        answers.push([(await fetch(url)).status])
        assert.equal(await server.cli('EXISTS', 'koa:fallback:k'), '1')
        await server.stop()
        for (let i = 0; i < 3; i++) {
          const response = await fetch(url)
          answers.push([response.status, response.status === 200 ? await response.json() : await response.text()])
        }
      })
      // Redis counted the first; memory (from empty) the next two, and refused the third.
      assert.deepEqual(answers, [
        [200],
        [200, { store: 'memory', remaining: 1 }],
        [200, { store: 'memory', remaining: 0 }],
        [429, 'You must wait 3599000 ms before you can make requests.'],
      ])
    } finally {
      await server.stop()
    }
  })

  it("throws an invalid key or weight to Koa even with onError: 'allow' (a client must not escape the limit with a bad id)", async () => {
    const logged = []
    const app = catchingApp({
      limiter: new RateLimiter({ interval: 60_000, maxInInterval: 1 }),
      key: (ctx) => ctx.get('x-api-key') || undefined,
      weight: (ctx) => Number(ctx.get('x-cost') || 1),
      onError: 'allow',
      log: (...args) => logged.push(args),
    })
    await withApp(app, async (url) => {
      const body = async (headers) => (await fetch(url, { headers })).text()
      assert.equal(await body({}), 'error: ERR_INVALID_ID')
      assert.equal(await body({ 'x-api-key': 'k'.repeat(2000) }), 'error: ERR_INVALID_ID')
      for (const cost of ['0', '1.5', 'x', '-1']) assert.equal(await body({ 'x-api-key': 'a', 'x-cost': cost }), 'error: ERR_INVALID_ARGUMENT', cost)
      assert.equal(await body({ 'x-api-key': 'a' }), 'ok')
    })
    assert.deepEqual(logged, [])
  })
})

describe('options', () => {
  const limiter = new RateLimiter({ interval: 1000, maxInInterval: 1 })

  it("takes the Express middleware's options and checks each, with codes", () => {
    assert.throws(() => rateLimit(), { name: 'TypeError', code: 'ERR_INVALID_OPTION', message: /ratekeeper\/koa rateLimit options must be an object/ })
    assert.throws(() => rateLimit({ limiter: {} }), { code: 'ERR_INVALID_OPTION' })
    const bad = {
      TypeError: [
        { key: 'ip' },
        { ipv6Subnet: '56' },
        { key: (ctx) => ctx.ip, ipv6Subnet: 48 },
        { weight: '2' },
        { weight: Object.create(null) },
        { headers: 'draft-9' },
        { headers: ['draft-7', 'draft-8'] },
        { identifier: '' },
        { statusCode: '429' },
        { message: 'slow', handler: () => {} },
        { message: { big: 1n } },
        { handler: 'refuse' },
        { skip: 'always' },
        { skipFailedRequests: 'yes' },
        { skipSuccessfulRequests: true, limiter: { consume: async () => ({}) } },
        { requestPropertyName: '' },
        { onError: 'throw' },
        { log: console },
        { validate: 'no' },
      ],
      RangeError: [{ ipv6Subnet: 31 }, { weight: 0 }, { weight: 1.5 }, { weight: Number.NaN }, { weight: 2 ** 60 }, { statusCode: 42 }, { statusCode: Infinity }],
    }
    for (const [name, list] of Object.entries(bad)) {
      for (const options of list) {
        assert.throws(() => rateLimit({ limiter, ...options }), { name, code: 'ERR_INVALID_OPTION' }, String(Object.keys(options)))
      }
    }
    // The messages speak of Koa's ctx.
    assert.throws(() => rateLimit({ limiter, key: 'ip' }), { message: '`key` must be a function (ctx) => id' })
    assert.throws(() => rateLimit({ limiter, handler: 'refuse' }), { message: '`handler` must be a function (ctx, next, answer) => void' })
    // express-rate-limit's options are no options here.
    for (const name of ['windowMs', 'max', 'limit', 'store', 'standardHeaders', 'keyGenerator']) {
      assert.throws(() => rateLimit({ limiter, [name]: 1 }), { name: 'TypeError', code: 'ERR_UNKNOWN_OPTION', message: new RegExp(`unknown option \`${name}\` in ratekeeper/koa rateLimit options`) })
    }
    for (const options of [
      { key: (ctx) => ctx.ip, weight: () => 1, headers: ['draft-6', 'draft-7', 'legacy', 'x-rate-limit'], identifier: () => 'api' },
      { ipv6Subnet: false, weight: 3, headers: false, identifier: 'api', statusCode: 503, message: { error: 'slow' } },
      { ipv6Subnet: 32, headers: true, handler: () => {}, skip: () => false, skipFailedRequests: true, skipSuccessfulRequests: true },
      { ipv6Subnet: 64, headers: [], requestPropertyName: 'quota', onError: 'allow', log: () => {}, validate: false },
      { key: undefined, ipv6Subnet: undefined, headers: undefined, message: undefined, handler: undefined },
    ]) {
      const middleware = rateLimit({ limiter, ...options })
      assert.equal(typeof middleware, 'function')
      assert.equal(middleware.length, 2) // (ctx, next)
    }
  })
})

describe('the entries', () => {
  it('ratekeeper/koa is the same rateLimit from CommonJS and ES modules, and loads no Koa', async () => {
    assert.equal(require('ratekeeper/koa').rateLimit, rateLimit)
    const esm = await import('ratekeeper/koa')
    assert.equal(esm.rateLimit, rateLimit)
    assert.equal(esm.default, koa)
    assert.deepEqual(Object.keys(koa), ['rateLimit'])
    // Koa stays the app's: the library never requires it (a child process sees what loads).
    const { stdout } = await run(['-e', "require('./koa.js'); console.log(Object.keys(require.cache).filter((file) => /node_modules[\\\\/]koa[\\\\/]/.test(file)).length)"])
    assert.equal(stdout.trim(), '0')
  })
})

/** Runs node with `args` in the repository; resolves its output. */
function run(args, env = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: path.join(__dirname, '..'), env: { ...process.env, ...env } })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk) => (stdout += chunk))
    child.stderr.on('data', (chunk) => (stderr += chunk))
    child.on('error', reject)
    child.on('close', (code) => (code === 0 ? resolve({ stdout, stderr }) : reject(new Error(`exit ${code}: ${stderr}`))))
  })
}

describe('examples/koa.js', () => {
  const children = []
  after(() => children.forEach((child) => child.kill()))

  /** Starts the example; resolves its URL once it prints it and the curl line. */
  function start(env) {
    const { REDIS_URL, ...inherited } = process.env
    const child = spawn(process.execPath, [path.join(__dirname, '..', 'examples', 'koa.js')], { env: { ...inherited, PORT: '0', ...env }, stdio: ['ignore', 'pipe', 'inherit'] })
    children.push(child)
    let output = ''
    return new Promise((resolve, reject) => {
      child.stdout.on('data', (chunk) => {
        output += chunk
        const match = output.match(/listening on (http:\/\/127\.0\.0\.1:\d+\/) \((Redis|in-memory) store\)/)
        if (match && output.includes('curl')) resolve({ url: match[1], store: match[2], child })
      })
      child.on('exit', (code) => reject(new Error(`the example exited with ${code}: ${output}`)))
    })
  }

  for (const store of ['memory', 'Redis']) {
    it(`limits /hello by client, GET 1 and POST 2 of 5, never /health, on ${store}`, async () => {
      const { url, store: printed, child } = await start(store === 'Redis' ? { REDIS_URL: redis.server.url } : {})
      try {
        assert.equal(printed, store === 'Redis' ? 'Redis' : 'in-memory')
        const seen = []
        for (const [method, route] of [['GET', 'hello'], ['POST', 'hello'], ['GET', 'health'], ['GET', 'hello'], ['GET', 'hello']]) {
          const response = await fetch(url + route, { method })
          seen.push([method, route, response.status, response.headers.get('ratelimit'), await response.text()])
        }
        assert.deepEqual(seen.map(([method, route, status, header]) => [method, route, status, header?.replace(/, reset=\d+$/, '')]), [
          ['GET', 'hello', 200, 'limit=5, remaining=4'],
          ['POST', 'hello', 200, 'limit=5, remaining=2'],
          ['GET', 'health', 200, undefined],
          ['GET', 'hello', 200, 'limit=5, remaining=1'],
          ['GET', 'hello', 200, 'limit=5, remaining=0'],
        ])
        assert.deepEqual(JSON.parse(seen[0][4]), { hello: 'world', left: 4 })
        assert.equal(seen[2][4], 'ok')
        const refused = await fetch(`${url}hello`)
        assert.equal(refused.status, 429)
        assert.match(refused.headers.get('retry-after'), /^(1[0-2]|[1-9])$/)
        assert.match(await refused.text(), /^You must wait \d+ ms before you can make requests\.$/)
        if (store === 'Redis') {
          // The client's key (the token bucket's default namespace) is on the server, with a TTL.
          assert.ok(Number(await redis.server.cli('PTTL', 'ratekeeper:token:127.0.0.1')) > 0)
        }
      } finally {
        child.kill()
      }
    })
  }
})
