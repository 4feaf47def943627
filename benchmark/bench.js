'use strict'

// ratekeeper against its peers on npm, side by side in one run.
//
//   npm run bench                        # 5 rounds of every scenario
//   npm run bench -- --rounds 3 --ops 20000 --only redis
//
// Each scenario runs both libraries on the same workload (CONCURRENCY callers in flight, ids
// drawn from IDS), alternating which goes first from round to round. The table reports medians
// over the rounds and, as the headline, the median of the per-round throughput ratios: the
// machines are shared and noisy, so a ratio measured within one round is what compares.
// Memory is measured in separate child processes (RSS after GC) and with Redis' used_memory.

const { spawnSync } = require('node:child_process')
const path = require('node:path')
const IORedis = require('ioredis')
const upstream = require('rolling-rate-limiter')
const flexible = require('rate-limiter-flexible')

const ratekeeper = require('..')
const { startRedis } = require('../__test__/helpers/redis-server.js')

const args = parseArgs(process.argv.slice(2))
const ROUNDS = args.rounds ?? 5
const OPS = args.ops ?? 50_000
const CONCURRENCY = args.concurrency ?? 256
const IDS = args.ids ?? 10_000
const WINDOW = { interval: 60_000, maxInInterval: 100 }
const FIXED = { limits: [{ duration: 60_000, limit: 100 }] }
const FLEXIBLE = { points: 100, duration: 60 }

/** Each library's call, as `attempt(id)` resolving whether it was refused. */
const rolling = (limiter) => (id) => limiter.limit(id)
const fixedWindow = (limiter) => (id) => limiter.consume(id).then((verdict) => !verdict.allowed)
const rateLimiterFlexible = (limiter) => (id) => limiter.consume(id).then(() => false, () => true)

function parseArgs(argv) {
  const out = {}
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i].replace(/^--/, '')
    out[name] = name === 'only' || name === 'memory-child' ? argv[i + 1] : Number(argv[i + 1])
  }
  return out
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}
const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]

/** Runs OPS calls of `attempt(id)` with CONCURRENCY in flight; returns ops/s and latency percentiles (µs). */
async function measure(attempt) {
  const latencies = new Float64Array(OPS)
  let issued = 0
  const started = process.hrtime.bigint()
  async function caller() {
    while (issued < OPS) {
      const index = issued++
      const id = `user-${(index * 7919) % IDS}`
      const t0 = process.hrtime.bigint()
      await attempt(id)
      latencies[index] = Number(process.hrtime.bigint() - t0) / 1000
    }
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, caller))
  const seconds = Number(process.hrtime.bigint() - started) / 1e9
  latencies.sort()
  return { opsPerSecond: OPS / seconds, p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99) }
}

/** Both libraries must answer alike before they are timed. */
async function checkSameAnswers(name, ours, theirs) {
  const a = []
  const b = []
  for (let i = 0; i < 5; i++) a.push(await ours('same-answers'))
  for (let i = 0; i < 5; i++) b.push(await theirs('same-answers'))
  if (JSON.stringify(a) !== JSON.stringify(b)) {
    throw new Error(`${name}: the libraries disagree: ${JSON.stringify(a)} vs ${JSON.stringify(b)}`)
  }
}

async function runScenario(scenario) {
  const { name, ours, theirs, reset } = scenario
  await checkSameAnswers(name, ours, theirs)
  const rounds = []
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 ? ['theirs', 'ours'] : ['ours', 'theirs']
    const result = {}
    for (const who of order) {
      if (reset) await reset()
      result[who] = await measure(who === 'ours' ? ours : theirs)
    }
    rounds.push(result)
    process.stderr.write(`${name} round ${round + 1}: ours ${result.ours.opsPerSecond.toFixed(0)} ops/s, ${scenario.peer} ${result.theirs.opsPerSecond.toFixed(0)} ops/s\n`)
  }
  const summary = (who, field) => median(rounds.map((r) => r[who][field]))
  return {
    name,
    peer: scenario.peer,
    ratio: median(rounds.map((r) => r.ours.opsPerSecond / r.theirs.opsPerSecond)),
    ours: { opsPerSecond: summary('ours', 'opsPerSecond'), p50: summary('ours', 'p50'), p99: summary('ours', 'p99') },
    theirs: { opsPerSecond: summary('theirs', 'opsPerSecond'), p50: summary('theirs', 'p50'), p99: summary('theirs', 'p99') },
  }
}

/** In a child process: fill a limiter with IDS ids x 10 actions and print the RSS growth. */
async function memoryChild(which) {
  const create = {
    ours: () => new ratekeeper.InMemoryRateLimiter(WINDOW),
    theirs: () => new upstream.InMemoryRateLimiter(WINDOW),
  }[which]
  global.gc()
  const before = process.memoryUsage().rss
  const limiter = create()
  for (let i = 0; i < IDS * 10; i++) await limiter.limit(`user-${i % IDS}`)
  global.gc()
  const after = process.memoryUsage().rss
  process.stdout.write(JSON.stringify({ bytes: after - before }))
  // rolling-rate-limiter keeps one timer per id: leave without waiting for them.
  process.exit(0)
}

