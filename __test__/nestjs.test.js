'use strict'

// The storage for @nestjs/throttler (`ratekeeper/nestjs`): beside the official in-memory
// ThrottlerStorageService, increment for increment (the same records, blocks included), in
// memory and on a real redis-server; and in real Nest apps on the Express and the Fastify
// platform, side by side with the official storage: the same statuses and headers.

const { describe, it, mock } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawn, execFileSync } = require('node:child_process')
const { ThrottlerStorageService } = require('@nestjs/throttler')

const { RatekeeperThrottlerStorage } = require('../nestjs.js')
const { RedisStore } = require('..')
const { useRedisServer, withRedisServer, freePort, startCluster, clusterSkip } = require('./helpers/redis-server.js')
const { random } = require('./helpers/random.js')
const { serveNestApp, request } = require('./helpers/nestjs-app.js')

const redis = useRedisServer()

const SECOND = 1000
const MINUTE = 60 * SECOND
// An instant for the tests that set the clock (mock.timers drives Date.now()).
const T0 = 1_700_000_000_000

let prefixCounter = 0
const uniquePrefix = () => `nest-${++prefixCounter}:`

/** The storages under test whose clock is `Date.now()`, each on a fresh prefix. */
const clockedStorages = {
  'in memory': () => new RatekeeperThrottlerStorage(),
  "on Redis with clock: 'local'": () => new RatekeeperThrottlerStorage({ client: redis.server.url, prefix: uniquePrefix(), clock: 'local' }),
}

/** Sets Date.now() to T0 until the test ends. */
function mockClock(t) {
  mock.timers.enable({ apis: ['Date'], now: T0 })
  t.after(() => mock.timers.reset())
}

/** The official storage, its sweep timer stopped when the test ends. */
function officialStorage(t) {
  const storage = new ThrottlerStorageService()
  t.after(() => storage.onApplicationShutdown())
  return storage
}

/**
 * The official record as ours reports it: `timeToBlockExpire` is 0 when not blocked (the official
 * storage leaves there minus the seconds since its last block, or since 1970).
 */
const comparable = (record) => ({ ...record, timeToBlockExpire: record.isBlocked ? record.timeToBlockExpire : 0 })

const rec = (totalHits, timeToExpire, isBlocked, timeToBlockExpire) => ({ totalHits, timeToExpire, isBlocked, timeToBlockExpire })

/**
 * Scenarios of one key: its throttler's `ttl`, `limit` and `blockDuration`, and per call the
 * instant (ms after T0) and the record both storages answer.
 */
