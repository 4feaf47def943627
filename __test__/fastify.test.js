'use strict'

// The store for @fastify/rate-limit (`ratekeeper/fastify`): the plugin itself in real Fastify 5
// apps, with the store in memory (the app's clock, Date.now(), driven by mock timers) and on a
// real redis-server (time passing by moving the keys' TTLs), each beside the plugin's own store
// there (LocalStore, RedisStore), which is the oracle: the same requests get the same answers.

const { describe, it, after, mock } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { createRequire } = require('node:module')
const { spawn, execFileSync } = require('node:child_process')
const Fastify = require('fastify')
const rateLimit = require('@fastify/rate-limit')
const LocalStore = require('@fastify/rate-limit/store/LocalStore')
const PluginRedisStore = require('@fastify/rate-limit/store/RedisStore')
const IORedis = require('ioredis')
const { createClient } = require('redis')

const { ratekeeperStore } = require('../fastify.js')
const { RedisStore } = require('..')
const { useRedisServer, startRedis, startCluster, clusterSkip } = require('./helpers/redis-server.js')
const { random } = require('./helpers/random.js')

const redis = useRedisServer()
/** The test's own client (made on first use): the plugin's RedisStore's, and the one that moves TTLs. */
let testClient
const ioredisClient = () => (testClient ??= new IORedis({ host: redis.server.host, port: redis.server.port }))
after(() => testClient?.disconnect())

const SECOND = 1000
const MINUTE = 60 * SECOND
const T0 = 1_700_000_000_000
/** The longest window the expiring counter takes (src/time.rs). */
const MAX_DURATION_MS = 1e12

let nameSpaceCounter = 0
const uniqueNameSpace = (who) => `fy-${who}-${++nameSpaceCounter}-`

// Time passing on Redis, where the server's clock decides: every key under a pattern loses `ms`
// of its TTL, and a key whose TTL runs out is deleted, as if `ms` had passed.
const SHIFT_TTLS = `
local ms = tonumber(ARGV[2])
for _, key in ipairs(redis.call('KEYS', ARGV[1])) do
  local left = redis.call('PTTL', key)
  if left > ms then
    redis.call('PEXPIRE', key, left - ms)
  elseif left >= 0 then
    redis.call('DEL', key)
  end
end`

async function shiftTtls(nameSpaces, ms) {
  for (const nameSpace of nameSpaces) await ioredisClient().eval(SHIFT_TTLS, 0, `${nameSpace}*`, ms)
}

/**
 * Where the counts live, for the app tests: the plugin's options for our store (`ours`) and for
 * the plugin's own store there (`theirs`), and `advance(ms, side)`, time passing for one of them.
 */
const backends = {
  'in memory': (t) => {
    mock.timers.enable({ apis: ['Date'], now: T0 })
    t.after(() => mock.timers.reset())
    return {
      ours: () => ({ store: ratekeeperStore() }),
      theirs: () => ({}),
      advance: async (ms) => mock.timers.tick(ms),
    }
  },
  'on Redis': () => {
    const nameSpaces = { ours: uniqueNameSpace('ours'), theirs: uniqueNameSpace('theirs') }
    return {
      nameSpaces,
      ours: () => ({ store: ratekeeperStore({ client: redis.server.url, nameSpace: nameSpaces.ours }) }),
      theirs: () => ({ redis: ioredisClient(), nameSpace: nameSpaces.theirs }),
      advance: (ms, side) => shiftTtls([nameSpaces[side]], ms),
    }
  },
}

/**
 * A response as one line: the status, `remaining/limit reset <s>` (or `-` without the plugin's
 * headers), `retry <s>`, and the body (an error's code and message).
 */
function summary(response) {
  const headers = response.headers
  const limits = headers['x-ratelimit-limit'] === undefined ? '-' : `${headers['x-ratelimit-remaining']}/${headers['x-ratelimit-limit']} reset ${headers['x-ratelimit-reset']}`
  const retry = headers['retry-after'] === undefined ? '' : ` retry ${headers['retry-after']}`
  let text = response.body
  if (response.statusCode >= 400) {
    const { code, message } = response.json()
    text = code === undefined ? message : `${code} ${message}`
  }
  return `${response.statusCode} ${limits}${retry}: ${text}`
}

/** A Fastify app on the plugin with `options` (registered before `routes(app)`), closed after the test. */
async function limitedApp(t, options, routes) {
  const app = Fastify()
  t.after(() => app.close())
  await app.register(rateLimit, options)
  routes(app)
  await app.ready()
  return app
}

/**
 * Runs `steps` on an app (see `limitedApp`): a step is a request (a URL or inject's options), a
 * number of ms to `advance`, or a function to call. Resolves the requests' summaries.
 */
async function trace(t, options, routes, steps, advance) {
  const app = await limitedApp(t, options, routes)
  const answers = []
  for (const step of steps) {
    if (typeof step === 'number') await advance(step)
    else if (typeof step === 'function') await step()
    else answers.push(summary(await app.inject(step)))
  }
  return answers
}

