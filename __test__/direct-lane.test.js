'use strict'

// The direct lane (src/store/direct.rs, lib/direct.js): a lone caller's calls are written by the
// JavaScript thread on a connection of its own. They answer exactly as the usual way does, keep
// the order calls were made in, and whatever goes wrong on the lane (a flushed script cache, a
// wrong-type key, a stalled server, a killed connection) ends as it would the usual way.

const { describe, it, before, after } = require('node:test')
const assert = require('node:assert/strict')
const net = require('node:net')

const ratekeeper = require('..')
const { FixedWindow, RedisStore } = ratekeeper
const native = require('../lib/native.js')
const { LIMITERS, ONE_ID } = require('./helpers/limiters.js')
const { startRedis, serverSupports } = require('./helpers/redis-server.js')
const { random } = require('./helpers/random.js')
const { commandsRun } = require('./helpers/command-stats.js')
const { withTimersFaked, answeredWithin3s } = require('./helpers/faked-timers.js')

const T0 = 1_700_000_000_000

/** The connections of CLIENT LIST, each as its fields (`id`, `db`, `cmd`...). */
async function clients(server) {
  const list = await server.cli('CLIENT', 'LIST')
  return list
    .split('\n')
    .filter((line) => line.includes('id='))
    .map((line) => Object.fromEntries(line.trim().split(' ').map((pair) => pair.split('=', 2))))
}

/** The server's clock in microseconds, as TIME reads it. */
async function serverMicros(server) {
  const [seconds, micros] = (await server.cli('TIME')).split('\n').map(Number)
  return seconds * 1e6 + micros
}

