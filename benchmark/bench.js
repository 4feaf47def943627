'use strict'

// ratekeeper against its peers on npm, side by side in one run.
//
//   npm run bench                       # every scenario at 1, 64 and 256 callers over 10 and 10,000 ids
//   npm run bench -- --rounds 3 --only "fixed window" --concurrency 256 --ids 10000
//   npm run bench -- --only http        # the HTTP scenario alone (benchmark/http.js): a table per framework
//   npm run bench -- --only http --http-frameworks fastify,koa   # some of its tables
//
// Each scenario runs both libraries on the same workload (CONCURRENCY callers in flight, ids
// drawn from IDS), alternating which goes first from round to round, each run in a process of
// its own (after an untimed warm-up run there), on fresh limiters and an emptied Redis. Before it is timed, each pair must give the same decisions on the
// same sequence of calls. The table reports medians over the rounds and, as the headline, the
// median of the per-round throughput ratios: the machines are shared and noisy, so a ratio
// measured within one round is what compares. One caller on Redis (about 7,000 calls a second,
// where a pause of the machine moves a whole turn) runs in turns: both processes at once, taking
// turns run by run (`measureInTurns`). On Redis the benchmark also reads redis-server's
// CPU time (`INFO cpu`) around each run: microseconds of Redis CPU per decision. Memory is
// measured in child processes (RSS after GC).
//
// A full run (no --only) writes benchmark/RESULTS.md and benchmark/results.svg.

const { fork, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const IORedis = require('ioredis')
const upstream = require('rolling-rate-limiter')
const redback = require('redback')
const redis3 = require('redis3')
const flexible = require('rate-limiter-flexible')
const { TokenBucket: LimiterTokenBucket } = require('limiter')
const redisGcra = require('redis-gcra')
const { Ratelimit: UpstashRatelimit } = require('@upstash/ratelimit')

const ratekeeper = require('..')
const ratekeeperFlexible = require('../flexible.js')
const { startRedis } = require('../__test__/helpers/redis-server.js')
const { httpBenchmark, redisCpuSeconds } = require('./http.js')
const { writeResults } = require('./results.js')

const args = parseArgs(process.argv.slice(2))
// For an A/B of the direct lane (benchmark/RESULTS.md, items 29 and 33): `RATEKEEPER_BENCH_LANES=off`
// sends every lone call the usual way, in this process and the runs' (which inherit it).
if (process.env.RATEKEEPER_BENCH_LANES === 'off') require('../lib/native.js').setDirectLanes(false)
// For an A/B of the server's clock (benchmark/RESULTS.md, item 39): `BENCH_CLOCK=local` gives
// ratekeeper's limiters whose peer sends its own clock (the token bucket, GCRA, the leaky bucket
// and the sliding tail on Redis) `clock: 'local'`, so that they send this host's clock too.
const CALLER_CLOCK = process.env.BENCH_CLOCK === 'local' ? { clock: 'local' } : {}
const ROUNDS = args.rounds ?? 5
const MEMORY_OPS = args.ops ?? 50_000
const REDIS_OPS = args.ops ?? 20_000
const CONCURRENCIES = args.concurrency ? [args.concurrency] : [1, 64, 256]
const ID_COUNTS = args.ids ? [args.ids] : [10, 10_000]
const WINDOW = { interval: 60_000, maxInInterval: 100 }
const FIXED = { limits: [{ duration: 60_000, limit: 100 }] }
const FLEXIBLE = { points: 100, duration: 60 }
// A union of three: per minute, per 10 minutes and per hour (the first decides the benchmark's calls).
const FLEXIBLE_UNION = [
  { keyPrefix: 'union-minute', points: 100, duration: 60 },
  { keyPrefix: 'union-ten', points: 1000, duration: 600 },
  { keyPrefix: 'union-hour', points: 10_000, duration: 3600 },
]
// 100 at once, 100 per minute sustained: the same bucket for every bucket-like library.
const BUCKET = { capacity: 100, refillAmount: 100, refillInterval: 60_000 }
const GCRA = { limit: 100, period: 60_000, burst: 100 }
const PEER_GCRA = { burst: 100, rate: 100, period: 60_000 }
const PEER_BUCKET = { bucketSize: 100, tokensPerInterval: 100, interval: 60_000 }
const SLIDING_LOG = { interval: 60_000, maxInInterval: 100 }
// Leaks one every 600 ms: 100 per minute in steps, nearest to GCRA's and `limiter`'s continuous rate.
const LEAKY = { capacity: 100, leakAmount: 1, leakInterval: 600 }
/** How long a timed run lasts at least, and its process's untimed warm-up run before it. */
const MIN_RUN_MS = 250
const WARM_UP_MS = 250
/**
 * How long each library's runs of one caller on Redis last at least, in turns (`measureInTurns`):
 * 250 ms is about 2,000 calls there, and a pause of the machine (this shared VM's) of a few tens of
 * ms moved one round's ratio from about 1.0x to 0.3x or 1.6x (benchmark/RESULTS.md, item 35).
 */
const MIN_LONE_REDIS_RUN_MS = 1500
/** One call in this many has its latency taken (timing every call would cost as much as an in-memory decision). */
const LATENCY_SAMPLE = 8
const MEMORY_IDS = 1_000_000

/**
 * Each library's call as an app makes it: `attempt(id)` returns what the library returns (a
 * Promise of its answer, or, `sync`, the answer itself), and the benchmark awaits it and nothing
 * more. Turning the answer into a decision would add a Promise per call to the timed loop, so
 * that is left to `attempt.refused(result)` (a Promise of true when the call was refused, or the
 * boolean for a synchronous call), which only the check that both libraries decide alike uses.
 * rate-limiter-flexible rejects a refusal: its call handles that with `.then(onAllowed,
 * onRefused)`, which costs it less than an `await` in a `try` (a throw per refusal).
 */
const decided = (attempt, refused) => Object.assign(attempt, { refused })
const rolling = (limiter) => decided((id) => limiter.limit(id), (blocked) => blocked)
const rollingSync = (limiter) => decided((id) => limiter.limitSync(id), (blocked) => blocked)
const verdict = (limiter) => decided((id) => limiter.consume(id), (answer) => answer.then((a) => !a.allowed))
const verdictSync = (limiter) => decided((id) => limiter.consumeSync(id), (answer) => !answer.allowed)
const rateLimiterFlexible = (limiter) => decided((id) => limiter.consume(id).then(() => false, () => true), (refused) => refused)
const gcraPeer = (limiter) => decided((id) => limiter.limit({ key: id }), (answer) => answer.then((a) => a.limited))
// redback's RateLimit counts and leaves the limit to the app: a call adds one and is refused when
// the count over the last REDBACK_INTERVAL seconds (with the one it adds) passes REDBACK_LIMIT.
const REDBACK_INTERVAL = 60
const REDBACK_LIMIT = 100
const overRedbackLimit = (count) => count.then((n) => n > REDBACK_LIMIT)
const bucketCircle = (limit) => decided((id) => limit.addCount(id, REDBACK_INTERVAL), overRedbackLimit)
const redbackPeer = (limit) =>
  decided(
    (id) => new Promise((resolve, reject) => limit.addCount(id, REDBACK_INTERVAL, (error, count) => (error ? reject(error) : resolve(count)))),
    overRedbackLimit,
  )

// sliding-window-rate-limiter's `reserve` answers a token when it logs the action, none when
// it refuses.
const slidingLogPeer = (limiter) => decided((id) => limiter.reserve(id, SLIDING_LOG.maxInInterval), (answer) => answer.then((a) => a.token === undefined))
const upstashPeer = (limiter) => decided((id) => limiter.limit(id), (answer) => answer.then((a) => !a.success))

/**
 * @upstash/ratelimit talks to Redis through @upstash/redis's REST client; on a Redis server, it
 * takes this object over ioredis instead: the two calls it makes (EVALSHA, and EVAL when the
 * script is not loaded yet), with @upstash/redis's arguments.
 */
const upstashRedis = (client) => ({
  evalsha: (sha, keys, args) => client.evalsha(sha, keys.length, ...keys, ...args),
  eval: (script, keys, args) => client.eval(script, keys.length, ...keys, ...args),
})

/**
 * `limiter`'s TokenBucket holds one bucket: kept per id in a Map, as an app would, and started
 * full (as ours is). It answers at once (`tryRemoveTokens`): against ratekeeper's Promise API
 * its answer is wrapped in a resolved Promise (`sync` false), against the synchronous methods it
 * is not.
 */
function tokenBucketPeer({ sync }) {
  const buckets = new Map()
  const take = (id) => {
    let bucket = buckets.get(id)
    if (!bucket) {
      bucket = new LimiterTokenBucket(PEER_BUCKET)
      bucket.content = PEER_BUCKET.bucketSize
      buckets.set(id, bucket)
    }
    return bucket.tryRemoveTokens(1)
  }
  if (sync) return decided(take, (taken) => !taken)
  return decided((id) => Promise.resolve(take(id)), (taken) => taken.then((ok) => !ok))
}

function parseArgs(argv) {
  const out = {}
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i].replace(/^--/, '')
    out[name] = ['only', 'memory-child', 'run-child', 'http-frameworks'].includes(name) ? argv[i + 1] : Number(argv[i + 1])
  }
  return out
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}
const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]