/** The same steps through the plugin's own store and through ours: the same answers, resolved. */
async function sameAsPlugin(t, backend, options, routes, steps) {
  const theirs = await trace(t, { ...options, ...backend.theirs() }, routes, steps, (ms) => backend.advance(ms, 'theirs'))
  const ours = await trace(t, { ...options, ...backend.ours() }, routes, steps, (ms) => backend.advance(ms, 'ours'))
  assert.deepEqual(ours, theirs)
  return ours
}

const okRoute = (url, config) => (app) => app.get(url, config ? { config } : {}, async () => 'ok')

/**
 * `store.incr` (or `read`) as a Promise of its `{ current, ttl }` (read at once: LocalStore
 * answers with the object it goes on changing).
 */
function call(store, method, key, timeWindow, max) {
  return new Promise((resolve, reject) => {
    store[method](key, (error, answer) => (error ? reject(error) : resolve({ current: answer.current, ttl: answer.ttl })), timeWindow, max)
  })
}

for (const [where, backendFor] of Object.entries(backends)) {
  describe(`@fastify/rate-limit with ratekeeperStore ${where}, beside the plugin's own store`, () => {
    it("lets 3 requests through, answers the 4th 429 with the plugin's headers and message, and lets the client in again when the window ends", async (t) => {
      const backend = backendFor(t)
      const answers = await sameAsPlugin(t, backend, { max: 3, timeWindow: MINUTE }, okRoute('/'), [
        '/', 20 * SECOND, '/', '/', '/', 39 * SECOND, '/', SECOND, '/',
      ])
      // The window starts at the first request and lasts a minute.
      assert.deepEqual(answers, [
        '200 2/3 reset 60: ok',
        '200 1/3 reset 40: ok',
        '200 0/3 reset 40: ok',
        '429 0/3 reset 40 retry 40: Rate limit exceeded, retry in 40 seconds',
        '429 0/3 reset 1 retry 1: Rate limit exceeded, retry in 1 second',
        '200 2/3 reset 60: ok',
      ])
    })

    it("counts a route with its own limit apart, and leaves a route with `rateLimit: false` alone", async (t) => {
      const backend = backendFor(t)
      const routes = (app) => {
        okRoute('/')(app)
        okRoute('/strict', { rateLimit: { max: 1, timeWindow: 10 * SECOND } })(app)
        okRoute('/free', { rateLimit: false })(app)
      }
      const answers = await sameAsPlugin(t, backend, { max: 3, timeWindow: MINUTE }, routes, [
        '/strict', '/strict', '/', '/free', '/free', 10 * SECOND, '/strict', '/',
      ])
      assert.deepEqual(answers, [
        '200 0/1 reset 10: ok',
        '429 0/1 reset 10 retry 10: Rate limit exceeded, retry in 10 seconds',
        '200 2/3 reset 60: ok',
        '200 -: ok',
        '200 -: ok',
        '200 0/1 reset 10: ok',
        '200 1/3 reset 50: ok',
      ])
      if (backend.nameSpaces) {
        // The keys are the plugin's RedisStore's, after the prefix, and each has a TTL.
        const keysOf = async (nameSpace) => {
          const keys = (await ioredisClient().keys(`${nameSpace}*`)).sort()
          const entries = []
          for (const key of keys) entries.push([key.slice(nameSpace.length), await ioredisClient().get(key), (await ioredisClient().pttl(key)) > 0])
          return entries
        }
        const ours = await keysOf(backend.nameSpaces.ours)
        assert.deepEqual(ours, [['127.0.0.1', '2', true], ['GET/strict-127.0.0.1', '1', true]])
        assert.deepEqual(await keysOf(backend.nameSpaces.theirs), ours)
      }
    })

    it('answers 403 past `ban` and calls onBanReach', async (t) => {
      const backend = backendFor(t)
      let bans = 0
      const answers = await sameAsPlugin(t, backend, { max: 1, ban: 1, timeWindow: MINUTE, onBanReach: () => bans++ }, okRoute('/'), ['/', '/', '/', '/'])
      assert.deepEqual(answers, [
        '200 0/1 reset 60: ok',
        '429 0/1 reset 60 retry 60: Rate limit exceeded, retry in 1 minute',
        '403 0/1 reset 60 retry 60: Rate limit exceeded, retry in 1 minute',
        '403 0/1 reset 60 retry 60: Rate limit exceeded, retry in 1 minute',
      ])
      assert.equal(bans, 4, 'twice through each store')
    })

    it('counts the keys `keyGenerator` gives apart, and does not count a key of the allowList', async (t) => {
      const backend = backendFor(t)
      const allowList = []
      const as = (user) => ({ url: '/', headers: { 'x-user': user } })
      const answers = await sameAsPlugin(
        t,
        backend,
        { max: 2, timeWindow: MINUTE, keyGenerator: (req) => req.headers['x-user'], allowList },
        okRoute('/'),
        [
          () => allowList.splice(0, allowList.length, 'admin'),
          as('ada'), as('ada'), as('ada'), as('bob'), as('admin'), as('admin'), as('admin'),
          // The plugin reads its allowList each time: off it, admin's first request is its first counted.
          () => allowList.splice(0),
          as('admin'),
        ],
      )
      assert.deepEqual(answers, [
        '200 1/2 reset 60: ok',
        '200 0/2 reset 60: ok',
        '429 0/2 reset 60 retry 60: Rate limit exceeded, retry in 1 minute',
        '200 1/2 reset 60: ok',
        '200 -: ok',
        '200 -: ok',
        '200 -: ok',
        '200 1/2 reset 60: ok',
      ])
    })

    it('with continueExceeding, restarts the window at each request over the limit', async (t) => {
      const backend = backendFor(t)
      const answers = await sameAsPlugin(t, backend, { max: 1, timeWindow: 10 * SECOND, continueExceeding: true }, okRoute('/'), [
        '/', 5 * SECOND, '/', 9 * SECOND, '/', 9 * SECOND, '/', 10 * SECOND, '/',
      ])
      assert.deepEqual(answers, [
        '200 0/1 reset 10: ok',
        '429 0/1 reset 10 retry 10: Rate limit exceeded, retry in 10 seconds',
        '429 0/1 reset 10 retry 10: Rate limit exceeded, retry in 10 seconds',
        '429 0/1 reset 10 retry 10: Rate limit exceeded, retry in 10 seconds',
        '200 0/1 reset 10: ok',
      ])
    })

    it('with exponentialBackoff, doubles the wait at each request over the limit', async (t) => {
      const backend = backendFor(t)
      const answers = await sameAsPlugin(t, backend, { max: 1, timeWindow: SECOND, exponentialBackoff: true }, okRoute('/'), [
        '/', '/', '/', '/', SECOND, '/',
      ])
      assert.deepEqual(answers.slice(0, 4), [
        '200 0/1 reset 1: ok',
        '429 0/1 reset 1 retry 1: Rate limit exceeded, retry in 1 second',
        '429 0/1 reset 2 retry 2: Rate limit exceeded, retry in 2 seconds',
        '429 0/1 reset 4 retry 4: Rate limit exceeded, retry in 4 seconds',
      ])
      // A second later: the plugin's LocalStore (and ours in memory) has started a new window, a
      // second after the last request; its RedisStore (and ours on Redis) keeps the key 4 s.
      assert.equal(answers[4], where === 'in memory' ? '200 0/1 reset 1: ok' : '429 0/1 reset 8 retry 8: Rate limit exceeded, retry in 8 seconds')
    })

    it('reads the count without counting for createRateLimit with `{ increment: false }`', async (t) => {
      const backend = backendFor(t)
      const routes = (app) => {
        const check = app.createRateLimit()
        const show = ({ remaining, ttlInSeconds }) => `remaining ${remaining} ttl ${ttlInSeconds}`
        app.get('/peek', async (req) => show(await check(req, { increment: false })))
        app.get('/consume', async (req) => show(await check(req)))
      }
      const answers = await sameAsPlugin(t, backend, { global: false, max: 2, timeWindow: MINUTE }, routes, [
        '/peek', '/consume', 30 * SECOND, '/peek', '/consume', '/peek', 30 * SECOND, '/peek',
      ])
      assert.deepEqual(answers, [
        '200 -: remaining 2 ttl 0',
        '200 -: remaining 1 ttl 60',
        '200 -: remaining 1 ttl 30',
        '200 -: remaining 0 ttl 30',
        '200 -: remaining 0 ttl 30',
        '200 -: remaining 2 ttl 0',
      ])
    })

    it('answers 500 with the code of a bad key from keyGenerator, or lets the request through with skipOnError', async (t) => {
      const backend = backendFor(t)
      for (const skipOnError of [false, true]) {
        const app = await limitedApp(t, { ...backend.ours(), max: 1, timeWindow: MINUTE, keyGenerator: () => ({ user: 'ada' }), skipOnError }, okRoute('/'))
        assert.equal(
          summary(await app.inject('/')),
          skipOnError ? '200 1/1 reset 0: ok' : '500 -: ERR_INVALID_ID a key must be a string or a finite number (what the plugin\'s `keyGenerator` returns), got an object',
        )
      }
    })
  })
}