const SCENARIOS = {
  'a block of the ttl (the guard\'s default): 3 hits, the 4th blocked for 10 s, the count falling as hits leave, 1 after the block': {
    ttl: 10 * SECOND,
    limit: 3,
    blockDuration: 10 * SECOND,
    calls: [
      [0, rec(1, 10, false, 0)],
      [1000, rec(2, 9, false, 0)],
      [2000, rec(3, 8, false, 0)],
      [3000, rec(4, 7, true, 10)],
      // Blocked calls are not hits: still 4.
      [5000, rec(4, 5, true, 8)],
      // The timer ran out at 10 s and starts again; the hit of 0 s has left.
      [10_500, rec(3, 10, true, 3)],
      [12_999, rec(1, 8, true, 1)],
      // The block is over: this call counts 1.
      [13_000, rec(1, 8, false, 0)],
      [13_001, rec(2, 8, false, 0)],
    ],
  },
  'a block shorter than the ttl: the hits held when it ends are forgotten': {
    ttl: 10 * SECOND,
    limit: 2,
    blockDuration: 2 * SECOND,
    calls: [
      [0, rec(1, 10, false, 0)],
      [100, rec(2, 10, false, 0)],
      [200, rec(3, 10, true, 2)],
      [2199, rec(3, 8, true, 1)],
      // 3 hits of the last 10 s, but the block forgot them.
      [2200, rec(1, 8, false, 0)],
      [2300, rec(2, 8, false, 0)],
      [2400, rec(3, 8, true, 2)],
    ],
  },
  'a block longer than the ttl: the timer starts again meanwhile': {
    ttl: SECOND,
    limit: 1,
    blockDuration: 5 * SECOND,
    calls: [
      [0, rec(1, 1, false, 0)],
      [10, rec(2, 1, true, 5)],
      [2000, rec(0, 1, true, 4)],
      [5009, rec(0, 1, true, 1)],
      [5010, rec(1, 1, false, 0)],
    ],
  },
  'no block (blockDuration 0): a sliding log of the allowed hits, a refusal waiting for the oldest to leave': {
    ttl: 10 * SECOND,
    limit: 2,
    blockDuration: 0,
    calls: [
      [0, rec(1, 10, false, 0)],
      [4000, rec(2, 6, false, 0)],
      [5000, rec(3, 5, true, 5)],
      [9999, rec(3, 1, true, 1)],
      // The hit of 0 s has left, the one of 4 s has not: a window would count 1 here.
      [10_000, rec(2, 10, false, 0)],
      [10_001, rec(3, 10, true, 4)],
    ],
  },
  'a limit of 0 without a block: every call refused until the timer runs out': {
    ttl: 5 * SECOND,
    limit: 0,
    blockDuration: 0,
    calls: [
      [0, rec(1, 5, true, 5)],
      [4500, rec(1, 1, true, 1)],
      [5000, rec(1, 5, true, 5)],
    ],
  },
  'a limit of 0 with a block: one call passes as each block ends': {
    ttl: 5 * SECOND,
    limit: 0,
    blockDuration: 3 * SECOND,
    calls: [
      [0, rec(1, 5, true, 3)],
      [1000, rec(1, 4, true, 2)],
      [3000, rec(1, 2, false, 0)],
      [3001, rec(2, 2, true, 3)],
    ],
  },
}

for (const [name, create] of Object.entries(clockedStorages)) {
  describe(`the storage ${name}, beside the official ThrottlerStorageService`, () => {
    for (const [scenario, { ttl, limit, blockDuration, calls }] of Object.entries(SCENARIOS)) {
      it(scenario, async (t) => {
        mockClock(t)
        const official = officialStorage(t)
        const ours = create()
        for (const [at, expected] of calls) {
          mock.timers.setTime(T0 + at)
          const args = ['key', ttl, limit, blockDuration, 'default']
          assert.deepEqual(comparable(await official.increment(...args)), expected, `the official storage at ${at} ms`)
          assert.deepEqual(await ours.increment(...args), expected, `ours at ${at} ms`)
        }
      })
    }

    it('gives the same records as the official storage over random sequences of increments (keys, throttlers, limits, blocks, pauses)', async (t) => {
      mockClock(t)
      const seeds = name === 'in memory' ? 12 : 3
      let compared = 0
      let blocked = 0
      for (let seed = 1; seed <= seeds; seed++) {
        const next = random(seed)
        const whole = (below) => Math.floor(next() * below)
        // The throttlers of a few routes: each (key, name) keeps its settings, as the guard's.
        const throttlers = [
          { name: 'default', ttl: 1000 + whole(5000), limit: 1 + whole(4), blockDuration: whole(3) * 2000 },
          { name: 'short', ttl: 1 + whole(3000), limit: 1 + whole(3), blockDuration: [1, 999, 1000, 1001, 10_000][whole(5)] },
          { name: 'long', ttl: 1000 + whole(5000), limit: 1 + whole(4), blockDuration: 0 },
          { name: 'strict', ttl: 2000, limit: 0, blockDuration: 0 },
        ]
        const official = officialStorage(t)
        const ours = create()
        for (let i = 0; i < 250; i++) {
          // Mostly short pauses, now and then a long one (up to 4 s).
          mock.timers.tick(Math.floor(next() ** 3 * 4000))
          const { name: throttler, ttl, limit, blockDuration } = throttlers[whole(throttlers.length)]
          const args = [`${throttler}-${whole(2)}`, ttl, limit, blockDuration, throttler]
          const expected = comparable(await official.increment(...args))
          assert.deepEqual(await ours.increment(...args), expected, `seed ${seed}, call ${i}: increment(${args.join(', ')})`)
          compared++
          if (expected.isBlocked) blocked++
        }
      }
      // The sequences do reach blocks, often.
      assert.ok(blocked > compared / 5 && blocked < compared, `${blocked} of ${compared} blocked`)
    })
  })
}

