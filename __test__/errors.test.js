'use strict'

// Bad input gets a TypeError or RangeError with a stable code; Redis trouble gets
// ERR_STORE_UNAVAILABLE within commandTimeoutMs, and the limiter recovers by itself.

const { describe, it, before, after } = require('node:test')
const assert = require('node:assert/strict')

const { RollingWindow } = require('../binding.js')
const { RateLimiter, InMemoryRateLimiter, RedisRateLimiter, RedisStore, FixedWindow, SlidingWindow, createRateLimit, createClient } = require('..')
const { freePort, withRedisServer } = require('./helpers/redis-server.js')

const valid = { interval: 1000, maxInInterval: 10 }

describe('constructor options', () => {
  const cases = [
    ['options missing', undefined, 'TypeError', 'ERR_INVALID_OPTION'],
    ['options null', null, 'TypeError', 'ERR_INVALID_OPTION'],
    ['options an array', [], 'TypeError', 'ERR_INVALID_OPTION'],
    ['interval missing', { maxInInterval: 1 }, 'TypeError', 'ERR_INVALID_OPTION', /`interval`/],
    ['maxInInterval missing', { interval: 1 }, 'TypeError', 'ERR_INVALID_OPTION', /`maxInInterval`/],
    ['interval a string', { ...valid, interval: '1000' }, 'TypeError', 'ERR_INVALID_OPTION', /`interval`/],
    ['interval zero', { ...valid, interval: 0 }, 'RangeError', 'ERR_INVALID_OPTION', /`interval`/],
    ['interval negative', { ...valid, interval: -1 }, 'RangeError', 'ERR_INVALID_OPTION', /`interval`/],
    ['interval NaN', { ...valid, interval: NaN }, 'RangeError', 'ERR_INVALID_OPTION', /`interval`/],
    ['interval Infinity', { ...valid, interval: Infinity }, 'RangeError', 'ERR_INVALID_OPTION', /`interval`/],
    ['interval huge', { ...valid, interval: 1e15 }, 'RangeError', 'ERR_INVALID_OPTION', /`interval`/],
    ['maxInInterval zero', { ...valid, maxInInterval: 0 }, 'RangeError', 'ERR_INVALID_OPTION', /`maxInInterval`/],
    ['maxInInterval negative', { ...valid, maxInInterval: -1 }, 'RangeError', 'ERR_INVALID_OPTION', /`maxInInterval`/],
    ['maxInInterval fractional', { ...valid, maxInInterval: 2.5 }, 'RangeError', 'ERR_INVALID_OPTION', /`maxInInterval`/],
    ['maxInInterval huge', { ...valid, maxInInterval: 2e15 }, 'RangeError', 'ERR_INVALID_OPTION', /`maxInInterval`/],
    ['minDifference negative', { ...valid, minDifference: -1 }, 'RangeError', 'ERR_INVALID_OPTION', /`minDifference`/],
    ['recordBlocked not a boolean', { ...valid, recordBlocked: 'yes' }, 'TypeError', 'ERR_INVALID_OPTION', /`recordBlocked`/],
    ['clock redis in memory', { ...valid, clock: 'redis' }, 'RangeError', 'ERR_INVALID_OPTION', /`clock/],
    ['an unknown option', { ...valid, maxInIntervall: 5 }, 'TypeError', 'ERR_UNKNOWN_OPTION', /`maxInIntervall`/],
  ]
  for (const [name, options, errorName, code, message] of cases) {
    it(`rejects ${name}`, () => {
      for (const construct of [() => new RateLimiter(options), () => new InMemoryRateLimiter(options)]) {
        assert.throws(construct, (error) => {
          assert.equal(error.name, errorName)
          assert.equal(error.code, code)
          if (message) assert.match(error.message, message)
          return true
        })
      }
    })
  }

  it('accepts minDifference missing or zero', () => {
    new RateLimiter(valid)
    new RateLimiter({ ...valid, minDifference: 0 })
  })

  it('checks hashIds and maxKeys', () => {
    const windows = { limits: [{ duration: 1000, limit: 1 }] }
    assert.throws(() => new FixedWindow({ ...windows, hashIds: 'yes' }), { name: 'TypeError', code: 'ERR_INVALID_OPTION', message: /`hashIds`/ })
    for (const maxKeys of [0, -1, 1.5, NaN, 1e10]) {
      assert.throws(() => new FixedWindow({ ...windows, maxKeys }), { name: 'RangeError', code: 'ERR_INVALID_OPTION', message: /`maxKeys`/ })
      assert.throws(() => new RateLimiter({ ...valid, maxKeys }), { name: 'RangeError', code: 'ERR_INVALID_OPTION' })
    }
    assert.throws(() => new SlidingWindow({ ...windows, maxKeys: '10' }), { name: 'TypeError', code: 'ERR_INVALID_OPTION' })
    assert.throws(() => createRateLimit('a', { maxKeys: -5 }), { name: 'RangeError', code: 'ERR_INVALID_OPTION' })
    // maxKeys bounds memory; Redis keys expire by themselves.
    assert.throws(() => new FixedWindow({ ...windows, maxKeys: 10, client: 'redis://127.0.0.1:1' }), { name: 'RangeError', message: /`maxKeys`/ })
  })

  it('rejects a bad client', () => {
    for (const client of [42, true, () => {}, new Date()]) {
      assert.throws(() => new RedisRateLimiter({ ...valid, client }), { name: 'TypeError', code: 'ERR_INVALID_OPTION' })
    }
    assert.throws(() => new RedisRateLimiter(valid), { name: 'TypeError', code: 'ERR_INVALID_OPTION', message: /`client`/ })
    assert.throws(() => new InMemoryRateLimiter({ ...valid, client: 'redis://127.0.0.1:1' }), { code: 'ERR_INVALID_OPTION' })
  })

  it('rejects bad Redis options', () => {
    const cases = [
      [{ port: 0 }, 'RangeError', /`port`/],
      [{ port: 70000 }, 'RangeError', /`port`/],
      [{ port: '6379' }, 'TypeError', /`port`/],
      [{ db: -1 }, 'RangeError', /`db`/],
      [{ commandTimeoutMs: 0 }, 'RangeError', /`commandTimeoutMs`/],
      [{ connectTimeoutMs: NaN }, 'RangeError', /`connectTimeoutMs`/],
      [{ cluster: 'redis://x' }, 'TypeError', /`cluster`/],
      [{ cluster: [] }, 'RangeError', /`cluster`/],
      [{ url: 'http://example.test' }, 'RangeError', /`url`/],
      [{ hots: 'localhost' }, 'TypeError', /`hots`/],
      [{ tls: 'yes' }, 'TypeError', /`tls`/],
      [{ tls: { ca: 42 } }, 'TypeError', /`ca`/],
      [{ tls: { ca: 'not a certificate' } }, 'RangeError', /PEM/],
      [{ tls: { cert: 'x' } }, 'RangeError', /`tls.cert` and `tls.key`/],
      [{ tls: { servername: 'a', cluster: true } }, 'TypeError', /`cluster`/],
      [{ tls: { servername: 'redis.test' }, cluster: ['redis://127.0.0.1:7000'] }, 'RangeError', /servername/],
      [{ tls: { rejectUnauthorised: false } }, 'TypeError', /rejectUnauthorised/],
    ]
    for (const [options, name, message] of cases) {
      assert.throws(() => new RedisStore(options), (error) => {
        assert.equal(error.name, name, JSON.stringify(options))
        assert.match(error.code, /^ERR_(INVALID|UNKNOWN)_OPTION$/)
        assert.match(error.message, message)
        return true
      })
    }
  })

  it('never echoes a password from a URL', () => {
    assert.throws(() => new RedisStore('bogus://user:hunter2@example.test'), (error) => {
      assert.doesNotMatch(error.message, /hunter2/)
      return true
    })
  })
})

describe('call arguments', () => {
  const limiter = new RateLimiter(valid)
  const cases = [
    ['an empty id', '', 'RangeError', 'ERR_INVALID_ID'],
    ['an id over 1 KiB', 'x'.repeat(1025), 'RangeError', 'ERR_INVALID_ID'],
    ['an id over 1 KiB in UTF-8', 'é'.repeat(513), 'RangeError', 'ERR_INVALID_ID'],
    ['a NaN id', NaN, 'RangeError', 'ERR_INVALID_ID'],
    ['an Infinity id', Infinity, 'RangeError', 'ERR_INVALID_ID'],
    ['a null id', null, 'TypeError', 'ERR_INVALID_ID'],
    ['an object id', {}, 'TypeError', 'ERR_INVALID_ID'],
    ['a boolean id', true, 'TypeError', 'ERR_INVALID_ID'],
    ['a symbol id', Symbol('id'), 'TypeError', 'ERR_INVALID_ID'],
  ]
  for (const [name, id, errorName, code] of cases) {
    it(`rejects ${name} in every method`, async () => {
      for (const method of ['limit', 'limitWithInfo', 'wouldLimit', 'wouldLimitWithInfo', 'clear']) {
        await assert.rejects(limiter[method](id), { name: errorName, code }, method)
      }
    })
  }

  it('accepts an id of exactly 1 KiB', async () => {
    assert.equal(await limiter.limit('x'.repeat(1024)), false)
  })

  it('rejects a bad { now }', async () => {
    for (const now of [-1, NaN, Infinity, 1e16]) {
      await assert.rejects(limiter.limit('a', { now }), { name: 'RangeError', code: 'ERR_INVALID_ARGUMENT' })
    }
    await assert.rejects(limiter.limit('a', { now: '5' }), { name: 'TypeError', code: 'ERR_INVALID_ARGUMENT' })
    await assert.rejects(limiter.limit('a', { when: 5 }), { name: 'TypeError', code: 'ERR_UNKNOWN_OPTION' })
    await assert.rejects(limiter.limit('a', 5), { name: 'TypeError', code: 'ERR_INVALID_ARGUMENT' })
  })

  it('leaves the limit untouched after a rejected call', async () => {
    const one = new RateLimiter({ interval: 1000, maxInInterval: 1 })
    await assert.rejects(one.limit('a', { now: -1 }))
    assert.equal(await one.limit('a', { now: 0 }), false)
  })
})

describe('Redis unavailable', () => {
  it('rejects with ERR_STORE_UNAVAILABLE when nothing listens, with the cause', async () => {
    const port = await freePort()
    const limiter = new RedisRateLimiter({ ...valid, client: { port, commandTimeoutMs: 300 } })
    await assert.rejects(limiter.limit('a'), (error) => {
      assert.equal(error.code, 'ERR_STORE_UNAVAILABLE')
      assert.ok(error.cause instanceof Error, 'has a cause')
      assert.match(error.message, new RegExp(`127\\.0\\.0\\.1:${port}`))
      return true
    })
  })

  it('RedisStore.connect rejects without the password in the message', async () => {
    const port = await freePort()
    await assert.rejects(RedisStore.connect(`redis://user:hunter2@127.0.0.1:${port}`), (error) => {
      assert.equal(error.code, 'ERR_STORE_UNAVAILABLE')
      assert.doesNotMatch(error.message, /hunter2/)
      assert.doesNotMatch(String(error.cause && error.cause.message), /hunter2/)
      return true
    })
  })

  it('rejects within commandTimeoutMs when Redis hangs, then recovers when it answers again', async () => {
    await withRedisServer(async (server) => {
      const store = await RedisStore.connect({ url: server.url, commandTimeoutMs: 300 })
      const limiter = new RedisRateLimiter({ ...valid, client: store, namespace: 'hang:' })
      assert.equal(await limiter.limit('a'), false)
      process.kill(server.pid, 'SIGSTOP')
      try {
        await assert.rejects(limiter.limit('a'), { code: 'ERR_STORE_UNAVAILABLE' })
      } finally {
        process.kill(server.pid, 'SIGCONT')
      }
      let answer
      for (let attempt = 0; attempt < 50 && answer === undefined; attempt++) {
        answer = await limiter.limit('a').catch(() => undefined)
      }
      assert.equal(answer, false)
      await store.close()
    })
  })

  it('recovers by itself when Redis is stopped mid-run and restarted', async () => {
    await withRedisServer(async (server) => {
      const store = await RedisStore.connect({ url: server.url, commandTimeoutMs: 500 })
      const limiter = new RedisRateLimiter({ interval: 60_000, maxInInterval: 2, client: store, namespace: 'restart:' })
      assert.equal(await limiter.limit('a'), false)
      await server.stop()
      await assert.rejects(limiter.limit('a'), { code: 'ERR_STORE_UNAVAILABLE' })
      await server.restart()
      // Reconnection happens in the background: retry for a while (no sleep-based assertion).
      let answer
      for (let attempt = 0; attempt < 100 && answer === undefined; attempt++) {
        answer = await limiter.limit('a').catch(async () => {
          await new Promise((resolve) => setTimeout(resolve, 50))
          return undefined
        })
      }
      // The restarted server kept nothing (no persistence): the script was loaded again
      // (NOSCRIPT) and the log starts afresh.
      assert.equal(answer, false)
      assert.equal(await server.cli('ZCARD', 'restart:a'), '1')
      await store.close()
    })
  })

  it('rejects calls on a closed store with ERR_STORE_CLOSED', async () => {
    await withRedisServer(async (server) => {
      const store = new RedisStore(server.url)
      const limiter = new RedisRateLimiter({ ...valid, client: store })
      await store.close()
      assert.equal(store.closed, true)
      await assert.rejects(limiter.limit('a'), { code: 'ERR_STORE_CLOSED' })
    })
  })

  it('answers ERR_STORE_ERROR when the key holds another type', async () => {
    await withRedisServer(async (server) => {
      await server.cli('SET', 'wrong:a', 'a string')
      const limiter = new RedisRateLimiter({ ...valid, client: server.url, namespace: 'wrong:' })
      await assert.rejects(limiter.limit('a'), (error) => {
        assert.equal(error.code, 'ERR_STORE_ERROR')
        assert.match(error.message, /WRONGTYPE/)
        return true
      })
    })
  })
})