describe('ratekeeperStore in memory', () => {
  it("follows the app's clock (Date.now()): mock timers end the window", async (t) => {
    mock.timers.enable({ apis: ['Date'], now: T0 })
    t.after(() => mock.timers.reset())
    const Store = ratekeeperStore()
    const store = new Store({ timeWindow: MINUTE })
    assert.deepEqual(await call(store, 'incr', 'k', MINUTE, 5), { current: 1, ttl: MINUTE })
    mock.timers.tick(MINUTE - 1)
    assert.deepEqual(await call(store, 'incr', 'k', MINUTE, 5), { current: 2, ttl: 1 })
    mock.timers.tick(1)
    assert.deepEqual(await call(store, 'read', 'k', MINUTE, 5), { current: 0, ttl: 0 })
    assert.deepEqual(await call(store, 'incr', 'k', MINUTE, 5), { current: 1, ttl: MINUTE })
  })

  it("keeps two apps' counts apart (each its own store class)", async (t) => {
    const statuses = []
    const apps = [await limitedApp(t, { store: ratekeeperStore(), max: 1 }, okRoute('/')), await limitedApp(t, { store: ratekeeperStore(), max: 1 }, okRoute('/'))]
    for (const app of [apps[0], apps[1], apps[0]]) statuses.push((await app.inject('/')).statusCode)
    assert.deepEqual(statuses, [200, 200, 429])
  })
})