/**
 * Runs `ops` calls of `attempt(id)` with `concurrency` in flight over `ids` ids; returns how long
 * that took and the latencies (µs) of a sample of the calls. A synchronous `attempt` runs in a
 * loop.
 */
async function run(attempt, { ops, concurrency, ids, sync }) {
  const names = Array.from({ length: ids }, (_, i) => `user-${i}`)
  const started = process.hrtime.bigint()
  const seconds = () => Number(process.hrtime.bigint() - started) / 1e9
  if (sync) {
    for (let index = 0; index < ops; index++) attempt(names[(index * 7919) % ids])
    return { seconds: seconds(), latencies: [] }
  }
  const latencies = []
  let issued = 0
  async function caller() {
    while (issued < ops) {
      const index = issued++
      const id = names[(index * 7919) % ids]
      if (index % LATENCY_SAMPLE !== 0) {
        await attempt(id)
        continue
      }
      const t0 = process.hrtime.bigint()
      await attempt(id)
      latencies.push(Number(process.hrtime.bigint() - t0) / 1000)
    }
  }
  await Promise.all(Array.from({ length: concurrency }, caller))
  return { seconds: seconds(), latencies }
}

/**
 * Runs the same workload (see `run`) on a fresh limiter from `make()`, after `reset()`, again
 * and again until the runs add up to `minMs` (a run of a few milliseconds would time the JIT and
 * the first garbage collections rather than the library); returns ops/s over them all, the
 * latency percentiles (µs) of their samples (NaN for a synchronous call) and, given
 * `redisCpuSeconds` (a function reading redis-server's CPU time), the Redis CPU per call of the
 * runs (not of the resets).
 */