describe('the storage: what differs from the official one', () => {
  it('keeps throttlers apart under one key (a custom generateKey without the name): the official storage shares the timer and the block', async (t) => {
    mockClock(t)
    const official = officialStorage(t)
    const ours = new RatekeeperThrottlerStorage()
    for (const storage of [official, ours]) {
      assert.deepEqual(comparable(await storage.increment('client', SECOND, 1, SECOND, 'short')), rec(1, 1, false, 0))
      assert.deepEqual(comparable(await storage.increment('client', SECOND, 1, SECOND, 'short')), rec(2, 1, true, 1))
    }
    // 'long' under the same key: the official storage finds the key blocked by 'short'.
    assert.deepEqual(await official.increment('client', MINUTE, 100, MINUTE, 'long'), rec(0, 1, true, 1))
    assert.deepEqual(await ours.increment('client', MINUTE, 100, MINUTE, 'long'), rec(1, 60, false, 0))
  })

  it('answers timeToBlockExpire 0 when not blocked, where the official storage leaves its last block\'s (or 1970\'s) seconds', async (t) => {
    mockClock(t)
    const official = officialStorage(t)
    const ours = new RatekeeperThrottlerStorage()
    assert.equal((await official.increment('key', SECOND, 1, SECOND, 'default')).timeToBlockExpire, -T0 / SECOND)
    assert.equal((await ours.increment('key', SECOND, 1, SECOND, 'default')).timeToBlockExpire, 0)
  })
})

