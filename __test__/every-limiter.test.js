'use strict'

// What holds for every limiter with `consume`, old and new, on both stores: timeLeft is exact
// (refused one millisecond before it, allowed at it), `peek` reports what is left now, and
// `reward` gives capacity back without going below empty, creating state or losing a TTL.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')

const { LIMITERS, CAPACITY, SPACED, ONE_ID } = require('./helpers/limiters.js')
const { RateLimiter } = require('..')
const { useRedisServer } = require('./helpers/redis-server.js')
const { random } = require('./helpers/random.js')

const redis = useRedisServer()
let namespaceCounter = 0

const T0 = 1_700_000_000_000

/** How many ids hold state in memory (the rolling windows keep theirs on `window`). */
const trackedIds = (limiter) => limiter.trackedIds ?? limiter.window.trackedIds

const stores = {
  'in memory': (create) => ({ limiter: create({}), key: null }),
  'on Redis': (create) => {
    namespaceCounter += 1
    const namespace = `every${namespaceCounter}:`
    return { limiter: create({ client: redis.server.url, namespace }), key: (id) => namespace + id }
  },
}

for (const [storeName, build] of Object.entries(stores)) {
  for (const [name, create] of Object.entries(LIMITERS)) {
    describe(`${name} ${storeName}`, () => {
      it('answers a refusal with the exact wait: refused 1 ms before it, allowed at it', async () => {
        const { limiter } = build(create)
        const rand = random(name.length * 7919 + storeName.length)
        let refusals = 0
        for (let round = 0; round < 40; round++) {
          const id = `r${round}`
          // A random history: bursts and pauses, fractional instants.
          let now = T0 + round * 100_000 + Math.floor(rand() * 1000) + (rand() < 0.3 ? 0.25 : 0)
          let refused = null
          for (let call = 0; call < 40 && !refused; call++) {
            now += rand() < 0.7 ? Math.floor(rand() * 40) : Math.floor(rand() * 400)
            const weight = 1 + Math.floor(rand() * 3)
            const answer = await limiter.consume(id, { now, weight })
            if (!answer.allowed) refused = { now, weight, answer }
          }
          if (!refused) continue
          refusals++
          const { answer, weight } = refused
          assert.ok(answer.timeLeft > 0 && Number.isInteger(answer.timeLeft), JSON.stringify(answer))
          const before = await limiter.peek(id, { now: refused.now + answer.timeLeft - 1, weight })
          assert.equal(before.allowed, false, `${id}: still refused 1 ms before timeLeft ${answer.timeLeft}`)
          const at = await limiter.consume(id, { now: refused.now + answer.timeLeft, weight })
          assert.equal(at.allowed, true, `${id}: allowed after timeLeft ${answer.timeLeft}`)
        }
        assert.ok(refusals >= 20, `only ${refusals} refusals to check`)
      })

      it('never admits a weight above its capacity, and writes nothing for it', async () => {
        const { limiter, key } = build(create)
        const answer = await limiter.consume('big', { now: T0, weight: 1000 })
        assert.equal(answer.allowed, false)
        assert.equal(answer.timeLeft, Infinity)
        if (key) assert.equal(await redis.server.cli('EXISTS', key('big')), '0')
        else assert.equal(trackedIds(limiter), 0)
      })

      it('peeks at what is left now, without taking it', async () => {
        const { limiter } = build(create)
        const fresh = await limiter.peek('p', { now: T0, weight: 2 })
        assert.equal(fresh.allowed, true)
        assert.equal(fresh.remaining, CAPACITY)
        assert.equal(fresh.resetAfter, 0)
        const taken = await limiter.consume('p', { now: T0, weight: 2 })
        assert.equal(taken.remaining, SPACED.has(name) ? 0 : CAPACITY - 2)
        const after = await limiter.peek('p', { now: T0, weight: 2 })
        assert.equal(after.remaining, SPACED.has(name) ? 0 : CAPACITY - 2)
        assert.equal(after.resetAfter, taken.resetAfter)
      })

      it('gives capacity back with reward, never below empty and never to an id without state', async () => {
        const { limiter, key } = build(create)
        // An id without state gets none.
        const none = await limiter.reward('nobody', { now: T0, weight: 3 })
        assert.deepEqual(none, await limiter.peek('nobody', { now: T0 }))
        assert.equal(none.remaining, CAPACITY)
        if (key) assert.equal(await redis.server.cli('EXISTS', key('nobody')), '0')
        else assert.equal(trackedIds(limiter), 0)

        assert.equal((await limiter.consume('u', { now: T0, weight: 4 })).allowed, true)
        const back = await limiter.reward('u', { now: T0, weight: 3 })
        assert.deepEqual(back, await limiter.peek('u', { now: T0 }))
        if (!SPACED.has(name)) assert.equal(back.remaining, CAPACITY - 1)
        if (key && (await redis.server.cli('EXISTS', key('u'))) === '1') {
          assert.ok(Number(await redis.server.cli('PTTL', key('u'))) > 0, 'the key keeps a TTL')
        }
        // More than was taken: back to empty, not beyond.
        const all = await limiter.reward('u', { now: T0, weight: 100 })
        assert.equal(all.remaining, CAPACITY)
        assert.equal(all.resetAfter, 0)
        assert.equal((await limiter.consume('u', { now: T0, weight: CAPACITY })).allowed, true)
        assert.equal((await limiter.consume('u', { now: T0, weight: 1 })).allowed, false)
      })

      it('rewards several ids at once, and rejects a bad weight', async () => {
        const { limiter } = build(create)
        if (!ONE_ID.has(name)) {
          await limiter.consume(['a', 'b'], { now: T0, weight: 2 })
          const back = await limiter.reward(['a', 'b', 'c'], { now: T0, weight: 2 })
          assert.equal(back.remaining, CAPACITY)
        }
        await assert.rejects(limiter.reward('a', { now: T0, weight: 0 }), { code: 'ERR_INVALID_ARGUMENT' })
        await assert.rejects(limiter.reward('a', { now: T0, weight: 1.5 }), { code: 'ERR_INVALID_ARGUMENT' })
        await assert.rejects(limiter.reward('a', { now: T0, wieght: 1 }), { code: 'ERR_UNKNOWN_OPTION' })
      })
    })
  }
}

