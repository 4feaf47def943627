'use strict'

// ratekeeper/flexible against rate-limiter-flexible itself: the same sequences of calls on both,
// in memory (the clock driven by mock timers) and on a real redis-server (each on its own key
// prefix, and the keys compared too), give the same answers; both on one Redis count together.

const { describe, it, mock } = require('node:test')
const assert = require('node:assert/strict')
const { fork } = require('node:child_process')
const path = require('node:path')
const IORedis = require('ioredis')
const rlf = require('rate-limiter-flexible')

const flexible = require('../flexible.js')
const { useRedisServer } = require('./helpers/redis-server.js')
const { random } = require('./helpers/random.js')
const { withTimersFaked, answeredWithin3s } = require('./helpers/faked-timers.js')

const redis = useRedisServer()

const T0 = 1_700_000_000_000

/** A call's outcome, as an app sees it: resolved or rejected, and the answer as JSON. */
async function outcome(promise) {
  try {
    const value = await promise
    return { resolved: value instanceof Object && 'toJSON' in value ? value.toJSON() : value }
  } catch (error) {
    if (error instanceof Error) return { failed: error.message }
    return { rejected: error.toJSON() }
  }
}

/**
 * A random sequence of calls over 3 keys: consume (with `customDuration` now and then), penalty,
 * reward, get, set, block, delete, and the clock moving on by up to 4 s (in memory only).
 */
function sequence(seed, length, withTicks) {
  const next = random(seed)
  const pick = (n) => Math.floor(next() * n)
  const steps = []
  for (let i = 0; i < length; i++) {
    const key = `k${pick(3)}`
    const kind = pick(withTicks ? 10 : 9)
    if (kind <= 2) steps.push(['consume', key, 1 + pick(3), pick(5) === 0 ? { customDuration: pick(3) } : {}])
    else if (kind === 3) steps.push(['penalty', key, 1 + pick(2)])
    else if (kind === 4) steps.push(['reward', key, 1 + pick(2)])
    else if (kind === 5) steps.push(['get', key])
    else if (kind === 6) steps.push(['set', key, pick(6), pick(4)])
    else if (kind === 7) steps.push(['block', key, pick(3)])
    else if (kind === 8) steps.push(['delete', key])
    else steps.push(['tick', 1 + pick(4000)])
  }
  return steps
}

/** Runs `step` on `limiter`. */
function call(limiter, [method, ...args]) {
  return limiter[method](...args)
}

const OPTIONS = [
  { points: 5, duration: 10 },
  { points: 3, duration: 2, blockDuration: 5 },
  { points: 2, duration: 0 },
  { points: 4, duration: 3, keyPrefix: '' },
]