function memoryInProcess(which) {
  const child = spawnSync(process.execPath, ['--expose-gc', __filename, '--memory-child', which, '--ids', String(IDS)], { encoding: 'utf8' })
  if (child.status !== 0) throw new Error(`memory child failed: ${child.stderr}`)
  return JSON.parse(child.stdout).bytes
}

async function memoryInRedis(server, limiter) {
  await server.cli('FLUSHALL')
  const usedBefore = Number((await server.cli('INFO', 'memory')).match(/used_memory:(\d+)/)[1])
  for (let i = 0; i < IDS * 10; i += CONCURRENCY) {
    await Promise.all(Array.from({ length: CONCURRENCY }, (_, j) => limiter.limit(`user-${(i + j) % IDS}`)))
  }
  const usedAfter = Number((await server.cli('INFO', 'memory')).match(/used_memory:(\d+)/)[1])
  return usedAfter - usedBefore
}

const format = (n) => Math.round(n).toLocaleString('en-US')
const mib = (bytes) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`

async function main() {
  if (args['memory-child']) return memoryChild(args['memory-child'])
  const server = await startRedis()
  const ioredis = new IORedis(server.port, '127.0.0.1', { enableAutoPipelining: true })
  const store = await ratekeeper.RedisStore.connect(server.url)
  const flush = () => server.cli('FLUSHALL')
  const oursRollingOnRedis = new ratekeeper.RedisRateLimiter({ client: store, namespace: 'bench:', ...WINDOW })
  const theirsRollingOnRedis = new upstream.RedisRateLimiter({ client: ioredis, namespace: 'bench:', ...WINDOW })
  const scenarios = [
    {
      name: 'rolling window, Redis',
      peer: 'rolling-rate-limiter (ioredis, auto-pipelining)',
      ours: rolling(oursRollingOnRedis),
      theirs: rolling(theirsRollingOnRedis),
      reset: flush,
      memory: { ours: oursRollingOnRedis, theirs: theirsRollingOnRedis, peer: 'rolling-rate-limiter' },
    },
    {
      name: 'rolling window, in memory',
      peer: 'rolling-rate-limiter (InMemoryRateLimiter)',
      ours: rolling(new ratekeeper.InMemoryRateLimiter(WINDOW)),
      theirs: rolling(new upstream.InMemoryRateLimiter(WINDOW)),
    },
    {
      name: 'fixed window, Redis',
      peer: 'rate-limiter-flexible (RateLimiterRedis, ioredis, auto-pipelining)',
      ours: fixedWindow(new ratekeeper.FixedWindow({ client: store, namespace: 'bench-fixed:', ...FIXED })),
      theirs: rateLimiterFlexible(new flexible.RateLimiterRedis({ storeClient: ioredis, keyPrefix: 'bench-flexible', ...FLEXIBLE })),
      reset: flush,
    },
    {
      name: 'fixed window, in memory',
      peer: 'rate-limiter-flexible (RateLimiterMemory)',
      ours: fixedWindow(new ratekeeper.FixedWindow(FIXED)),
      theirs: rateLimiterFlexible(new flexible.RateLimiterMemory(FLEXIBLE)),
    },
  ].filter((s) => !args.only || s.name.includes(args.only))

  console.log(`ratekeeper benchmark: ${ROUNDS} rounds of ${format(OPS)} calls, ${CONCURRENCY} concurrent callers over ${format(IDS)} ids, Node ${process.version}, redis-server ${(await server.cli('INFO', 'server')).match(/redis_version:(\S+)/)[1]}\n`)
  const results = []
  for (const scenario of scenarios) results.push(await runScenario(scenario))

  console.log('| scenario | peer | ratekeeper ops/s | peer ops/s | ratio (median of rounds) | ratekeeper p50 / p99 | peer p50 / p99 |')
  console.log('|---|---|---:|---:|---:|---:|---:|')
  for (const r of results) {
    console.log(
      `| ${r.name} | ${r.peer} | ${format(r.ours.opsPerSecond)} | ${format(r.theirs.opsPerSecond)} | **${r.ratio.toFixed(1)}x** | ${format(r.ours.p50)} / ${format(r.ours.p99)} µs | ${format(r.theirs.p50)} / ${format(r.theirs.p99)} µs |`,
    )
  }

  console.log(`\nMemory for ${format(IDS)} ids x 10 actions (maxInInterval ${WINDOW.maxInInterval}):\n`)
  console.log('| store | ratekeeper | rolling-rate-limiter |')
  console.log('|---|---:|---:|')
  if (!args.only || 'in memory'.includes(args.only)) {
    console.log(`| in memory (process RSS growth) | ${mib(memoryInProcess('ours'))} | ${mib(memoryInProcess('theirs'))} |`)
  }
  const redisScenario = scenarios.find((s) => s.memory)
  if (redisScenario) {
    const { ours, theirs } = redisScenario.memory
    console.log(`| Redis (used_memory growth) | ${mib(await memoryInRedis(server, ours))} | ${mib(await memoryInRedis(server, theirs))} |`)
  }

  ioredis.disconnect()
  await store.close()
  await server.stop()
  // rolling-rate-limiter's in-memory limiter keeps a timer per id.
  process.exit(0)
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