// rolling-rate-limiter's own API keeps the same promise, whether refusals are recorded or not.
for (const [storeName, build] of Object.entries(stores)) {
  for (const recordBlocked of [true, false]) {
    it(`limitWithInfo ${storeName} (recordBlocked: ${recordBlocked}): blocked 1 ms before millisecondsUntilAllowed, allowed at it`, async () => {
      const { limiter } = build((o) => new RateLimiter({ interval: 1000, maxInInterval: 5, minDifference: 30, recordBlocked, ...o }))
      const rand = random(recordBlocked ? 11 : 12)
      let checked = 0
      for (let round = 0; round < 40; round++) {
        const id = `l${round}`
        let now = T0 + round * 100_000
        let blocked = null
        for (let call = 0; call < 40 && !blocked; call++) {
          now += rand() < 0.7 ? Math.floor(rand() * 40) : Math.floor(rand() * 400)
          const info = await limiter.limitWithInfo(id, { now })
          if (info.blocked) blocked = { now, wait: info.millisecondsUntilAllowed }
        }
        if (!blocked) continue
        checked++
        assert.equal((await limiter.wouldLimitWithInfo(id, { now: blocked.now + blocked.wait - 1 })).blocked, true, id)
        assert.equal((await limiter.limitWithInfo(id, { now: blocked.now + blocked.wait })).blocked, false, id)
      }
      assert.ok(checked >= 20, `only ${checked} refusals to check`)
    })
  }
}