// Seeded random sequences of hits and reads, the same through the plugin's store and ours.
const MODES = [
  { continueExceeding: false, exponentialBackoff: false },
  { continueExceeding: true, exponentialBackoff: false },
  { continueExceeding: false, exponentialBackoff: true },
  // The plugin's stores: continueExceeding wins.
  { continueExceeding: true, exponentialBackoff: true },
]
const modeName = (mode) => Object.keys(mode).filter((name) => mode[name]).join(' and ') || 'plain'

describe("the store's answers, step by step, against the plugin's own stores", () => {
  for (const mode of MODES) {
    it(`in memory, as LocalStore's at every step (mock timers): ${modeName(mode)}`, async (t) => {
      mock.timers.enable({ apis: ['Date'], now: T0 })
      t.after(() => mock.timers.reset())
      const configs = [
        { max: 0, timeWindow: SECOND, steps: 600 },
        { max: 2, timeWindow: SECOND, steps: 600 },
        { max: 5, timeWindow: MINUTE, steps: 600 },
        // A window of 0 ms: every hit is the first of its own.
        { max: 1, timeWindow: 0, steps: 50 },
      ]
      for (const [seed, { max, timeWindow, steps }] of configs.entries()) {
        const theirs = new LocalStore(mode.continueExceeding, mode.exponentialBackoff)
        const ours = new (ratekeeperStore())({ ...mode, timeWindow })
        const next = random(seed + 1)
        let overMax = 0
        let restarts = 0
        /** Each key's count at its last hit. */
        const previous = {}
        for (let step = 0; step < steps; step++) {
          // Mostly short gaps (hits in one window, backoffs that grow), sometimes a window or more.
          const gap = next() < 0.5 ? 0 : Math.floor(next() ** 3 * 1.5 * (timeWindow || SECOND))
          mock.timers.tick(gap)
          const key = `k${Math.floor(next() * 3)}`
          const method = next() < 0.15 ? 'read' : 'incr'
          const expected = await call(theirs, method, key, timeWindow, max)
          const actual = await call(ours, method, key, timeWindow, max)
          assert.deepEqual(actual, expected, `max ${max}, timeWindow ${timeWindow}, step ${step}: ${method} ${key} after ${gap} ms`)
          if (expected.current > max) overMax++
          if (method === 'incr' && expected.current === 1 && previous[key] > 1) restarts++
          if (method === 'incr') previous[key] = expected.current
        }
        // The sequences go over max, and windows end, many times.
        if (timeWindow > 0) assert.ok(overMax > 20 && restarts > 20, `over max ${overMax} times, windows restarted ${restarts} times`)
      }
    })
  }

  for (const mode of MODES) {
    it(`on Redis, as RedisStore's at every step (the ttl within the steps' own time): ${modeName(mode)}`, async () => {
      for (const [seed, max] of [0, 2].entries()) {
        const nameSpaces = { theirs: uniqueNameSpace('theirs'), ours: uniqueNameSpace('ours') }
        const timeWindow = MINUTE
        const theirs = new PluginRedisStore(mode.continueExceeding, mode.exponentialBackoff, ioredisClient(), nameSpaces.theirs)
        const ours = new (ratekeeperStore({ client: redis.server.url, nameSpace: nameSpaces.ours }))({ ...mode, timeWindow })
        const next = random(100 + seed)
        let overMax = 0
        let restarts = 0
        /** Each key's count at its last hit. */
        const previous = {}
        // The two stores' keys live on Redis's real clock: a TTL they set in one step, and read in
        // another, differ by at most those steps' lengths (both calls of a step run together).
        let slowestStepMs = 0
        for (let step = 0; step < 150; step++) {
          // Time moves in quarters of the window: a key ends for both stores or for neither.
          const gap = next() < 0.5 ? 0 : Math.floor(next() * 5) * (timeWindow / 4)
          if (gap > 0) await shiftTtls(Object.values(nameSpaces), gap)
          const key = `k${Math.floor(next() * 8)}`
          const method = next() < 0.15 ? 'read' : 'incr'
          const started = process.hrtime.bigint()
          const [expected, actual] = await Promise.all([call(theirs, method, key, timeWindow, max), call(ours, method, key, timeWindow, max)])
          slowestStepMs = Math.max(slowestStepMs, Number(process.hrtime.bigint() - started) / 1e6)
          const what = `max ${max}, step ${step}: ${method} ${key} after ${gap} ms: ours ${JSON.stringify(actual)}, theirs ${JSON.stringify(expected)}`
          assert.ok(expected.ttl < MAX_DURATION_MS, `the sequence stays below the longest window: ${what}`)
          assert.equal(actual.current, expected.current, what)
          assert.ok(Math.abs(actual.ttl - expected.ttl) <= 2 * Math.ceil(slowestStepMs) + 2, `${what} (slowest step ${slowestStepMs} ms)`)
          if (expected.current > max) overMax++
          if (method === 'incr' && expected.current === 1 && previous[key] > 1) restarts++
          if (method === 'incr') previous[key] = expected.current
        }
        assert.ok(overMax > 10 && restarts > 10, `over max ${overMax} times, windows restarted ${restarts} times`)
        // The same keys, each with a TTL.
        for (const nameSpace of Object.values(nameSpaces)) {
          for (const key of await ioredisClient().keys(`${nameSpace}*`)) assert.ok((await ioredisClient().pttl(key)) > 0, key)
        }
        const suffixes = async (nameSpace) => (await ioredisClient().keys(`${nameSpace}*`)).map((key) => key.slice(nameSpace.length)).sort()
        assert.deepEqual(await suffixes(nameSpaces.ours), await suffixes(nameSpaces.theirs))
      }
    })
  }

  it('on Redis, a hit is one script call, restart included: two processes\' concurrent hits over max lose none', async () => {
    // Two stores on connections of their own (as two app processes): with the add and the restart
    // in two calls, one's restart could overwrite the other's add.
    const nameSpace = uniqueNameSpace('two')
    const [first, second] = [new RedisStore(redis.server.url), new RedisStore(redis.server.url)]
    try {
      const stores = [first, second].map((client) => new (ratekeeperStore({ client, nameSpace }))({ exponentialBackoff: true }))
      await call(stores[0], 'incr', 'k', MINUTE, 3)
      const calls = () => first.stats().calls + second.stats().calls
      const callsBefore = calls()
      const answers = await Promise.all(Array.from({ length: 200 }, (_, i) => call(stores[i % 2], 'incr', 'k', MINUTE, 3)))
      assert.equal(calls() - callsBefore, 200, 'one call of the script per hit')
      assert.deepEqual(answers.map(({ current }) => current).sort((a, b) => a - b), Array.from({ length: 200 }, (_, i) => i + 2))
      assert.equal(await redis.server.cli('GET', `${nameSpace}k`), '201')
      // Each hit over max answered the backoff of its own count: 60 s * 2^(current - 4), capped.
      for (const { current, ttl } of answers) assert.equal(ttl, current > 3 ? Math.min(MINUTE * 2 ** (current - 4), MAX_DURATION_MS) : ttl, `hit ${current}`)
      const left = Number(await redis.server.cli('PTTL', `${nameSpace}k`))
      assert.ok(left > MAX_DURATION_MS - MINUTE && left <= MAX_DURATION_MS, `PTTL ${left}`)
    } finally {
      await Promise.all([first.close(), second.close()])
    }
  })

  it('on Redis, concurrent hits of one process over max lose none: the restarts of the window go in order', async () => {
    const store = new (ratekeeperStore({ client: redis.server.url, nameSpace: uniqueNameSpace('burst') }))({ continueExceeding: true })
    const answers = await Promise.all(Array.from({ length: 20 }, () => call(store, 'incr', 'k', MINUTE, 5)))
    assert.deepEqual(answers.map(({ current }) => current).sort((a, b) => a - b), Array.from({ length: 20 }, (_, i) => i + 1))
    assert.deepEqual(answers.filter(({ current }) => current > 5).map(({ ttl }) => ttl), Array(15).fill(MINUTE))
    assert.equal(await redis.server.cli('GET', `${store.prefix}k`), '20')
  })

  it('on Redis, caps an exponential backoff at 1e12 ms (31 years), where RedisStore goes on doubling', async () => {
    const Store = ratekeeperStore({ client: redis.server.url, nameSpace: uniqueNameSpace('cap') })
    const store = new Store({ exponentialBackoff: true })
    const answers = []
    for (let i = 0; i < 27; i++) answers.push(await call(store, 'incr', 'k', MINUTE, 0))
    // Hit n waits 60 s * 2^(n - 1): the 24th 5.03e11 ms, the 25th 1.007e12, past the longest window.
    assert.deepEqual(answers.slice(22).map(({ current, ttl }) => [current, ttl]), [
      [23, MINUTE * 2 ** 22],
      [24, MINUTE * 2 ** 23],
      [25, MAX_DURATION_MS],
      [26, MAX_DURATION_MS],
      [27, MAX_DURATION_MS],
    ])
    const left = Number(await redis.server.cli('PTTL', `${store.prefix}k`))
    assert.ok(left > MAX_DURATION_MS - MINUTE && left <= MAX_DURATION_MS, `PTTL ${left}`)
  })
})