async function measure(make, reset, { ops, concurrency, ids, sync, minMs = 0, redisCpuSeconds }) {
  const total = timedRuns()
  do {
    total.add(await timedRun(make, reset, { ops, concurrency, ids, sync, redisCpuSeconds }))
  } while (total.seconds * 1e3 < minMs)
  return total.result(sync)
}

/**
 * One run of `measure`: on a fresh limiter from `make()`, after `reset()`; how long it took, its
 * calls, the latencies of its sample, and the Redis CPU seconds it cost (given `redisCpuSeconds`).
 */
async function timedRun(make, reset, { ops, concurrency, ids, sync, redisCpuSeconds }) {
  await reset()
  const attempt = make()
  const cpuBefore = redisCpuSeconds ? await redisCpuSeconds() : 0
  const result = await run(attempt, { ops, concurrency, ids, sync })
  const redisSeconds = redisCpuSeconds ? (await redisCpuSeconds()) - cpuBefore : 0
  return { seconds: result.seconds, calls: ops, latencies: result.latencies, redisSeconds, withRedis: Boolean(redisCpuSeconds) }
}

/** Runs of `timedRun` added up: ops/s over them all, latency percentiles, Redis CPU per call. */
function timedRuns() {
  let seconds = 0
  let calls = 0
  let redisSeconds = 0
  let withRedis = false
  const latencies = []
  return {
    get seconds() {
      return seconds
    },
    add(run) {
      seconds += run.seconds
      calls += run.calls
      redisSeconds += run.redisSeconds
      withRedis = run.withRedis
      for (const latency of run.latencies) latencies.push(latency)
    },
    result(sync) {
      latencies.sort((a, b) => a - b)
      return {
        opsPerSecond: calls / seconds,
        p50: sync ? NaN : percentile(latencies, 0.5),
        p99: sync ? NaN : percentile(latencies, 0.99),
        redisCpuMicros: withRedis ? (redisSeconds * 1e6) / calls : undefined,
      }
    },
  }
}

/**
 * Both libraries must decide alike before they are timed: 250 calls over 2 ids (100 allowed
 * each, then refusals), one at a time, on fresh limiters.
 */
async function checkSameDecisions(scenario) {
  const decide = async (make) => {
    const attempt = make()
    const decisions = []
    for (let i = 0; i < 250; i++) decisions.push(await attempt.refused(attempt(`same-${i % 2}`)))
    return decisions.map((refused) => (refused ? 'x' : '.')).join('')
  }
  if (scenario.reset) await scenario.reset()
  const ours = await decide(scenario.ours)
  if (scenario.reset) await scenario.reset()
  const theirs = await decide(scenario.theirs)
  if (ours !== theirs) throw new Error(`${scenario.name}: the libraries decide differently:\n${ours}\n${theirs}`)
}

/**
 * Times one library on one scenario in a process of its own (`--run-child`), so that neither
 * library's garbage, heap or JIT state weighs on the other's numbers (its latencies above all:
 * a scavenge of one shared heap pauses whichever library runs). The child connects its own
 * clients, warms up with untimed runs (the first would otherwise time the JIT), then times runs
 * of the workload (see `measure`), reading redis-server's CPU time around each.
 */
function measureInChild(job) {
  const child = spawnSync(process.execPath, [__filename, '--run-child', JSON.stringify(job)], { encoding: 'utf8', maxBuffer: 1 << 20 })
  if (child.status !== 0) throw new Error(`${job.name} (${job.who}) failed in its child process: ${child.stderr}`)
  // (JSON writes NaN, the latencies of a synchronous run, as null.)
  return JSON.parse(child.stdout, (key, value) => (value === null ? NaN : value))
}

/**
 * One caller on Redis, in turns: both libraries' child processes (`--run-child` with `stepwise`)
 * at once, taking turns run by run (`timedRun`: 2,000 calls, about 0.3 s here), `order` first,
 * until each has MIN_LONE_REDIS_RUN_MS timed. A pause or a slow spell of this shared machine then
 * weighs on both, where 1.5 s turns one after the other let it fall on one: one cell's rounds
 * spread from 0.36x to 1.03x that way (benchmark/RESULTS.md, items 35 and 36).
 */
async function measureInTurns(job, order) {
  const children = { ours: steppedChild({ ...job, who: 'ours' }), theirs: steppedChild({ ...job, who: 'theirs' }) }
  try {
    await Promise.all([children.ours.ready, children.theirs.ready])
    const totals = { ours: timedRuns(), theirs: timedRuns() }
    while (totals.ours.seconds * 1e3 < MIN_LONE_REDIS_RUN_MS || totals.theirs.seconds * 1e3 < MIN_LONE_REDIS_RUN_MS) {
      for (const who of order) totals[who].add(await children[who].run())
    }
    return { ours: totals.ours.result(false), theirs: totals.theirs.result(false) }
  } finally {
    children.ours.close()
    children.theirs.close()
  }
}