describe('RateLimiterMemory, beside rate-limiter-flexible', () => {
  for (const options of OPTIONS) {
    it(`answers every call of random sequences as rate-limiter-flexible does: ${JSON.stringify(options)}`, async (t) => {
      mock.timers.enable({ apis: ['Date', 'setTimeout'], now: T0 })
      t.after(() => mock.timers.reset())
      for (let seed = 1; seed <= 20; seed++) {
        const theirs = new rlf.RateLimiterMemory(options)
        const ours = new flexible.RateLimiterMemory(options)
        for (const [n, step] of sequence(seed, 60, true).entries()) {
          if (step[0] === 'tick') {
            mock.timers.tick(step[1])
            continue
          }
          const [expected, actual] = [await outcome(call(theirs, step)), await outcome(call(ours, step))]
          assert.deepEqual(actual, expected, `seed ${seed}, step ${n}: ${JSON.stringify(step)}`)
        }
      }
    })
  }

  it('counts a refused consume, blocks on the first one over, and answers -1 for a key that never expires', async (t) => {
    mock.timers.enable({ apis: ['Date', 'setTimeout'], now: T0 })
    t.after(() => mock.timers.reset())
    const limiter = new flexible.RateLimiterMemory({ points: 2, duration: 60, blockDuration: 300 })
    assert.deepEqual((await limiter.consume('ip', 2)).toJSON(), { remainingPoints: 0, msBeforeNext: 60_000, consumedPoints: 2, isFirstInDuration: true })
    mock.timers.tick(1000)
    const refused = await limiter.consume('ip').then(assert.fail, (res) => res)
    assert.ok(refused instanceof flexible.RateLimiterRes)
    assert.deepEqual(refused.toJSON(), { remainingPoints: 0, msBeforeNext: 300_000, consumedPoints: 3, isFirstInDuration: true })
    // The block outlives the 60 s duration.
    mock.timers.tick(100_000)
    assert.deepEqual((await limiter.get('ip')).toJSON(), { remainingPoints: 0, msBeforeNext: 200_000, consumedPoints: 3, isFirstInDuration: false })
    const forever = await limiter.block('other', 0)
    assert.equal(forever.msBeforeNext, -1)
    assert.equal((await limiter.get('other')).msBeforeNext, -1)
    assert.equal(await limiter.get('nobody'), null)
  })

  it('with execEvenly, holds each allowed action as long as rate-limiter-flexible does, and answers alike', async (t) => {
    mock.timers.enable({ apis: ['Date', 'setTimeout'], now: T0 })
    t.after(() => mock.timers.reset())
    const options = { points: 4, duration: 10, execEvenly: true }
    const limiters = [new rlf.RateLimiterMemory(options), new flexible.RateLimiterMemory(options)]
    const delays = []
    for (let call = 0; call < 4; call++) {
      const settled = limiters.map((limiter) => {
        const state = { at: null, answer: null }
        limiter.consume('k').then((res) => Object.assign(state, { at: Date.now() - started, answer: res.toJSON() }))
        return state
      })
      const started = Date.now()
      // Both hold the action on a timer of their own: the clock moves 1 ms at a time until both are answered.
      for (let ms = 0; settled.some((state) => state.at === null) && ms < 20_000; ms++) {
        await new Promise(setImmediate)
        if (settled.some((state) => state.at === null)) mock.timers.tick(1)
      }
      assert.deepEqual(settled[1], settled[0], `call ${call}`)
      delays.push(settled[1].at)
    }
    // The first is not held; each next one is held for what is left of the 10 s shared over the
    // points left plus 2, here never below the 2,500 ms of 10 s / 4 points.
    assert.deepEqual(delays, [0, 2500, 2500, 2500])
  })

  it('dumps what rate-limiter-flexible dumps, and each restores the other\'s dump to answer alike', async (t) => {
    mock.timers.enable({ apis: ['Date', 'setTimeout'], now: T0 })
    t.after(() => mock.timers.reset())
    const sorted = (dump) => ({ ...dump, storage: [...dump.storage].sort((a, b) => String(a.key).localeCompare(String(b.key))) })
    for (let seed = 1; seed <= 10; seed++) {
      const options = OPTIONS[seed % OPTIONS.length]
      const theirs = new rlf.RateLimiterMemory(options)
      const ours = new flexible.RateLimiterMemory(options)
      const steps = sequence(seed, 60, true)
      for (const step of steps.slice(0, 30)) {
        if (step[0] === 'tick') mock.timers.tick(step[1])
        else await Promise.all([outcome(call(theirs, step)), outcome(call(ours, step))])
      }
      const [theirDump, ourDump] = [theirs.dump(), ours.dump()]
      assert.deepEqual(sorted(ourDump), sorted(theirDump), `seed ${seed}`)
      // Crossed over: rate-limiter-flexible from our dump, ours from theirs.
      const [theirsFromOurs, oursFromTheirs] = [new rlf.RateLimiterMemory(options), new flexible.RateLimiterMemory(options)]
      const counts = { invalid: 0, expired: 0, restored: theirDump.storage.length }
      assert.deepEqual(theirsFromOurs.restore(ourDump), counts)
      assert.deepEqual(oursFromTheirs.restore(theirDump), counts)
      for (const [n, step] of steps.slice(30).entries()) {
        if (step[0] === 'tick') {
          mock.timers.tick(step[1])
          continue
        }
        const [expected, actual] = [await outcome(call(theirsFromOurs, step)), await outcome(call(oursFromTheirs, step))]
        assert.deepEqual(actual, expected, `seed ${seed}, step ${30 + n}: ${JSON.stringify(step)}`)
      }
    }
  })

  it('sorts a snapshot\'s items into invalid, expired and restored as rate-limiter-flexible does', (t) => {
    mock.timers.enable({ apis: ['Date', 'setTimeout'], now: T0 })
    t.after(() => mock.timers.reset())
    const data = {
      version: 1,
      dumpedAt: T0 - 5000,
      storage: [null, 7, { key: {}, value: 1, expiresAt: null }, { key: 'nan', value: NaN, expiresAt: null }, { key: 'when', value: 1, expiresAt: 'soon' },
        { key: 'old', value: 3, expiresAt: T0 }, { key: 'live', value: 3, expiresAt: T0 + 4000 }, { key: 9, value: 1, expiresAt: null }],
    }
    const limiters = [new rlf.RateLimiterMemory({ points: 3, duration: 10 }), new flexible.RateLimiterMemory({ points: 3, duration: 10 })]
    const [expected, actual] = limiters.map((limiter) => limiter.restore(data, true))
    assert.deepEqual(actual, expected)
    assert.deepEqual(actual.restored.keys, ['live', 9])
    assert.equal(limiters[1].restore({ version: 2 }), undefined)
    assert.deepEqual(limiters[1].restore({ version: 1 }), { invalid: 0, expired: 0, restored: 0 })
    // A fraction of a point: rate-limiter-flexible takes it; ours counts whole points only.
    assert.deepEqual(limiters[1].restore({ version: 1, storage: [{ key: 'f', value: 1.5, expiresAt: null }] }), { invalid: 1, expired: 0, restored: 0 })
    return Promise.all(limiters.map((limiter) => limiter.get('live'))).then(([theirs, ours]) => assert.deepEqual(ours.toJSON(), theirs.toJSON()))
  })

  it('refuses at once while the global queueMicrotask and setImmediate are replaced, as fake timers replace them, as rate-limiter-flexible does', async () => {
    const answers = { ours: [], theirs: [] }
    await withTimersFaked(async () => {
      for (const [side, library] of [['ours', flexible], ['theirs', rlf]]) {
        const limiter = new library.RateLimiterMemory({ points: 2, duration: 60, blockDuration: 300 })
        for (let i = 0; i < 4; i++) {
          const settled = await answeredWithin3s(outcome(limiter.consume('ip')), `${side}: call ${i}`)
          answers[side].push(settled.resolved ? ['resolved', settled.resolved.remainingPoints] : ['rejected', settled.rejected.consumedPoints])
        }
      }
    })
    // Two allowed, then refused: blocked at the first one over (3 counted), and still counting.
    assert.deepEqual(answers.ours, [['resolved', 1], ['resolved', 0], ['rejected', 3], ['rejected', 4]])
    assert.deepEqual(answers.ours, answers.theirs)
  })

  it('keeps durations past 24.8 days (no timer per key)', async (t) => {
    mock.timers.enable({ apis: ['Date'], now: T0 })
    t.after(() => mock.timers.reset())
    const thirtyDays = 30 * 24 * 3600
    const limiter = new flexible.RateLimiterMemory({ points: 1, duration: thirtyDays })
    await limiter.consume('k')
    mock.timers.setTime(T0 + (thirtyDays - 1) * 1000)
    const res = await limiter.consume('k').then(assert.fail, (r) => r)
    assert.equal(res.msBeforeNext, 1000)
    mock.timers.setTime(T0 + thirtyDays * 1000)
    assert.equal((await limiter.consume('k')).isFirstInDuration, true)
  })
})

