'use strict'

// The soak: full load on a FixedWindow and a RedisRateLimiter while the Redis under them is
// SIGKILLed and restarted every 10 s, for a minute. It checks that every call settles, that no
// rejection goes unhandled, that memory (RSS) and the calls in flight stay flat from the second
// restart on, and that what Redis holds afterwards is consistent: every key has a TTL, no
// counter is negative or above its limit, no log is longer than its limit.
//
//   npm run soak                      # 60 s
//   npm run soak -- --seconds 20      # shorter
//
// Not part of `npm test` (it takes a minute). Exits non-zero when a check fails.

const assert = require('node:assert/strict')
const IORedis = require('ioredis')
const { FixedWindow, RedisRateLimiter, RedisStore } = require('..')
const { startRedis } = require('../__test__/helpers/redis-server.js')

const argument = (name, fallback) => {
  const at = process.argv.indexOf(`--${name}`)
  return at > 0 ? Number(process.argv[at + 1]) : fallback
}
const SECONDS = argument('seconds', 60)
const RESTART_EVERY_MS = 10_000
const DOWN_FOR_MS = 1_000
const COMMAND_TIMEOUT_MS = 500
/** Calls started every tick, per limiter, without waiting for earlier ones (an open loop). */
const CALLS_PER_TICK = 40
const TICK_MS = 5
const IDS = 2_000
const WINDOW_LIMIT = 100
const ROLLING_LIMIT = 50
/** A call not settled after this long has hung. */
const HANG_MS = COMMAND_TIMEOUT_MS + 2_000

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const mib = (bytes) => (bytes / 1024 / 1024).toFixed(1)

