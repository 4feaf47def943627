'use strict'

// The store for hono-rate-limiter (`ratekeeper/hono`): hono-rate-limiter itself in real Hono apps
// served by @hono/node-server on free ports and hit with fetch, with the store in memory and on a
// real redis-server (single node, Cluster, Sentinel), and side by side with hono-rate-limiter's
// own MemoryStore and RedisStore, the oracles.

const { describe, it, mock, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { createRequire } = require('node:module')
const { spawn, execFileSync } = require('node:child_process')
const { Hono } = require('hono')
const { serve } = require('@hono/node-server')
const { rateLimiter, MemoryStore, RedisStore: TheirRedisStore } = require('hono-rate-limiter')
const IORedis = require('ioredis')

const { Store } = require('../hono.js')
const { RedisStore } = require('..')
const { useRedisServer, startRedis, startCluster, startSentinel, clusterSkip } = require('./helpers/redis-server.js')
const { random } = require('./helpers/random.js')

const redis = useRedisServer()

const SECOND = 1000
const MINUTE = 60 * SECOND
const DAY = 24 * 60 * MINUTE
// An instant on a day's boundary (so on every minute's and second's too), for the tests that set the clock.
const T0 = 1_700_006_400_000
const DEFAULT_MESSAGE = 'Too many requests, please try again later.'

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let prefixCounter = 0
const uniquePrefix = () => `hrl-${++prefixCounter}:`

/** The stores under test, each on a fresh prefix. */
const stores = {
  'in memory': () => new Store(),
  'on Redis': () => new Store({ client: redis.server.url, prefix: uniquePrefix() }),
}

/** The stores whose windows follow `Date.now()`, which the tests set with mock.timers. */
const clockedStores = {
  'in memory': () => new Store(),
  "on Redis with clock: 'local'": () => new Store({ client: redis.server.url, prefix: uniquePrefix(), clock: 'local' }),
}

/** Sets `Date.now()` to `now` until the test ends (timers stay real: fetch and the server need them). */
function setClock(t, now) {
  mock.timers.enable({ apis: ['Date'], now })
  t.after(() => mock.timers.reset())
}

/** The client a request comes from: its `x-client` header (the tests' keyGenerator). */
const clientOf = (c) => c.req.header('x-client') ?? 'anonymous'

/**
 * A Hono app behind hono-rate-limiter with `options` (keyed by `x-client` unless `keyGenerator`
 * is given): `/` answers 'ok', `/fail` 500, `/info` the store's `getKey` for the client through
 * `c.get('rateLimitStore')`. A thrown error (the store's) is answered 500 `error: <code>`.
 */
function limitedApp(options) {
  const app = new Hono()
  app.use(rateLimiter({ keyGenerator: clientOf, ...options }))
  app.get('/', (c) => c.text('ok'))
  app.get('/fail', (c) => c.text('failed', 500))
  app.get('/info', async (c) => c.json((await c.get('rateLimitStore').getKey(clientOf(c))) ?? null))
  app.onError((error, c) => c.text(`error: ${error.code ?? error.message}`, 500))
  return app
}

/** Serves `app` with @hono/node-server on a free port until the test ends; resolves its base URL. */
function serveApp(t, app) {
  return new Promise((resolve) => {
    const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) => {
      t.after(() => new Promise((done) => {
        server.close(done)
        server.closeAllConnections()
      }))
      resolve(`http://127.0.0.1:${info.port}`)
    })
  })
}

/** Starts an app limited by `options` on a free port: resolves its URL. */
const serveLimited = (t, options) => serveApp(t, limitedApp(options))

/** Fetches `url` as `client`; resolves the status, the headers and the text. */
async function get(url, client = 'ada') {
  const response = await fetch(url, { headers: { 'x-client': client } })
  return { status: response.status, headers: response.headers, text: await response.text() }
}

/** What hono-rate-limiter wrote of a response: its status, its rate-limit headers and its body. */
function seen({ status, headers, text }) {
  const names = ['ratelimit', 'ratelimit-policy', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'retry-after']
  return [status, Object.fromEntries(names.filter((name) => headers.has(name)).map((name) => [name, headers.get(name)])), text]
}

/**
 * Runs `steps` (`[instant, operation, key]`) through a store initialized for `windowMs`, with
 * `Date.now()` at each step's instant; resolves what each step answered: `[hits, resetTime]`
 * for `increment` and `get` (`get`: `'none'` for a key without hits), nothing for the others.
 */
async function play(store, steps) {
  const trace = []
  for (const [at, operation, key] of steps) {
    mock.timers.setTime(at)
    const answer = await store[operation](key)
    if (operation === 'increment') trace.push([at, operation, key, answer.totalHits, answer.resetTime.getTime()])
    else if (operation === 'get') trace.push([at, operation, key, answer?.totalHits > 0 ? [answer.totalHits, answer.resetTime.getTime()] : 'none'])
    else trace.push([at, operation, key])
  }
  return trace
}