/** A `--run-child` process that warms up, then times one run each time it is asked (`run()`). */
function steppedChild(job) {
  const child = fork(__filename, ['--run-child', JSON.stringify({ ...job, stepwise: true })], { stdio: ['ignore', 'ignore', 'pipe', 'ipc'] })
  let stderr = ''
  child.stderr.on('data', (chunk) => {
    stderr += chunk
  })
  let waiting = null
  child.on('message', (message) => waiting?.resolve(message))
  child.on('exit', (code) => waiting?.reject(new Error(`${job.name} (${job.who}) failed in its child process (exit ${code}): ${stderr}`)))
  const answer = (message) =>
    new Promise((resolve, reject) => {
      waiting = { resolve, reject }
      if (message) child.send(message)
    })
  return { ready: answer(), run: () => answer('run'), close: () => child.connected && child.send('exit') }
}

async function runChild({ name, who, ops, concurrency, ids, port, stepwise }) {
  // One caller is what ioredis's defaults are for: a peer's client pipelines automatically only
  // under load (its users turn that on for throughput; it holds a lone command to the end of the
  // turn).
  const clients = await connectClients(port, { autoPipelining: concurrency > 1 })
  const scenario = scenarios(clients).find((s) => s.name === name)
  const sync = (scenario.sync ?? []).includes(who)
  const reset = scenario.reset ?? (() => {})
  const make = () => scenario[who]()
  await measure(make, reset, { ops: Math.ceil(ops / 5), concurrency, ids, sync, minMs: WARM_UP_MS })
  // redis-server's CPU time, through this process's connection.
  const server = { cli: (...command) => clients.ioredis.call(...command) }
  const cpu = scenario.redis ? () => redisCpuSeconds(server) : undefined
  if (stepwise) {
    process.on('message', async (message) => {
      if (message !== 'run') process.exit(0)
      process.send(await timedRun(make, reset, { ops, concurrency, ids, sync, redisCpuSeconds: cpu }))
    })
    process.send('ready')
    return
  }
  const result = await measure(make, reset, { ops, concurrency, ids, sync, minMs: MIN_RUN_MS, redisCpuSeconds: cpu })
  process.stdout.write(JSON.stringify(result))
  process.exit(0)
}

/**
 * The clients the scenarios use, on the redis-server at `port`; the peers' ioredis clients with
 * `enableAutoPipelining` as `autoPipelining` says (default true), ratekeeper's store with its
 * `functions` option as `functions` says (default: true, its default, unless the environment
 * has BENCH_FUNCTIONS=0, for an A/B run of Functions against EVALSHA: benchmark/RESULTS.md, item
 * 38).
 */
async function connectClients(port, { autoPipelining = true, functions = process.env.BENCH_FUNCTIONS !== '0' } = {}) {
  const ioredis = new IORedis(port, '127.0.0.1', { enableAutoPipelining: autoPipelining })
  // redis-gcra needs ioredis 4 (its own dependency).
  const IORedis4 = require(require.resolve('ioredis', { paths: [path.dirname(require.resolve('redis-gcra'))] }))
  const ioredis4 = new IORedis4(port, '127.0.0.1', { enableAutoPipelining: autoPipelining })
  // redback's own client: node-redis 3 (it sends each command at once, so calls in flight share
  // the connection as a pipeline).
  const nodeRedis3 = redis3.createClient(port, '127.0.0.1')
  const store = await ratekeeper.RedisStore.connect({ url: `redis://127.0.0.1:${port}`, functions })
  // (An ES module: imported, not required.)
  const { SlidingWindowRateLimiter } = await import('sliding-window-rate-limiter')
  const flush = () => ioredis.flushall()
  return { ioredis, ioredis4, nodeRedis3, store, flush, SlidingWindowRateLimiter }
}

/**
 * Runs `scenario` at one load for ROUNDS rounds, alternating which library goes first: each run
 * in a child process of its own (`measureInChild`), or with `inProcess` (the hot keys, whose two
 * sides are both ratekeeper and whose answers are checked afterwards) in this one.
 */
async function runScenario(scenario, server, config, { inProcess = false } = {}) {
  const ops = scenario.ops ?? (scenario.redis ? (config.concurrency === 1 ? REDIS_OPS / 10 : REDIS_OPS) : MEMORY_OPS)
  const isSync = (who) => (scenario.sync ?? []).includes(who)
  const here = (who, runOps) =>
    measure(() => scenario[who](), scenario.reset ?? (() => {}), {
      ops: runOps,
      ...config,
      sync: isSync(who),
      redisCpuSeconds: scenario.redis ? () => redisCpuSeconds(server) : undefined,
    })
  const inTurns = scenario.redis && config.concurrency === 1 && !inProcess
  // In this process, an untimed run of each first: the first round would otherwise time the JIT's warm-up.
  if (inProcess) for (const who of ['ours', 'theirs']) await here(who, Math.ceil(ops / 5))
  const rounds = []
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 ? ['theirs', 'ours'] : ['ours', 'theirs']
    const result = {}
    if (inTurns) {
      Object.assign(result, await measureInTurns({ name: scenario.name, ops, ...config, port: server.port }, order))
    } else {
      for (const who of order) {
        result[who] = inProcess ? await here(who, ops) : measureInChild({ name: scenario.name, who, ops, ...config, port: server.port })
      }
    }
    result.ratio = result.ours.opsPerSecond / result.theirs.opsPerSecond
    rounds.push(result)
  }
  const summary = (who) => {
    const of = (field) => median(rounds.map((r) => r[who][field]))
    return { opsPerSecond: of('opsPerSecond'), p50: of('p50'), p99: of('p99'), redisCpuMicros: scenario.redis ? of('redisCpuMicros') : undefined }
  }
  const row = {
    name: scenario.name,
    peer: scenario.peer,
    ...config,
    ratio: median(rounds.map((r) => r.ratio)),
    ratios: rounds.map((r) => r.ratio),
    ours: summary('ours'),
    theirs: summary('theirs'),
  }
  process.stderr.write(`${row.name}, ${config.concurrency} callers over ${config.ids} ids: ${row.ratio.toFixed(2)}x (rounds ${row.ratios.map((r) => r.toFixed(2)).join(', ')})\n`)
  return row
}

