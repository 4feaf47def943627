'use strict'

// Where a lone call's time goes on Redis (issue 24): one caller, each call awaited before the
// next, as a cron job or a quiet app makes them. Interleaved rounds of:
//
// - a thread hand-off: a round trip between two threads that wait on each other (Atomics.wait in
//   a worker_thread), which is what a call pays each time it crosses from the JavaScript thread
//   to the store's thread or back;
// - PING through ioredis (its defaults: no auto-pipelining);
// - the fixed window's own script (lua/prelude.lua + lua/fixed_window.lua, loaded with SCRIPT
//   LOAD) sent by ioredis as EVALSHA, with the arguments ratekeeper sends for a lone consume:
//   the same work for Redis, on a client that lives on the JavaScript thread;
// - ratekeeper's FixedWindow.consume on Redis, by its direct lane (the default: a lone call is
//   written and read by the JavaScript thread, src/store/direct.rs) and the usual way (lanes off:
//   through the store's thread);
// - rate-limiter-flexible's RateLimiterRedis.consume over ioredis (its defaults).
//
// Over 10,000 ids; per round and path, the p50 and p99 latency and the calls per second, then the
// median over the rounds. Redis's own time per command (INFO commandstats) is read around each
// run: what the server spends is the same for a script sent by either client.
//
//   node benchmark/one-caller.js [--rounds 7] [--calls 3000]

const fs = require('node:fs')
const path = require('node:path')
const { Worker } = require('node:worker_threads')
const IORedis = require('ioredis')
const { RateLimiterRedis } = require('rate-limiter-flexible')

const ratekeeper = require('..')
const native = require('../lib/native.js')
const { startRedis } = require('../__test__/helpers/redis-server.js')
const { evalScript } = require('../__test__/helpers/lua-scripts.js')

const args = Object.fromEntries(process.argv.slice(2).map((v, i, a) => (i % 2 ? null : [v.replace(/^--/, ''), Number(a[i + 1])])).filter(Boolean))
const ROUNDS = args.rounds ?? 7
const CALLS = args.calls ?? 3000
const IDS = 10_000
const WARM_UP = 500

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}
const micros = () => Number(process.hrtime.bigint()) / 1000

/** Times `CALLS` awaited calls of `call(i)`: { p50, p99 } in µs and calls per second. */
async function time(call) {
  for (let i = 0; i < WARM_UP; i++) await call(i)
  const latencies = new Float64Array(CALLS)
  const started = micros()
  for (let i = 0; i < CALLS; i++) {
    const before = micros()
    await call(i)
    latencies[i] = micros() - before
  }
  const perSecond = CALLS / ((micros() - started) / 1e6)
  latencies.sort()
  return { p50: latencies[CALLS >> 1], p99: latencies[Math.floor(CALLS * 0.99)], perSecond }
}

/** A round trip between this thread and a worker that wait on each other: two thread wake-ups. */
function handOff() {
  const shared = new Int32Array(new SharedArrayBuffer(8))
  const worker = new Worker(
    `const { workerData: s } = require('node:worker_threads')
     for (;;) { Atomics.wait(s, 0, 0); Atomics.store(s, 0, 0); Atomics.store(s, 1, 1); Atomics.notify(s, 1) }`,
    { eval: true, workerData: shared },
  )
  const call = () => {
    Atomics.store(shared, 0, 1)
    Atomics.notify(shared, 0)
    Atomics.wait(shared, 1, 0)
    Atomics.store(shared, 1, 0)
  }
  return { call: async () => call(), close: () => worker.terminate() }
}

/**
 * Runs `run(name)` for each of `names`, ROUNDS rounds, the order reversed every other round (what
 * ran just before, a warm or a cold CPU, weighs on each in turn), on an emptied Redis with its
 * command stats reset; returns each name's results.
 */