describe('the storage on Redis', () => {
  it('keeps a key\'s hits, timer and block in three sorted sets under the prefix, each with a TTL', async (t) => {
    mockClock(t)
    const prefix = uniquePrefix()
    const storage = new RatekeeperThrottlerStorage({ client: redis.server.url, prefix, clock: 'local' })
    assert.equal(storage.prefix, prefix)
    assert.ok(storage.store instanceof RedisStore)
    for (let i = 0; i < 3; i++) await storage.increment('10.0.0.1', 10 * SECOND, 2, 30 * SECOND, 'per/ip')
    const keys = (await redis.server.cli('--scan', '--pattern', `${prefix}*`)).split('\n').filter(Boolean).sort()
    // The name comes first, URI-encoded: no two (name, key) pairs share an id.
    assert.deepEqual(keys, [`${prefix}block:per%2Fip:10.0.0.1`, `${prefix}hits:per%2Fip:10.0.0.1`, `${prefix}reset:per%2Fip:10.0.0.1`])
    for (const key of keys) {
      assert.equal(await redis.server.cli('TYPE', key), 'zset')
      const ttl = Number(await redis.server.cli('PTTL', key))
      assert.ok(ttl > 0, `${key} has a TTL (${ttl})`)
    }
    assert.equal(await redis.server.cli('ZCARD', `${prefix}hits:per%2Fip:10.0.0.1`), '3')
  })

  it("follows the Redis server's clock by default: a block lasts its blockDuration", async () => {
    const storage = new RatekeeperThrottlerStorage({ client: redis.server.url, prefix: uniquePrefix() })
    assert.deepEqual(await storage.increment('key', MINUTE, 1, 2 * MINUTE, 'default'), rec(1, 60, false, 0))
    assert.deepEqual(await storage.increment('key', MINUTE, 1, 2 * MINUTE, 'default'), rec(2, 60, true, 120))
    const third = await storage.increment('key', MINUTE, 1, 2 * MINUTE, 'default')
    assert.equal(third.isBlocked, true)
    assert.equal(third.totalHits, 2)
    // 120 s, or 119 if a second boundary passed since the block started.
    assert.ok(third.timeToBlockExpire === 120 || third.timeToBlockExpire === 119, `${third.timeToBlockExpire}`)
  })

  it('shares the records between storages on one Redis (two app instances)', async (t) => {
    mockClock(t)
    const options = { client: redis.server.url, prefix: uniquePrefix(), clock: 'local' }
    const [first, second] = [new RatekeeperThrottlerStorage(options), new RatekeeperThrottlerStorage(options)]
    assert.deepEqual(await first.increment('key', 10 * SECOND, 2, 10 * SECOND, 'default'), rec(1, 10, false, 0))
    assert.deepEqual(await second.increment('key', 10 * SECOND, 2, 10 * SECOND, 'default'), rec(2, 10, false, 0))
    assert.deepEqual(await first.increment('key', 10 * SECOND, 2, 10 * SECOND, 'default'), rec(3, 10, true, 10))
    mock.timers.setTime(T0 + 4000)
    assert.deepEqual(await second.increment('key', 10 * SECOND, 2, 10 * SECOND, 'default'), rec(3, 6, true, 6))
  })

  it('runs on a Redis Cluster, with the same records as the official storage', { skip: clusterSkip() }, async (t) => {
    const cluster = await startCluster()
    t.after(() => cluster.stop())
    mockClock(t)
    const official = officialStorage(t)
    const ours = new RatekeeperThrottlerStorage({ client: { cluster: [cluster.urls[0]] }, clock: 'local' })
    const { ttl, limit, blockDuration, calls } = SCENARIOS['a block shorter than the ttl: the hits held when it ends are forgotten']
    // Several keys, so that their logs land on every shard.
    for (const key of ['a', 'b', 'c', 'd']) {
      for (const [at, expected] of calls) {
        mock.timers.setTime(T0 + at)
        assert.deepEqual(comparable(await official.increment(key, ttl, limit, blockDuration, 'default')), expected)
        assert.deepEqual(await ours.increment(key, ttl, limit, blockDuration, 'default'), expected, `${key} at ${at} ms`)
      }
    }
  })
})