describe('ratekeeperStore on Redis', () => {
  it('fails with ERR_STORE_UNAVAILABLE while Redis is down (500), or lets requests through with skipOnError, and counts again once it is back', async (t) => {
    const server = await startRedis()
    t.after(() => server.stop())
    const store = () => ratekeeperStore({ client: server.url, nameSpace: uniqueNameSpace('outage') })
    const skipping = await limitedApp(t, { store: store(), max: 2, timeWindow: MINUTE, skipOnError: true }, okRoute('/'))
    const failing = await limitedApp(t, { store: store(), max: 2, timeWindow: MINUTE }, okRoute('/'))
    assert.equal(summary(await skipping.inject('/')), '200 1/2 reset 60: ok')
    assert.equal(summary(await failing.inject('/')), '200 1/2 reset 60: ok')
    await server.kill()
    // Uncounted: the plugin's answer without a count (0 hits, no window).
    assert.equal(summary(await skipping.inject('/')), '200 2/2 reset 0: ok')
    const failed = await failing.inject('/')
    assert.equal(failed.statusCode, 500)
    assert.equal(failed.json().code, 'ERR_STORE_UNAVAILABLE')
    await server.restart()
    // The store dials again by itself: the next requests are counted on the new (empty) server.
    const deadline = Date.now() + 10 * SECOND
    let answer
    while ((answer = summary(await failing.inject('/'))) !== '200 1/2 reset 60: ok') {
      assert.ok(Date.now() < deadline, `Redis is back, yet: ${answer}`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    assert.equal(summary(await failing.inject('/')), '200 0/2 reset 60: ok')
  })

  it('shares the counts between two app instances on one Redis (real HTTP), each with its own client form', async (t) => {
    const nameSpace = uniqueNameSpace('shared')
    const client = new IORedis({ host: redis.server.host, port: redis.server.port, lazyConnect: true })
    t.after(() => client.disconnect())
    const urls = []
    for (const store of [ratekeeperStore({ client: redis.server.url, nameSpace }), ratekeeperStore({ client, nameSpace })]) {
      const app = await limitedApp(t, { store, max: 3, timeWindow: MINUTE }, okRoute('/'))
      urls.push(await app.listen({ port: 0, host: '127.0.0.1' }))
    }
    const answers = []
    for (const url of [urls[0], urls[1], urls[0], urls[1]]) {
      const response = await fetch(url)
      answers.push(`${response.status} ${response.headers.get('x-ratelimit-remaining')}`)
    }
    assert.deepEqual(answers, ['200 2', '200 1', '200 0', '429 0'])
    assert.equal(await redis.server.cli('GET', `${nameSpace}127.0.0.1`), '4')
  })

  it("counts together with the plugin's own RedisStore by default (its nameSpace and layout), so a fleet can switch while it runs", async (t) => {
    const user = `switch-${Date.now()}`
    const options = { max: 3, timeWindow: MINUTE, keyGenerator: () => user }
    const routes = (app) => {
      okRoute('/')(app)
      okRoute('/login', { rateLimit: { max: 1, timeWindow: MINUTE } })(app)
    }
    const Store = ratekeeperStore({ client: redis.server.url })
    assert.equal(new Store({}).prefix, 'fastify-rate-limit-')
    const theirs = await limitedApp(t, { ...options, redis: ioredisClient() }, routes)
    const ours = await limitedApp(t, { ...options, store: Store }, routes)
    const answers = []
    for (const [app, url] of [[theirs, '/'], [ours, '/'], [theirs, '/'], [ours, '/'], [ours, '/login'], [theirs, '/login']]) {
      answers.push(summary(await app.inject(url)))
    }
    assert.deepEqual(answers, [
      '200 2/3 reset 60: ok',
      '200 1/3 reset 60: ok',
      '200 0/3 reset 60: ok',
      '429 0/3 reset 60 retry 60: Rate limit exceeded, retry in 1 minute',
      '200 0/1 reset 60: ok',
      '429 0/1 reset 60 retry 60: Rate limit exceeded, retry in 1 minute',
    ])
    assert.equal(await redis.server.cli('GET', `fastify-rate-limit-GET/login-${user}`), '2')
  })

  it('takes the client in every form the limiters take, all on the same counts', async (t) => {
    const nameSpace = uniqueNameSpace('forms')
    const { url, host, port } = redis.server
    const nodeRedis = createClient({ url })
    const clients = [url, { host, port }, new RedisStore(url), new IORedis({ host, port, lazyConnect: true }), nodeRedis]
    t.after(() => clients[3].disconnect())
    for (const [i, client] of clients.entries()) {
      const store = new (ratekeeperStore({ client, nameSpace }))({ timeWindow: MINUTE })
      assert.equal((await call(store, 'incr', 'k', MINUTE, 10)).current, i + 1)
    }
    assert.equal(await redis.server.cli('TYPE', `${nameSpace}k`), 'string')
    assert.ok(Number(await redis.server.cli('PTTL', `${nameSpace}k`)) > 0)
  })
})

describe('ratekeeperStore on a Redis Cluster', { skip: clusterSkip() }, () => {
  it('counts each key on its own slot, a window restarted over max in the same call, every key with a TTL', async (t) => {
    const cluster = await startCluster()
    t.after(() => cluster.stop())
    const Store = ratekeeperStore({ client: { cluster: cluster.nodes.map((node) => node.url) }, nameSpace: 'fy-cluster-' })
    const store = new Store({ exponentialBackoff: true })
    const keys = Array.from({ length: 30 }, (_, i) => `client-${i}`)
    const answers = []
    for (let hit = 0; hit < 4; hit++) answers.push(await Promise.all(keys.map((key) => call(store, 'incr', key, MINUTE, 2))))
    // Each key: 1 and 2 in the window, then over max 2: 60 s, then 120 s.
    for (const [hit, expected] of [[1, MINUTE], [2, undefined], [3, MINUTE], [4, 2 * MINUTE]].entries()) {
      for (const answer of answers[hit]) {
        assert.equal(answer.current, expected[0])
        if (expected[1] !== undefined) assert.equal(answer.ttl, expected[1])
      }
    }
    const ttls = await Promise.all(keys.map(async (key) => Number(await cluster.cli(cluster.nodes[0].port, '-c', 'PTTL', `fy-cluster-${key}`))))
    assert.ok(ttls.every((ttl) => ttl > MINUTE && ttl <= 2 * MINUTE), ttls.join())
  })
})

describe('bad input', () => {
  it('ratekeeperStore checks its options, with codes', () => {
    assert.throws(() => ratekeeperStore(null), { name: 'TypeError', code: 'ERR_INVALID_OPTION' })
    assert.throws(() => ratekeeperStore('redis://127.0.0.1:6380'), { name: 'TypeError', code: 'ERR_INVALID_OPTION' })
    assert.throws(() => ratekeeperStore({ redis: 'redis://127.0.0.1:6380' }), { name: 'TypeError', code: 'ERR_UNKNOWN_OPTION', message: /`redis`.*`client`, `nameSpace`/ })
    assert.throws(() => ratekeeperStore({ nameSpace: 5 }), { name: 'TypeError', code: 'ERR_INVALID_OPTION' })
    assert.throws(() => ratekeeperStore({ nameSpace: 'x'.repeat(1025) }), { name: 'RangeError', code: 'ERR_INVALID_OPTION' })
    assert.throws(() => ratekeeperStore({ client: 42 }), { name: 'TypeError', code: 'ERR_INVALID_OPTION' })
    const Store = ratekeeperStore()
    assert.throws(() => new Store(null), { name: 'TypeError', code: 'ERR_INVALID_OPTION' })
    assert.throws(() => new Store({ continueExceeding: 'yes' }), { name: 'TypeError', code: 'ERR_INVALID_OPTION', message: /`continueExceeding` must be a boolean/ })
    assert.throws(() => new Store({ exponentialBackoff: 1 }), { name: 'TypeError', code: 'ERR_INVALID_OPTION' })
    assert.throws(() => new Store({ timeWindow: -1 }), { name: 'RangeError', code: 'ERR_INVALID_OPTION' })
    assert.throws(() => new Store({ timeWindow: 1.5 }), { name: 'RangeError', code: 'ERR_INVALID_OPTION' })
  })

  it("fails the plugin's registration, or the route's, on an option the store cannot take", async () => {
    const tooLong = Fastify()
    await assert.rejects(async () => tooLong.register(rateLimit, { store: ratekeeperStore(), timeWindow: '100 years' }), { name: 'RangeError', code: 'ERR_INVALID_OPTION', message: /`timeWindow` must be whole milliseconds from 0 to 1000000000000/ })
    await tooLong.close()
    const badRoute = Fastify()
    await badRoute.register(rateLimit, { store: ratekeeperStore() })
    assert.throws(() => badRoute.get('/', { config: { rateLimit: { continueExceeding: 'yes' } } }, async () => 'ok'), { name: 'TypeError', code: 'ERR_INVALID_OPTION' })
    await badRoute.close()
  })

  for (const where of ['in memory', 'on Redis']) {
    it(`calls back a coded error for bad arguments, ${where}`, async () => {
      const options = where === 'on Redis' ? { client: redis.server.url, nameSpace: uniqueNameSpace('bad') } : {}
      const store = new (ratekeeperStore(options))({})
      const cases = [
        [[{}, MINUTE, 1], 'TypeError', 'ERR_INVALID_ID'],
        [[undefined, MINUTE, 1], 'TypeError', 'ERR_INVALID_ID'],
        [[NaN, MINUTE, 1], 'RangeError', 'ERR_INVALID_ID'],
        [['x'.repeat(2000), MINUTE, 1], 'RangeError', 'ERR_INVALID_ID'],
        [['k', '1 minute', 1], 'TypeError', 'ERR_INVALID_ARGUMENT'],
        [['k', -1, 1], 'RangeError', 'ERR_INVALID_ARGUMENT'],
        [['k', 1.5, 1], 'RangeError', 'ERR_INVALID_ARGUMENT'],
        [['k', 2e12, 1], 'RangeError', 'ERR_INVALID_ARGUMENT'],
        [['k', MINUTE, '5'], 'TypeError', 'ERR_INVALID_ARGUMENT'],
        [['k', MINUTE, -1], 'RangeError', 'ERR_INVALID_ARGUMENT'],
        [['k', MINUTE, NaN], 'RangeError', 'ERR_INVALID_ARGUMENT'],
        [['k', MINUTE, 2.5], 'RangeError', 'ERR_INVALID_ARGUMENT'],
      ]
      for (const [[key, timeWindow, max], name, code] of cases) {
        await assert.rejects(call(store, 'incr', key, timeWindow, max), { name, code }, `incr(${String(key).slice(0, 10)}, ${timeWindow}, ${max})`)
      }
      await assert.rejects(call(store, 'read', {}, MINUTE, 1), { name: 'TypeError', code: 'ERR_INVALID_ID' })
      assert.throws(() => store.incr('k', 'not a callback', MINUTE, 1), { name: 'TypeError', code: 'ERR_INVALID_ARGUMENT' })
      assert.throws(() => store.read('k'), { name: 'TypeError', code: 'ERR_INVALID_ARGUMENT' })
      // A number is a key, as its string; the empty string too (the plugin's stores take any).
      assert.deepEqual(await call(store, 'incr', 7, MINUTE, 1), { current: 1, ttl: MINUTE })
      assert.equal((await call(store, 'incr', '7', MINUTE, 1)).current, 2)
      assert.equal((await call(store, 'incr', '', MINUTE, 1)).current, 1)
    })
  }
})

describe('the ratekeeper/fastify module', () => {
  it('loads as ratekeeper/fastify, from CommonJS and from ES modules', async (t) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ratekeeper-fastify-'))
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
    fs.mkdirSync(path.join(dir, 'node_modules'))
    fs.symlinkSync(path.join(__dirname, '..'), path.join(dir, 'node_modules', 'ratekeeper'), 'dir')
    fs.writeFileSync(path.join(dir, 'probe.mjs'), "export { ratekeeperStore } from 'ratekeeper/fastify'\nexport { default } from 'ratekeeper/fastify'\n")
    assert.equal(createRequire(path.join(dir, 'app.js'))('ratekeeper/fastify').ratekeeperStore, ratekeeperStore)
    const esm = await import(path.join(dir, 'probe.mjs'))
    assert.equal(esm.ratekeeperStore, ratekeeperStore)
    assert.equal(esm.default.ratekeeperStore, ratekeeperStore)
    const { files } = require('../package.json')
    for (const file of ['fastify.js', 'fastify.mjs', 'fastify.d.ts', 'lib/']) assert.ok(files.includes(file), file)
  })

  it('does not load fastify or @fastify/rate-limit itself', () => {
    const script = "require('./fastify.js'); const loaded = Object.keys(require.cache).filter((file) => /node_modules[\\\\/](fastify|@fastify)[\\\\/]/.test(file)); console.log(JSON.stringify(loaded))"
    const output = execFileSync(process.execPath, ['-e', script], { cwd: path.join(__dirname, '..'), encoding: 'utf8' })
    assert.deepEqual(JSON.parse(output), [])
  })
})

describe('examples/fastify.js', () => {
  for (const where of ['in memory', 'on Redis']) {
    it(`limits /login to 5 a minute, then 429, then 403 (ban), apart from the global limit: ${where}`, async (t) => {
      if (where === 'on Redis') {
        const keys = await ioredisClient().keys('fastify-rate-limit-*')
        if (keys.length > 0) await ioredisClient().del(...keys)
      }
      const env = { ...process.env, PORT: '0', REDIS_URL: where === 'on Redis' ? redis.server.url : '' }
      const child = spawn(process.execPath, [path.join(__dirname, '..', 'examples', 'fastify.js')], { env, stdio: ['ignore', 'pipe', 'pipe'] })
      const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })))
      t.after(() => child.exitCode === null && child.signalCode === null && child.kill('SIGKILL'))
      let output = ''
      child.stderr.on('data', (chunk) => (output += chunk))
      const url = await new Promise((resolve, reject) => {
        child.stdout.on('data', (chunk) => {
          output += chunk
          const match = /listening on (http:\/\/\S+) \(counts (.+)\)/.exec(output)
          if (match) resolve({ url: match[1], where: match[2] })
        })
        exited.then(() => reject(new Error(`the example exited: ${output}`)))
      })
      assert.equal(url.where, where)
      const statuses = []
      for (let i = 0; i < 8; i++) statuses.push((await fetch(`${url.url}/login`, { method: 'POST' })).status)
      assert.deepEqual(statuses, [200, 200, 200, 200, 200, 429, 429, 403])
      const home = await fetch(url.url)
      assert.deepEqual([home.status, home.headers.get('x-ratelimit-remaining'), home.headers.get('x-ratelimit-limit')], [200, '99', '100'])
      child.kill('SIGTERM')
      assert.deepEqual(await exited, { code: 0, signal: null }, output)
    })
  }
})