/**
 * A hot-key attack: 10 ids sending all the traffic, all over their limit (spent before each run), on the fixed window on
 * Redis with `blockCache` against the same limiter without it. Calls pass whole-millisecond
 * instants, and one answer in 50 given with the cache is replayed afterwards against the store
 * (a `peek` at the same instant, by a limiter without the cache): any difference fails the run.
 */
async function hotKeys(store, server) {
  const HOT = { limits: [{ duration: 3_600_000, limit: 100 }] }
  const config = { concurrency: 256, ids: 10 }
  const sample = []
  const make = (blockCache) => () => {
    const limiter = new ratekeeper.FixedWindow({ client: store, namespace: 'hot:', blockCache, ...HOT })
    let calls = 0
    return (id) => {
      const now = Date.now()
      return limiter.consume(id, { now }).then((answer) => {
        if (blockCache && !answer.allowed && calls++ % 50 === 0) sample.push({ id, now, answer })
        return !answer.allowed
      })
    }
  }
  const scenario = {
    name: 'hot keys (10 ids, all over the limit), fixed window on Redis, blockCache',
    peer: 'the same limiter without blockCache',
    redis: true,
    // Long enough runs that the cache's first lesson per id (one round trip each) is noise, and
    // that the cached side (millions of answers a second) runs for about 250 ms, as the other
    // scenarios' turns do.
    ops: 25 * REDIS_OPS,
    // All over their limit from the start: each id's 100 spent before the run.
    reset: async () => {
      await server.cli('FLUSHALL')
      const filler = new ratekeeper.FixedWindow({ client: store, namespace: 'hot:', ...HOT })
      await Promise.all(Array.from({ length: 100 * config.ids }, (_, i) => filler.consume(`user-${i % config.ids}`)))
    },
    ours: make(true),
    theirs: make(false),
  }
  const row = await runScenario(scenario, server, config, { inProcess: true })
  // The last round's store is still there: replay the answers of that round.
  const plain = new ratekeeper.FixedWindow({ client: store, namespace: 'hot:', ...HOT })
  const replayed = sample.slice(-200)
  for (const { id, now, answer } of replayed) {
    const again = await plain.peek(id, { now })
    if (JSON.stringify(again) !== JSON.stringify(answer)) {
      throw new Error(`blockCache answered ${JSON.stringify(answer)} for ${id} at ${now}; the store answers ${JSON.stringify(again)}`)
    }
  }
  row.replayed = replayed.length
  return row
}

/**
 * In a child process: `which` limiter takes MEMORY_IDS distinct ids once each; prints the RSS
 * growth per id after GC and, for ratekeeper, again once those ids are stale (the store sweeps).
 */
async function memoryChild(which) {
  const T0 = Date.now()
  const rss = () => {
    global.gc()
    return process.memoryUsage().rss
  }
  const before = rss()
  if (which === 'theirs') {
    const limiter = new flexible.RateLimiterMemory(FLEXIBLE)
    for (let i = 0; i < MEMORY_IDS; i++) await limiter.consume(`user-${i}`)
    process.stdout.write(JSON.stringify({ bytesPerId: (rss() - before) / MEMORY_IDS }))
  } else {
    const limiter = new ratekeeper.FixedWindow(FIXED)
    for (let i = 0; i < MEMORY_IDS; i++) await limiter.consume(`user-${i}`, { now: T0 })
    const full = rss()
    // A minute and a sweep period later, one id is still being called.
    for (let s = 0; s <= 80; s += 10) await limiter.consume('steady', { now: T0 + s * 1000 })
    const stale = rss()
    process.stdout.write(JSON.stringify({ bytesPerId: (full - before) / MEMORY_IDS, staleBytesPerId: (stale - before) / MEMORY_IDS, trackedAfter: limiter.trackedIds }))
  }
  // rate-limiter-flexible keeps one timer per id: leave without waiting for them.
  process.exit(0)
}

function memoryOf(which) {
  const child = spawnSync(process.execPath, ['--expose-gc', __filename, '--memory-child', which], { encoding: 'utf8', maxBuffer: 1 << 20 })
  if (child.status !== 0) throw new Error(`memory child failed: ${child.stderr}`)
  // (JSON writes NaN, the latencies of a synchronous run, as null.)
  return JSON.parse(child.stdout, (key, value) => (value === null ? NaN : value))
}

