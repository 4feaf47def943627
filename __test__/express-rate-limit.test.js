'use strict'

// The store for express-rate-limit (`ratekeeper/express-rate-limit`): express-rate-limit 8 itself
// in real Express apps on free ports, with the store on a real redis-server and in memory, and
// side by side with rate-limit-redis and express-rate-limit's MemoryStore.

const { describe, it, mock } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { createRequire } = require('node:module')
const { spawnSync } = require('node:child_process')
const express = require('express')
const { rateLimit, MemoryStore } = require('express-rate-limit')
const { RedisStore: RateLimitRedisStore } = require('rate-limit-redis')
const IORedis = require('ioredis')
const { createClient } = require('redis')

const { Store } = require('../express-rate-limit.js')
const { RedisStore } = require('..')
const { useRedisServer } = require('./helpers/redis-server.js')

const redis = useRedisServer()

const SECOND = 1000
const MINUTE = 60 * SECOND
const DAY = 24 * 60 * MINUTE
// An instant on a minute boundary, for the tests that set the clock.
const T0 = 1_700_000_040_000
// The key express-rate-limit's default keyGenerator gives a client on 127.0.0.1.
const KEY = '127.0.0.1'
const DEFAULT_MESSAGE = 'Too many requests, please try again later.'

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

let prefixCounter = 0
const uniquePrefix = () => `erl-${++prefixCounter}:`

/** The stores under test, each on a fresh prefix. */
const stores = {
  'in memory': () => new Store(),
  'on Redis': () => new Store({ client: redis.server.url, prefix: uniquePrefix() }),
}

/** The stores whose windows follow `Date.now()`, which the tests can set. */
const clockedStores = {
  'in memory': () => new Store(),
  "on Redis with clock: 'local'": () => new Store({ client: redis.server.url, prefix: uniquePrefix(), clock: 'local' }),
}

/**
 * An Express app behind express-rate-limit with `options`; `/` succeeds, `/fail` answers 500.
 * What express-rate-limit logs (its validations' complaints, store errors) goes to `logged`.
 */
function limitedApp(options) {
  const logged = []
  const log = (error, message) => logged.push({ code: error?.code, error, message })
  const limiter = rateLimit({ logger: { warn: log, error: log }, ...options })
  const app = express()
  app.use(limiter)
  app.get('/', (req, res) => res.send('ok'))
  app.get('/fail', (req, res) => res.status(500).send('failed'))
  app.use((error, req, res, next) => res.status(500).send(`error: ${error.code}`))
  return { app, limiter, logged }
}

/** Serves `app` on a free port until the test ends; resolves its base URL. */
function serve(t, app) {
  return new Promise((resolve) => {
    const server = app.listen(0, '127.0.0.1', () => {
      t.after(() => new Promise((done) => server.close(done)))
      resolve(`http://127.0.0.1:${server.address().port}`)
    })
  })
}

/** Starts an app limited by `options` on a free port: resolves `{ url, limiter, logged }`. */
async function serveLimited(t, options) {
  const { app, limiter, logged } = limitedApp(options)
  return { url: await serve(t, app), limiter, logged }
}

/** Fetches `url` and reads the body; resolves the status, the headers and the text. */
async function get(url) {
  const response = await fetch(url)
  return { status: response.status, headers: response.headers, text: await response.text() }
}

/** Waits until `check()` resolves true (a decrement lands after the response): fails after 5 s. */
async function eventually(check, what) {
  const deadline = Date.now() + 5 * SECOND
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`not within 5 s: ${what}`)
    await sleep(10)
  }
}