describe('calls sent together', () => {
  it('fail alone: a key of the wrong type rejects its own call, not its batch', async () => {
    await withRedisServer(async (server) => {
      await server.cli('SET', 'mixed:bad', 'a string')
      const limiter = new RedisRateLimiter({ ...valid, client: server.url, namespace: 'mixed:' })
      const ids = Array.from({ length: 50 }, (_, i) => (i === 25 ? 'bad' : `good-${i}`))
      const answers = await Promise.allSettled(ids.map((id) => limiter.limit(id)))
      assert.deepEqual(
        answers.map((a) => a.status),
        ids.map((id) => (id === 'bad' ? 'rejected' : 'fulfilled')),
      )
      assert.equal(answers[25].reason.code, 'ERR_STORE_ERROR')
      assert.ok(answers.every((a, i) => i === 25 || a.value === false))
    })
  })
})

describe('the native class directly', () => {
  it('validates its options too', () => {
    assert.throws(() => new RollingWindow({ interval: 1 }), { code: 'ERR_INVALID_OPTION' })
  })
})

describe('ids', () => {
  it('every method of the class APIs refuses a missing id; only the callback API has a global limit', async () => {
    const windows = { limits: [{ duration: 1000, limit: 1 }] }
    for (const limiter of [new FixedWindow(windows), new SlidingWindow(windows)]) {
      for (const call of ['consume', 'peek', 'reset']) {
        await assert.rejects(limiter[call](undefined), { name: 'TypeError', code: 'ERR_INVALID_ID' }, call)
        await assert.rejects(limiter[call]([undefined]), { name: 'TypeError', code: 'ERR_INVALID_ID' }, call)
      }
    }
    const redback = createRateLimit('a')
    await assert.rejects(redback.add(undefined), { name: 'TypeError', code: 'ERR_INVALID_ID' })
    await assert.rejects(redback.count(undefined, 10), { name: 'TypeError', code: 'ERR_INVALID_ID' })
    await assert.rejects(redback.addCount(undefined, 10), { name: 'TypeError', code: 'ERR_INVALID_ID' })
    for (const bad of [null, '', NaN, {}, [], Symbol('s'), 10n, () => {}]) {
      await assert.rejects(new RateLimiter(valid).limit(bad), { code: 'ERR_INVALID_ID' }, String(typeof bad))
    }
    const callback = RateLimiter({ interval: 1000, maxInInterval: 1 })
    assert.equal(await callback(), 0)
    assert.ok((await callback()) > 0)
  })
})