async function interleaved(ioredis, names, run) {
  const results = Object.fromEntries(names.map((name) => [name, []]))
  for (let round = 0; round < ROUNDS; round++) {
    for (const name of round % 2 ? [...names].reverse() : names) {
      await ioredis.flushall()
      await commandMicros(ioredis)
      results[name].push(await run(name))
    }
    process.stderr.write(`round ${round + 1} of ${ROUNDS}\n`)
  }
  return results
}

/** Redis's own microseconds per call of each command since the last reset (INFO commandstats). */
async function commandMicros(client) {
  const stats = await client.info('commandstats')
  await client.config('RESETSTAT')
  return Object.fromEntries([...stats.matchAll(/cmdstat_(\w+):calls=(\d+),usec=\d+,usec_per_call=([\d.]+)/g)].map(([, name, , per]) => [name, Number(per)]))
}

async function main() {
  const server = await startRedis()
  const ioredis = new IORedis(server.port, '127.0.0.1')
  const lua = (name) => fs.readFileSync(path.join(__dirname, '..', 'lua', `${name}.lua`), 'utf8')
  const sha = await ioredis.script('LOAD', evalScript('fixed_window'))
  // ratekeeper as it runs by default (its script as a Redis Function, FCALL), and with
  // `functions: false` (EVALSHA of the same script as ioredis's path below: the same work for Redis).
  const store = await ratekeeper.RedisStore.connect(server.url)
  const evalStore = await ratekeeper.RedisStore.connect({ url: server.url, functions: false })
  const windowOptions = { namespace: 'rk:', limits: [{ duration: 60_000, limit: 100 }] }
  const fixed = new ratekeeper.FixedWindow({ client: store, ...windowOptions })
  const fixedEval = new ratekeeper.FixedWindow({ client: evalStore, ...windowOptions })
  const flexible = new RateLimiterRedis({ storeClient: ioredis, keyPrefix: 'rlf', points: 100, duration: 60 })
  const thread = handOff()
  // ratekeeper's arguments for one consume of one id under one limit, on the server's clock: L,
  // duration (µs) and limit, mode, TTL (ms), the batch's shape, then N, now and weight.
  const scriptArgs = ['1', '60000000', '100', 'consume', '61000', '+', '1', '', '1']
  const paths = {
    'thread hand-off (there and back)': thread.call,
    'ioredis PING': () => ioredis.ping(),
    'ioredis EVALSHA (the fixed window script)': (i) => ioredis.evalsha(sha, 1, `io:u${i % IDS}`, ...scriptArgs),
    'ratekeeper FixedWindow.consume (direct lane)': (i) => fixed.consume(`u${i % IDS}`),
    'ratekeeper FixedWindow.consume (the usual way: lanes off)': (i) => fixed.consume(`u${i % IDS}`),
    'ratekeeper FixedWindow.consume (direct lane, functions: false)': (i) => fixedEval.consume(`u${i % IDS}`),
    'rate-limiter-flexible consume': (i) => flexible.consume(`u${i % IDS}`).catch(() => {}),
  }
  // Redis's time per script call (FCALL or EVALSHA) where the path sends one.
  const sendsScript = new Set([
    'ioredis EVALSHA (the fixed window script)',
    'ratekeeper FixedWindow.consume (direct lane)',
    'ratekeeper FixedWindow.consume (the usual way: lanes off)',
    'ratekeeper FixedWindow.consume (direct lane, functions: false)',
    'rate-limiter-flexible consume',
  ])
  const rounds = await interleaved(ioredis, Object.keys(paths), async (name) => {
    // (Set once per run, not per call: outside what is timed.)
    native.setDirectLanes(!name.includes('lanes off'))
    const result = await time(paths[name])
    const micros = await commandMicros(ioredis)
    if (sendsScript.has(name)) result.redis = micros.fcall ?? micros.evalsha
    return result
  })
  console.log(`One caller, ${CALLS} awaited calls per run over ${IDS.toLocaleString('en')} ids, ${ROUNDS} rounds (medians), Node ${process.version}, ${(await ioredis.info('server')).match(/redis_version:(\S+)/)[1]}:\n`)
  console.log('| path | p50 | p99 | calls/s | Redis time per FCALL or EVALSHA |')
  console.log('|---|---:|---:|---:|---:|')
  for (const [name, results] of Object.entries(rounds)) {
    const of = (field) => median(results.map((r) => r[field]))
    const redis = sendsScript.has(name) ? `${of('redis').toFixed(2)} µs` : ''
    console.log(`| ${name} | ${of('p50').toFixed(1)} µs | ${of('p99').toFixed(1)} µs | ${Math.round(of('perSecond')).toLocaleString('en')} | ${redis} |`)
  }
  await redisSide(ioredis, lua, scriptArgs)
  await thread.close()
  await store.close()
  await evalStore.close()
  ioredis.disconnect()
  await server.stop()
}