describe('the storage while Redis is unavailable (onStoreError)', () => {
  /** A Redis URL where nothing listens. */
  const deadRedis = async () => `redis://127.0.0.1:${await freePort()}`

  it("rejects with ERR_STORE_UNAVAILABLE by default ('reject')", async () => {
    const storage = new RatekeeperThrottlerStorage({ client: await deadRedis() })
    await assert.rejects(storage.increment('key', MINUTE, 2, MINUTE, 'default'), { code: 'ERR_STORE_UNAVAILABLE' })
  })

  it("lets every request through, uncounted, with 'allow'", async () => {
    const storage = new RatekeeperThrottlerStorage({ client: await deadRedis(), onStoreError: 'allow' })
    for (let i = 0; i < 4; i++) assert.deepEqual(await storage.increment('key', MINUTE, 2, MINUTE, 'default'), rec(0, 0, false, 0))
  })

  it("counts in memory with 'memory', and goes back to Redis once it answers", async () => {
    await withRedisServer(async (server) => {
      const prefix = uniquePrefix()
      const storage = new RatekeeperThrottlerStorage({ client: server.url, prefix, onStoreError: 'memory' })
      assert.deepEqual(await storage.increment('key', MINUTE, 2, MINUTE, 'default'), rec(1, 60, false, 0))
      await server.kill()
      // In memory, from empty: the hit on Redis is not there.
      assert.deepEqual(await storage.increment('key', MINUTE, 2, MINUTE, 'default'), rec(1, 60, false, 0))
      assert.deepEqual(await storage.increment('key', MINUTE, 2, MINUTE, 'default'), rec(2, 60, false, 0))
      assert.deepEqual(await storage.increment('key', MINUTE, 2, MINUTE, 'default'), rec(3, 60, true, 60))
      await server.restart()
      // Back on Redis (a new, empty server) once the store has reconnected and the fallback's
      // half second is over: the key's hits are written there again.
      const deadline = Date.now() + 20 * SECOND
      while ((await server.cli('EXISTS', `${prefix}hits:default:other`)) !== '1') {
        assert.ok(Date.now() < deadline, 'Redis answers again within 20 s')
        await storage.increment('other', MINUTE, 100, MINUTE, 'default')
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
      assert.deepEqual(await storage.increment('key', MINUTE, 2, MINUTE, 'default'), rec(1, 60, false, 0))
    })
  })
})

describe('the storage refuses bad options and arguments with coded errors', () => {
  it('at construction', () => {
    const cases = [
      [() => new RatekeeperThrottlerStorage(null), TypeError, 'ERR_INVALID_OPTION'],
      [() => new RatekeeperThrottlerStorage('redis://127.0.0.1:1'), TypeError, 'ERR_INVALID_OPTION'],
      [() => new RatekeeperThrottlerStorage({ url: 'redis://127.0.0.1:1' }), TypeError, 'ERR_UNKNOWN_OPTION'],
      [() => new RatekeeperThrottlerStorage({ ttl: 1000 }), TypeError, 'ERR_UNKNOWN_OPTION'],
      [() => new RatekeeperThrottlerStorage({ prefix: 5 }), TypeError, 'ERR_INVALID_OPTION'],
      [() => new RatekeeperThrottlerStorage({ prefix: 'x'.repeat(2000) }), RangeError, 'ERR_INVALID_OPTION'],
      [() => new RatekeeperThrottlerStorage({ clock: 'server' }), RangeError, 'ERR_INVALID_OPTION'],
      [() => new RatekeeperThrottlerStorage({ client: 5 }), TypeError, 'ERR_INVALID_OPTION'],
      [() => new RatekeeperThrottlerStorage({ onStoreError: 'memory' }), RangeError, 'ERR_INVALID_OPTION'],
      [() => new RatekeeperThrottlerStorage({ client: redis.server.url, onStoreError: 'fail' }), RangeError, 'ERR_INVALID_OPTION'],
    ]
    for (const [build, type, code] of cases) assert.throws(build, (error) => error instanceof type && error.code === code, build.toString())
  })

  it('at each increment, counting nothing', async (t) => {
    mockClock(t)
    const storage = new RatekeeperThrottlerStorage()
    const cases = [
      [[5, 1000, 1, 0, 'default'], TypeError, 'ERR_INVALID_ID'],
      [[undefined, 1000, 1, 0, 'default'], TypeError, 'ERR_INVALID_ID'],
      [['', 1000, 1, 0, 'default'], RangeError, 'ERR_INVALID_ID'],
      [['k'.repeat(1100), 1000, 1, 0, 'default'], RangeError, 'ERR_INVALID_ID'],
      [['key', '1000', 1, 0, 'default'], TypeError, 'ERR_INVALID_ARGUMENT'],
      [['key', 0, 1, 0, 'default'], RangeError, 'ERR_INVALID_ARGUMENT'],
      [['key', -1000, 1, 0, 'default'], RangeError, 'ERR_INVALID_ARGUMENT'],
      [['key', NaN, 1, 0, 'default'], RangeError, 'ERR_INVALID_ARGUMENT'],
      [['key', Infinity, 1, 0, 'default'], RangeError, 'ERR_INVALID_ARGUMENT'],
      [['key', 1000.5, 1, 0, 'default'], RangeError, 'ERR_INVALID_ARGUMENT'],
      [['key', 1e13, 1, 0, 'default'], RangeError, 'ERR_INVALID_ARGUMENT'],
      [['key', 1000, -1, 0, 'default'], RangeError, 'ERR_INVALID_ARGUMENT'],
      [['key', 1000, 2.5, 0, 'default'], RangeError, 'ERR_INVALID_ARGUMENT'],
      [['key', 1000, 1e16, 0, 'default'], RangeError, 'ERR_INVALID_ARGUMENT'],
      [['key', 1000, null, 0, 'default'], TypeError, 'ERR_INVALID_ARGUMENT'],
      [['key', 1000, 1, -1, 'default'], RangeError, 'ERR_INVALID_ARGUMENT'],
      [['key', 1000, 1, NaN, 'default'], RangeError, 'ERR_INVALID_ARGUMENT'],
      [['key', 1000, 1, undefined, 'default'], TypeError, 'ERR_INVALID_ARGUMENT'],
      [['key', 1000, 1, 0, 5], TypeError, 'ERR_INVALID_ARGUMENT'],
      [['key', 1000, 1, 0], TypeError, 'ERR_INVALID_ARGUMENT'],
    ]
    for (const [args, type, code] of cases) {
      await assert.rejects(storage.increment(...args), (error) => error instanceof type && error.code === code, `increment(${args.map(String).join(', ')})`)
    }
    // None of them counted: the first good call is the key's first hit.
    assert.deepEqual(await storage.increment('key', 1000, 1, 0, 'default'), rec(1, 1, false, 0))
  })
})

describe('@nestjs/throttler in a real Nest app, with the official storage beside ours', () => {
  /** The storages an app is given: the official one (none given), and ours in memory and on Redis. */
  const appStorages = {
    'the official storage': () => undefined,
    'ours in memory': () => new RatekeeperThrottlerStorage(),
    "ours on Redis with clock: 'local'": () => new RatekeeperThrottlerStorage({ client: redis.server.url, prefix: uniquePrefix(), clock: 'local' }),
  }

  /** Runs `script(url)` against an app with each storage; asserts every run returns the official one's answers, and returns them. */
  async function sameWithEveryStorage(t, platform, throttlers, script) {
    const answers = {}
    for (const [name, storage] of Object.entries(appStorages)) {
      mock.timers.setTime(T0)
      const url = await serveNestApp(t, { platform, throttlers, storage: storage() })
      answers[name] = await script(url)
    }
    for (const name of Object.keys(appStorages).slice(1)) assert.deepEqual(answers[name], answers['the official storage'], name)
    return answers['the official storage']
  }

  for (const platform of ['express', 'fastify']) {
    describe(`on the ${platform} platform`, () => {
      it('refuses the 4th request of 3 with 429 and Retry-After, for the blockDuration, and lets the client in again after it; @Throttle overrides a route\'s limits', async (t) => {
        mockClock(t)
        const throttlers = [{ ttl: 10 * SECOND, limit: 3, blockDuration: 30 * SECOND }]
        const answers = await sameWithEveryStorage(t, platform, throttlers, async (url) => {
          const responses = []
          for (let i = 0; i < 4; i++) responses.push(await request(`${url}/`))
          mock.timers.setTime(T0 + 10 * SECOND)
          responses.push(await request(`${url}/`))
          mock.timers.setTime(T0 + 30 * SECOND)
          responses.push(await request(`${url}/`))
          // /login: `@Throttle({ default: { limit: 1, ttl: 5000, blockDuration: 20_000 } })`.
          responses.push(await request(`${url}/login`), await request(`${url}/login`))
          return responses
        })
        const allowed = (remaining, reset) => ({ status: 200, headers: { 'x-ratelimit-limit': '3', 'x-ratelimit-remaining': String(remaining), 'x-ratelimit-reset': String(reset) } })
        const refused = (retryAfter) => ({ status: 429, headers: { 'retry-after': String(retryAfter) } })
        assert.deepEqual(answers, [
          allowed(2, 10),
          allowed(1, 10),
          allowed(0, 10),
          refused(30),
          refused(20),
          allowed(2, 10),
          { status: 200, headers: { 'x-ratelimit-limit': '1', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '5' } },
          refused(20),
        ])
      })

      it('counts several named throttlers, each with its own headers, and skips what @SkipThrottle says', async (t) => {
        mockClock(t)
        const throttlers = [
          { name: 'short', ttl: SECOND, limit: 3 },
          { name: 'long', ttl: MINUTE, limit: 5 },
        ]
        const answers = await sameWithEveryStorage(t, platform, throttlers, async (url) => {
          const responses = []
          for (let i = 0; i < 4; i++) responses.push(await request(`${url}/`))
          mock.timers.setTime(T0 + SECOND)
          for (let i = 0; i < 3; i++) responses.push(await request(`${url}/`))
          // /search skips 'short'; /health skips both; /login overrides 'long' (2 a minute).
          responses.push(await request(`${url}/search`), await request(`${url}/health`))
          responses.push(await request(`${url}/login`), await request(`${url}/login`), await request(`${url}/login`))
          mock.timers.setTime(T0 + SECOND + MINUTE)
          responses.push(await request(`${url}/`))
          return responses
        })
        const both = (short, long, longLimit = 5) => ({
          status: 200,
          headers: {
            'x-ratelimit-limit-long': String(longLimit),
            'x-ratelimit-limit-short': '3',
            'x-ratelimit-remaining-long': String(longLimit - long),
            'x-ratelimit-remaining-short': String(3 - short),
            'x-ratelimit-reset-long': '60',
            'x-ratelimit-reset-short': '1',
          },
        })
        assert.deepEqual(answers, [
          both(1, 1),
          both(2, 2),
          both(3, 3),
          // 'short' refuses (for its ttl, the guard's default block): 'long' is not asked.
          { status: 429, headers: { 'retry-after-short': '1' } },
          // A second later: 'short' counts 1 again, 'long' has 4, then 5.
          { ...both(1, 4), headers: { ...both(1, 4).headers, 'x-ratelimit-reset-long': '59' } },
          { ...both(2, 5), headers: { ...both(2, 5).headers, 'x-ratelimit-reset-long': '59' } },
          // 'short' counted this one; 'long' refuses, for a minute.
          { status: 429, headers: { 'retry-after-long': '60', 'x-ratelimit-limit-short': '3', 'x-ratelimit-remaining-short': '0', 'x-ratelimit-reset-short': '1' } },
          { status: 200, headers: { 'x-ratelimit-limit-long': '5', 'x-ratelimit-remaining-long': '4', 'x-ratelimit-reset-long': '60' } },
          { status: 200, headers: {} },
          both(1, 1, 2),
          both(2, 2, 2),
          { status: 429, headers: { 'retry-after-long': '60', 'x-ratelimit-limit-short': '3', 'x-ratelimit-remaining-short': '0', 'x-ratelimit-reset-short': '1' } },
          // A minute later 'long''s block on / is over: it counts 1 again.
          both(1, 1),
        ])
      })
    })
  }

  it('counts once for two app instances sharing one Redis (one on Express, one on Fastify)', async (t) => {
    mockClock(t)
    const options = { client: redis.server.url, prefix: uniquePrefix(), clock: 'local' }
    const throttlers = [{ ttl: MINUTE, limit: 3 }]
    const onExpress = await serveNestApp(t, { platform: 'express', throttlers, storage: new RatekeeperThrottlerStorage(options) })
    const onFastify = await serveNestApp(t, { platform: 'fastify', throttlers, storage: new RatekeeperThrottlerStorage(options) })
    const responses = []
    for (const url of [onExpress, onFastify, onExpress, onFastify, onExpress]) responses.push(await request(`${url}/`))
    assert.deepEqual(
      responses.map(({ status, headers }) => [status, headers['x-ratelimit-remaining'] ?? headers['retry-after']]),
      [[200, '2'], [200, '1'], [200, '0'], [429, '60'], [429, '60']],
    )
  })

  it('answers 500 while Redis is unavailable by default, and follows onStoreError', async (t) => {
    const client = `redis://127.0.0.1:${await freePort()}`
    const throttlers = [{ ttl: MINUTE, limit: 2 }]
    const statuses = {}
    for (const onStoreError of ['reject', 'allow', 'memory']) {
      const url = await serveNestApp(t, { platform: 'express', throttlers, storage: new RatekeeperThrottlerStorage({ client, onStoreError }) })
      statuses[onStoreError] = []
      for (let i = 0; i < 3; i++) {
        const { status, headers } = await request(`${url}/`)
        statuses[onStoreError].push([status, headers['x-ratelimit-remaining'] ?? headers['retry-after']])
      }
    }
    assert.deepEqual(statuses, {
      reject: [[500, undefined], [500, undefined], [500, undefined]],
      allow: [[200, '2'], [200, '2'], [200, '2']],
      memory: [[200, '1'], [200, '0'], [429, '60']],
    })
  })
})

describe('the package entry', () => {
  const ROOT = path.join(__dirname, '..')

  it('gives the same class to import and require, by path and by name', async () => {
    const byPath = await import('../nestjs.mjs')
    const byName = await import('ratekeeper/nestjs')
    assert.equal(byPath.RatekeeperThrottlerStorage, RatekeeperThrottlerStorage)
    assert.equal(byName.RatekeeperThrottlerStorage, RatekeeperThrottlerStorage)
    assert.equal(byName.default.RatekeeperThrottlerStorage, RatekeeperThrottlerStorage)
    assert.equal(require('ratekeeper/nestjs').RatekeeperThrottlerStorage, RatekeeperThrottlerStorage)
  })

  it('loads no @nestjs package: the app brings its own', () => {
    const loaded = execFileSync(process.execPath, ['-e', "require('ratekeeper/nestjs'); console.log(JSON.stringify(Object.keys(require.cache).filter((file) => file.includes('@nestjs'))))"], { cwd: ROOT, encoding: 'utf8' })
    assert.deepEqual(JSON.parse(loaded), [])
  })
})

describe('examples/nestjs.js', () => {
  /** Starts the example on a free port with `env`; resolves its URL, the process killed when the test ends. */
  function startExample(t, env) {
    const child = spawn(process.execPath, [path.join(__dirname, '..', 'examples', 'nestjs.js')], { env: { ...process.env, PORT: '0', ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
    t.after(() => child.kill('SIGKILL'))
    return new Promise((resolve, reject) => {
      let output = ''
      child.stdout.on('data', (chunk) => {
        output += chunk
        const url = /listening on (http:\/\/\S+) \(counts (in memory|on Redis)\)/.exec(output)
        if (url) resolve({ url: url[1], where: url[2] })
      })
      child.stderr.on('data', (chunk) => (output += chunk))
      child.on('exit', (code) => reject(new Error(`the example exited with ${code}:\n${output}`)))
    })
  }

  for (const where of ['in memory', 'on Redis']) {
    it(`allows 5 logins a minute, then 429, and never limits /health: ${where}`, async (t) => {
      if (where === 'on Redis') await redis.server.cli('FLUSHALL')
      const started = await startExample(t, { REDIS_URL: where === 'on Redis' ? redis.server.url : '' })
      assert.equal(started.where, where)
      const statuses = []
      for (let i = 0; i < 6; i++) statuses.push((await fetch(`${started.url}/login`, { method: 'POST' })).status)
      assert.deepEqual(statuses, [201, 201, 201, 201, 201, 429])
      const health = []
      for (let i = 0; i < 5; i++) health.push((await fetch(`${started.url}/health`)).status)
      assert.deepEqual(health, [200, 200, 200, 200, 200])
      if (where === 'on Redis') assert.notEqual(await redis.server.cli('--scan', '--pattern', 'ratekeeper:nest:hits:long:*'), '')
    })
  }
})