describe('RateLimiterRedis, beside rate-limiter-flexible on one redis-server', () => {
  const REDIS_OPTIONS = [
    { points: 5, duration: 60 },
    { points: 3, duration: 60, blockDuration: 120 },
    { points: 2, duration: 0 },
    { points: 3, duration: 60, blockDuration: 120, blockOnConsumed: 5 },
  ]
  for (const [index, options] of REDIS_OPTIONS.entries()) {
    it(`answers every call as rate-limiter-flexible does, and writes the same keys: ${JSON.stringify(options)}`, async () => {
      const client = new IORedis(redis.server.port, '127.0.0.1')
      try {
        const theirs = new rlf.RateLimiterRedis({ ...options, storeClient: client, keyPrefix: `theirs${index}` })
        const ours = new flexible.RateLimiterRedis({ ...options, storeClient: client, keyPrefix: `ours${index}` })
        for (let seed = 1; seed <= 5; seed++) {
          await client.flushall()
          for (const [n, step] of sequence(seed, 40, false).entries()) {
            const [expected, actual] = [await outcome(call(theirs, step)), await outcome(call(ours, step))]
            const at = `seed ${seed}, step ${n}: ${JSON.stringify(step)}`
            // The time left passes between the two calls: within 50 ms.
            assert.equal(closeMs(actual, expected), true, `${at}: ${JSON.stringify(actual)} against ${JSON.stringify(expected)}`)
            assert.deepEqual(withoutMs(actual), withoutMs(expected), at)
            const [theirKey, ourKey] = await Promise.all([keyState(client, `theirs${index}:${step[1]}`), keyState(client, `ours${index}:${step[1]}`)])
            assert.equal(ourKey.value, theirKey.value, `${at}: the key's value`)
            assert.ok(Math.abs(ourKey.ttl - theirKey.ttl) <= 1000 || (ourKey.ttl < 0 && ourKey.ttl === theirKey.ttl), `${at}: TTL ${ourKey.ttl} against ${theirKey.ttl}`)
          }
        }
      } finally {
        client.disconnect()
      }
    })
  }

  it('shares every count with rate-limiter-flexible: 10,000 consumes over 100 keys from both never allow more than the points', async () => {
    const client = new IORedis(redis.server.port, '127.0.0.1')
    try {
      const options = { points: 30, duration: 60, keyPrefix: 'fleet', storeClient: client }
      const limiters = [new rlf.RateLimiterRedis(options), new flexible.RateLimiterRedis(options)]
      const allowed = new Map()
      const calls = []
      for (let i = 0; i < 10_000; i++) {
        const key = `user${i % 100}`
        calls.push(
          limiters[i % 2].consume(key).then(
            () => allowed.set(key, (allowed.get(key) ?? 0) + 1),
            (res) => assert.ok(res instanceof rlf.RateLimiterRes || res instanceof flexible.RateLimiterRes, String(res)),
          ),
        )
      }
      await Promise.all(calls)
      assert.equal(allowed.size, 100)
      for (const [key, count] of allowed) assert.equal(count, 30, key)
      assert.equal(await client.get('fleet:user7'), '100')
      const ttl = await client.pttl('fleet:user7')
      assert.ok(ttl > 55_000 && ttl <= 60_000, `TTL ${ttl}`)
    } finally {
      client.disconnect()
    }
  })

  it('a fleet switching host by host: rate-limiter-flexible and ratekeeper in two processes, 10,000 consumes over 100 keys, never allow more than the points', async (t) => {
    const options = { port: redis.server.port, calls: 5000, keys: 100, points: 30, duration: 60, keyPrefix: 'hosts' }
    const hosts = ['rlf', 'ratekeeper'].map((library) => {
      const child = fork(path.join(__dirname, 'helpers', 'flexible-fleet-worker.js'), [JSON.stringify({ library, ...options })])
      const nextMessage = () =>
        new Promise((resolve, reject) => {
          child.once('message', resolve)
          child.once('exit', (code) => reject(new Error(`the ${library} host exited with ${code}`)))
        })
      return { child, ready: nextMessage(), nextMessage }
    })
    // Both hosts connected, then both go at once.
    await Promise.all(hosts.map((host) => host.ready))
    const reported = hosts.map((host) => host.nextMessage())
    for (const { child } of hosts) child.send('go')
    const reports = await Promise.all(reported)
    const allowed = new Map()
    for (const report of reports) for (const [key, count] of Object.entries(report.allowed)) allowed.set(key, (allowed.get(key) ?? 0) + count)
    assert.equal(allowed.size, 100)
    for (const [key, count] of allowed) assert.equal(count, 30, key)
    const shares = reports.map((report) => Object.values(report.allowed).reduce((a, b) => a + b, 0))
    t.diagnostic(`allowed: ${shares[0]} by rate-limiter-flexible's host, ${shares[1]} by ratekeeper's`)
    for (const key of ['hosts:user0', 'hosts:user99']) {
      assert.equal(await redis.server.cli('GET', key), '100')
      const ttl = Number(await redis.server.cli('PTTL', key))
      assert.ok(ttl > 50_000 && ttl <= 60_000, `${key}: TTL ${ttl}`)
    }
  })

  it('answers from the insurance limiter while Redis is unreachable', async () => {
    const insuranceLimiter = new flexible.RateLimiterMemory({ points: 1, duration: 60 })
    const limiter = new flexible.RateLimiterRedis({ storeClient: 'redis://127.0.0.1:1', points: 5, duration: 60, insuranceLimiter })
    assert.deepEqual((await limiter.consume('k')).toJSON(), { remainingPoints: 0, msBeforeNext: 60_000, consumedPoints: 1, isFirstInDuration: true })
    const refused = await limiter.consume('k').then(assert.fail, (res) => res)
    assert.equal(refused.consumedPoints, 2)
    const bare = new flexible.RateLimiterRedis({ storeClient: 'redis://127.0.0.1:1', points: 5, duration: 60 })
    const failure = await bare.consume('k').then(assert.fail, (error) => error)
    assert.ok(failure instanceof Error)
    assert.equal(failure.code, 'ERR_STORE_UNAVAILABLE')
  })

  it('rejects a consume of a key holding what it did not write with the store\'s error, alone and batched, and leaves the key as it was', async () => {
    const limiter = new flexible.RateLimiterRedis({ storeClient: redis.server.url, keyPrefix: 'foreign', points: 5, duration: 60 })
    await redis.server.cli('HSET', 'foreign:hash', 'f', '1')
    await redis.server.cli('SET', 'foreign:text', 'abc', 'PX', '60000')
    for (const [key, message] of [['hash', /WRONGTYPE/], ['text', /not an integer/]]) {
      // Alone (a lone consume's path), then beside another key's consume in one batch.
      const [alone] = await Promise.allSettled([limiter.consume(key)])
      const [batched, other] = await Promise.allSettled([limiter.consume(key), limiter.consume(`fine-${key}`)])
      for (const settled of [alone, batched]) {
        assert.equal(settled.status, 'rejected', key)
        assert.ok(settled.reason instanceof Error, key)
        assert.equal(settled.reason.code, 'ERR_STORE_ERROR', key)
        assert.match(settled.reason.message, message)
      }
      assert.equal(other.status, 'fulfilled')
      assert.equal(other.value.consumedPoints, 1)
    }
    assert.equal(await redis.server.cli('HGETALL', 'foreign:hash'), 'f\n1')
    assert.equal(await redis.server.cli('GET', 'foreign:text'), 'abc')
  })
})