async function waitFor(check, what) {
  for (let i = 0; i < 200; i++) {
    if (await check()) return
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  assert.fail(`timed out waiting for ${what}`)
}

describe('the direct lane', () => {
  let server
  before(async () => {
    server = await startRedis()
  })
  after(() => server?.stop())

  it('answers every limiter exactly as the usual way does, one call at a time', async () => {
    for (const [name, create] of Object.entries(LIMITERS)) {
      const store = new RedisStore(server.url)
      const runs = []
      for (const lanes of [true, false]) {
        native.setDirectLanes(lanes)
        const limiter = create({ client: store, namespace: `same-${name}-${lanes}:` })
        const rand = random(7)
        const answers = []
        let now = T0
        for (let call = 0; call < 120; call++) {
          now += Math.floor(rand() * 300)
          const id = ONE_ID.has(name) ? 'a' : ['a', 'b'][Math.floor(rand() * 2)]
          const mode = rand() < 0.15 ? 'reward' : 'consume'
          if (mode === 'reward' && typeof limiter.reward === 'function') answers.push(await limiter.reward(id, { now }))
          else answers.push(await limiter.consume(id, { now }))
        }
        runs.push(answers)
      }
      native.setDirectLanes(true)
      assert.deepEqual(runs[0], runs[1], name)
      await store.close()
    }
  })

  it('answers alike through more configurations than a Function keeps, calls of one id and of three mixed', async () => {
    // On Redis 7 a lone call goes to the Function's compact entry (src/store/script.rs), which
    // builds each configuration's arguments once and keeps 16: 20 configurations in turn make it
    // build them again and again, and calls of three ids among calls of one rewrite their tails.
    const runs = []
    for (const lanes of [true, false]) {
      native.setDirectLanes(lanes)
      const store = new RedisStore(server.url)
      const limiters = Array.from({ length: 20 }, (_, i) => [
        LIMITERS.TokenBucket({ client: store, namespace: `configs-${lanes}:`, capacity: 3 + i }),
        LIMITERS.Gcra({ client: store, namespace: `configs-gcra-${lanes}:`, burst: 2 + i }),
      ]).flat()
      // Both libraries loaded first (a lane's call that finds none is sent again the usual way).
      await limiters[0].consume('warm', { now: T0 })
      await limiters[1].consume('warm', { now: T0 })
      const before = store.stats()
      const rand = random(11)
      const answers = []
      let now = T0
      for (let call = 0; call < 400; call++) {
        now += Math.floor(rand() * 40)
        const limiter = limiters[Math.floor(rand() * limiters.length)]
        const ids = rand() < 0.3 ? ['a', 'b', 'c'] : [['a', 'b', 'c'][Math.floor(rand() * 3)]]
        const weight = 1 + Math.floor(rand() * 2)
        answers.push(await limiter.consume(ids, { now, weight }))
      }
      runs.push(answers)
      // One script call per call: none was refused by the Function's entry and sent again.
      const after = store.stats()
      assert.deepEqual([after.calls - before.calls, after.batches - before.batches], [400, 400], `lanes ${lanes}`)
      await store.close()
    }
    native.setDirectLanes(true)
    assert.equal(runs[0].length, 400)
    assert.ok(runs[0].some((a) => a.allowed) && runs[0].some((a) => !a.allowed))
    assert.deepEqual(runs[0], runs[1])
  })

  it("answers on the server's clock what the same clock's instant, given, answers", async () => {
    // A lone call on the server's clock (no `now`) reads it in the script (lone_now in
    // lua/lone.lua) and sends it back with the answer, which is judged at it: the same calls at
    // the instant TIME read before them answer the same, within the time that passed.
    // (A day's windows: the sliding tail's calls all fall in one, but for 1 run in a million.)
    const DAY = 86_400_000
    const slow = {
      TokenBucket: (o) => new ratekeeper.TokenBucket({ capacity: 5, refillAmount: 1, refillInterval: DAY, ...o }),
      LeakyBucket: (o) => new ratekeeper.LeakyBucket({ capacity: 5, leakAmount: 1, leakInterval: DAY, ...o }),
      SlidingTail: (o) => new ratekeeper.SlidingTail({ limits: [{ duration: DAY, limit: 5 }], ...o }),
      Gcra: (o) => new ratekeeper.Gcra({ limit: 1, period: DAY, burst: 5, ...o }),
      FixedWindow: (o) => new ratekeeper.FixedWindow({ limits: [{ duration: DAY, limit: 5 }], ...o }),
    }
    const store = new RedisStore(server.url)
    for (const [name, create] of Object.entries(slow)) {
      const onServer = create({ client: store, namespace: `server-clock-${name}:` })
      const given = create({ client: store, namespace: `given-clock-${name}:` })
      // The lane opens after a first call.
      await onServer.consume('warm')
      const started = Date.now()
      const now = Math.floor((await serverMicros(server)) / 1000)
      for (let call = 0; call < 7; call++) {
        const ours = await onServer.consume('x')
        const expected = await given.consume('x', { now })
        // (Its milliseconds, and one for `now` rounded down. A call after the lane's first
        // carries its estimate of the server's clock, which may lag it, and counts its waits
        // from the latest instant the clock may be at: see the next test.)
        const passed = Date.now() - started + 1
        assert.deepEqual({ ...ours, timeLeft: 0, resetAfter: 0 }, { ...expected, timeLeft: 0, resetAfter: 0 }, `${name}, call ${call}`)
        assert.equal(ours.remaining, Math.max(0, 4 - call), `${name}, call ${call}`)
        for (const field of ['timeLeft', 'resetAfter']) {
          const behind = expected[field] - ours[field]
          assert.ok(behind >= -1 && behind <= passed, `${name}, call ${call}: ${field} ${ours[field]} against ${expected[field]}`)
        }
      }
    }
    await store.close()
  })

  it("on the server's clock, sends the lane's estimate of it once learned: never ahead of it, never behind an instant answered before", async () => {
    // The counting limiters (not the rolling windows, which read the clock at every call): Redis
    // reads TIME for the first lone calls (the usual way while the lane opens, then the lane's
    // first), then for about one in 100 ms; the rest carry the lane's estimate.
    for (const [name, create] of Object.entries(LIMITERS).filter(([name]) => !ONE_ID.has(name))) {
      const store = new RedisStore(server.url)
      const limiter = create({ client: store, namespace: `clock-${name}:` })
      const counted = await commandsRun(server, ['script', 'time'], async () => {
        for (let i = 0; i < 40; i++) await limiter.consume('a')
      })
      // (A store's first call of a script may be sent again once the script is loaded.)
      assert.ok(counted.script >= 40, name)
      assert.ok(counted.time >= 1 && counted.time <= 10, `${name}: TIME read by ${counted.time} of 40 calls`)
      await store.close()
    }
    // The instant each call was judged at, as the leaky bucket stored it ("<level>:<ts>", ts
    // the instant a new bucket began, in µs), in the order the calls were made: a lone call on
    // one store, a batch of two (which reads TIME), lone calls on that store, another store
    // (another lane) and the first again. Each is at or after every instant answered before it;
    // none is ahead of the server's clock after it; an estimate lags the server's clock by its
    // sample's round trip (under 1 ms) at most.
    const [a, b] = [new RedisStore(server.url), new RedisStore(server.url)]
    // (A minute's leak, so that no bucket expires before it is read.)
    const [bucketA, bucketB] = [a, b].map((client) => LIMITERS.LeakyBucket({ client, namespace: 'order:', leakInterval: 60_000 }))
    // (Each store's lane opens after its first lone call.)
    for (let i = 0; i < 3; i++) {
      await bucketA.consume(`warm${i}`)
      await bucketB.consume(`warm${i}b`)
    }
    const made = []
    for (let round = 0; round < 12; round++) {
      const before = await serverMicros(server)
      const ids = []
      const consume = async (bucket, id) => {
        ids.push(id)
        await bucket.consume(id)
      }
      await consume(bucketA, `${round}-first`)
      // (The lane's allowance for drift, 1 µs per ms, grows meanwhile: the next estimate would
      // lag the batch's TIME, were the batch's answer not heeded.)
      await new Promise((resolve) => setTimeout(resolve, 80))
      await Promise.all([consume(bucketA, `${round}-batch1`), consume(bucketA, `${round}-batch2`)])
      await consume(bucketA, `${round}-after-batch`)
      await consume(bucketB, `${round}-other-store`)
      await consume(bucketA, `${round}-back`)
      const after = await serverMicros(server)
      made.push({ before, after, ids })
    }
    let last = 0
    for (const { before, after, ids } of made) {
      for (const id of ids) {
        const at = Number((await server.cli('GET', `order:${id}`)).split(':')[1])
        assert.ok(at >= last, `${id} judged at ${at}, before ${last}, answered earlier`)
        assert.ok(at <= after && at >= before - 1_000, `${id} judged at ${at}, server's clock ${before} to ${after}`)
        last = Math.max(last, at)
      }
    }
    await a.close()
    await b.close()
  })

  it("counts a wait on the server's clock from no earlier than the call: added to the caller's clock read before it, it never ends after the window", async () => {
    // A day's window ends at midnight UTC, on the server's clock (this host's here). A lone call
    // that carried the lane's estimate was judged at an instant up to its sample's round trip
    // before the call was written; its waits count from the latest instant the clock may have
    // been at (Verdict::counted_from_later), so a caller's clock plus `resetAfter` lands on
    // midnight at the latest, as with TIME (the Express headers and the block cache rely on it).
    const DAY = 86_400_000
    const store = new RedisStore(server.url)
    const limiter = new FixedWindow({ client: store, namespace: 'day-waits:', limits: [{ duration: DAY, limit: 1_000 }] })
    await limiter.consume('warm')
    for (let call = 0; call < 80; call++) {
      const started = Date.now()
      const { resetAfter, allowed } = await limiter.consume('x')
      const midnight = Math.ceil((started + 1) / DAY) * DAY
      // (A call within a second of midnight may fall in the next day.)
      if (midnight - started < 1000) continue
      assert.ok(allowed)
      assert.ok(started + resetAfter <= midnight, `call ${call}: ${started} + ${resetAfter} is ${started + resetAfter - midnight} ms after midnight`)
    }
    await store.close()
  })

  it('opens one connection of its own beside the store\'s, logged in as the same user to the same database, and closes it with the store', async () => {
    await server.cli('ACL', 'SETUSER', 'lane-user', 'on', '>lane-pw', '~*', '+@all')
    {
      const store = new RedisStore({ port: server.port, username: 'lane-user', password: 'lane-pw', db: 3 })
      const limiter = new FixedWindow({ client: store, namespace: 'db3:', limits: [{ duration: 60_000, limit: 3 }] })
      const answers = []
      for (let i = 0; i < 5; i++) answers.push((await limiter.consume('x', { now: T0 })).remaining)
      assert.deepEqual(answers, [2, 1, 0, 0, 0])
      const cli = server.cli
      assert.equal(await cli('-n', '3', 'HGET', 'db3:x', `60000000:${Math.floor((T0 * 1000) / 60_000_000)}`), '3')
      const scripted = async () =>
        (await cli('CLIENT', 'LIST'))
          .split('\n')
          .filter((line) => /\bcmd=(?:evalsha|fcall)\b/.test(line) && /\buser=lane-user\b/.test(line))
          .map((line) => ({ id: Number(line.match(/\bid=(\d+)/)[1]), db: line.match(/\bdb=(\d+)/)[1] }))
      const connected = await scripted()
      assert.equal(connected.length, 2, "the store's connection and the lane")
      assert.deepEqual(connected.map((c) => c.db), ['3', '3'])
      // The lane opened after the first call, which went the usual way.
      const lane = Math.max(...connected.map((c) => c.id))
      await store.close()
      await waitFor(async () => !(await scripted()).some((c) => c.id === lane), 'the lane to close')
    }
  })

  it('keeps the order of calls made together after a lone one', async () => {
    const store = new RedisStore(server.url)
    const limiter = new FixedWindow({ client: store, namespace: 'order:', limits: [{ duration: 60_000, limit: 4 }] })
    await limiter.consume('warm', { now: T0 })
    await limiter.consume('warm', { now: T0 })
    const answers = await Promise.all([1, 2, 3, 4, 5, 6].map(() => limiter.consume('x', { now: T0 })))
    assert.deepEqual(
      answers.map((a) => [a.allowed, a.remaining]),
      [[true, 3], [true, 2], [true, 1], [true, 0], [false, 0], [false, 0]],
    )
    await store.close()
  })

  it('writes a lone call once the microtasks before it ran, before its turn ends, and holds a call made later in the turn for its answer', async () => {
    const store = new RedisStore(server.url)
    const limiter = new FixedWindow({ client: store, namespace: 'early:', limits: [{ duration: 60_000, limit: 1 }] })
    // Lone calls: the lane opens and takes them.
    for (let i = 0; i < 3; i++) await limiter.consume(`warm${i}`, { now: T0 })
    const events = []
    const write = net.Socket.prototype.write
    net.Socket.prototype.write = function (...args) {
      events.push('write')
      return write.apply(this, args)
    }
    try {
      for (let round = 0; round < 3; round++) {
        events.length = 0
        // (Queued before the call: the end of the turn, where the calls of a turn leave together.)
        const turnEnded = new Promise((resolve) => setImmediate(() => resolve(events.push('end of turn'))))
        const first = limiter.consume(`x${round}`, { now: T0 })
        // The lone call's microtask has run: it left by the lane.
        await Promise.resolve()
        const second = limiter.consume(`x${round}`, { now: T0 })
        await turnEnded
        assert.deepEqual(events, ['write', 'end of turn'], `round ${round}: the lone call alone written, before the turn ended`)
        const answers = await Promise.all([first, second])
        assert.deepEqual(answers.map((a) => [a.allowed, a.remaining]), [[true, 0], [false, 0]], `round ${round}: in the order made`)
      }
    } finally {
      net.Socket.prototype.write = write
    }
    await store.close()
  })

  it('answers lone calls while the global queueMicrotask and setImmediate are replaced, as fake timers replace them', async () => {
    const store = new RedisStore(server.url)
    const limiter = new FixedWindow({ client: store, namespace: 'faked:', limits: [{ duration: 60_000, limit: 10 }] })
    const remaining = []
    try {
      await withTimersFaked(async () => {
        for (let i = 0; i < 5; i++) remaining.push((await answeredWithin3s(limiter.consume('x', { now: T0 }), `call ${i}`)).remaining)
      })
    } finally {
      // (Closing fails a call left unsent, which would keep the process alive.)
      await store.close()
    }
    assert.deepEqual(remaining, [9, 8, 7, 6, 5])
  })

  it('sends a call made while the lane carries another once that one is answered', async () => {
    const store = new RedisStore(server.url)
    const limiter = new FixedWindow({ client: store, namespace: 'meanwhile:', limits: [{ duration: 60_000, limit: 20 }] })
    for (let i = 0; i < 3; i++) await limiter.consume('warm', { now: T0 })
    const remaining = []
    for (let round = 0; round < 3; round++) {
      // Redis holds the lane's call for 300 ms: the second call, made 100 ms in, is held for it,
      // and leaves once it is answered, with nothing else of the process to send it.
      await server.cli('CLIENT', 'PAUSE', '300', 'ALL')
      const first = limiter.consume('x', { now: T0 })
      const { second } = await new Promise((resolve) => setTimeout(() => resolve({ second: limiter.consume('x', { now: T0 }) }), 100))
      let timer
      const late = new Promise((_, reject) => {
        // (Closing the store fails the call left behind, which would keep the process alive.)
        timer = setTimeout(() => store.close().finally(() => reject(new Error(`round ${round}: a call made meanwhile was never sent`))), 3000)
      })
      const answers = await Promise.race([Promise.all([first, second]), late]).finally(() => clearTimeout(timer))
      remaining.push(...answers.map((a) => a.remaining))
    }
    assert.deepEqual(remaining, [19, 18, 17, 16, 15, 14])
    await store.close()
  })

  it('leaves a turn that makes several calls to the usual way: one script call for all of them', async () => {
    const store = new RedisStore(server.url)
    const limiter = new FixedWindow({ client: store, namespace: 'turns:', limits: [{ duration: 60_000, limit: 1000 }] })
    // Lone calls: the lane opens and takes them.
    for (let i = 0; i < 3; i++) await limiter.consume('warm', { now: T0 })
    for (let round = 0; round < 3; round++) {
      const before = store.stats()
      await Promise.all(Array.from({ length: 20 }, (_, i) => limiter.consume(`id${i}`, { now: T0 })))
      const after = store.stats()
      assert.deepEqual([after.calls - before.calls, after.batches - before.batches], [20, 1], `round ${round}`)
    }
    await store.close()
  })

  it('passes a call on when Redis lost the script (SCRIPT FLUSH, FUNCTION FLUSH): it loads it and answers', async () => {
    const store = new RedisStore(server.url)
    const limiter = new FixedWindow({ client: store, namespace: 'flush:', limits: [{ duration: 60_000, limit: 3 }] })
    for (let i = 0; i < 3; i++) await limiter.consume('x', { now: T0 })
    const loads = store.stats().scriptLoads
    await server.cli('SCRIPT', 'FLUSH')
    if (serverSupports.version >= 7) await server.cli('FUNCTION', 'FLUSH')
    const answer = await limiter.consume('x', { now: T0 })
    assert.deepEqual([answer.allowed, answer.remaining], [false, 0])
    assert.equal(store.stats().scriptLoads, loads + 1)
    assert.equal((await limiter.consume('y', { now: T0 })).remaining, 2)
    await store.close()
  })

  it('rejects a call on a key of another type with ERR_STORE_ERROR, and goes on', async () => {
    const store = new RedisStore(server.url)
    const limiter = new FixedWindow({ client: store, namespace: 'wrong:', limits: [{ duration: 60_000, limit: 3 }] })
    await limiter.consume('warm', { now: T0 })
    await limiter.consume('warm', { now: T0 })
    await server.cli('SET', 'wrong:x', 'a string')
    await assert.rejects(limiter.consume('x', { now: T0 }), (error) => error.code === 'ERR_STORE_ERROR' && /WRONGTYPE/.test(error.message))
    assert.equal((await limiter.consume('y', { now: T0 })).remaining, 2)
    await store.close()
  })

  it('fails a call that gets no answer within commandTimeoutMs with ERR_STORE_UNAVAILABLE, then answers again', async () => {
    const store = new RedisStore({ port: server.port, commandTimeoutMs: 200 })
    const limiter = new FixedWindow({ client: store, namespace: 'stall:', limits: [{ duration: 60_000, limit: 10 }] })
    await limiter.consume('x', { now: T0 })
    await limiter.consume('x', { now: T0 })
    process.kill(server.pid, 'SIGSTOP')
    const started = Date.now()
    try {
      await assert.rejects(limiter.consume('x', { now: T0 }), (error) => error.code === 'ERR_STORE_UNAVAILABLE' && /did not answer within 200 ms/.test(error.message))
    } finally {
      process.kill(server.pid, 'SIGCONT')
    }
    const waited = Date.now() - started
    assert.ok(waited >= 190 && waited < 1000, `rejected after ${waited} ms`)
    // The stalled call runs once Redis wakes (it is not sent again): 3 counted. (It waits in the
    // lane's socket, closed since; Redis may run a call sent after it on another connection
    // first, so the count is read until the stalled call shows.)
    await waitFor(async () => (await limiter.peek('x', { now: T0 })).remaining !== 8, 'the stalled call to run')
    assert.equal((await limiter.peek('x', { now: T0 })).remaining, 7)
    const answer = await limiter.consume('x', { now: T0 })
    assert.equal(answer.remaining, 6)
    await store.close()
  })

  it('fails a call whose connection is lost with the error the usual way gives (ERR_STORE_UNAVAILABLE, cause Io)', async () => {
    // A server of its own, stopped with a call on the connection, then killed.
    const lost = async (lanes) => {
      const own = await startRedis()
      native.setDirectLanes(lanes)
      const store = new RedisStore({ port: own.port, commandTimeoutMs: 5000 })
      const limiter = new FixedWindow({ client: store, namespace: 'lost:', limits: [{ duration: 60_000, limit: 10 }] })
      try {
        for (let i = 0; i < 3; i++) await limiter.consume('x', { now: T0 })
        process.kill(own.pid, 'SIGSTOP')
        const pending = limiter.consume('x', { now: T0 }).then(() => assert.fail('answered'), (error) => error)
        await new Promise((resolve) => setTimeout(resolve, 50))
        process.kill(own.pid, 'SIGKILL')
        return await pending
      } finally {
        native.setDirectLanes(true)
        await store.close()
        await own.stop()
      }
    }
    const [byLane, usual] = [await lost(true), await lost(false)]
    for (const error of [byLane, usual]) {
      assert.equal(error.code, 'ERR_STORE_UNAVAILABLE', error.message)
      assert.match(error.message, /^Redis at 127\.0\.0\.1:\d+ is unavailable: /)
    }
    assert.equal(byLane.cause.code, usual.cause.code)
    assert.match(byLane.message, /the connection was lost/)
  })

  it('goes the usual way once its connection is killed, and opens a new one', async () => {
    const store = new RedisStore(server.url)
    const limiter = new FixedWindow({ client: store, namespace: 'killed:', limits: [{ duration: 60_000, limit: 100 }] })
    for (let i = 0; i < 3; i++) await limiter.consume('x', { now: T0 })
    const lane = Math.max(...(await clients(server)).filter((c) => ['evalsha', 'fcall'].includes(c.cmd)).map((c) => Number(c.id)))
    await server.cli('CLIENT', 'KILL', 'ID', String(lane))
    // (The lane learns of it from its socket, in a turn of the event loop.)
    await new Promise((resolve) => setTimeout(resolve, 50))
    const remaining = []
    for (let i = 0; i < 5; i++) remaining.push((await limiter.consume('x', { now: T0 })).remaining)
    assert.deepEqual(remaining, [96, 95, 94, 93, 92])
    // A lane that closed is opened again by a lone call a second later.
    await new Promise((resolve) => setTimeout(resolve, 1100))
    for (let i = 0; i < 3; i++) await limiter.consume('x', { now: T0 })
    assert.equal((await limiter.consume('x', { now: T0 })).remaining, 88)
    const newer = (await clients(server)).filter((c) => ['evalsha', 'fcall'].includes(c.cmd) && Number(c.id) > lane)
    assert.equal(newer.length, 1, 'a new lane')
    await store.close()
  })
})
