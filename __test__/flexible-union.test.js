'use strict'

// ratekeeper/flexible's RateLimiterUnion: atomic where rate-limiter-flexible's is not. The oracle
// is rate-limiter-flexible itself, made atomic by the test: before each union consume it reads
// every member (`get`), and consumes through its own RateLimiterUnion only when every member has
// room; otherwise it charges none, and blocks a member with `blockDuration` as that member's own
// consume would. Ours must answer every call of random sequences as that oracle does, in memory
// (the clock driven by mock timers) and on a real redis-server (where the keys must match too).

const { describe, it, mock } = require('node:test')
const { execFileSync } = require('node:child_process')
const path = require('node:path')
const assert = require('node:assert/strict')
const IORedis = require('ioredis')
const rlf = require('rate-limiter-flexible')

const flexible = require('../flexible.js')
const { RedisStore } = require('..')
const { useRedisServer } = require('./helpers/redis-server.js')
const { random } = require('./helpers/random.js')

const redis = useRedisServer()

const T0 = 1_700_000_000_000

const MEMBERS = [
  [
    { points: 3, duration: 2 },
    { points: 5, duration: 10, blockDuration: 4 },
  ],
  [
    { points: 2, duration: 0 },
    { points: 4, duration: 3 },
    { points: 6, duration: 20, blockDuration: 30 },
  ],
]

/** A member's answer as JSON, or an Error's message. */
const shown = (answer) => (answer instanceof Error ? { failed: answer.message } : answer.toJSON())

/**
 * A union call's outcome with the members in order (their key prefixes differ between the two
 * sides): `{ resolved: [json...] }` or `{ rejected: [json or null per member] }`.
 */
async function unionOutcome(promise, prefixes) {
  try {
    const answers = await promise
    return { resolved: prefixes.map((prefix) => shown(answers[prefix])) }
  } catch (refusals) {
    if (refusals instanceof Error) return { failed: refusals.message }
    return { rejected: prefixes.map((prefix) => (prefix in refusals ? shown(refusals[prefix]) : null)) }
  }
}

/** rate-limiter-flexible's limiters and union, made atomic (see the top of this file). */
function atomicOracle(limiters) {
  const union = new rlf.RateLimiterUnion(...limiters)
  return {
    async consume(key, points) {
      const held = await Promise.all(limiters.map((limiter) => limiter.get(key)))
      const over = limiters.map((limiter, i) => (held[i]?.consumedPoints ?? 0) + points > limiter.points)
      if (!over.includes(true)) return union.consume(key, points)
      const refusals = {}
      for (const [i, limiter] of limiters.entries()) {
        if (!over[i]) continue
        const consumed = held[i]?.consumedPoints ?? 0
        if (limiter.blockDuration > 0 && consumed <= limiter.points) refusals[limiter.keyPrefix] = await limiter.block(key, limiter.blockDuration)
        else refusals[limiter.keyPrefix] = new rlf.RateLimiterRes(Math.max(limiter.points - consumed, 0), held[i]?.msBeforeNext ?? 0, consumed, false)
      }
      throw refusals
    },
  }
}

/**
 * Random steps over 3 keys: union consumes of 1 to 3 points, a member's own consume, penalty,
 * reward or delete, and (in memory) the clock moving on by up to 3 s.
 */
function sequence(seed, length, memberCount, withTicks) {
  const next = random(seed)
  const pick = (n) => Math.floor(next() * n)
  const steps = []
  for (let i = 0; i < length; i++) {
    const key = `k${pick(3)}`
    const kind = pick(withTicks ? 9 : 8)
    if (kind <= 3) steps.push(['union', key, 1 + pick(3)])
    else if (kind === 4) steps.push(['member', pick(memberCount), 'consume', key, 1 + pick(2)])
    else if (kind === 5) steps.push(['member', pick(memberCount), 'penalty', key, 1])
    else if (kind === 6) steps.push(['member', pick(memberCount), 'reward', key, 1 + pick(2)])
    else if (kind === 7) steps.push(['member', pick(memberCount), 'delete', key])
    else steps.push(['tick', 1 + pick(3000)])
  }
  return steps
}

/** A member call's outcome: resolved or rejected, as JSON. */
async function memberOutcome(promise) {
  try {
    const value = await promise
    return { resolved: value instanceof Object ? value.toJSON() : value }
  } catch (res) {
    return { rejected: shown(res) }
  }
}