/** A MemoryStore of hono-rate-limiter's for `windowMs`, shut down (its sweep timer) after the test. */
function theirMemoryStore(t, windowMs) {
  const store = new MemoryStore()
  store.init({ windowMs })
  t.after(() => store.shutdown())
  return store
}

for (const [name, create] of Object.entries(clockedStores)) {
  describe(`the Store ${name} beside hono-rate-limiter's MemoryStore, on a clock the test sets`, () => {
    it('answers the same sequence of increments, decrements, gets and resets with the same hits and the same window ends', async (t) => {
      setClock(t, T0)
      // Each window's first call for a key falls on the window's start (T0, T0 + 1 min, ...),
      // where the MemoryStore starts that key's window too: the two windows coincide.
      const steps = [
        [T0, 'get', 'a'],
        [T0, 'increment', 'a'],
        [T0, 'increment', 'b'],
        [T0 + 10 * SECOND, 'increment', 'a'],
        [T0 + 20 * SECOND, 'increment', 'a'],
        [T0 + 20 * SECOND, 'get', 'a'],
        [T0 + 25 * SECOND, 'decrement', 'a'],
        [T0 + 30 * SECOND, 'increment', 'a'],
        [T0 + 35 * SECOND, 'decrement', 'b'],
        [T0 + 35 * SECOND, 'decrement', 'b'], // never below 0
        [T0 + 36 * SECOND, 'get', 'b'],
        [T0 + 40 * SECOND, 'increment', 'b'],
        [T0 + MINUTE - 1, 'increment', 'a'],
        [T0 + MINUTE - 1, 'resetKey', 'b'],
        [T0 + MINUTE - 1, 'get', 'b'],
        [T0 + MINUTE, 'increment', 'a'], // a new window: counted from 1
        [T0 + MINUTE, 'increment', 'b'],
        [T0 + MINUTE + 1, 'increment', 'a'],
        [T0 + MINUTE + 2, 'get', 'a'],
        [T0 + 5 * MINUTE, 'increment', 'a'],
        [T0 + 5 * MINUTE + 59 * SECOND, 'increment', 'a'],
        [T0 + 5 * MINUTE + 59 * SECOND, 'resetKey', 'a'],
        [T0 + 5 * MINUTE + 59 * SECOND, 'resetKey', 'nobody'],
        [T0 + 5 * MINUTE + 59 * SECOND, 'get', 'a'],
      ]
      const theirs = await play(theirMemoryStore(t, MINUTE), steps)
      const store = create()
      store.init({ windowMs: MINUTE })
      const ours = await play(store, steps)
      assert.deepEqual(ours, theirs)
      // For the record, the hits the increments counted:
      assert.deepEqual(ours.filter(([, operation]) => operation === 'increment').map(([, , key, hits]) => `${key}${hits}`), [
        'a1', 'b1', 'a2', 'a3', 'a3', 'b1', 'a4', 'a1', 'b1', 'a2', 'a1', 'a2',
      ])
    })

    it('gives the same totalHits over 2,000 random steps, and the same resetTime wherever the MemoryStore\'s window falls on ours', async (t) => {
      // A seeded sequence of increments, decrements, gets and resets on 3 keys, with the clock
      // ticking within a window and jumping to window starts. A jump goes to a start at or after
      // the end of every window the MemoryStore holds, so that the windows still agree on what
      // they counted: a key whose first call in a window comes after its start has a MemoryStore
      // window that ends later than ours (then only the hits are compared).
      const SEED = 26
      const next = random(SEED)
      const pick = (items) => items[Math.floor(next() * items.length)]
      setClock(t, T0)
      const theirs = theirMemoryStore(t, MINUTE)
      const ours = create()
      ours.init({ windowMs: MINUTE })
      const counted = { increments: 0, sameResetTime: 0, laterResetTime: 0, gets: 0 }
      let now = T0
      for (let step = 0; step < 2000; step++) {
        const roll = next()
        const key = pick(['a', 'b', 'c'])
        const at = `step ${step} (seed ${SEED}) at T0 + ${now - T0} ms, key ${key}`
        if (roll < 0.04) {
          const theirEnds = [...theirs.current.values(), ...theirs.previous.values()].map((client) => client.resetTime.getTime())
          now = Math.ceil(Math.max(now + 1, ...theirEnds) / MINUTE) * MINUTE + (next() < 0.5 ? 0 : MINUTE)
        } else if (roll < 0.14) {
          now = Math.min(now + Math.floor(next() * 15 * SECOND), Math.floor(now / MINUTE) * MINUTE + MINUTE - 1)
        } else if (roll < 0.6) {
          mock.timers.setTime(now)
          const [their, our] = [theirs.increment(key), await ours.increment(key)]
          assert.equal(our.totalHits, their.totalHits, at)
          const windowEnd = Math.floor(now / MINUTE) * MINUTE + MINUTE
          assert.equal(our.resetTime.getTime(), windowEnd, at)
          if (their.resetTime.getTime() === windowEnd) counted.sameResetTime++
          else {
            assert.ok(their.resetTime.getTime() > windowEnd, at)
            counted.laterResetTime++
          }
          counted.increments++
        } else if (roll < 0.8) {
          mock.timers.setTime(now)
          theirs.decrement(key)
          await ours.decrement(key)
        } else if (roll < 0.95) {
          mock.timers.setTime(now)
          // The MemoryStore answers an ended window's count, or 0 hits, where ours has none.
          const their = theirs.get(key)
          const theirHits = their !== undefined && their.resetTime.getTime() > now ? their.totalHits : 0
          assert.equal((await ours.get(key))?.totalHits ?? 0, theirHits, at)
          counted.gets++
        } else {
          theirs.resetKey(key)
          await ours.resetKey(key)
        }
      }
      // Both branches were taken (the numbers follow from the seed).
      assert.deepEqual(counted, { increments: 892, sameResetTime: 511, laterResetTime: 381, gets: 294 })
    })

    it('differs where the MemoryStore starts a window at a key\'s first hit: ours are aligned to the clock', async (t) => {
      setClock(t, T0)
      const theirs = theirMemoryStore(t, MINUTE)
      const ours = create()
      ours.init({ windowMs: MINUTE })
      const both = async (at, operation, key) => {
        mock.timers.setTime(at)
        const their = theirs[operation](key)
        const our = await ours[operation](key)
        const shown = (info) => (info === undefined ? 'none' : [info.totalHits, info.resetTime.getTime() - T0])
        return { theirs: shown(their), ours: shown(our) }
      }
      // A first hit 30 s into the minute: the MemoryStore's window lasts until 30 s into the next
      // minute, ours ends on the minute.
      assert.deepEqual(await both(T0 + 30 * SECOND, 'increment', 'k'), { theirs: [1, 90 * SECOND], ours: [1, 60 * SECOND] })
      // 70 s: ours started a new window, the MemoryStore still counts in its own.
      assert.deepEqual(await both(T0 + 70 * SECOND, 'increment', 'k'), { theirs: [2, 90 * SECOND], ours: [1, 120 * SECOND] })
      // Long after: the MemoryStore answers its ended window's count (until its sweep), ours none.
      assert.deepEqual(await both(T0 + 10 * MINUTE, 'get', 'k'), { theirs: [2, 90 * SECOND], ours: 'none' })
      // A decrement of a key without hits: the MemoryStore makes an entry of 0 hits, ours nothing.
      mock.timers.setTime(T0 + 10 * MINUTE)
      theirs.decrement('x')
      await ours.decrement('x')
      assert.deepEqual(await both(T0 + 10 * MINUTE, 'get', 'x'), { theirs: [0, 11 * MINUTE], ours: 'none' })
    })
  })

  describe(`hono-rate-limiter with the Store ${name}, in a Hono app, on a clock the test sets`, () => {
    for (const standardHeaders of ['draft-6', 'draft-7']) {
      it(`answers every request as with hono-rate-limiter's MemoryStore: 429 after the limit, the same ${standardHeaders} headers, and again allowed when the window ends`, async (t) => {
        setClock(t, T0)
        const traces = []
        for (const store of [theirMemoryStore(t, MINUTE), create()]) {
          const url = await serveLimited(t, { store, windowMs: MINUTE, limit: 3, standardHeaders })
          const trace = []
          for (const at of [T0, T0 + SECOND, T0 + 20 * SECOND, T0 + 59 * SECOND, T0 + MINUTE - 1, T0 + MINUTE, T0 + MINUTE + 500]) {
            mock.timers.setTime(at)
            trace.push([at - T0, ...seen(await get(`${url}/`))])
          }
          traces.push(trace)
        }
        assert.deepEqual(traces[1], traces[0])
        // What hono-rate-limiter wrote, for the record:
        const expected = standardHeaders === 'draft-6'
          ? [
              [0, 200, { 'ratelimit-policy': '3;w=60', 'ratelimit-limit': '3', 'ratelimit-remaining': '2', 'ratelimit-reset': '60' }, 'ok'],
              [1000, 200, { 'ratelimit-policy': '3;w=60', 'ratelimit-limit': '3', 'ratelimit-remaining': '1', 'ratelimit-reset': '59' }, 'ok'],
              [20000, 200, { 'ratelimit-policy': '3;w=60', 'ratelimit-limit': '3', 'ratelimit-remaining': '0', 'ratelimit-reset': '40' }, 'ok'],
              [59000, 429, { 'ratelimit-policy': '3;w=60', 'ratelimit-limit': '3', 'ratelimit-remaining': '0', 'ratelimit-reset': '1', 'retry-after': '1' }, DEFAULT_MESSAGE],
              [59999, 429, { 'ratelimit-policy': '3;w=60', 'ratelimit-limit': '3', 'ratelimit-remaining': '0', 'ratelimit-reset': '1', 'retry-after': '1' }, DEFAULT_MESSAGE],
              [60000, 200, { 'ratelimit-policy': '3;w=60', 'ratelimit-limit': '3', 'ratelimit-remaining': '2', 'ratelimit-reset': '60' }, 'ok'],
              [60500, 200, { 'ratelimit-policy': '3;w=60', 'ratelimit-limit': '3', 'ratelimit-remaining': '1', 'ratelimit-reset': '60' }, 'ok'],
            ]
          : [
              [0, 200, { ratelimit: 'limit=3, remaining=2, reset=60', 'ratelimit-policy': '3;w=60' }, 'ok'],
              [1000, 200, { ratelimit: 'limit=3, remaining=1, reset=59', 'ratelimit-policy': '3;w=60' }, 'ok'],
              [20000, 200, { ratelimit: 'limit=3, remaining=0, reset=40', 'ratelimit-policy': '3;w=60' }, 'ok'],
              [59000, 429, { ratelimit: 'limit=3, remaining=0, reset=1', 'ratelimit-policy': '3;w=60', 'retry-after': '1' }, DEFAULT_MESSAGE],
              [59999, 429, { ratelimit: 'limit=3, remaining=0, reset=1', 'ratelimit-policy': '3;w=60', 'retry-after': '1' }, DEFAULT_MESSAGE],
              [60000, 200, { ratelimit: 'limit=3, remaining=2, reset=60', 'ratelimit-policy': '3;w=60' }, 'ok'],
              [60500, 200, { ratelimit: 'limit=3, remaining=1, reset=60', 'ratelimit-policy': '3;w=60' }, 'ok'],
            ]
        assert.deepEqual(traces[1], expected)
      })
    }

    it('gives the route its hits through c.get(\'rateLimitStore\').getKey, and the window\'s end', async (t) => {
      setClock(t, T0 + 20 * SECOND)
      const url = await serveLimited(t, { store: create(), windowMs: MINUTE, limit: 5 })
      await get(`${url}/`)
      const info = await get(`${url}/info`)
      assert.deepEqual(JSON.parse(info.text), { totalHits: 2, resetTime: new Date(T0 + MINUTE).toISOString() })
      assert.equal(JSON.parse((await get(`${url}/info`, 'grace')).text).totalHits, 1)
    })
  })
}