/** The rolling windows' memory for 10,000 ids x 10 actions, in memory (child processes) and on Redis. */
async function rollingMemory(server, ioredis, store) {
  const inProcess = (which) => {
    const child = spawnSync(process.execPath, ['--expose-gc', '-e', `
      const { InMemoryRateLimiter } = require(${JSON.stringify(which === 'ours' ? '..' : 'rolling-rate-limiter')})
      ;(async () => {
        global.gc(); const before = process.memoryUsage().rss
        const limiter = new InMemoryRateLimiter(${JSON.stringify(WINDOW)})
        for (let i = 0; i < 100000; i++) await limiter.limit('user-' + (i % 10000))
        global.gc(); process.stdout.write(String(process.memoryUsage().rss - before)); process.exit(0)
      })()`], { encoding: 'utf8', cwd: __dirname })
    if (child.status !== 0) throw new Error(`memory child failed: ${child.stderr}`)
    return Number(child.stdout)
  }
  const inRedis = async (limiter) => {
    await server.cli('FLUSHALL')
    const used = async () => Number((await server.cli('INFO', 'memory')).match(/used_memory:(\d+)/)[1])
    const before = await used()
    for (let i = 0; i < 100_000; i += 256) await Promise.all(Array.from({ length: 256 }, (_, j) => limiter.limit(`user-${(i + j) % 10_000}`)))
    return (await used()) - before
  }
  return {
    memory: { ours: inProcess('ours'), theirs: inProcess('theirs') },
    redis: {
      ours: await inRedis(new ratekeeper.RedisRateLimiter({ client: store, namespace: 'mem:', ...WINDOW })),
      theirs: await inRedis(new upstream.RedisRateLimiter({ client: ioredis, namespace: 'mem:', ...WINDOW })),
    },
  }
}