/** The two sides' outcomes of `step`. */
async function runStep(sides, step) {
  return Promise.all(
    sides.map(async ({ union, limiters }) => {
      if (step[0] === 'union') {
        return unionOutcome(union.consume(step[1], step[2]), limiters.map((limiter) => limiter.keyPrefix))
      }
      const [, member, method, ...args] = step
      return memberOutcome(limiters[member][method](...args))
    }),
  )
}

/**
 * `actual` with each `msBeforeNext` that is within 100 ms of `expected`'s taken from `expected`
 * (time passes between the two sides' calls on Redis).
 */
function withinMs(actual, expected) {
  if (actual === null || typeof actual !== 'object' || expected === null || typeof expected !== 'object') return actual
  const copy = Array.isArray(actual) ? [] : {}
  for (const [name, value] of Object.entries(actual)) {
    const close = name === 'msBeforeNext' && value > 0 && Math.abs(value - expected[name]) <= 100
    copy[name] = close ? expected[name] : withinMs(value, expected[name])
  }
  return copy
}

describe('RateLimiterUnion in memory', () => {
  for (const members of MEMBERS) {
    it(`answers random sequences as rate-limiter-flexible made atomic does: ${JSON.stringify(members)}`, async (t) => {
      mock.timers.enable({ apis: ['Date', 'setTimeout'], now: T0 })
      t.after(() => mock.timers.reset())
      let refusals = 0
      for (let seed = 1; seed <= 20; seed++) {
        const theirs = members.map((options, i) => new rlf.RateLimiterMemory({ ...options, keyPrefix: `m${i}` }))
        const ours = members.map((options, i) => new flexible.RateLimiterMemory({ ...options, keyPrefix: `m${i}` }))
        const union = new flexible.RateLimiterUnion(...ours)
        assert.equal(union.atomic, true)
        const sides = [
          { union: atomicOracle(theirs), limiters: theirs },
          { union, limiters: ours },
        ]
        for (const [n, step] of sequence(seed, 60, members.length, true).entries()) {
          if (step[0] === 'tick') {
            mock.timers.tick(step[1])
            continue
          }
          const [expected, actual] = await runStep(sides, step)
          assert.deepEqual(actual, expected, `seed ${seed}, step ${n}: ${JSON.stringify(step)}`)
          if (step[0] === 'union' && expected.rejected) refusals++
        }
      }
      // The sequences do reach the refusals.
      assert.ok(refusals > 100, `${refusals} refusals`)
    })
  }

  it('charges no member when one refuses, where rate-limiter-flexible charges the others', async () => {
    const make = (lib) => [new lib.RateLimiterMemory({ keyPrefix: 'second', points: 2, duration: 1 }), new lib.RateLimiterMemory({ keyPrefix: 'minute', points: 10, duration: 60 })]
    const [theirs, ours] = [make(rlf), make(flexible)]
    const unions = [new rlf.RateLimiterUnion(...theirs), new flexible.RateLimiterUnion(...ours)]
    const allowed = [0, 0]
    for (let i = 0; i < 6; i++) {
      for (const [side, union] of unions.entries()) {
        await union.consume('u').then(
          () => allowed[side]++,
          (refusals) => assert.deepEqual(Object.keys(refusals), ['second']),
        )
      }
    }
    assert.deepEqual(allowed, [2, 2])
    // Theirs counted the 4 refused consumes on the minute too; ours did not.
    assert.equal((await theirs[1].get('u')).consumedPoints, 6)
    assert.equal((await ours[1].get('u')).consumedPoints, 2)
    assert.equal((await ours[0].get('u')).consumedPoints, 2)
  })

  it('answers concurrent consumes with exactly the smallest limit', async () => {
    const members = [new flexible.RateLimiterMemory({ keyPrefix: 'a', points: 10, duration: 60 }), new flexible.RateLimiterMemory({ keyPrefix: 'b', points: 30, duration: 60 })]
    const union = new flexible.RateLimiterUnion(...members)
    const outcomes = await Promise.allSettled(Array.from({ length: 200 }, () => union.consume('hot')))
    assert.equal(outcomes.filter((o) => o.status === 'fulfilled').length, 10)
    assert.equal((await members[1].get('hot')).consumedPoints, 10)
  })
})