for (const [name, create] of Object.entries(stores)) {
  describe(`hono-rate-limiter with the Store ${name}, in a Hono app`, () => {
    it('refuses the 4th request of 3 allowed, with the headers carrying the store\'s numbers', async (t) => {
      // A day's window, aligned to the clock (on Redis, the server's): the 4 requests fall in one
      // (a run within 5 s of midnight UTC waits for the next day to begin).
      const untilTomorrow = DAY - (Date.now() % DAY)
      if (untilTomorrow < 5 * SECOND) await new Promise((resolve) => setTimeout(resolve, untilTomorrow + 100))
      const store = create()
      const url = await serveLimited(t, { store, windowMs: DAY, limit: 3 })
      const responses = []
      for (let i = 0; i < 4; i++) responses.push(await get(`${url}/`))
      assert.deepEqual(responses.map((r) => r.status), [200, 200, 200, 429])
      assert.deepEqual(responses.map((r) => r.headers.get('ratelimit-remaining')), ['2', '1', '0', '0'])
      assert.deepEqual(responses.map((r) => r.headers.get('ratelimit-policy')), ['3;w=86400', '3;w=86400', '3;w=86400', '3;w=86400'])
      assert.equal(responses[3].text, DEFAULT_MESSAGE)
      // The window ends at midnight UTC: the reset is the seconds left until then.
      const untilMidnight = Math.ceil((DAY - (Date.now() % DAY)) / SECOND)
      const reset = Number(responses[3].headers.get('ratelimit-reset'))
      assert.ok(Math.abs(reset - untilMidnight) <= 2, `reset ${reset}, ${untilMidnight} s until midnight`)
      assert.equal(responses[3].headers.get('retry-after'), String(reset))
      // hono-rate-limiter counts every request, the refused one too; the store agrees.
      const info = await store.get('ada')
      assert.equal(info.totalHits, 4)
      // At midnight; on the Redis server's clock, early by at most the call's trip (never late).
      const resetAt = info.resetTime.getTime()
      assert.ok(Math.ceil(resetAt / DAY) * DAY - resetAt < SECOND, `resetTime ${info.resetTime.toISOString()}`)
      assert.equal((await get(`${url}/`, 'grace')).status, 200, 'another client has its own count')
    })

    it('lets the client through again after resetKey', async (t) => {
      const store = create()
      const url = await serveLimited(t, { store, windowMs: DAY, limit: 1 })
      assert.equal((await get(`${url}/`)).status, 200)
      assert.equal((await get(`${url}/`)).status, 429)
      await store.resetKey('ada')
      assert.equal(await store.get('ada'), undefined)
      const again = await get(`${url}/`)
      assert.equal(again.status, 200)
      assert.equal(again.headers.get('ratelimit-remaining'), '0')
      assert.equal((await get(`${url}/`)).status, 429)
    })

    it('takes hits back for skipFailedRequests and skipSuccessfulRequests (decrement) as with hono-rate-limiter\'s MemoryStore', async (t) => {
      // The same requests through the MemoryStore and through this store: the same statuses,
      // remaining counts and hits after each.
      const steps = ['/fail', '/fail', '/', '/', '/', '/fail', '/']
      for (const skip of ['skipFailedRequests', 'skipSuccessfulRequests']) {
        const traces = []
        for (const store of [theirMemoryStore(t, DAY), create()]) {
          const url = await serveLimited(t, { store, windowMs: DAY, limit: 2, [skip]: true })
          const trace = []
          for (const step of steps) {
            const response = await get(url + step)
            const info = await store.get('ada')
            trace.push(`${step} ${response.status} ${response.headers.get('ratelimit-remaining')} ${info?.totalHits ?? 0}`)
          }
          traces.push(trace)
        }
        assert.deepEqual(traces[1], traces[0], skip)
        // hono-rate-limiter 0.5 asks whether a refused request failed before its handler sets the
        // 429, so it counts as successful: kept with skipFailedRequests, taken back with
        // skipSuccessfulRequests (express-rate-limit does the opposite).
        assert.deepEqual(traces[1], skip === 'skipFailedRequests'
          ? ['/fail 500 1 0', '/fail 500 1 0', '/ 200 1 1', '/ 200 0 2', '/ 429 0 3', '/fail 429 0 4', '/ 429 0 5']
          : ['/fail 500 1 1', '/fail 500 0 2', '/ 429 0 2', '/ 429 0 2', '/ 429 0 2', '/fail 429 0 2', '/ 429 0 2'], skip)
      }
    })

    it('answers a request whose key is no id with Hono\'s onError (ERR_INVALID_ID), and counts nothing', async (t) => {
      const store = create()
      const url = await serveLimited(t, { store, windowMs: DAY, limit: 2, keyGenerator: (c) => c.req.header('x-client') ?? '' })
      const response = await fetch(`${url}/`)
      assert.deepEqual([response.status, await response.text()], [500, 'error: ERR_INVALID_ID'])
      const long = await get(`${url}/`, 'x'.repeat(1025))
      assert.deepEqual([long.status, long.text], [500, 'error: ERR_INVALID_ID'])
      assert.equal((await get(`${url}/`)).status, 200)
    })
  })
}

