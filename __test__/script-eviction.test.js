'use strict'

// Scripts leaving Redis's script cache while calls run: another client floods it with 1,000
// distinct EVAL scripts (Redis 7.4+ and Valkey 8+ keep 500 of those and evict the rest; scripts
// added with SCRIPT LOAD, as ratekeeper's are, stay) and then empties it with SCRIPT FLUSH. Every
// limiter on Redis answers each call as its twin in memory does, and no call fails: a script
// Redis no longer has (NOSCRIPT, whatever the server's wording) is loaded again, batched calls
// included. The same with the scripts as Redis Functions (src/store/script.rs), which FUNCTION
// FLUSH drops.

const { it } = require('node:test')
const assert = require('node:assert/strict')
const crypto = require('node:crypto')
const IORedis = require('ioredis')

const { RateLimiter, createRateLimit, RedisStore } = require('..')
const { LIMITERS, ONE_ID } = require('./helpers/limiters.js')
const { useRedisServer, serverSupports } = require('./helpers/redis-server.js')
const { random } = require('./helpers/random.js')
const { scriptNames, evalScript } = require('./helpers/lua-scripts.js')
const flexible = require('../flexible.js')

const redis = useRedisServer()

const T0 = 1_700_000_000_000
const FLOOD = 1000
/** Each step makes one call per lane at once (concurrent calls of a limiter leave in one batch); each lane has ids of its own. */
const LANES = [0, 1, 2, 3].map((lane) => [`${lane}a`, `${lane}b`])

const pick = (rand, items) => items[Math.floor(rand() * items.length)]

/** A call of a limiter with `consume` and `peek`, on one id or two. */
const consumeOrPeek = (oneId) => (limiter, ids, now, rand) => {
  const id = oneId || rand() < 0.7 ? pick(rand, ids) : [pick(rand, ids), pick(rand, ids)]
  const weight = 1 + Math.floor(rand() * 3)
  return rand() < 0.75 ? limiter.consume(id, { now, weight }) : limiter.peek(id, { now, weight })
}

/** Every limiter: how to build it on a store's options, and one call of it. */
const SUBJECTS = {
  ...Object.fromEntries(Object.entries(LIMITERS).map(([name, create]) => [name, { create, call: consumeOrPeek(ONE_ID.has(name)) }])),
  "rolling-rate-limiter's RateLimiter (limit)": {
    create: (o) => new RateLimiter({ interval: 1000, maxInInterval: 5, ...o }),
    call: (limiter, ids, now, rand) => {
      const r = rand()
      if (r < 0.4) return limiter.limit(pick(rand, ids), { now })
      if (r < 0.8) return limiter.limitWithInfo(pick(rand, ids), { now })
      return limiter.wouldLimitWithInfo(pick(rand, ids), { now })
    },
  },
  "redback's createRateLimit": {
    create: (o) => createRateLimit('flood', { bucket_span: 10, bucket_interval: 1, ...o }),
    call: (limiter, ids, now, rand) => {
      const r = rand()
      if (r < 0.4) return limiter.add(pick(rand, ids), { now })
      if (r < 0.7) return limiter.count(pick(rand, ids), Math.floor(rand() * 11), { now })
      return limiter.addCount(pick(rand, ids), Math.floor(rand() * 11), { now })
    },
  },
  // Its Redis twin runs on the keys' TTLs: durations too long to end here, and only what does
  // not depend on the time left compared.
  "rate-limiter-flexible's RateLimiterRedis (ratekeeper/flexible)": {
    create: (o) =>
      o.client === undefined
        ? new flexible.RateLimiterMemory({ points: 6, duration: 1000 })
        : new flexible.RateLimiterRedis({ points: 6, duration: 1000, storeClient: o.client, keyPrefix: o.namespace }),
    call: (limiter, ids, now, rand) => {
      const points = (res) => [res.consumedPoints, res.remainingPoints]
      const r = rand()
      const id = pick(rand, ids)
      if (r < 0.7) {
        return limiter.consume(id, 1 + Math.floor(rand() * 2)).then(
          (res) => ['allowed', ...points(res)],
          (res) => {
            if (res instanceof Error) throw res
            return ['refused', ...points(res)]
          },
        )
      }
      if (r < 0.85) return limiter.reward(id, 1).then(points)
      return limiter.get(id).then((res) => res && points(res))
    },
  },
}