function scenarios({ ioredis, ioredis4, nodeRedis3, store, flush, SlidingWindowRateLimiter }) {
  const onRedis = { redis: true, reset: flush }
  return [
    {
      name: 'rolling window, Redis',
      peer: 'rolling-rate-limiter (ioredis, auto-pipelining under load)',
      ours: () => rolling(new ratekeeper.RedisRateLimiter({ client: store, namespace: 'bench:', ...WINDOW })),
      theirs: () => rolling(new upstream.RedisRateLimiter({ client: ioredis, namespace: 'bench:', ...WINDOW })),
      ...onRedis,
    },
    {
      name: 'rolling window, in memory',
      peer: 'rolling-rate-limiter (InMemoryRateLimiter)',
      ours: () => rolling(new ratekeeper.InMemoryRateLimiter(WINDOW)),
      theirs: () => rolling(new upstream.InMemoryRateLimiter(WINDOW)),
    },
    {
      name: 'rolling window, in memory, limitSync',
      peer: 'rolling-rate-limiter (InMemoryRateLimiter, Promise)',
      ours: () => rollingSync(new ratekeeper.InMemoryRateLimiter(WINDOW)),
      theirs: () => rolling(new upstream.InMemoryRateLimiter(WINDOW)),
      sync: ['ours'],
    },
    {
      name: 'fixed window, Redis',
      peer: 'rate-limiter-flexible (RateLimiterRedis, ioredis, auto-pipelining under load)',
      ours: () => verdict(new ratekeeper.FixedWindow({ client: store, namespace: 'bench-fixed:', ...FIXED })),
      theirs: () => rateLimiterFlexible(new flexible.RateLimiterRedis({ storeClient: ioredis, keyPrefix: 'bench-flexible', ...FLEXIBLE })),
      ...onRedis,
    },
    {
      name: 'fixed window, in memory',
      peer: 'rate-limiter-flexible (RateLimiterMemory)',
      ours: () => verdict(new ratekeeper.FixedWindow(FIXED)),
      theirs: () => rateLimiterFlexible(new flexible.RateLimiterMemory(FLEXIBLE)),
    },
    {
      name: 'fixed window, in memory, consumeSync',
      peer: 'rate-limiter-flexible (RateLimiterMemory, Promise)',
      ours: () => verdictSync(new ratekeeper.FixedWindow(FIXED)),
      theirs: () => rateLimiterFlexible(new flexible.RateLimiterMemory(FLEXIBLE)),
      sync: ['ours'],
    },
    // ratekeeper/flexible, the drop-in: the same class and options as the peer's, over the same
    // ioredis client (ratekeeper opens its own connection from the client's options).
    {
      name: 'flexible drop-in, Redis',
      peer: 'rate-limiter-flexible (RateLimiterRedis, ioredis, auto-pipelining under load)',
      ours: () => rateLimiterFlexible(new ratekeeperFlexible.RateLimiterRedis({ storeClient: ioredis, keyPrefix: 'bench-drop-in', ...FLEXIBLE })),
      theirs: () => rateLimiterFlexible(new flexible.RateLimiterRedis({ storeClient: ioredis, keyPrefix: 'bench-flexible', ...FLEXIBLE })),
      ...onRedis,
    },
    {
      name: 'flexible drop-in, in memory',
      peer: 'rate-limiter-flexible (RateLimiterMemory)',
      ours: () => rateLimiterFlexible(new ratekeeperFlexible.RateLimiterMemory(FLEXIBLE)),
      theirs: () => rateLimiterFlexible(new flexible.RateLimiterMemory(FLEXIBLE)),
    },
    {
      name: 'flexible drop-in, Union of 3, Redis',
      peer: 'rate-limiter-flexible (RateLimiterUnion of 3 RateLimiterRedis, ioredis, auto-pipelining under load)',
      ours: () => rateLimiterFlexible(new ratekeeperFlexible.RateLimiterUnion(...FLEXIBLE_UNION.map((options) => new ratekeeperFlexible.RateLimiterRedis({ storeClient: ioredis, ...options })))),
      theirs: () => rateLimiterFlexible(new flexible.RateLimiterUnion(...FLEXIBLE_UNION.map((options) => new flexible.RateLimiterRedis({ storeClient: ioredis, ...options })))),
      ...onRedis,
    },
    {
      name: 'bucket circle (redback), Redis',
      peer: 'redback (RateLimit, node-redis 3)',
      ours: () => bucketCircle(ratekeeper.createRateLimit('bench', { client: store, namespace: 'bench-redback' })),
      theirs: () => redbackPeer(redback.use(nodeRedis3, { namespace: 'bench-redback' }).createRateLimit('bench')),
      ...onRedis,
    },
    // For the token bucket on Redis, redis-gcra: its GCRA answers as a continuous token bucket
    // does, on a Redis client (rate-limiter-flexible has no token bucket; @upstash/ratelimit's is
    // written for Upstash's REST client).
    {
      name: 'token bucket, Redis',
      peer: 'redis-gcra (GCRA, ioredis 4, auto-pipelining under load)',
      ours: () => verdict(new ratekeeper.TokenBucket({ client: store, namespace: 'bench-token:', ...CALLER_CLOCK, ...BUCKET })),
      theirs: () => gcraPeer(redisGcra({ redis: ioredis4, keyPrefix: 'bench-gcra-peer', ...PEER_GCRA })),
      ...onRedis,
    },
    {
      name: 'token bucket, in memory',
      peer: 'limiter (TokenBucket, one per id in a Map)',
      ours: () => verdict(new ratekeeper.TokenBucket(BUCKET)),
      theirs: () => tokenBucketPeer({ sync: false }),
    },
    {
      name: 'token bucket, in memory, consumeSync',
      peer: 'limiter (TokenBucket, one per id in a Map, synchronous)',
      ours: () => verdictSync(new ratekeeper.TokenBucket(BUCKET)),
      theirs: () => tokenBucketPeer({ sync: true }),
      sync: ['ours', 'theirs'],
    },
    {
      name: 'GCRA, Redis',
      peer: 'redis-gcra (ioredis 4, auto-pipelining under load)',
      ours: () => verdict(new ratekeeper.Gcra({ client: store, namespace: 'bench-gcra:', ...CALLER_CLOCK, ...GCRA })),
      theirs: () => gcraPeer(redisGcra({ redis: ioredis4, keyPrefix: 'bench-gcra-peer', ...PEER_GCRA })),
      ...onRedis,
    },
    {
      name: 'GCRA, in memory',
      peer: 'limiter (TokenBucket, one per id in a Map)',
      ours: () => verdict(new ratekeeper.Gcra(GCRA)),
      theirs: () => tokenBucketPeer({ sync: false }),
    },
    {
      name: 'GCRA, in memory, consumeSync',
      peer: 'limiter (TokenBucket, one per id in a Map, synchronous)',
      ours: () => verdictSync(new ratekeeper.Gcra(GCRA)),
      theirs: () => tokenBucketPeer({ sync: true }),
      sync: ['ours', 'theirs'],
    },
    // sliding-window-rate-limiter logs allowed actions only, as the sliding log does; it is also
    // the exact log that the precision sliding window approximates (no npm package that runs
    // here keeps a sliding window in buckets and decides in one step).
    {
      name: 'sliding log, Redis',
      peer: 'sliding-window-rate-limiter (ioredis, auto-pipelining under load)',
      ours: () => verdict(new ratekeeper.SlidingLog({ client: store, namespace: 'bench-log:', ...SLIDING_LOG })),
      theirs: () => slidingLogPeer(SlidingWindowRateLimiter.createLimiter({ redis: ioredis, interval: SLIDING_LOG.interval })),
      ...onRedis,
    },
    {
      name: 'sliding log, in memory',
      peer: 'sliding-window-rate-limiter (in memory)',
      ours: () => verdict(new ratekeeper.SlidingLog(SLIDING_LOG)),
      theirs: () => slidingLogPeer(SlidingWindowRateLimiter.createLimiter({ interval: SLIDING_LOG.interval })),
    },
    {
      name: 'sliding window, Redis',
      peer: 'sliding-window-rate-limiter (a sliding log; ioredis, auto-pipelining under load)',
      ours: () => verdict(new ratekeeper.SlidingWindow({ client: store, namespace: 'bench-sliding:', ...FIXED })),
      theirs: () => slidingLogPeer(SlidingWindowRateLimiter.createLimiter({ redis: ioredis, interval: SLIDING_LOG.interval })),
      ...onRedis,
    },
    {
      name: 'sliding window, in memory',
      peer: 'sliding-window-rate-limiter (a sliding log, in memory)',
      ours: () => verdict(new ratekeeper.SlidingWindow(FIXED)),
      theirs: () => slidingLogPeer(SlidingWindowRateLimiter.createLimiter({ interval: SLIDING_LOG.interval })),
    },
    // @upstash/ratelimit's slidingWindow is the sliding tail: the current window plus the
    // previous one weighted by how much of it the sliding window still covers. (It has no
    // in-memory store.)
    {
      name: 'sliding tail, Redis',
      peer: '@upstash/ratelimit (slidingWindow, over ioredis with auto-pipelining under load)',
      ours: () => verdict(new ratekeeper.SlidingTail({ client: store, namespace: 'bench-tail:', ...CALLER_CLOCK, ...FIXED })),
      theirs: () =>
        upstashPeer(
          new UpstashRatelimit({
            redis: upstashRedis(ioredis),
            limiter: UpstashRatelimit.slidingWindow(100, '60 s'),
            prefix: 'bench-upstash',
            // As ratekeeper's blockCache, off: every call asks Redis.
            ephemeralCache: false,
          }),
        ),
      ...onRedis,
    },
    // A leaky bucket as a meter is GCRA, and a token bucket upside down.
    {
      name: 'leaky bucket, Redis',
      peer: 'redis-gcra (GCRA, ioredis 4, auto-pipelining under load)',
      ours: () => verdict(new ratekeeper.LeakyBucket({ client: store, namespace: 'bench-leaky:', ...CALLER_CLOCK, ...LEAKY })),
      theirs: () => gcraPeer(redisGcra({ redis: ioredis4, keyPrefix: 'bench-gcra-peer', ...PEER_GCRA })),
      ...onRedis,
    },
    {
      name: 'leaky bucket, in memory',
      peer: 'limiter (TokenBucket, one per id in a Map)',
      ours: () => verdict(new ratekeeper.LeakyBucket(LEAKY)),
      theirs: () => tokenBucketPeer({ sync: false }),
    },
  ]
}