describe('the Store on Redis', () => {
  it('shares the count between two apps with their own Store instances on one Redis', async (t) => {
    const prefix = uniquePrefix()
    const ioredis = new IORedis({ host: redis.server.host, port: redis.server.port, lazyConnect: true })
    const first = new Store({ client: redis.server.url, prefix })
    const a = await serveLimited(t, { store: first, windowMs: DAY, limit: 3 })
    const b = await serveLimited(t, { store: new Store({ client: ioredis, prefix }), windowMs: DAY, limit: 3 })
    const responses = []
    for (const url of [a, b, a, b]) responses.push(await get(`${url}/`))
    assert.deepEqual(responses.map((r) => r.status), [200, 200, 200, 429])
    assert.deepEqual(responses.map((r) => r.headers.get('ratelimit-remaining')), ['2', '1', '0', '0'])
    assert.equal((await first.get('ada')).totalHits, 4)
    // One hash per client, with a TTL (the window's length and a second: it outlives the window).
    assert.equal(await redis.server.cli('TYPE', `${prefix}ada`), 'hash')
    const ttl = Number(await redis.server.cli('PTTL', `${prefix}ada`))
    assert.ok(ttl > 0 && ttl <= DAY + SECOND, `PTTL ${ttl}`)
    // A third Store on the same prefix (a worker that is no app) resets the client for both.
    const store = new Store({ client: redis.server.url, prefix })
    store.init({ windowMs: DAY })
    await store.resetKey('ada')
    assert.equal((await get(`${b}/`)).status, 200)
  })

  it('in memory, two apps count apart (localKeys)', async (t) => {
    const a = await serveLimited(t, { store: new Store(), windowMs: DAY, limit: 1 })
    const b = await serveLimited(t, { store: new Store(), windowMs: DAY, limit: 1 })
    assert.deepEqual([(await get(`${a}/`)).status, (await get(`${b}/`)).status, (await get(`${a}/`)).status], [200, 200, 429])
  })

  it('answers like hono-rate-limiter\'s own RedisStore beside it on the same Redis, with the keys apart', async (t) => {
    const ioredis = new IORedis({ host: redis.server.host, port: redis.server.port })
    t.after(() => ioredis.disconnect())
    // hono-rate-limiter's RedisStore takes a client with these four methods (@upstash/redis's shape).
    const client = {
      scriptLoad: (script) => ioredis.script('LOAD', script),
      evalsha: (sha, keys, args) => ioredis.evalsha(sha, keys.length, ...keys, ...args),
      decr: (key) => ioredis.decr(key),
      del: (key) => ioredis.del(key),
    }
    const theirs = new TheirRedisStore({ client })
    const ours = new Store({ client: redis.server.url })
    const traces = []
    for (const store of [theirs, ours]) {
      const url = await serveLimited(t, { store, windowMs: DAY, limit: 3, skipFailedRequests: true })
      const trace = []
      for (const step of ['/', '/fail', '/', 'resetKey', '/', '/', '/', '/', '/fail', '/']) {
        if (step === 'resetKey') {
          await store.resetKey('switching')
          trace.push(step)
          continue
        }
        const response = await get(url + step, 'switching')
        trace.push([step, response.status, response.headers.get('ratelimit-remaining')])
      }
      traces.push(trace)
    }
    assert.deepEqual(traces[1], traces[0])
    assert.deepEqual(traces[1].map((step) => (Array.isArray(step) ? step.slice(0, 2).join(' ') : step)), [
      '/ 200', '/fail 500', '/ 200', 'resetKey', '/ 200', '/ 200', '/ 200', '/ 429', '/fail 429', '/ 429',
    ])
    // Its strings at 'hrl:', our hashes at 'ratekeeper:hrl:': both can run while a fleet switches.
    assert.equal(ours.prefix, 'ratekeeper:hrl:')
    assert.deepEqual([await redis.server.cli('TYPE', 'hrl:switching'), await redis.server.cli('TYPE', 'ratekeeper:hrl:switching')], ['string', 'hash'])
  })

  it('takes the client in every form the limiters take, all on the same counts', async () => {
    const prefix = uniquePrefix()
    const { url, host, port } = redis.server
    const clients = [url, { host, port }, new RedisStore(url), new IORedis({ host, port, lazyConnect: true })]
    for (const [i, client] of clients.entries()) {
      const store = new Store({ client, prefix })
      assert.deepEqual([store.localKeys, store.prefix], [false, prefix])
      store.init({ windowMs: DAY })
      assert.equal((await store.increment('k')).totalHits, i + 1)
    }
  })

  it('while Redis is down: Hono\'s onError by default, every request allowed with onStoreError \'allow\', counted in this process with \'memory\'; Redis decides again once back', async (t) => {
    const server = await startRedis()
    t.after(() => server.stop())
    const client = new RedisStore({ url: server.url, commandTimeoutMs: 300 })
    t.after(() => client.close())
    const policies = [undefined, 'allow', 'memory']
    const apps = []
    for (const onStoreError of policies) {
      const store = new Store({ client, prefix: uniquePrefix(), onStoreError })
      apps.push({ store, url: await serveLimited(t, { store, windowMs: DAY, limit: 2 }) })
    }
    const statuses = async ({ url }) => {
      const answers = []
      for (let i = 0; i < 3; i++) {
        const response = await get(`${url}/`)
        answers.push(`${response.status} ${response.headers.get('ratelimit-remaining') ?? response.text}`)
      }
      return answers
    }
    assert.deepEqual(await statuses(apps[0]), ['200 1', '200 0', '429 0'], 'Redis up')

    await server.kill()
    assert.deepEqual(await statuses(apps[0]), ['500 error: ERR_STORE_UNAVAILABLE', '500 error: ERR_STORE_UNAVAILABLE', '500 error: ERR_STORE_UNAVAILABLE'])
    // 'allow': counted as 0 hits, so the headers show the whole limit left.
    assert.deepEqual(await statuses(apps[1]), ['200 2', '200 2', '200 2'])
    // 'memory': this process counts from 0, with the same limit.
    assert.deepEqual(await statuses(apps[2]), ['200 1', '200 0', '429 0'])

    await server.restart()
    // Once the connection is back (the default store rejects until then), and half a second
    // after the fallbacks' last failure, Redis decides again: the new server has no counts.
    for (let attempt = 0; await apps[0].store.get('probe').then(() => false, () => true); attempt++) {
      assert.ok(attempt < 100, 'the store reconnects')
      await sleep(50)
    }
    await sleep(600)
    for (const app of apps) assert.deepEqual(await statuses(app), ['200 1', '200 0', '429 0'])
    assert.equal(await server.cli('EXISTS', `${apps[2].store.prefix}ada`), '1')
  })
})