/** A call's outcome, comparable: its answer, or the code of its error. */
const settle = (promise) => promise.then((value) => ({ value }), (error) => ({ error: error.code ?? String(error) }))

/**
 * One limiter in memory and its twin on `store`, called in steps: each step moves time forward
 * and makes the same calls on both, and the Redis twin must answer as the memory one did.
 */
function twins(name, { create, call }, store, seed) {
  const memory = create({})
  const onRedis = create({ client: store, namespace: `flood${seed}:` })
  const rand = random(seed)
  let now = T0
  let steps = 0
  return {
    name,
    get steps() {
      return steps
    },
    async step() {
      now += Math.floor(rand() * 150)
      const at = now
      const plans = LANES.map((ids) => {
        const state = rand() * 4294967296
        return (limiter) => call(limiter, ids, at, random(state))
      })
      const expected = []
      for (const plan of plans) expected.push(await settle(plan(memory)))
      const answers = await Promise.all(plans.map((plan) => settle(plan(onRedis))))
      assert.deepEqual(answers, expected, `${name}, step ${steps} at +${at - T0} ms`)
      steps++
    },
  }
}

/** The SHA1 of each script ratekeeper runs as EVALSHA (see helpers/lua-scripts.js). */
function ratekeeperScripts() {
  return scriptNames().map((name) => crypto.createHash('sha1').update(evalScript(name)).digest('hex'))
}

/** A field of an INFO section as a number, or undefined when the server has no such field. */
function infoField(text, name) {
  const match = new RegExp(`^${name}:(\\d+)`, 'm').exec(text)
  return match ? Number(match[1]) : undefined
}

it('every limiter answers as in memory, and none fails, while 1,000 EVAL scripts flood the script cache and SCRIPT FLUSH empties it', async (t) => {
  // (Scripts as EVALSHA, as on Redis 6.2: with Functions, EVALSHA runs only when they are refused.)
  const store = new RedisStore({ url: redis.server.url, functions: false })
  const flooder = new IORedis({ host: redis.server.host, port: redis.server.port, lazyConnect: true, maxRetriesPerRequest: 0 })
  await flooder.connect()
  try {
    const pairs = Object.entries(SUBJECTS).map(([name, subject], i) => twins(name, subject, store, i + 1))
    const steps = (count) => Promise.all(pairs.map(async (pair) => {
      for (let step = 0; step < count; step++) await pair.step()
    }))
    const ours = ratekeeperScripts()
    const allThere = ours.map(() => 1)

    // Every script loaded (once: the server is this file's own).
    await steps(10)
    assert.deepEqual(await flooder.call('SCRIPT', 'EXISTS', ...ours), allThere, "ratekeeper's scripts are cached (is the addon built from these lua/ files?)")
    const loadsBefore = store.stats().scriptLoads

    // The flood, then the flush, while every limiter goes on calling until both are done.
    let flooded = false
    const flood = (async () => {
      try {
        for (let i = 0; i < FLOOD; i++) await flooder.call('EVAL', `return 'flood ${i}'`, '0')
        const seen = {
          stats: await flooder.call('INFO', 'stats'),
          memory: await flooder.call('INFO', 'memory'),
          ours: await flooder.call('SCRIPT', 'EXISTS', ...ours),
        }
        assert.equal(await flooder.call('SCRIPT', 'FLUSH'), 'OK')
        return seen
      } finally {
        flooded = true
      }
    })()
    const stepsBefore = pairs.map((pair) => pair.steps)
    const during = Promise.all(pairs.map(async (pair) => {
      do {
        await pair.step()
      } while (!flooded)
    }))
    const [seen] = await Promise.all([flood, during])
    const stepsDuring = pairs.map((pair, i) => pair.steps - stepsBefore[i])

    // After the flush: every limiter again, each script loaded anew.
    await steps(10)

    const evicted = infoField(seen.stats, 'evicted_scripts')
    const cached = infoField(seen.memory, 'number_of_cached_scripts')
    t.diagnostic(`after the flood: ${cached} scripts cached, ${evicted ?? 'none (no such field)'} evicted; steps during it: ${Math.min(...stepsDuring)} to ${Math.max(...stepsDuring)} per limiter`)
    if (evicted === undefined) {
      // Redis before 7.4 keeps every script: the flood is all there.
      assert.ok(cached >= FLOOD + ours.length, `${cached} scripts cached after the flood`)
    } else {
      assert.ok(evicted > 0, 'the flood evicted scripts')
      assert.ok(cached < FLOOD, `${cached} scripts cached after the flood`)
    }
    // Scripts added with SCRIPT LOAD are never evicted: ratekeeper's stayed through the flood.
    assert.deepEqual(seen.ours, allThere, "ratekeeper's scripts after the flood")
    // SCRIPT FLUSH dropped them, and the calls after it loaded each one again.
    const loadsAfter = store.stats().scriptLoads - loadsBefore
    assert.ok(loadsAfter >= ours.length, `${loadsAfter} scripts loaded after SCRIPT FLUSH, for ${ours.length} scripts`)
    assert.deepEqual(await flooder.call('SCRIPT', 'EXISTS', ...ours), allThere)
    assert.deepEqual(store.stats().failures, { ERR_STORE_UNAVAILABLE: 0, ERR_STORE_ERROR: 0, ERR_STORE_CLOSED: 0 })
  } finally {
    flooder.disconnect()
    store.close()
  }
})

