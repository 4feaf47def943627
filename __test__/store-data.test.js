'use strict'

// What is at a limiter's key is not always what the limiter wrote: another type (a namespace
// collision), foreign fields, counters that are not numbers, scores of +-inf. Every Redis-backed
// limiter must then reject the call with ERR_STORE_ERROR and a message that says what is wrong,
// and leave the key exactly as it was (type, content and TTL): never overwrite it, delete it or
// give it another TTL. `reset` / `clear` are the way out: they delete whatever is at the id's key.
// A Redis at maxmemory (noeviction) rejects the calls that write with Redis's own OOM message,
// changes nothing, and still answers the calls that only read.

const { describe, it, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { inspect } = require('node:util')
const IORedis = require('ioredis')

const { RateLimiter, RedisRateLimiter, SlidingLog, FixedWindow, SlidingWindow, SlidingTail, Gcra, TokenBucket, createRateLimit, createClient } = require('..')
const { startRedis } = require('./helpers/redis-server.js')

const SECOND = 1000
const MINUTE = 60 * SECOND
// 5 s into a minute (and a 10 s bucket, and a 5 s redback bucket).
const T0 = 1_700_000_040_000
const T = T0 + 5 * SECOND
const NOW = { now: T }
const LATER = { now: T + SECOND }

// The layouts at T (see docs/algorithms.md). Fixed window, one limit of 5 per minute: field
// `<duration µs>:<window index>` the count (earlier versions: `<duration µs>` the count,
// `<duration µs>:w` the window index).
const FW_DURATION = String(MINUTE * 1000)
const FW_W = Math.floor(T / MINUTE)
// Sliding window, 5 per minute in 10 s buckets: `<duration µs>:<precision µs>:<bucket>`, `...:o`.
const SW = `${MINUTE * 1000}:${10 * SECOND * 1000}:`
const SW_BUCKET = Math.floor(T / (10 * SECOND))
const SW_OLDEST = SW_BUCKET - 5
// redback's defaults (bucket_span 600 s, bucket_interval 5 s): field `<bucket of the circle>`,
// and `last`, the absolute bucket of the last add.
const RB_BUCKET = String(Math.floor(((T / 1000) % 600) / 5))
const RB_LAST = Math.floor(T / 5000)

// A TTL no limiter would give (the longest here is redback's subject_expiry, 1200 s).
const FOREIGN_TTL_MS = 5_000_000

let redis // the test server
let r // a direct client, to shape and read keys

before(async () => {
  redis = await startRedis()
  r = new IORedis({ host: redis.host, port: redis.port, lazyConnect: true, maxRetriesPerRequest: 0 })
  await r.connect()
})
after(async () => {
  if (r) r.disconnect()
  if (redis) await redis.stop()
})

/** A key's type, full content and PTTL. */
async function snapshot(client, key) {
  const [type, pttl] = await Promise.all([client.type(key), client.pttl(key)])
  let content = null
  if (type === 'string') content = await client.get(key)
  else if (type === 'list') content = await client.lrange(key, 0, -1)
  else if (type === 'set') content = (await client.smembers(key)).sort()
  else if (type === 'hash') content = Object.entries(await client.hgetall(key)).sort(([a], [b]) => (a < b ? -1 : 1))
  else if (type === 'zset') content = await client.zrange(key, 0, -1, 'WITHSCORES')
  else if (type !== 'none') content = `a ${type}`
  return { type, content, pttl }
}

/** How `after` differs from `before` (null when it does not): the TTL may only have run down. */
function changed(before, after, elapsedMs) {
  const sameTtl = before.pttl < 0 ? after.pttl === before.pttl : after.pttl <= before.pttl && after.pttl >= before.pttl - elapsedMs - 50
  if (before.type === after.type && sameTtl && JSON.stringify(before.content) === JSON.stringify(after.content)) return null
  return `${inspect(before, { breakLength: Infinity })} became ${inspect(after, { breakLength: Infinity })}`
}

/**
 * Shapes `key`, runs `call`, and asserts: the call rejected with ERR_STORE_ERROR and a useful
 * message, and `key` (and `others`, the other keys of the call) are exactly as they were.
 * `kind` is 'type' (the key holds another type: Redis's WRONGTYPE is the message) or 'content'
 * (the right type, wrong content: the message must name the key, and be no Lua runtime error).
 */
async function assertRejectsUntouched({ key, others = [], shape, call }) {
  const keys = [key, ...others]
  await r.del(...keys)
  await shape.create(key)
  const before = await Promise.all(keys.map((k) => snapshot(r, k)))
  assert.notEqual(before[0].type, 'none', 'the shape was created')
  const started = Date.now()
  let outcome
  try {
    outcome = { value: await call() }
  } catch (error) {
    outcome = { error }
  }
  const elapsed = Date.now() - started
  const afterwards = await Promise.all(keys.map((k) => snapshot(r, k)))
  const problems = []
  const { error } = outcome
  if (!error) {
    problems.push(`resolved ${inspect(outcome.value, { breakLength: Infinity })} instead of rejecting`)
  } else if (!(error instanceof Error) || error.code !== 'ERR_STORE_ERROR') {
    problems.push(`rejected with code ${error && error.code}: ${error && error.message}`)
  } else if (shape.kind === 'type') {
    if (!/WRONGTYPE/.test(error.message)) problems.push(`the message does not say WRONGTYPE: ${error.message}`)
  } else {
    if (!error.message.includes(key)) problems.push(`the message does not name the key ${key}: ${error.message}`)
    if (/attempt to|nil value|user_script/.test(error.message)) problems.push(`the message is a Lua runtime error: ${error.message}`)
  }
  keys.forEach((k, i) => {
    const change = changed(before[i], afterwards[i], elapsed)
    if (change) problems.push(`${k} changed: ${change}`)
  })
  assert.deepEqual(problems, [])
}

// ---------------------------------------------------------------------------------------------
// Shapes. `kind` as above; `create(key)` writes the shape at key.

const withTtl = (shape) => ({
  ...shape,
  name: `${shape.name}, with a TTL of its own`,
  create: async (key) => {
    await shape.create(key)
    await r.pexpire(key, FOREIGN_TTL_MS)
  },
})

const STRING = { name: 'a string', kind: 'type', create: (key) => r.set(key, 'a string') }
const LIST = { name: 'a list', kind: 'type', create: (key) => r.rpush(key, 'a', 'b') }
const SET = { name: 'a set', kind: 'type', create: (key) => r.sadd(key, 'a', 'b') }
const HASH = { name: 'a hash (HSET key foo bar)', create: (key) => r.hset(key, 'foo', 'bar') }
const ZSET = {
  name: 'a sorted set with non-numeric members and scores of +inf, -inf',
  create: (key) => r.zadd(key, '+inf', 'abc', '-inf', 'def', '1', 'ghi'),
}

const OTHER_TYPES_THAN_HASH = [STRING, withTtl(STRING), LIST, SET, { ...ZSET, kind: 'type' }]
const OTHER_TYPES_THAN_ZSET = [STRING, withTtl(STRING), LIST, SET, { ...HASH, kind: 'type' }]

// Sorted sets of absurd scores, at a rolling window's key. (Members are UUIDs, in
// rolling-rate-limiter as here: a member's look says nothing; see the controls below.)
const ROLLING_CONTENT = [
  { name: 'a sorted set with a +inf score', kind: 'content', create: (key) => r.zadd(key, '+inf', 'abc') },
  { name: 'a sorted set with a -inf score', kind: 'content', create: (key) => r.zadd(key, '-inf', 'abc') },
  {
    name: 'a sorted set with a +inf score after a valid entry',
    kind: 'content',
    create: (key) => r.zadd(key, (T - SECOND) * 1000, 'e1', '+inf', 'abc'),
  },
  {
    name: 'a sorted set with a -inf score before a valid entry',
    kind: 'content',
    create: (key) => r.zadd(key, '-inf', 'abc', (T - SECOND) * 1000, 'e1'),
  },
  // (Counting first prunes the entries that left the window: here it must fail first.)
  {
    name: 'a sorted set with a +inf score after an entry that left the window',
    kind: 'content',
    create: (key) => r.zadd(key, (T - 2 * MINUTE) * 1000, 'e0', '+inf', 'abc'),
  },
]
ROLLING_CONTENT.push(withTtl(ROLLING_CONTENT[0]), withTtl(ROLLING_CONTENT[1]))

/** Right fields, wrong values: counts, then indices (a window, a bucket), not numbers or negative. */
function hashContent(fieldsWith) {
  const shapes = [
    { name: 'a hash (HSET key foo bar)', kind: 'content', create: (key) => r.hset(key, 'foo', 'bar') },
    { name: 'a valid hash plus a foreign field foo', kind: 'content', create: (key) => r.hset(key, ...fieldsWith({}), 'foo', 'bar') },
  ]
  for (const value of ['abc', '1e999', '-5', 'nan']) {
    shapes.push({ name: `a count of ${value}`, kind: 'content', create: (key) => r.hset(key, ...fieldsWith({ count: value })) })
  }
  for (const value of ['abc', '1e999', 'nan']) {
    shapes.push({ name: `an index of ${value}`, kind: 'content', create: (key) => r.hset(key, ...fieldsWith({ index: value })) })
  }
  shapes.push(withTtl(shapes[2]))
  return shapes
}

const FIXED_CONTENT = [
  ...hashContent(({ count = '1', index = FW_W }) => [`${FW_DURATION}:${index}`, count]),
  {
    name: 'a count of abc in an earlier window',
    kind: 'content',
    create: (key) => r.hset(key, `${FW_DURATION}:${FW_W - 1}`, 'abc'),
  },
  {
    name: 'a count of abc in the layout of earlier versions',
    kind: 'content',
    create: (key) => r.hset(key, FW_DURATION, 'abc', `${FW_DURATION}:w`, FW_W),
  },
  {
    name: 'a window of -5 in the layout of earlier versions',
    kind: 'content',
    create: (key) => r.hset(key, FW_DURATION, '1', `${FW_DURATION}:w`, '-5'),
  },
]
const SLIDING_CONTENT = hashContent(({ count = '1', index = SW_OLDEST }) => [`${SW}${SW_BUCKET}`, count, `${SW}o`, index])
const BUCKET_CONTENT = hashContent(({ count = '1', index = RB_LAST }) => [RB_BUCKET, count, 'last', index])

// ---------------------------------------------------------------------------------------------
// The limiters and their methods that touch Redis: `call(limiter, id)`; `others(namespace, id)`
// the other keys a call touches.

const rollingMethods = {
  limit: (l, id) => l.limit(id, NOW),
  limitWithInfo: (l, id) => l.limitWithInfo(id, NOW),
  wouldLimit: (l, id) => l.wouldLimit(id, NOW),
  wouldLimitWithInfo: (l, id) => l.wouldLimitWithInfo(id, NOW),
  consume: (l, id) => l.consume(id, { now: T, meta: 'user:1' }),
  peek: (l, id) => l.peek(id, NOW),
  entries: (l, id) => l.entries(id, NOW),
}

const countingMethods = {
  consume: { call: (l, id) => l.consume(id, NOW) },
  peek: { call: (l, id) => l.peek(id, NOW) },
  // With a clean id first: the whole call rejects, and the clean id is not counted either.
  'consume([clean, id])': { call: (l, id) => l.consume([`clean-${id}`, id], NOW), others: (ns, id) => [`${ns}clean-${id}`] },
  'peek([clean, id])': { call: (l, id) => l.peek([`clean-${id}`, id], NOW), others: (ns, id) => [`${ns}clean-${id}`] },
}

const redbackMethods = {
  add: (l, id) => l.add(id, NOW),
  count: (l, id) => l.count(id, 60, NOW),
  addCount: (l, id) => l.addCount(id, 60, NOW),
}

const rollingLimiters = [
  {
    name: 'RedisRateLimiter',
    namespace: 'rrl:',
    create: (url) => new RedisRateLimiter({ client: url, namespace: 'rrl:', interval: MINUTE, maxInInterval: 2 }),
  },
  {
    name: 'RateLimiter with a client (minDifference, maxInInterval 1)',
    namespace: 'rl:',
    create: (url) => new RateLimiter({ client: url, namespace: 'rl:', interval: MINUTE, maxInInterval: 1, minDifference: SECOND }),
  },
  {
    name: 'SlidingLog on Redis',
    namespace: 'log:',
    create: (url) => new SlidingLog({ client: url, namespace: 'log:', interval: MINUTE, maxInInterval: 2 }),
  },
]

const countingLimiters = [
  {
    name: 'FixedWindow',
    namespace: 'fw:',
    create: (url) => new FixedWindow({ client: url, namespace: 'fw:', limits: [{ duration: MINUTE, limit: 5 }] }),
    shapes: [...OTHER_TYPES_THAN_HASH, ...FIXED_CONTENT],
  },
  {
    name: 'SlidingWindow',
    namespace: 'sw:',
    create: (url) => new SlidingWindow({ client: url, namespace: 'sw:', limits: [{ duration: MINUTE, limit: 5, precision: 10 * SECOND }] }),
    shapes: [...OTHER_TYPES_THAN_HASH, ...SLIDING_CONTENT],
  },
]

const redbackLimiters = [
  {
    name: 'createRateLimit with a client',
    namespace: 'rb:requests:',
    create: (url) => createRateLimit('requests', { client: url, namespace: 'rb' }),
  },
  {
    name: 'createClient().createRateLimit',
    namespace: 'rbc:hits:',
    create: (url) => createClient(url, { namespace: 'rbc' }).createRateLimit('hits'),
  },
]

let idCounter = 0
const nextId = () => `id${++idCounter}`

describe('data of the wrong shape at the key: ERR_STORE_ERROR, and the key left as it was', () => {
  for (const limiter of rollingLimiters) {
    describe(limiter.name, () => {
      let instance
      before(() => {
        instance = limiter.create(redis.url)
      })
      for (const shape of [...OTHER_TYPES_THAN_ZSET, ...ROLLING_CONTENT]) {
        for (const [method, call] of Object.entries(rollingMethods)) {
          it(`${method} on ${shape.name}`, async () => {
            const id = nextId()
            await assertRejectsUntouched({ key: limiter.namespace + id, shape, call: () => call(instance, id) })
          })
        }
      }
    })
  }

  describe('the callback API, RateLimiter({ redis })', () => {
    let limiter
    before(() => {
      limiter = RateLimiter({ redis: redis.url, namespace: 'cb:', interval: MINUTE, maxInInterval: 2 })
    })
    const forms = {
      'limiter(id)': (id) => limiter(id),
      'limiter(id, callback)': (id) =>
        new Promise((resolve, reject) => {
          limiter(id, (error, timeLeft) => (error ? reject(error) : resolve(timeLeft)))
        }),
    }
    for (const shape of [...OTHER_TYPES_THAN_ZSET, ...ROLLING_CONTENT]) {
      for (const [form, call] of Object.entries(forms)) {
        it(`${form} on ${shape.name}`, async () => {
          const id = nextId()
          await assertRejectsUntouched({ key: `cb:${id}`, shape, call: () => call(id) })
        })
      }
    }
  })

  for (const limiter of countingLimiters) {
    describe(limiter.name, () => {
      let instance
      before(() => {
        instance = limiter.create(redis.url)
      })
      for (const shape of limiter.shapes) {
        for (const [method, { call, others }] of Object.entries(countingMethods)) {
          it(`${method} on ${shape.name}`, async () => {
            const id = nextId()
            await assertRejectsUntouched({
              key: limiter.namespace + id,
              others: others ? others(limiter.namespace, id) : [],
              shape,
              call: () => call(instance, id),
            })
          })
        }
      }
      if (limiter.name === 'SlidingWindow') {
        // Regression: an unchecked oldest bucket of -inf made the script loop for ever
        // (-inf + 1 == -inf), growing a Lua table until Redis ran out of memory.
        it('consume on an oldest bucket of -1e999', async () => {
          const id = nextId()
          await assertRejectsUntouched({
            key: limiter.namespace + id,
            shape: { kind: 'content', create: (key) => r.hset(key, `${SW}${SW_BUCKET}`, '1', `${SW}o`, '-1e999') },
            call: () => instance.consume(id, NOW),
          })
        })
        // A bucket's name is a whole number: one in the window that is not would count in the
        // script's total without a bucket of the answer the Rust side judges from.
        for (const bucket of [`${SW_BUCKET - 0.5}`, 'nan', 'inf']) {
          it(`consume on a bucket named ${bucket}`, async () => {
            const id = nextId()
            await assertRejectsUntouched({
              key: limiter.namespace + id,
              shape: { kind: 'content', create: (key) => r.hset(key, `${SW}${SW_BUCKET}`, '1', `${SW}${bucket}`, '4', `${SW}o`, String(SW_OLDEST)) },
              call: () => instance.consume(id, NOW),
            })
          })
        }
      }
    })
  }

  for (const limiter of redbackLimiters) {
    describe(`redback's ${limiter.name}`, () => {
      let instance
      before(() => {
        instance = limiter.create(redis.url)
      })
      for (const shape of [...OTHER_TYPES_THAN_HASH, ...BUCKET_CONTENT]) {
        for (const [method, call] of Object.entries(redbackMethods)) {
          it(`${method} on ${shape.name}`, async () => {
            const id = nextId()
            await assertRejectsUntouched({ key: limiter.namespace + id, shape, call: () => call(instance, id) })
          })
        }
      }
    })
  }
})

describe('still reads what it and its peers write (controls for the checks above)', () => {
  it("a rolling window counts rolling-rate-limiter's sorted set (UUID members, scores in µs)", async () => {
    const limiter = new RedisRateLimiter({ client: redis.url, namespace: 'ctl:', interval: MINUTE, maxInInterval: 2 })
    await r.zadd('ctl:u', (T - SECOND) * 1000, '0b6a1c52-6a47-4d5e-9a8e-2f3c0d1e4b5a')
    assert.deepEqual(await limiter.limitWithInfo('u', NOW), {
      blocked: false,
      blockedDueToCount: false,
      blockedDueToMinDifference: false,
      millisecondsUntilAllowed: 59_000,
      actionsRemaining: 0,
    })
    assert.equal(await r.zcard('ctl:u'), 2)
  })

  it("a FixedWindow counts beside another FixedWindow's limits in the same hash", async () => {
    const minute = new FixedWindow({ client: redis.url, namespace: 'ctl-fw:', limits: [{ duration: MINUTE, limit: 5 }] })
    const second = new FixedWindow({ client: redis.url, namespace: 'ctl-fw:', limits: [{ duration: SECOND, limit: 2 }] })
    await second.consume('u', NOW)
    assert.deepEqual(await minute.consume('u', NOW), { allowed: true, timeLeft: 0, remaining: 4, limit: 5, resetAfter: 55_000 })
    assert.deepEqual(await second.peek('u', NOW), { allowed: true, timeLeft: 0, remaining: 1, limit: 2, resetAfter: 1000 })
    assert.deepEqual(await r.hgetall('ctl-fw:u'), {
      [`1000000:${Math.floor(T / SECOND)}`]: '1',
      [`${FW_DURATION}:${FW_W}`]: '1',
    })
  })

  it("a SlidingWindow counts beside another SlidingWindow's limits in the same hash", async () => {
    const minute = new SlidingWindow({ client: redis.url, namespace: 'ctl-sw:', limits: [{ duration: MINUTE, limit: 5, precision: 10 * SECOND }] })
    const second = new SlidingWindow({ client: redis.url, namespace: 'ctl-sw:', limits: [{ duration: SECOND, limit: 2 }] })
    await second.consume('u', NOW)
    assert.deepEqual(await minute.consume('u', NOW), { allowed: true, timeLeft: 0, remaining: 4, limit: 5, resetAfter: 55_000 })
    assert.equal((await second.peek('u', NOW)).remaining, 1)
    assert.equal(await r.hlen('ctl-sw:u'), 4)
  })

  it("redback's RateLimit counts redback's own hash (no `last` field)", async () => {
    const limiter = createRateLimit('requests', { client: redis.url, namespace: 'ctl-rb' })
    await r.hset('ctl-rb:requests:u', RB_BUCKET, '3')
    assert.equal(await limiter.count('u', 60, NOW), 3)
    assert.equal(await limiter.addCount('u', 60, NOW), 4)
  })
})

describe('limiters that share a namespace share an id hash, whose TTL none of them shortens', () => {
  // A limiter of 1 s sets a TTL of a few seconds when its window (or bucket) moves: were it to
  // replace the minute limiter's TTL, the minute's count would expire with it, and the minute
  // limiter would then admit a full limit again.
  for (const Limiter of [FixedWindow, SlidingWindow, SlidingTail]) {
    it(`${Limiter.name}`, async () => {
      const namespace = `share-${Limiter.name}:`
      const minute = new Limiter({ client: redis.url, namespace, limits: [{ duration: MINUTE, limit: 5 }] })
      const second = new Limiter({ client: redis.url, namespace, limits: [{ duration: SECOND, limit: 2 }] })
      await minute.consume('u', NOW)
      for (const at of [T, T + 1500, T + 2600]) {
        assert.equal((await second.consume('u', { now: at })).allowed, true)
        const pttl = await r.pttl(`${namespace}u`)
        assert.ok(pttl > MINUTE - 1000, `PTTL ${pttl} after the 1 s limiter counted at +${at - T} ms`)
      }
      assert.equal((await minute.peek('u', { now: T + 2600 })).remaining, 4)
    })
  }
})

describe('reset and clear delete whatever is at the id key, and nothing else', () => {
  // An explicit reset is the way out of a key that makes every other call reject: it deletes the
  // key whatever it holds (a DEL, as rolling-rate-limiter's clear), and only that key.
  const cases = [
    ...rollingLimiters.flatMap((l) => ['clear', 'reset'].map((method) => ({ ...l, method }))),
    ...countingLimiters.map((l) => ({ ...l, method: 'reset' })),
  ]
  for (const limiter of cases) {
    for (const shape of [withTtl(STRING), HASH, ZSET]) {
      it(`${limiter.name}: ${limiter.method} on ${shape.name}`, async () => {
        const instance = limiter.create(redis.url)
        const id = nextId()
        const key = limiter.namespace + id
        const neighbour = `${key}-neighbour`
        await shape.create(key)
        await shape.create(neighbour)
        const before = await snapshot(r, neighbour)
        assert.equal(await instance[limiter.method](id), undefined)
        assert.equal(await r.exists(key), 0)
        assert.equal(changed(before, await snapshot(r, neighbour), 1000), null)
      })
    }
  }
})

describe('a Redis at maxmemory with noeviction', () => {
  let server
  let client
  const limiters = {}

  before(async () => {
    server = await startRedis({ args: ['--maxmemory', '4mb', '--maxmemory-policy', 'noeviction'] })
    client = new IORedis({ host: server.host, port: server.port, lazyConnect: true, maxRetriesPerRequest: 0 })
    await client.connect()
    limiters.rolling = new RedisRateLimiter({ client: server.url, namespace: 'rrl:', interval: MINUTE, maxInInterval: 2 })
    limiters.log = new SlidingLog({ client: server.url, namespace: 'log:', interval: MINUTE, maxInInterval: 2 })
    limiters.fixed = new FixedWindow({ client: server.url, namespace: 'fw:', limits: [{ duration: MINUTE, limit: 5 }] })
    limiters.sliding = new SlidingWindow({ client: server.url, namespace: 'sw:', limits: [{ duration: MINUTE, limit: 5, precision: 10 * SECOND }] })
    limiters.redback = createRateLimit('requests', { client: server.url, namespace: 'rb' })
    limiters.callback = RateLimiter({ redis: server.url, namespace: 'cb:', interval: MINUTE, maxInInterval: 2 })
    // Each id `seen` has done one action at T, and `read` (for the reads) and `gone` (for reset) too.
    for (const id of ['seen', 'read', 'gone']) {
      await limiters.rolling.limit(id, NOW)
      await limiters.log.consume(id, { now: T, meta: 'user:1' })
      await limiters.fixed.consume(id, NOW)
      await limiters.sliding.consume(id, NOW)
      await limiters.redback.add(id, NOW)
      await limiters.callback(id) // on the server's clock
    }
    // Fill it up until a write fails.
    for (let i = 0; ; i++) {
      assert.ok(i < 100, 'the server never reached maxmemory')
      try {
        await client.set(`filler:${i}`, Buffer.alloc(256 * 1024, 'x'))
      } catch (error) {
        assert.match(error.message, /^OOM /)
        break
      }
    }
    // A big write fails first (its own query buffer counts): bring maxmemory 512 KiB below
    // what is used, so that every write fails however the server's own buffers move.
    const used = Number(/used_memory:(\d+)/.exec(await client.info('memory'))[1])
    await client.config('SET', 'maxmemory', String(used - 512 * 1024))
    await assert.rejects(client.set('probe', '1'), /OOM command not allowed when used memory > 'maxmemory'/)
  })
  after(async () => {
    if (client) client.disconnect()
    if (server) await server.stop()
  })

  const writes = {
    'RedisRateLimiter.limit': ['rrl:', (id) => limiters.rolling.limit(id, LATER)],
    'RedisRateLimiter.limitWithInfo': ['rrl:', (id) => limiters.rolling.limitWithInfo(id, LATER)],
    'RedisRateLimiter.consume': ['rrl:', (id) => limiters.rolling.consume(id, LATER)],
    'SlidingLog.consume': ['log:', (id) => limiters.log.consume(id, { ...LATER, meta: 'user:2' })],
    'SlidingLog.limit': ['log:', (id) => limiters.log.limit(id, LATER)],
    'RateLimiter({ redis })(id)': ['cb:', (id) => limiters.callback(id)],
    'FixedWindow.consume': ['fw:', (id) => limiters.fixed.consume(id, LATER)],
    'SlidingWindow.consume': ['sw:', (id) => limiters.sliding.consume(id, LATER)],
    'RateLimit.add': ['rb:requests:', (id) => limiters.redback.add(id, LATER)],
    'RateLimit.addCount': ['rb:requests:', (id) => limiters.redback.addCount(id, 60, LATER)],
  }
  for (const [name, [namespace, call]] of Object.entries(writes)) {
    for (const id of ['seen', 'new']) {
      it(`${name} on ${id === 'seen' ? 'an id with an action' : 'a new id'} rejects with the OOM error, writing nothing`, async () => {
        const key = namespace + id
        const before = await snapshot(client, key)
        const started = Date.now()
        await assert.rejects(call(id), (error) => {
          assert.equal(error.code, 'ERR_STORE_ERROR')
          assert.match(error.message, /OOM command not allowed when used memory > 'maxmemory'/)
          return true
        })
        assert.equal(changed(before, await snapshot(client, key), Date.now() - started), null)
      })
    }
  }

  it('the calls that only read still answer', async () => {
    assert.equal(await limiters.rolling.wouldLimit('read', LATER), false)
    assert.deepEqual(await limiters.rolling.wouldLimitWithInfo('read', LATER), {
      blocked: false,
      blockedDueToCount: false,
      blockedDueToMinDifference: false,
      millisecondsUntilAllowed: 59_000,
      actionsRemaining: 0,
    })
    assert.deepEqual(await limiters.rolling.peek('read', LATER), { allowed: true, timeLeft: 0, remaining: 1, limit: 2, resetAfter: 59_000 })
    assert.deepEqual(await limiters.log.peek('read', LATER), { allowed: true, timeLeft: 0, remaining: 1, limit: 2, resetAfter: 59_000 })
    assert.deepEqual(await limiters.log.entries('read', LATER), [{ at: T, meta: 'user:1' }])
    assert.deepEqual(await limiters.fixed.peek('read', LATER), { allowed: true, timeLeft: 0, remaining: 4, limit: 5, resetAfter: 54_000 })
    assert.deepEqual(await limiters.sliding.peek('read', LATER), { allowed: true, timeLeft: 0, remaining: 4, limit: 5, resetAfter: 54_000 })
    assert.equal(await limiters.redback.count('read', 60, LATER), 1)
  })

  it('a refusal, which writes nothing, still answers', async () => {
    // A weight above the limit is refused before anything is written.
    assert.deepEqual(await limiters.fixed.consume('read', { ...LATER, weight: 6 }), {
      allowed: false,
      timeLeft: Infinity,
      remaining: 4,
      limit: 5,
      resetAfter: 54_000,
    })
    assert.equal((await limiters.log.consume('read', { ...LATER, weight: 3 })).allowed, false)
  })

  it('a limiter whose script Redis has not loaded yet answers its reads as in memory, and its writes reject with the OOM error', async () => {
    // (On Redis 7 and later a library is not loaded at maxmemory, nor a Function run that may
    // write: the store sends such calls as EVALSHA, see src/store/script.rs.)
    for (const [Limiter, options] of [[Gcra, { limit: 5, period: MINUTE }], [TokenBucket, { capacity: 5, refillAmount: 5, refillInterval: MINUTE }]]) {
      const onRedis = new Limiter({ client: server.url, namespace: `unloaded-${Limiter.name}:`, ...options })
      const inMemory = new Limiter(options)
      assert.deepEqual(await onRedis.peek('x', LATER), await inMemory.peek('x', LATER), Limiter.name)
      await assert.rejects(onRedis.consume('x', LATER), (error) => {
        assert.equal(error.code, 'ERR_STORE_ERROR', Limiter.name)
        assert.match(error.message, /OOM command not allowed when used memory > 'maxmemory'/)
        return true
      })
    }
  })

  it('reset still deletes (DEL is allowed at maxmemory)', async () => {
    await limiters.fixed.reset('gone')
    await limiters.rolling.clear('gone')
    assert.equal(await client.exists('fw:gone', 'rrl:gone'), 0)
  })
})