describe('the Store on a Redis Cluster and behind Sentinel', () => {
  /** An app on `client` limited to 2 a day: each of 3 clients (spread over the slots) gets 2 then a 429. */
  async function limitsEachClient(t, client) {
    const store = new Store({ client, prefix: uniquePrefix() })
    const url = await serveLimited(t, { store, windowMs: DAY, limit: 2 })
    for (const who of ['ada', 'grace', 'edsger']) {
      const answers = []
      for (let i = 0; i < 3; i++) answers.push((await get(`${url}/`, who)).status)
      assert.deepEqual(answers, [200, 200, 429], who)
    }
    return store
  }

  it('on a Cluster', { skip: clusterSkip() }, async (t) => {
    const cluster = await startCluster()
    t.after(() => cluster.stop())
    const client = await RedisStore.connect({ cluster: cluster.urls })
    t.after(() => client.close())
    const store = await limitsEachClient(t, client)
    // The keys landed on their slots' primaries, each with a TTL.
    const ttls = []
    for (const port of await cluster.masters()) {
      const keys = (await cluster.cli(port, 'KEYS', `${store.prefix}*`)).split('\n').filter(Boolean)
      for (const key of keys) ttls.push(Number(await cluster.cli(port, 'PTTL', key)))
    }
    assert.equal(ttls.length, 3)
    assert.ok(ttls.every((ttl) => ttl > 0 && ttl <= DAY + SECOND), ttls.join())
  })

  it('behind Sentinel', async (t) => {
    const setup = await startSentinel()
    t.after(() => setup.stop())
    const url = `redis+sentinel://${setup.sentinelAddresses.map((s) => `${s.host}:${s.port}`).join(',')}/${setup.name}`
    const client = await RedisStore.connect(url)
    t.after(() => client.close())
    const store = await limitsEachClient(t, client)
    const ttl = Number(await setup.primary.cli('PTTL', `${store.prefix}ada`))
    assert.ok(ttl > 0 && ttl <= DAY + SECOND, `PTTL ${ttl} on the primary`)
  })
})