describe('ratekeeper/flexible: options and arguments', () => {
  it("refuses bad options with rate-limiter-flexible's messages and a code", () => {
    const cases = [
      [{ duration: 1 }, 'points must be set and must be a finite number'],
      [{ points: 1, duration: -1 }, 'duration must be set and must be a finite, non-negative number'],
      [{ points: 1, duration: 1, keyPrefix: 5 }, 'keyPrefix must be string'],
    ]
    for (const [options, message] of cases) {
      assert.throws(() => new rlf.RateLimiterMemory(options), { message })
      assert.throws(() => new flexible.RateLimiterMemory(options), (error) => error.message === message && error.code === 'ERR_INVALID_OPTION')
    }
    assert.throws(() => new flexible.RateLimiterRedis({ points: 1, duration: 1 }), { message: 'storeClient is not set', code: 'ERR_INVALID_OPTION' })
    assert.throws(() => new flexible.RateLimiterRedis({ points: 5, duration: 1, storeClient: 'redis://127.0.0.1:1', inMemoryBlockOnConsumed: 2 }), {
      message: 'inMemoryBlockOnConsumed option must be greater or equal "points" option',
      code: 'ERR_INVALID_OPTION',
    })
    assert.throws(() => new flexible.RateLimiterRedis({ points: 1, duration: 1, storeClient: 'redis://127.0.0.1:1', customIncrTtlLuaScript: 'return 1' }), {
      name: 'TypeError',
      code: 'ERR_INVALID_OPTION',
      message: /customIncrTtlLuaScript is not supported/,
    })
  })

  it('rejects fractional points on both stores, with the message of rate-limiter-flexible on Redis', async () => {
    const memory = new flexible.RateLimiterMemory({ points: 5, duration: 1 })
    await assert.rejects(memory.consume('k', 1.5), { name: 'RangeError', code: 'ERR_INVALID_ARGUMENT', message: 'Consuming decimal number of points is not supported by this package' })
    await assert.rejects(memory.consume('k', '1.5'), { code: 'ERR_INVALID_ARGUMENT', message: 'Consuming string different than integer values is not supported by this package' })
    assert.equal((await memory.consume('k', '2')).consumedPoints, 2)
  })

  it("gives the same class by ratekeeper/flexible and by its lib/ files, as rate-limiter-flexible's docs import them", () => {
    for (const name of ['RateLimiterMemory', 'RateLimiterRedis', 'RateLimiterRes', 'RateLimiterStoreAbstract']) {
      assert.equal(require(`ratekeeper/flexible/lib/${name}`), flexible[name])
      assert.equal(require(`ratekeeper/flexible/lib/${name}.js`), flexible[name])
    }
  })
})

/** Whether the two outcomes' `msBeforeNext` are within 50 ms of each other (or both absent or -1). */
function closeMs(actual, expected) {
  const ms = (o) => (o.resolved ?? o.rejected)?.msBeforeNext
  const [a, e] = [ms(actual), ms(expected)]
  if (a === undefined || e === undefined || a < 0 || e < 0) return a === e
  return Math.abs(a - e) <= 50
}

function withoutMs(outcome) {
  const answer = outcome.resolved ?? outcome.rejected
  if (answer === null || typeof answer !== 'object') return outcome
  const { msBeforeNext, ...rest } = answer
  return { ...outcome, [outcome.resolved !== undefined ? 'resolved' : 'rejected']: rest }
}

/** A key's value and PTTL. */
async function keyState(client, key) {
  const [value, ttl] = await Promise.all([client.get(key), client.pttl(key)])
  return { value, ttl }
}