const format = (n) => (Number.isNaN(n) ? '-' : Math.round(n).toLocaleString('en-US'))

function printTable(rows) {
  console.log('| scenario | callers x ids | ratekeeper ops/s | peer ops/s | ratio | ratekeeper p50 / p99 | peer p50 / p99 | Redis CPU per decision (ours / peer) |')
  console.log('|---|---|---:|---:|---:|---:|---:|---:|')
  for (const r of rows) {
    const cpu = r.ours.redisCpuMicros === undefined ? '' : `${r.ours.redisCpuMicros.toFixed(1)} / ${r.theirs.redisCpuMicros.toFixed(1)} µs`
    console.log(
      `| ${r.name} | ${r.concurrency} x ${format(r.ids)} | ${format(r.ours.opsPerSecond)} | ${format(r.theirs.opsPerSecond)} | **${r.ratio.toFixed(1)}x** | ${format(r.ours.p50)} / ${format(r.ours.p99)} µs | ${format(r.theirs.p50)} / ${format(r.theirs.p99)} µs | ${cpu} |`,
    )
  }
}

async function main() {
  if (args['memory-child']) return memoryChild(args['memory-child'])
  if (args['run-child']) return runChild(JSON.parse(args['run-child']))
  const server = await startRedis()
  const clients = await connectClients(server.port)
  const { ioredis, store } = clients
  const redisVersion = (await server.cli('INFO', 'server')).match(/redis_version:(\S+)/)[1]
  const chosen = scenarios(clients).filter((s) => !args.only || s.name.includes(args.only))

  console.log(`ratekeeper benchmark: ${ROUNDS} rounds, Node ${process.version}, redis-server ${redisVersion}\n`)
  const rows = []
  for (const scenario of chosen) {
    await checkSameDecisions(scenario)
    for (const ids of ID_COUNTS) {
      for (const concurrency of CONCURRENCIES) {
        // A synchronous call has no concurrency: it runs once, against each of the peer's.
        rows.push(await runScenario(scenario, server, { concurrency, ids }))
      }
    }
  }
  if (!args.only || 'hot keys'.includes(args.only)) {
    const row = await hotKeys(store, server)
    rows.push(row)
    process.stderr.write(`hot keys: ${row.replayed} answers given by blockCache replayed against the store, all the same\n`)
  }
  printTable(rows)

  const wantsMemory = !args.only || 'in memory'.includes(args.only) || args.only === 'memory'
  let memory
  if (wantsMemory) {
    memory = { ids: MEMORY_IDS, ours: memoryOf('ours'), theirs: memoryOf('theirs'), rolling: await rollingMemory(server, ioredis, store) }
    console.log(`\nMemory for ${format(MEMORY_IDS)} distinct ids hit once (fixed window, in memory, RSS after GC): ratekeeper ${memory.ours.bytesPerId.toFixed(0)} bytes per id (${memory.ours.staleBytesPerId.toFixed(0)} once they are stale), RateLimiterMemory ${memory.theirs.bytesPerId.toFixed(0)}`)
  }

  let http
  if (!args.only || 'http'.includes(args.only)) {
    http = await httpBenchmark({ rounds: args['http-rounds'] ?? 3, seconds: args['http-seconds'] ?? 5, frameworks: args['http-frameworks'] })
    console.log(`\n${http.join('\n')}`)
  }

  if (!args.only) {
    const machine = `${os.cpus().length} × ${os.cpus()[0]?.model ?? 'unknown CPU'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, ${os.type()} ${os.release()}`
    writeResults({ rows, memory, http, rounds: ROUNDS, machine, node: process.version, redis: redisVersion })
    // Kept (untracked) to rewrite the results without measuring again.
    fs.writeFileSync(path.join(__dirname, 'results.json'), JSON.stringify({ rows, memory, http, rounds: ROUNDS, machine, node: process.version, redis: redisVersion }))
    console.log('\nWrote benchmark/RESULTS.md and benchmark/results.svg')
  }

  clients.ioredis.disconnect()
  clients.ioredis4.disconnect()
  clients.nodeRedis3.quit()
  await store.close()
  await server.stop()
  // rolling-rate-limiter's in-memory limiter keeps a timer per id.
  process.exit(0)
}

if (require.main === module) {
  main().catch((error) => {
    console.error(error)
    process.exit(1)
  })
}

// (For benchmark/redis-time.js: the same scenarios, on the same clients.)
module.exports = { scenarios, connectClients }