async function main() {
  const unhandled = []
  process.on('unhandledRejection', (reason) => unhandled.push(reason))

  const server = await startRedis()
  const store = new RedisStore({ url: server.url, commandTimeoutMs: COMMAND_TIMEOUT_MS, connectTimeoutMs: 500 })
  let outages = 0
  store.on('error', () => outages++)
  const windows = new FixedWindow({ client: store, namespace: 'soak:fw:', limits: [{ duration: 60_000, limit: WINDOW_LIMIT }] })
  const rolling = new RedisRateLimiter({ client: store, namespace: 'soak:rl:', interval: 60_000, maxInInterval: ROLLING_LIMIT })

  const counts = { answered: 0, failed: 0, hung: 0, otherErrors: [] }
  let inFlight = 0
  let maxInFlightLate = 0
  const track = (promise) => {
    inFlight++
    const timer = setTimeout(() => counts.hung++, HANG_MS)
    promise.then(
      () => counts.answered++,
      (error) => {
        if (error.code === 'ERR_STORE_UNAVAILABLE') counts.failed++
        else counts.otherErrors.push(error)
      },
    ).finally(() => {
      clearTimeout(timer)
      inFlight--
    })
  }

  const started = Date.now()
  const deadline = started + SECONDS * 1000
  let n = 0
  let running = true
  const load = (async () => {
    while (running) {
      for (let i = 0; i < CALLS_PER_TICK; i++) {
        const id = `user-${n++ % IDS}`
        track(windows.consume(id))
        track(rolling.limit(id))
      }
      await sleep(TICK_MS)
    }
  })()

  const samples = []
  const sampler = setInterval(() => {
    global.gc?.()
    samples.push({ at: Date.now() - started, rss: process.memoryUsage().rss, inFlight })
  }, 1000)

  let restarts = 0
  let secondRestartAt = Infinity
  while (Date.now() + RESTART_EVERY_MS < deadline) {
    await sleep(RESTART_EVERY_MS - DOWN_FOR_MS)
    await server.kill()
    await sleep(DOWN_FOR_MS)
    await server.restart()
    restarts++
    if (restarts === 2) secondRestartAt = Date.now() - started
    console.log(`${((Date.now() - started) / 1000).toFixed(0)} s: restart ${restarts}; ${counts.answered} answered, ${counts.failed} failed, ${inFlight} in flight`)
  }
  await sleep(Math.max(0, deadline - Date.now()))
  running = false
  await load
  clearInterval(sampler)
  // Let everything settle: nothing may still be in flight after the longest timeout.
  await sleep(HANG_MS)

  for (const sample of samples) if (sample.at >= secondRestartAt) maxInFlightLate = Math.max(maxInFlightLate, sample.inFlight)
  const late = samples.filter((s) => s.at >= secondRestartAt)
  const checks = []
  const check = (name, test) => {
    try {
      test()
      checks.push([name, true])
    } catch (error) {
      checks.push([name, false, error.message])
    }
  }

  check('every call settled', () => {
    assert.equal(inFlight, 0)
    assert.equal(counts.hung, 0)
  })
  check('no unhandled rejection', () => assert.deepEqual(unhandled.map(String), []))
  check('failures only ERR_STORE_UNAVAILABLE', () => assert.deepEqual(counts.otherErrors.map((e) => `${e.code}: ${e.message}`), []))
  check('Redis went away and came back', () => {
    assert.ok(restarts >= 1, 'at least one restart')
    assert.ok(counts.failed > 0 && counts.answered > 0)
  })
  check('one error event per outage', () => assert.ok(outages >= restarts && outages <= 2 * restarts, `${outages} events for ${restarts} outages`))
  if (late.length >= 2) {
    check('RSS flat from the second restart on', () => {
      const first = late[0].rss
      const peak = Math.max(...late.map((s) => s.rss))
      assert.ok(peak <= first * 1.3 + 16 * 1024 * 1024, `RSS from ${mib(first)} MiB rose to ${mib(peak)} MiB`)
    })
    check('calls in flight flat from the second restart on', () => {
      // An open loop: what is in flight is bounded by the rate times the timeout, whatever
      // happens to Redis.
      const bound = (2 * CALLS_PER_TICK * (HANG_MS / TICK_MS))
      assert.ok(maxInFlightLate <= bound, `${maxInFlightLate} in flight (bound ${bound})`)
    })
  }

  // What Redis holds now (it restarted empty at the last restart, and was written since), read
  // in one pipeline: checking key by key with redis-cli would outlast the keys' TTLs.
  const redis = new IORedis({ host: '127.0.0.1', port: server.port })
  const keys = await redis.keys('soak:*')
  check('Redis holds the keys of the last run', () => assert.ok(keys.length > 0))
  const pipeline = redis.pipeline()
  for (const key of keys) {
    pipeline.pttl(key)
    if (key.startsWith('soak:fw:')) pipeline.hgetall(key)
    else pipeline.zcard(key)
  }
  const replies = (await pipeline.exec()).map(([error, value]) => (error ? String(error) : value))
  redis.disconnect()
  const problems = []
  keys.forEach((key, i) => {
    const [ttl, reply] = [replies[2 * i], replies[2 * i + 1]]
    // A fixed window's hash: one field per limit, `<duration µs>:<window>` its count.
    const held = typeof reply === 'object' ? (Object.values(reply)[0] ?? null) : reply
    if (!(ttl > 0)) problems.push(`${key} has no TTL (${ttl})`)
    const limit = key.startsWith('soak:fw:') ? WINDOW_LIMIT : ROLLING_LIMIT
    if (held !== null && !(Number(held) >= 0 && Number(held) <= limit)) problems.push(`${key} holds ${held}`)
  })
  check('every key has a TTL, no counter negative or inflated', () => assert.deepEqual(problems.slice(0, 10), []))

  await store.close()
  await server.stop()

  const total = counts.answered + counts.failed + counts.otherErrors.length
  console.log(`\n${total} calls in ${SECONDS} s: ${counts.answered} answered, ${counts.failed} rejected while Redis was down, ` +
    `${restarts} restarts, ${outages} error events`)
  console.log(`RSS (MiB) every second: ${samples.map((s) => mib(s.rss)).join(' ')}`)
  console.log(`in flight every second: ${samples.map((s) => s.inFlight).join(' ')}`)
  for (const [name, ok, why] of checks) console.log(`${ok ? 'ok' : 'FAILED'}: ${name}${why ? ` (${why})` : ''}`)
  const failed = checks.filter(([, ok]) => !ok).length
  console.log(`soak: ${checks.length - failed} passed, ${failed} failed`)
  process.exitCode = failed ? 1 : 0
}

main().catch((error) => {
  console.error(error)
  process.exitCode = 1
})