describe('RateLimiterUnion on Redis', () => {
  for (const [index, members] of MEMBERS.entries()) {
    it(`answers random sequences as rate-limiter-flexible made atomic does, and writes the same keys: ${JSON.stringify(members)}`, async () => {
      const client = new IORedis(redis.server.port, '127.0.0.1')
      try {
        const theirs = members.map((options, i) => new rlf.RateLimiterRedis({ ...options, storeClient: client, keyPrefix: `t${index}m${i}` }))
        const ours = members.map((options, i) => new flexible.RateLimiterRedis({ ...options, storeClient: client, keyPrefix: `o${index}m${i}` }))
        const union = new flexible.RateLimiterUnion(...ours)
        assert.equal(union.atomic, true)
        const sides = [
          { union: atomicOracle(theirs), limiters: theirs },
          { union, limiters: ours },
        ]
        let refusals = 0
        for (let seed = 1; seed <= 4; seed++) {
          await client.flushall()
          for (const [n, step] of sequence(seed, 40, members.length, false).entries()) {
            const at = `seed ${seed}, step ${n}: ${JSON.stringify(step)}`
            const [expected, actual] = await runStep(sides, step)
            assert.deepEqual(withinMs(actual, expected), expected, at)
            if (step[0] === 'union' && expected.rejected) refusals++
            const key = step[0] === 'union' ? step[1] : step[3]
            for (let i = 0; i < members.length; i++) {
              const [their, our] = await Promise.all([client.get(`t${index}m${i}:${key}`), client.get(`o${index}m${i}:${key}`)])
              assert.equal(our, their, `${at}: member ${i}'s key`)
            }
          }
        }
        assert.ok(refusals > 20, `${refusals} refusals`)
      } finally {
        client.disconnect()
      }
    })
  }

  it('admits exactly the smallest limit to 200 concurrent consumes and charges nothing more, in one script call each', async () => {
    const client = new IORedis(redis.server.port, '127.0.0.1')
    try {
      const make = (lib, side) => [
        new lib.RateLimiterRedis({ storeClient: client, keyPrefix: `${side}-a`, points: 10, duration: 60 }),
        new lib.RateLimiterRedis({ storeClient: client, keyPrefix: `${side}-b`, points: 30, duration: 60 }),
        new lib.RateLimiterRedis({ storeClient: client, keyPrefix: `${side}-c`, points: 50, duration: 600 }),
      ]
      const unions = [new rlf.RateLimiterUnion(...make(rlf, 'theirs')), new flexible.RateLimiterUnion(...make(flexible, 'ours'))]
      const outcomes = []
      for (const union of unions) outcomes.push(await Promise.allSettled(Array.from({ length: 200 }, () => union.consume('hot'))))
      assert.deepEqual(
        outcomes.map((settled) => settled.filter((o) => o.status === 'fulfilled').length),
        [10, 10],
      )
      // Ours is refused by the smallest limit alone; theirs, having charged the others, by more.
      const refusedBy = (settled) => new Set(settled.filter((o) => o.status === 'rejected').map((o) => Object.keys(o.reason).join()))
      assert.deepEqual([...refusedBy(outcomes[1])], ['ours-a'])
      assert.deepEqual([...refusedBy(outcomes[0])], ['theirs-a', 'theirs-a,theirs-b', 'theirs-a,theirs-b,theirs-c'])
      assert.deepEqual(await client.mget('theirs-a:hot', 'theirs-b:hot', 'theirs-c:hot'), ['200', '200', '200'])
      assert.deepEqual(await client.mget('ours-a:hot', 'ours-b:hot', 'ours-c:hot'), ['10', '10', '10'])
      const ttl = await client.pttl('ours-c:hot')
      assert.ok(ttl > 590_000 && ttl <= 600_000, `TTL ${ttl}`)
    } finally {
      client.disconnect()
    }
  })

  it('a lone union takes the direct lane: one script call, on the lane\'s connection, answers every member', async () => {
    const monitor = new IORedis(redis.server.port, '127.0.0.1')
    const store = new RedisStore(redis.server.url)
    try {
      const members = [10, 20, 30].map((points, i) => new flexible.RateLimiterRedis({ storeClient: store, keyPrefix: `lane${i}`, points, duration: 60 }))
      const union = new flexible.RateLimiterUnion(...members)
      const sources = []
      const watching = await monitor.monitor()
      watching.on('monitor', (time, args, source) => {
        if (/^(?:evalsha|fcall)$/i.test(args[0]) && args.some((arg) => String(arg).startsWith('lane0:'))) sources.push(source)
      })
      const answers = []
      for (let i = 0; i < 8; i++) answers.push(Object.values(await union.consume('k')).map((res) => res.remainingPoints))
      assert.deepEqual(answers, [9, 8, 7, 6, 5, 4, 3, 2].map((left) => [left, left + 10, left + 20]))
      await new Promise((resolve) => setTimeout(resolve, 50)) // the monitor's last lines
      watching.disconnect()
      // The first calls go the usual way (the store's connection; the very first may load the
      // script) while the lane opens; the rest go by the lane, a connection of its own: one
      // script call each, from its address.
      const [usual, lane] = new Set(sources)
      const onLane = sources.filter((source) => source === lane).length
      assert.ok(lane !== undefined && onLane >= 5, sources.join())
      assert.deepEqual(sources, [...sources.slice(0, -onLane).map(() => usual), ...Array(onLane).fill(lane)])
    } finally {
      monitor.disconnect()
      await store.close()
    }
  })

  it('blocks a refusing member with blockDuration, and keeps inMemoryBlockOnConsumed', async () => {
    const url = redis.server.url
    const a = new flexible.RateLimiterRedis({ storeClient: url, keyPrefix: 'blk-a', points: 2, duration: 60, blockDuration: 600 })
    const b = new flexible.RateLimiterRedis({ storeClient: url, keyPrefix: 'blk-b', points: 5, duration: 60, inMemoryBlockOnConsumed: 5 })
    const union = new flexible.RateLimiterUnion(a, b)
    await union.consume('k', 2)
    const refused = await union.consume('k').then(assert.fail, (r) => r)
    assert.deepEqual(Object.keys(refused), ['blk-a'])
    assert.deepEqual(refused['blk-a'].toJSON(), { remainingPoints: 0, msBeforeNext: 600_000, consumedPoints: 3, isFirstInDuration: false })
    const client = new IORedis(redis.server.port, '127.0.0.1')
    try {
      assert.deepEqual(await client.mget('blk-a:k', 'blk-b:k'), ['3', '2'])
      assert.ok((await client.pttl('blk-a:k')) > 590_000)
    } finally {
      client.disconnect()
    }
    // b blocks the key in memory once it holds 5: the next union call is refused without Redis.
    await union.consume('j', 2)
    await b.consume('j', 3)
    const blocked = await union.consume('j').then(assert.fail, (r) => r)
    assert.deepEqual(Object.keys(blocked), ['blk-b'])
    assert.ok(blocked['blk-b'].msBeforeNext > 59_000)
  })

  it('charges a key given twice (members sharing a keyPrefix) twice, or not at all when its second limit refuses', async () => {
    const members = [5, 3].map((points) => new flexible.RateLimiterRedis({ storeClient: redis.server.url, keyPrefix: 'twice', points, duration: 60 }))
    const union = new flexible.RateLimiterUnion(...members)
    // Two at once (one script call): the first starts the key with 1 and adds 1 more; the second
    // would take it to 3 and 4, over the second member's 3.
    const settled = await Promise.allSettled([union.consume('k'), union.consume('k')])
    assert.deepEqual(
      settled.map((outcome) => outcome.status),
      ['fulfilled', 'rejected'],
    )
    assert.equal(settled[0].value.twice.consumedPoints, 2)
    assert.equal(settled[1].reason.twice.consumedPoints, 2)
    const client = new IORedis(redis.server.port, '127.0.0.1')
    try {
      assert.equal(await client.get('twice:k'), '2')
      const ttl = await client.pttl('twice:k')
      assert.ok(ttl > 59_000 && ttl <= 60_000, `TTL ${ttl}`)
      // A refused union reads the time left of the key that refused.
      const refused = await union.consume('k').then(assert.fail, (r) => r)
      assert.ok(refused.twice.msBeforeNext > 59_000 && refused.twice.msBeforeNext <= 60_000, `${refused.twice.msBeforeNext}`)
      assert.equal(await client.get('twice:k'), '2')
    } finally {
      client.disconnect()
    }
  })

  it('rejects a union whose key holds what no limiter wrote with the store\'s error, charging no member', async () => {
    const members = ['fa', 'fb'].map((keyPrefix) => new flexible.RateLimiterRedis({ storeClient: redis.server.url, keyPrefix, points: 5, duration: 60 }))
    const union = new flexible.RateLimiterUnion(...members)
    await redis.server.cli('HSET', 'fb:hash', 'f', '1')
    await redis.server.cli('SET', 'fb:text', 'abc', 'PX', '60000')
    for (const [key, message] of [['hash', /WRONGTYPE/], ['text', /fb:text holds abc/]]) {
      // Alone (by the direct lane), then batched with a union of another key.
      const [alone] = await Promise.allSettled([union.consume(key)])
      const [batched, other] = await Promise.allSettled([union.consume(key), union.consume(`fine-${key}`)])
      for (const settled of [alone, batched]) {
        assert.equal(settled.status, 'rejected', key)
        assert.deepEqual(Object.keys(settled.reason), ['fa', 'fb'])
        for (const error of Object.values(settled.reason)) {
          assert.ok(error instanceof Error)
          assert.equal(error.code, 'ERR_STORE_ERROR')
          assert.match(error.message, message)
        }
      }
      assert.equal(other.status, 'fulfilled')
      assert.equal(other.value.fa.consumedPoints, 1)
      assert.equal(await members[0].get(key), null, 'the member whose key is sound was not charged')
    }
    assert.equal(await redis.server.cli('HGETALL', 'fb:hash'), 'f\n1')
    assert.equal(await redis.server.cli('GET', 'fb:text'), 'abc')
    // With an insurance limiter, each member consumes on its own: the insurance answers for fb.
    members[1].insuranceLimiter = new flexible.RateLimiterMemory({ keyPrefix: 'fb', points: 5, duration: 60 })
    const insured = await union.consume('hash')
    assert.deepEqual([insured.fa.consumedPoints, insured.fb.consumedPoints], [1, 1])
    assert.equal((await members[0].get('hash')).consumedPoints, 1)
    assert.equal(await redis.server.cli('HGETALL', 'fb:hash'), 'f\n1')
  })

  it('consumes one by one, as rate-limiter-flexible, when the members are not on one store', async () => {
    const memory = new flexible.RateLimiterMemory({ keyPrefix: 'mem', points: 1, duration: 60 })
    const onRedis = new flexible.RateLimiterRedis({ storeClient: redis.server.url, keyPrefix: 'mixed', points: 5, duration: 60 })
    const union = new flexible.RateLimiterUnion(memory, onRedis)
    assert.equal(union.atomic, false)
    await union.consume('k')
    assert.deepEqual(Object.keys(await union.consume('k').then(assert.fail, (r) => r)), ['mem'])
    assert.equal((await onRedis.get('k')).consumedPoints, 2)
  })

  it('goes to the insurance limiters while the store is unavailable', async () => {
    const store = new RedisStore({ url: 'redis://127.0.0.1:1', connectTimeoutMs: 200 })
    const members = [1, 2].map(
      (points) =>
        new flexible.RateLimiterRedis({
          storeClient: store,
          keyPrefix: `ins${points}`,
          points,
          duration: 60,
          insuranceLimiter: new flexible.RateLimiterMemory({ keyPrefix: `ins${points}`, points, duration: 60 }),
        }),
    )
    const union = new flexible.RateLimiterUnion(...members)
    assert.equal(union.atomic, true)
    try {
      const first = await union.consume('k')
      assert.deepEqual([first.ins1.consumedPoints, first.ins2.consumedPoints], [1, 1])
      assert.deepEqual(Object.keys(await union.consume('k').then(assert.fail, (r) => r)), ['ins1'])
    } finally {
      await store.close()
    }
  })

  it('refuses bad input as rate-limiter-flexible does, with a code', () => {
    assert.throws(() => new flexible.RateLimiterUnion(), { name: 'RangeError', code: 'ERR_INVALID_OPTION', message: 'RateLimiterUnion: at least one limiter have to be passed' })
    assert.throws(() => new flexible.RateLimiterUnion({}), {
      name: 'TypeError',
      code: 'ERR_INVALID_OPTION',
      message: 'RateLimiterUnion: all limiters have to be instance of RateLimiterAbstract or RateLimiterCompatibleAbstract',
    })
    const union = new flexible.RateLimiterUnion(new flexible.RateLimiterMemory({ points: 1, duration: 1 }))
    return assert.rejects(union.consume('k', 1.5), { code: 'ERR_INVALID_ARGUMENT' })
  })
})

describe('examples/flexible.js', () => {
  const EXPECTED = [
    'attempt 1: allowed: wrong password',
    'attempt 2: allowed: wrong password',
    'attempt 3: allowed: logged in',
    'attempt 4: allowed: wrong password',
    'attempt 5: allowed: wrong password',
    'attempt 6: allowed: wrong password',
    'attempt 7: refused by login_fail: retry in 900 s',
    'attempt 8: refused by login_fail: retry in 900 s',
    // The two refused attempts charged the IP nothing: 6 of 10 taken.
    'the IP has 4 attempts left this minute',
  ]
  for (const where of ['in memory', 'on Redis']) {
    it(`blocks the account after 3 failures in a row, and charges the IP for allowed attempts only: ${where}`, async () => {
      const env = { ...process.env, REDIS_URL: where === 'on Redis' ? redis.server.url : '' }
      if (where === 'on Redis') await redis.server.cli('FLUSHALL')
      const output = execFileSync(process.execPath, [path.join(__dirname, '..', 'examples', 'flexible.js')], { env, encoding: 'utf8', timeout: 30_000 })
      assert.deepEqual(output.trim().split('\n'), EXPECTED)
    })
  }
})