/**
 * Redis's side of a lone call: EVALSHA of variants of the fixed window's script, each call alone
 * on a fresh id (what one caller over 10,000 ids mostly sends), timed by Redis itself
 * (`usec_per_call` of INFO commandstats) and by the wall clock per awaited call (the same client
 * for every variant), rounds interleaved; the floor of ratekeeper's layout and rate-limiter-
 * flexible's script for comparison.
 */
async function redisSide(ioredis, lua, scriptArgs) {
  const prelude = lua('prelude')
  const fixed = evalScript('fixed_window')
  const variants = {
    'an empty script (return 1)': ['return 1', []],
    'the prelude alone (then return 1)': [`${prelude}\nreturn 1`, []],
    "the fixed window's script, on the server's clock": [fixed, scriptArgs],
    "the fixed window's script, with the call's now": [fixed, [...scriptArgs.slice(0, -2), '1700000000000000', '1']],
    // The floor of ratekeeper's layout: what any fixed window on the server's clock in a hash of
    // an id's counters must ask Redis for a lone consume of a new id, and nothing else (no checks,
    // no batch, one argument).
    "the least a fixed window on ratekeeper's layout does (TIME, HINCRBY, PEXPIRE)": [
      "local t = redis.call('TIME') local count = redis.call('HINCRBY', KEYS[1], ARGV[1], 1) if count == 1 then redis.call('PEXPIRE', KEYS[1], 61000) end return { count - 1, t[1] }",
      ['60000000:29000000'],
    ],
    "rate-limiter-flexible's script": [
      "redis.call('set', KEYS[1], 0, 'EX', ARGV[2], 'NX') local consumed = redis.call('incrby', KEYS[1], ARGV[1]) local ttl = redis.call('pttl', KEYS[1]) if ttl == -1 then redis.call('expire', KEYS[1], ARGV[2]) ttl = 1000 * ARGV[2] end return {consumed, ttl}",
      ['1', '60'],
    ],
  }
  const shas = {}
  for (const [name, [text]] of Object.entries(variants)) shas[name] = await ioredis.script('LOAD', text)
  const rounds = await interleaved(ioredis, Object.keys(variants), async (name) => {
    const [, args] = variants[name]
    const started = micros()
    for (let i = 0; i < CALLS; i++) await ioredis.evalsha(shas[name], 1, `v:u${i}`, ...args)
    const wall = (micros() - started) / CALLS
    return { redis: (await commandMicros(ioredis)).evalsha, wall }
  })
  console.log(`\nRedis's time per EVALSHA, and the wall time per awaited call through ioredis, each call alone on a fresh id (${CALLS} calls per run, medians of ${ROUNDS} rounds):\n`)
  console.log('| script | Redis time per call | wall time per call |')
  console.log('|---|---:|---:|')
  for (const [name, values] of Object.entries(rounds)) {
    const of = (field) => median(values.map((v) => v[field])).toFixed(2)
    console.log(`| ${name} | ${of('redis')} µs | ${of('wall')} µs |`)
  }
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