describe('the Store module', () => {
  it('checks its options at construction, with codes', () => {
    assert.throws(() => new Store(null), { name: 'TypeError', code: 'ERR_INVALID_OPTION', message: /hono-rate-limiter Store options must be an object/ })
    assert.throws(() => new Store('redis://127.0.0.1:6380'), { name: 'TypeError', code: 'ERR_INVALID_OPTION' })
    assert.throws(() => new Store({ windowMs: 1000 }), { name: 'TypeError', code: 'ERR_UNKNOWN_OPTION', message: /unknown option `windowMs` in hono-rate-limiter Store options/ })
    assert.throws(() => new Store({ prefix: 5 }), { name: 'TypeError', code: 'ERR_INVALID_OPTION', message: /'ratekeeper:hrl:'/ })
    assert.throws(() => new Store({ prefix: 'x'.repeat(2000) }), { name: 'RangeError', code: 'ERR_INVALID_OPTION' })
    assert.throws(() => new Store({ client: 42 }), { name: 'TypeError', code: 'ERR_INVALID_OPTION' })
    assert.throws(() => new Store({ clock: 'sundial' }), { name: 'RangeError', code: 'ERR_INVALID_OPTION' })
    assert.throws(() => new Store({ clock: 'redis' }), { name: 'RangeError', code: 'ERR_INVALID_OPTION' })
    assert.throws(() => new Store({ onStoreError: 'memory' }), { name: 'RangeError', code: 'ERR_INVALID_OPTION', message: /applies to limiters on Redis/ })
    assert.throws(() => new Store({ client: 'redis://127.0.0.1:6380', onStoreError: 'ignore' }), { name: 'RangeError', code: 'ERR_INVALID_OPTION' })
    const store = new Store()
    assert.deepEqual({ prefix: store.prefix, localKeys: store.localKeys }, { prefix: 'ratekeeper:hrl:', localKeys: true })
  })

  it('makes rateLimiter() throw for a windowMs the window cannot take, naming hono-rate-limiter\'s option; the calls then reject with it', async () => {
    const cases = [
      ['1m', 'TypeError', /^hono-rate-limiter's `windowMs` must be a number of milliseconds, got string$/],
      [0, 'RangeError', /^hono-rate-limiter's `windowMs` must be a finite number of milliseconds greater than 0 and at most 1e12, got 0$/],
      [-1, 'RangeError', /got -1$/],
      [NaN, 'RangeError', /got NaN$/],
      [Infinity, 'RangeError', /got Infinity$/],
      [1e13, 'RangeError', /got 10000000000000$/],
    ]
    for (const [windowMs, name, message] of cases) {
      const store = new Store()
      assert.throws(() => rateLimiter({ windowMs, keyGenerator: clientOf, store }), { name, code: 'ERR_INVALID_OPTION', message }, String(windowMs))
      await assert.rejects(store.increment('k'), { name, code: 'ERR_INVALID_OPTION', message })
      await assert.rejects(store.get('k'), { code: 'ERR_INVALID_OPTION' })
    }
    const store = new Store()
    assert.throws(() => store.init(null), { name: 'TypeError', code: 'ERR_INVALID_OPTION', message: /hono-rate-limiter's options must be an object/ })
    // A good init afterwards works.
    store.init({ windowMs: MINUTE })
    assert.equal((await store.increment('k')).totalHits, 1)
  })

  it('rejects calls before init, and bad keys', async () => {
    const store = new Store()
    for (const call of [() => store.increment('k'), () => store.decrement('k'), () => store.resetKey('k'), () => store.get('k')]) {
      await assert.rejects(call(), { name: 'TypeError', code: 'ERR_INVALID_ARGUMENT', message: /rateLimiter\(\{ store \}\), which calls init/ })
    }
    store.init({ windowMs: MINUTE })
    await assert.rejects(store.increment(''), { name: 'RangeError', code: 'ERR_INVALID_ID' })
    await assert.rejects(store.increment({}), { code: 'ERR_INVALID_ID' })
    await assert.rejects(store.decrement('x'.repeat(1025)), { code: 'ERR_INVALID_ID' })
  })

  it('loads as ratekeeper/hono from CommonJS and from ES modules, without loading hono or hono-rate-limiter', async (t) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ratekeeper-hono-'))
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
    fs.mkdirSync(path.join(dir, 'node_modules'))
    fs.symlinkSync(path.join(__dirname, '..'), path.join(dir, 'node_modules', 'ratekeeper'), 'dir')
    assert.equal(createRequire(path.join(dir, 'app.js'))('ratekeeper/hono').Store, Store)
    const esm = await import('../hono.mjs')
    assert.equal(esm.Store, Store)
    assert.equal(esm.default.Store, Store)
    const { files, exports, peerDependenciesMeta } = require('../package.json')
    for (const file of ['hono.js', 'hono.mjs', 'hono.d.ts']) assert.ok(files.includes(file), file)
    assert.deepEqual(exports['./hono'], { types: './hono.d.ts', import: './hono.mjs', require: './hono.js', default: './hono.js' })
    assert.equal(peerDependenciesMeta['hono-rate-limiter'].optional, true)
    const loaded = execFileSync(process.execPath, ['-e', `
      const { Store } = require('ratekeeper/hono')
      new Store().init({ windowMs: 1000 })
      console.log(Object.keys(require.cache).filter((file) => /node_modules[\\\\/](hono|hono-rate-limiter|@hono)[\\\\/]/.test(file)).length)
    `], { cwd: dir, encoding: 'utf8' })
    assert.equal(loaded.trim(), '0')
  })
})

describe('examples/hono.js', () => {
  const EXAMPLE = path.join(__dirname, '..', 'examples', 'hono.js')
  const children = new Set()
  after(() => {
    for (const child of children) child.kill()
  })

  /** Starts the example with `env`; resolves its URL once it listens. */
  function startExample(env) {
    const child = spawn(process.execPath, [EXAMPLE], { env: { ...process.env, PORT: '0', ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
    children.add(child)
    let output = ''
    return new Promise((resolve, reject) => {
      child.stdout.on('data', (chunk) => {
        output += chunk
        const listening = /^listening on (http:\/\/\S+) \((.*)\)$/m.exec(output)
        if (listening) resolve({ child, url: listening[1], where: listening[2] })
      })
      child.stderr.on('data', (chunk) => (output += chunk))
      child.on('exit', (code) => reject(new Error(`the example exited (${code}):\n${output}`)))
    })
  }

  for (const where of ['in memory', 'on Redis']) {
    it(`lets a client have 5 requests a minute, then 429 with the headers: ${where}`, async () => {
      const { child, url, where: said } = await startExample({ REDIS_URL: where === 'on Redis' ? redis.server.url : '' })
      try {
        assert.equal(said, where === 'on Redis' ? 'counts on Redis' : 'counts in memory')
        // Its windows end on the minute: start the 6 requests well within one.
        if (Date.now() % MINUTE > MINUTE - 5 * SECOND) await sleep(MINUTE - (Date.now() % MINUTE) + 100)
        const answers = []
        for (let i = 0; i < 6; i++) {
          const response = await fetch(`${url}/`)
          answers.push([response.status, (await response.text()).trim(), response.headers.get('ratelimit').replace(/, reset=\d+$/, '')])
        }
        assert.deepEqual(answers, [
          [200, 'hello, 4 left this minute', 'limit=5, remaining=4'],
          [200, 'hello, 3 left this minute', 'limit=5, remaining=3'],
          [200, 'hello, 2 left this minute', 'limit=5, remaining=2'],
          [200, 'hello, 1 left this minute', 'limit=5, remaining=1'],
          [200, 'hello, 0 left this minute', 'limit=5, remaining=0'],
          [429, DEFAULT_MESSAGE, 'limit=5, remaining=0'],
        ])
        const quota = await (await fetch(`${url}/quota`)).json()
        assert.equal(quota.used, 6)
        // On the minute (on Redis's clock, early by at most the call's trip).
        const resetAt = new Date(quota.resetTime).getTime()
        assert.ok(Math.ceil(resetAt / MINUTE) * MINUTE - resetAt < SECOND, quota.resetTime)
        if (where === 'on Redis') assert.equal(await redis.server.cli('TYPE', 'example:hono:127.0.0.1'), 'hash')
      } finally {
        child.kill()
        children.delete(child)
      }
    })
  }
})