for (const [name, create] of Object.entries(clockedStores)) {
  describe(`express-rate-limit with the Store ${name}, on a clock the test sets`, () => {
    it('lets 3 requests through, answers the 4th 429 with the window\'s numbers in the headers, and lets the client in again when the window ends', async (t) => {
      mock.timers.enable({ apis: ['Date'], now: T0 + 5 * SECOND })
      t.after(() => mock.timers.reset())
      const { url, logged } = await serveLimited(t, { store: create(), windowMs: MINUTE, limit: 3, standardHeaders: 'draft-7' })
      // The window is the minute from T0: it ends 55 s after the first request (express-rate-limit's
      // MemoryStore would say 60), and the headers say so.
      for (const [status, remaining] of [[200, 2], [200, 1], [200, 0], [429, 0]]) {
        const response = await get(url)
        assert.equal(response.status, status)
        assert.equal(response.headers.get('x-ratelimit-limit'), '3')
        assert.equal(response.headers.get('x-ratelimit-remaining'), String(remaining))
        assert.equal(response.headers.get('x-ratelimit-reset'), String((T0 + MINUTE) / SECOND))
        assert.equal(response.headers.get('ratelimit'), `limit=3, remaining=${remaining}, reset=55`)
        assert.equal(response.headers.get('ratelimit-policy'), '3;w=60')
        if (status === 429) {
          assert.equal(response.headers.get('retry-after'), '55')
          assert.equal(response.text, DEFAULT_MESSAGE)
        }
      }
      mock.timers.setTime(T0 + MINUTE - 1)
      const last = await get(url)
      assert.equal(last.status, 429)
      assert.equal(last.headers.get('retry-after'), '1')
      mock.timers.setTime(T0 + MINUTE)
      const next = await get(url)
      assert.equal(next.status, 200)
      assert.equal(next.headers.get('x-ratelimit-remaining'), '2')
      assert.equal(next.headers.get('ratelimit'), 'limit=3, remaining=2, reset=60')
      assert.deepEqual(logged, [])
    })

    it('answers getKey with the hits and the window\'s end, and undefined for a key without hits', async (t) => {
      mock.timers.enable({ apis: ['Date'], now: T0 + 20 * SECOND })
      t.after(() => mock.timers.reset())
      const { url, limiter, logged } = await serveLimited(t, { store: create(), windowMs: MINUTE, limit: 5 })
      assert.equal(await limiter.getKey(KEY), undefined)
      await get(url)
      await get(url)
      assert.deepEqual(await limiter.getKey(KEY), { totalHits: 2, resetTime: new Date(T0 + MINUTE) })
      assert.equal(await limiter.getKey('10.0.0.1'), undefined)
      mock.timers.setTime(T0 + MINUTE)
      assert.equal(await limiter.getKey(KEY), undefined, 'the window has ended')
      assert.deepEqual(logged, [])
    })
  })
}