/** The names of ratekeeper's Function libraries loaded in Redis. */
async function libraries(client) {
  const list = await client.call('FUNCTION', 'LIST', 'LIBRARYNAME', 'ratekeeper_*')
  return list.map((library) => library[library.indexOf('library_name') + 1]).sort()
}

it('every limiter answers as in memory, and none fails, while FUNCTION FLUSH drops its Functions; each library is loaded again', { skip: serverSupports.version < 7 && 'Functions are Redis 7 and later' }, async () => {
  const store = new RedisStore(redis.server.url)
  const flusher = new IORedis({ host: redis.server.host, port: redis.server.port, lazyConnect: true, maxRetriesPerRequest: 0 })
  await flusher.connect()
  try {
    const pairs = Object.entries(SUBJECTS).map(([name, subject], i) => twins(name, subject, store, i + 101))
    const steps = (count) => Promise.all(pairs.map(async (pair) => {
      for (let step = 0; step < count; step++) await pair.step()
    }))
    // One library per script of lua/ (named by the script and a hash of its code).
    const scripts = ratekeeperScripts().length
    await steps(10)
    const loaded = await libraries(flusher)
    assert.equal(loaded.length, scripts, `libraries loaded: ${loaded.join(', ')}`)
    for (const name of loaded) assert.match(name, /^ratekeeper_[a-z_]+_[0-9a-f]{12}$/)
    const loadsBefore = store.stats().scriptLoads

    // Flushed three times while every limiter goes on calling, each after every limiter's next
    // three steps.
    let flushed = false
    const fewest = () => Math.min(...pairs.map((pair) => pair.steps))
    const flush = (async () => {
      try {
        for (let i = 0; i < 3; i++) {
          const target = fewest() + 3
          while (fewest() < target) await new Promise((resolve) => setTimeout(resolve, 2))
          assert.equal(await flusher.call('FUNCTION', 'FLUSH'), 'OK')
        }
      } finally {
        flushed = true
      }
    })()
    const during = Promise.all(pairs.map(async (pair) => {
      do {
        await pair.step()
      } while (!flushed)
    }))
    await Promise.all([flush, during])
    await steps(10)

    assert.deepEqual(await libraries(flusher), loaded)
    const loadsAfter = store.stats().scriptLoads - loadsBefore
    assert.ok(loadsAfter >= scripts, `${loadsAfter} libraries loaded after FUNCTION FLUSH, for ${scripts} scripts`)
    assert.deepEqual(store.stats().failures, { ERR_STORE_UNAVAILABLE: 0, ERR_STORE_ERROR: 0, ERR_STORE_CLOSED: 0 })
  } finally {
    flusher.disconnect()
    store.close()
  }
})