describe('maxKeys', () => {
  it('keeps at most maxKeys ids in memory, evicting the least recently used', async () => {
    const limiter = new FixedWindow({ maxKeys: 100, limits: [{ duration: 60_000, limit: 2 }] })
    const rolling = new InMemoryRateLimiter({ ...valid, maxKeys: 100 })
    for (let i = 0; i < 1000; i++) {
      await limiter.consume(`id-${i}`, { now: 0 })
      await rolling.limit(`id-${i}`, { now: 0 })
      assert.ok(limiter.trackedIds <= 100 && rolling.trackedIds <= 100)
    }
    // Every id is still active in its window: none was idle, all that left were evicted.
    assert.equal(limiter.trackedIds + limiter.evictedIds, 1000)
    assert.equal(rolling.trackedIds + rolling.evictedIds, 1000)
    // An evicted id starts afresh: the price of the bound.
    assert.equal((await limiter.consume('id-0', { now: 0 })).remaining, 1)
    assert.equal((await limiter.consume('id-999', { now: 0 })).remaining, 0)
  })
})


// Each of these was found by the property-based fuzz test (__test__/fuzz.test.js).
describe('regressions found by fuzzing', () => {
  const marker = () => Object.assign(new Error('the caller threw'), { mine: true })
  const throwingNow = () => ({
    get now() {
      throw marker()
    },
  })

  it("redback's add refuses an `interval` option (count's argument), even undefined, and counts nothing", async () => {
    const limit = createRateLimit('requests')
    const T = 1_700_000_000_000
    for (const options of [{ interval: 60 }, { now: T, interval: undefined }]) {
      await assert.rejects(limit.add('a', options), { name: 'TypeError', code: 'ERR_UNKNOWN_OPTION', message: /`interval`/ })
      await assert.rejects(limit.add(['a', 'b'], options), { name: 'TypeError', code: 'ERR_UNKNOWN_OPTION' })
    }
    assert.equal(await limit.count('a', 60, { now: T }), 0)
  })

  it('a value without a prototype in an option is described in the error, not converted (which throws)', async () => {
    const bare = Object.create(null)
    const store = new RedisStore({ port: 1, connectTimeoutMs: 50 })
    try {
      assert.throws(() => store.on(bare, () => {}), { name: 'RangeError', code: 'ERR_INVALID_ARGUMENT', message: /not an object/ })
      assert.throws(
        () => new FixedWindow({ client: store, limits: [{ duration: 1000, limit: 1 }], blockCache: { maxIds: bare } }),
        { name: 'RangeError', code: 'ERR_INVALID_OPTION', message: /got an object/ },
      )
    } finally {
      await store.close()
    }
  })

  it('a positive duration that rounds to 0 microseconds is a RangeError, not a division by zero', () => {
    assert.throws(() => new SlidingWindow({ limits: [{ duration: 1000, limit: 1, precision: 0.0004 }] }), { name: 'RangeError', code: 'ERR_INVALID_OPTION' })
    assert.throws(() => new FixedWindow({ limits: [{ duration: 0.0004, limit: 1 }] }), { name: 'RangeError', code: 'ERR_INVALID_OPTION' })
    assert.throws(() => new RateLimiter({ interval: 0.0004, maxInInterval: 1 }), { name: 'RangeError', code: 'ERR_INVALID_OPTION' })
  })

  it("a call whose options throw (a getter, a Proxy trap) rejects with that error and counts nothing", async () => {
    const windows = new FixedWindow({ limits: [{ duration: 60_000, limit: 1 }] })
    await assert.rejects(windows.consume('a', throwingNow()), { mine: true })
    await assert.rejects(windows.consume('a', new Proxy({}, { ownKeys() { throw marker() } })), { mine: true })
    assert.equal((await windows.consume('a')).allowed, true)
    const rolling = new RateLimiter({ interval: 60_000, maxInInterval: 1 })
    await assert.rejects(rolling.limit('a', throwingNow()), { mine: true })
    assert.equal(await rolling.limit('a'), false)
    const redback = createRateLimit('a')
    await assert.rejects(redback.add('s', throwingNow()), { mine: true })
    assert.equal(await redback.count('s', 600), 0)
  })

  it('methods that return a Promise reject instead of throwing', async () => {
    await assert.rejects(new RateLimiter(valid).entries('a', throwingNow()), { mine: true })
    await assert.rejects(RedisStore.connect(new Proxy({ port: 1 }, { get() { throw marker() } })), { mine: true })
    await assert.rejects(createRateLimit('x').count('a', 10, new Proxy({}, { ownKeys() { throw marker() } })), { mine: true })
  })

  it('ids holding a lone surrogate are refused, so that they cannot share a counter', async () => {
    const windows = new FixedWindow({ limits: [{ duration: 60_000, limit: 1 }] })
    for (const id of ['\uD800', '\uDFFF', 'a\uD800b']) {
      await assert.rejects(windows.consume(id), { name: 'RangeError', code: 'ERR_INVALID_ID' })
    }
    // A real U+FFFD (and any well-formed text) is an id like any other.
    assert.equal((await windows.consume('\uFFFD')).allowed, true)
    assert.equal((await windows.consume('😀')).allowed, true)
  })

  it("redback: an add of several subjects counts none when one is invalid; circles need 3 buckets; createClient's options are checked", async () => {
    const redback = createRateLimit('a')
    await assert.rejects(redback.add(['a', null]), { code: 'ERR_INVALID_ID' })
    assert.equal(await redback.count('a', 600), 0)
    assert.throws(() => createRateLimit('a', { bucket_span: 10, bucket_interval: 5 }), { name: 'RangeError', code: 'ERR_INVALID_OPTION' })
    assert.throws(() => createClient('redis://127.0.0.1:1', { namespce: 'app' }), { code: 'ERR_UNKNOWN_OPTION' })
  })

  it('redback calls nobody awaits do not become unhandled rejections', async () => {
    const unhandled = []
    const onUnhandled = (reason) => unhandled.push(reason)
    process.on('unhandledRejection', onUnhandled)
    try {
      const port = await freePort()
      const redback = createRateLimit('a', { client: { url: `redis://127.0.0.1:${port}`, connectTimeoutMs: 100, commandTimeoutMs: 100 } })
      redback.add('127.0.0.1') // as in redback's README: not awaited
      redback.add(null).count('a', 10)
      await new Promise((resolve) => setTimeout(resolve, 300))
      assert.deepEqual(unhandled, [])
      // Whoever awaits still sees the failure.
      await assert.rejects(redback.add('127.0.0.1'), { code: 'ERR_STORE_UNAVAILABLE' })
    } finally {
      process.off('unhandledRejection', onUnhandled)
    }
  })

  it('entries() on Redis gives at most maxInInterval entries, even of a set written with a larger limit', async () => {
    await withRedisServer(async (server) => {
      const wide = new RateLimiter({ interval: 60_000, maxInInterval: 10, client: server.url, namespace: 'en:' })
      await wide.consume('a', { weight: 5, now: 1000 })
      const narrow = new RateLimiter({ interval: 60_000, maxInInterval: 2, client: server.url, namespace: 'en:' })
      const entries = await narrow.entries('a', { now: 1000 })
      assert.equal(entries.length, 2)
      assert.equal((await wide.entries('a', { now: 1000 })).length, 5)
    })
  })
})