for (const [name, create] of Object.entries(stores)) {
  describe(`express-rate-limit with the Store ${name}`, () => {
    it('refuses the 4th request of 3 allowed, with the headers carrying the store\'s numbers', async (t) => {
      // A day's window, aligned to the clock (on Redis, the server's): the 4 requests fall in one.
      const { url, limiter, logged } = await serveLimited(t, { store: create(), windowMs: DAY, limit: 3, standardHeaders: 'draft-6' })
      const responses = []
      for (let i = 0; i < 4; i++) responses.push(await get(url))
      assert.deepEqual(responses.map((r) => r.status), [200, 200, 200, 429])
      assert.deepEqual(responses.map((r) => r.headers.get('x-ratelimit-remaining')), ['2', '1', '0', '0'])
      assert.deepEqual(responses.map((r) => r.headers.get('ratelimit-remaining')), ['2', '1', '0', '0'])
      const resets = new Set(responses.map((r) => Number(r.headers.get('x-ratelimit-reset'))))
      assert.equal(resets.size, 1)
      const [reset] = resets
      assert.equal(reset % (DAY / SECOND), 0, 'the window ends at midnight UTC')
      // express-rate-limit counts every request, the refused one too; the store agrees.
      const info = await limiter.getKey(KEY)
      assert.equal(info.totalHits, 4)
      assert.equal(Math.ceil(info.resetTime.getTime() / SECOND), reset)
      const retryAfter = Number(responses[3].headers.get('retry-after'))
      assert.ok(retryAfter >= 1 && retryAfter <= DAY / SECOND, `Retry-After ${retryAfter}`)
      assert.equal(responses[3].text, DEFAULT_MESSAGE)
      assert.deepEqual(logged, [])
    })

    it('lets the client through again after resetKey', async (t) => {
      const { url, limiter, logged } = await serveLimited(t, { store: create(), windowMs: DAY, limit: 1 })
      assert.equal((await get(url)).status, 200)
      assert.equal((await get(url)).status, 429)
      await limiter.resetKey(KEY)
      assert.equal(await limiter.getKey(KEY), undefined)
      const again = await get(url)
      assert.equal(again.status, 200)
      assert.equal(again.headers.get('x-ratelimit-remaining'), '0')
      assert.equal((await get(url)).status, 429)
      assert.deepEqual(logged, [])
    })

    it('lets the client through again once a short window has ended (real time)', async (t) => {
      const windowMs = 500
      const { url, logged } = await serveLimited(t, { store: create(), windowMs, limit: 1 })
      let refused
      // Windows are aligned to the clock: a second request within 500 ms is refused, unless a
      // window ended in between; one of a few is.
      for (let i = 0; i < 5 && !refused; i++) {
        const response = await get(url)
        if (response.status === 429) refused = response
      }
      assert.ok(refused, 'a request beyond the limit was refused')
      // X-RateLimit-Reset is the window's end rounded up to the second.
      const resetAt = Number(refused.headers.get('x-ratelimit-reset')) * SECOND
      assert.ok(resetAt - Date.now() <= windowMs + SECOND, `the window is windowMs long (reset at ${resetAt}, now ${Date.now()})`)
      await sleep(Math.max(0, resetAt - Date.now()) + 50)
      assert.equal((await get(url)).status, 200)
      assert.deepEqual(logged, [])
    })

    it('does not count failed requests with skipFailedRequests (decrement)', async (t) => {
      const { url, limiter, logged } = await serveLimited(t, { store: create(), windowMs: DAY, limit: 2, skipFailedRequests: true })
      for (let i = 0; i < 4; i++) {
        assert.equal((await get(`${url}/fail`)).status, 500)
        // express-rate-limit decrements once the response has finished.
        await eventually(async () => (await limiter.getKey(KEY)) === undefined, 'the failed request is not counted')
      }
      assert.deepEqual([(await get(url)).status, (await get(url)).status, (await get(url)).status], [200, 200, 429])
      // A 429 is a failed request too: its hit is taken back.
      await eventually(async () => (await limiter.getKey(KEY))?.totalHits === 2, 'the 429 is not counted')
      assert.deepEqual(logged, [])
    })

    it('raises no complaint from express-rate-limit\'s validations, whatever the headers', async (t) => {
      for (const standardHeaders of [false, 'draft-6', 'draft-7', 'draft-8']) {
        const { url, logged } = await serveLimited(t, { store: create(), windowMs: MINUTE, limit: 2, standardHeaders, validate: true })
        const statuses = []
        for (let i = 0; i < 3; i++) statuses.push((await get(url)).status)
        assert.deepEqual(statuses, [200, 200, 429], `standardHeaders: ${standardHeaders}`)
        assert.deepEqual(logged, [], `standardHeaders: ${standardHeaders}`)
      }
    })

    it('is seen right by express-rate-limit\'s checks: one store per limiter; two limiters in one app count once each', async (t) => {
      // The checks are live: a store given to two limiters is reported.
      const store = create()
      const first = limitedApp({ store, windowMs: MINUTE })
      const second = limitedApp({ store, windowMs: MINUTE })
      assert.deepEqual(first.logged, [])
      assert.deepEqual(second.logged.map((entry) => entry.code), ['ERR_ERL_STORE_REUSE'])
      // Two limiters (a burst limit and a daily one) on stores of their own. On Redis, the stores
      // share counts when they share a prefix (localKeys false): express-rate-limit reports that
      // one key counted twice, and not when the prefixes differ. In memory, stores never share.
      const cases = name === 'in memory'
        ? [[(prefix) => new Store({ prefix }), 'same prefix', []]]
        : [
            [(prefix) => new Store({ client: redis.server.url, prefix }), 'same prefix', ['ERR_ERL_DOUBLE_COUNT']],
            [() => new Store({ client: redis.server.url, prefix: uniquePrefix() }), 'own prefixes', []],
          ]
      for (const [make, what, expected] of cases) {
        const prefix = uniquePrefix()
        const logged = []
        const logger = { warn: (error) => logged.push(error.code), error: (error) => logged.push(error.code) }
        const app = express()
        app.use(rateLimit({ store: make(prefix), windowMs: MINUTE, limit: 5, logger }))
        app.use(rateLimit({ store: make(prefix), windowMs: DAY, limit: 5, logger }))
        app.get('/', (req, res) => res.send('ok'))
        const url = await serve(t, app)
        assert.equal((await get(url)).status, 200)
        assert.deepEqual(logged, expected, what)
      }
    })

    it('takes one hit back without going below 0 or creating a key', async () => {
      const store = create()
      store.init({ windowMs: DAY })
      await store.decrement('nobody')
      assert.equal(await store.get('nobody'), undefined)
      if (name === 'on Redis') assert.equal(await redis.server.cli('EXISTS', `${store.prefix}nobody`), '0')
      assert.equal((await store.increment('u')).totalHits, 1)
      assert.equal((await store.increment('u')).totalHits, 2)
      for (let i = 0; i < 3; i++) await store.decrement('u')
      assert.equal(await store.get('u'), undefined)
      assert.equal((await store.increment('u')).totalHits, 1)
      await store.resetKey('u')
      assert.equal(await store.get('u'), undefined)
    })

    it('answers like express-rate-limit\'s stores to its documented behaviours', async (t) => {
      // The same requests through rate-limit-redis on the same Redis (or the MemoryStore), and
      // through this store: the same statuses, remaining counts and hits.
      let reference
      if (name === 'on Redis') {
        const client = new IORedis({ host: redis.server.host, port: redis.server.port })
        t.after(() => client.disconnect())
        reference = new RateLimitRedisStore({ sendCommand: (...args) => client.call(...args), prefix: uniquePrefix() })
      } else {
        reference = new MemoryStore()
        t.after(() => reference.shutdown())
      }
      const traces = []
      for (const store of [reference, create()]) {
        const { url, limiter, logged } = await serveLimited(t, { store, windowMs: DAY, limit: 3, skipFailedRequests: true, standardHeaders: 'draft-7' })
        const trace = []
        // rate-limit-redis answers a key without hits with totalHits NaN or 0, the MemoryStore 0 or
        // undefined, this store undefined: all are 0 here.
        const hits = async () => {
          const info = await limiter.getKey(KEY)
          return info?.totalHits > 0 ? info.totalHits : 0
        }
        for (const step of ['/', '/fail', '/', 'resetKey', '/', '/', '/', '/', '/fail']) {
          if (step === 'resetKey') {
            await limiter.resetKey(KEY)
            trace.push(['resetKey', await hits()])
            continue
          }
          const before = await hits()
          const response = await get(url + step)
          // A failed request's hit (a 429's too) is taken back after the response: wait for it.
          if (response.status >= 400) await eventually(async () => (await hits()) === before, 'the decrement')
          trace.push([step, response.status, response.headers.get('x-ratelimit-remaining'), response.headers.get('ratelimit').replace(/, reset=\d+$/, ''), await hits()])
        }
        assert.deepEqual(logged, [])
        traces.push(trace)
      }
      assert.deepEqual(traces[1], traces[0])
      // And what the steps gave, for the record:
      assert.deepEqual(traces[1].map(([step, status]) => `${step} ${status}`), [
        '/ 200', '/fail 500', '/ 200', 'resetKey 0', '/ 200', '/ 200', '/ 200', '/ 429', '/fail 429',
      ])
    })

    it('sends a store error to Express, or lets the request through with passOnStoreError', async (t) => {
      for (const passOnStoreError of [false, true]) {
        // A windowMs the window cannot take: init throws (express-rate-limit logs it) and every
        // call then rejects with that error, rather than counting in a window of another length.
        const { url, logged } = await serveLimited(t, { store: create(), windowMs: 0, passOnStoreError })
        assert.deepEqual(logged.map((entry) => [entry.error.name, entry.code]), [['RangeError', 'ERR_INVALID_OPTION']])
        assert.match(logged[0].error.message, /express-rate-limit's `windowMs` must be/)
        const response = await get(url)
        assert.deepEqual([response.status, response.text], passOnStoreError ? [200, 'ok'] : [500, 'error: ERR_INVALID_OPTION'])
      }
    })
  })
}

describe('the Store on Redis', () => {
  it('shares the count between two apps with their own Store instances on one Redis', async (t) => {
    const prefix = uniquePrefix()
    const ioredis = new IORedis({ host: redis.server.host, port: redis.server.port, lazyConnect: true })
    const a = await serveLimited(t, { store: new Store({ client: redis.server.url, prefix }), windowMs: DAY, limit: 3 })
    const b = await serveLimited(t, { store: new Store({ client: ioredis, prefix }), windowMs: DAY, limit: 3 })
    const responses = []
    for (const url of [a.url, b.url, a.url, b.url]) responses.push(await get(url))
    assert.deepEqual(responses.map((r) => r.status), [200, 200, 200, 429])
    assert.deepEqual(responses.map((r) => r.headers.get('x-ratelimit-remaining')), ['2', '1', '0', '0'])
    assert.equal((await a.limiter.getKey(KEY)).totalHits, 4)
    await b.limiter.resetKey(KEY)
    assert.equal((await get(a.url)).status, 200)
    assert.deepEqual([...a.logged, ...b.logged], [])
  })

  it('in memory, two apps count apart (localKeys)', async (t) => {
    const a = await serveLimited(t, { store: new Store(), windowMs: DAY, limit: 1 })
    const b = await serveLimited(t, { store: new Store(), windowMs: DAY, limit: 1 })
    assert.deepEqual([(await get(a.url)).status, (await get(b.url)).status, (await get(a.url)).status], [200, 200, 429])
  })

  it('takes the client in every form the limiters take, all on the same counts', async () => {
    const prefix = uniquePrefix()
    const { url, host, port } = redis.server
    const clients = [
      url,
      { host, port },
      new RedisStore(url),
      new IORedis({ host, port, lazyConnect: true }),
      createClient({ url }),
    ]
    for (const [i, client] of clients.entries()) {
      const store = new Store({ client, prefix })
      assert.equal(store.localKeys, false)
      assert.equal(store.prefix, prefix)
      store.init({ windowMs: DAY })
      assert.equal((await store.increment('k')).totalHits, i + 1)
    }
    assert.equal(await redis.server.cli('TYPE', `${prefix}k`), 'hash')
  })

  it('keeps its keys apart from rate-limit-redis\'s by default, so both can run during a switch', async () => {
    const store = new Store({ client: redis.server.url })
    assert.equal(store.prefix, 'ratekeeper:erl:')
    const client = new IORedis({ host: redis.server.host, port: redis.server.port })
    try {
      const theirs = new RateLimitRedisStore({ sendCommand: (...args) => client.call(...args) })
      await theirs.init({ windowMs: DAY })
      store.init({ windowMs: DAY })
      const id = `switch-${Date.now()}`
      assert.equal((await theirs.increment(id)).totalHits, 1)
      assert.equal((await store.increment(id)).totalHits, 1)
      assert.equal((await theirs.increment(id)).totalHits, 2)
      assert.equal(await redis.server.cli('TYPE', `rl:${id}`), 'string')
      assert.equal(await redis.server.cli('TYPE', `ratekeeper:erl:${id}`), 'hash')
    } finally {
      client.disconnect()
    }
  })
})

describe('the Store module', () => {
  it('checks its options at construction, with codes', () => {
    assert.throws(() => new Store(null), { name: 'TypeError', code: 'ERR_INVALID_OPTION' })
    assert.throws(() => new Store('redis://127.0.0.1:6380'), { name: 'TypeError', code: 'ERR_INVALID_OPTION' })
    assert.throws(() => new Store({ windowMs: 1000 }), { name: 'TypeError', code: 'ERR_UNKNOWN_OPTION' })
    assert.throws(() => new Store({ prefix: 5 }), { name: 'TypeError', code: 'ERR_INVALID_OPTION' })
    assert.throws(() => new Store({ prefix: 'x'.repeat(2000) }), { name: 'RangeError', code: 'ERR_INVALID_OPTION' })
    assert.throws(() => new Store({ client: 42 }), { name: 'TypeError', code: 'ERR_INVALID_OPTION' })
    assert.throws(() => new Store({ clock: 'sundial' }), { name: 'RangeError', code: 'ERR_INVALID_OPTION' })
    assert.throws(() => new Store({ clock: 'redis' }), { name: 'RangeError', code: 'ERR_INVALID_OPTION' })
    const store = new Store()
    assert.deepEqual({ prefix: store.prefix, localKeys: store.localKeys }, { prefix: 'ratekeeper:erl:', localKeys: true })
    assert.throws(() => store.init({ windowMs: '1m' }), { name: 'TypeError', code: 'ERR_INVALID_OPTION' })
    assert.throws(() => store.init({ windowMs: -1 }), { name: 'RangeError', code: 'ERR_INVALID_OPTION', message: /express-rate-limit's `windowMs`/ })
  })

  it('rejects calls before init, and bad keys', async () => {
    const store = new Store()
    await assert.rejects(store.increment('k'), { code: 'ERR_INVALID_ARGUMENT', message: /init/ })
    await assert.rejects(store.get('k'), { code: 'ERR_INVALID_ARGUMENT' })
    store.init({ windowMs: MINUTE })
    await assert.rejects(store.increment(''), { code: 'ERR_INVALID_ID' })
    await assert.rejects(store.increment({}), { code: 'ERR_INVALID_ID' })
  })

  it('loads as ratekeeper/express-rate-limit, from CommonJS and from ES modules', async (t) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ratekeeper-erl-'))
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
    fs.mkdirSync(path.join(dir, 'node_modules'))
    fs.symlinkSync(path.join(__dirname, '..'), path.join(dir, 'node_modules', 'ratekeeper'), 'dir')
    assert.equal(createRequire(path.join(dir, 'app.js'))('ratekeeper/express-rate-limit').Store, Store)
    const esm = await import('../express-rate-limit.js')
    assert.equal(esm.Store, Store)
    const { files } = require('../package.json')
    assert.ok(files.includes('express-rate-limit.js') && files.includes('express-rate-limit.d.ts'))
  })

  it('is declared as express-rate-limit\'s Store type (its declarations need @types/express: checked without)', (t) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ratekeeper-erl-types-'))
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
    const theirs = JSON.stringify(path.join(path.dirname(require.resolve('express-rate-limit')), '..'))
    const ours = JSON.stringify(path.join(__dirname, '..', 'express-rate-limit'))
    const file = path.join(dir, 'check.ts')
    fs.writeFileSync(file, [
      `import type { Store as ExpressRateLimitStore, rateLimit as RateLimit } from ${theirs}`,
      `import { Store } from ${ours}`,
      'const store: ExpressRateLimitStore = new Store()',
      'declare const rateLimit: typeof RateLimit',
      "rateLimit({ windowMs: 1000, store: new Store({ client: 'redis://127.0.0.1:6380' }) })",
      '// @ts-expect-error the shape is checked: an object without increment is no store',
      'const notAStore: ExpressRateLimitStore = { decrement() {}, resetKey() {} }',
      'console.log(store, notAStore)',
    ].join('\n'))
    const tsc = require.resolve('typescript/bin/tsc')
    const result = spawnSync(process.execPath, [tsc, '--noEmit', '--strict', '--skipLibCheck', '--module', 'commonjs', '--target', 'es2022', file], { encoding: 'utf8' })
    assert.equal(result.status, 0, result.stdout + result.stderr)
  })
})
