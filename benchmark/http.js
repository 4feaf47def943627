'use strict'

// The HTTP scenario of `npm run bench`: one Express route, limited four ways on one Redis, driven
// by autocannon on loopback, bounded in time.
//
//   node benchmark/http.js [--rounds 3] [--seconds 5] [--connections 64] [--ids 1000]
//
// Each limiter runs its app in a child process (so that the load generator, in this process,
// does not share an event loop with it), keyed by an `x-user` header drawn from `--ids` users,
// with a limit no one reaches (the limiter's work is measured, not 429s). Rounds alternate the
// order; the table gives each app's median requests per second and p99 latency, the median
// per-round ratio against express-rate-limit with rate-limit-redis, and the CPU time each request
// cost the app's process (all its threads) and Redis: on a machine where the load generator,
// the app and Redis share the cores, Express alone sets the pace, and the CPU per request shows
// what the limiter itself costs.

const { fork } = require('node:child_process')
const autocannon = require('autocannon')

const { startRedis } = require('../__test__/helpers/redis-server.js')

const APPS = {
  // The ceiling: what the route serves with no limiter at all.
  'no limiter (Express alone)': 'none',
  'ratekeeper rateLimit (FixedWindow)': 'ratekeeper',
  'express-rate-limit + ratekeeper/express-rate-limit': 'erl-ratekeeper',
  'express-rate-limit + rate-limit-redis (ioredis)': 'erl-rate-limit-redis',
  'rate-limiter-flexible (RateLimiterRedis, ioredis)': 'flexible',
}
const BASELINE = 'express-rate-limit + rate-limit-redis (ioredis)'
const WINDOW_MS = 60_000
const LIMIT = 1e9

/** In a child process: serve the route limited by `kind` on a free port; report the port. */
async function serve(kind, redisUrl) {
  const express = require('express')
  const app = express()
  const key = (req) => req.get('x-user') ?? 'anonymous'
  app.use(await middlewareOf(kind, redisUrl, key))
  app.get('/', (req, res) => res.send('ok'))
  const server = app.listen(0, '127.0.0.1', () => process.send({ port: server.address().port }))
  // The process's CPU time so far (every thread: a native client's too), in microseconds.
  process.on('message', () => {
    const { user, system } = process.cpuUsage()
    process.send({ cpuMicros: user + system })
  })
  process.on('disconnect', () => process.exit(0))
}

async function middlewareOf(kind, redisUrl, key) {
  if (kind === 'none') return (req, res, next) => next()
  if (kind === 'ratekeeper') {
    const { rateLimit, FixedWindow } = require('..')
    const limiter = new FixedWindow({ client: redisUrl, limits: [{ duration: WINDOW_MS, limit: LIMIT }] })
    return rateLimit({ limiter, key })
  }
  const IORedis = require('ioredis')
  const client = new IORedis(redisUrl, { enableAutoPipelining: true })
  if (kind === 'flexible') {
    const { RateLimiterRedis } = require('rate-limiter-flexible')
    const limiter = new RateLimiterRedis({ storeClient: client, points: LIMIT, duration: WINDOW_MS / 1000 })
    return (req, res, next) =>
      limiter.consume(key(req)).then(
        () => next(),
        () => res.status(429).send('Too Many Requests'),
      )
  }
  const { rateLimit } = require('express-rate-limit')
  const store =
    kind === 'erl-ratekeeper'
      ? new (require('../express-rate-limit.js').Store)({ client: redisUrl })
      : new (require('rate-limit-redis').RedisStore)({ sendCommand: (...args) => client.call(...args) })
  return rateLimit({ windowMs: WINDOW_MS, limit: LIMIT, keyGenerator: key, store, standardHeaders: 'draft-7', legacyHeaders: false, validate: false })
}

function startApp(kind, redisUrl) {
  return new Promise((resolve, reject) => {
    const child = fork(__filename, ['--serve', kind, redisUrl], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
    const cpuMicros = () => new Promise((answered) => {
      child.once('message', (message) => answered(message.cpuMicros))
      child.send('cpu')
    })
    child.once('message', ({ port }) => resolve({ child, url: `http://127.0.0.1:${port}/`, cpuMicros }))
    child.once('exit', (code) => reject(new Error(`the ${kind} app exited with ${code}`)))
  })
}

/** redis-server's CPU time so far (user + system), in seconds. */
async function redisCpuSeconds(server) {
  const info = await server.cli('INFO', 'cpu')
  const field = (name) => Number(info.match(new RegExp(`${name}:([\\d.]+)`))[1])
  return field('used_cpu_user') + field('used_cpu_sys')
}

/** Loads `url` for `seconds` with `connections` connections over `ids` users. */
async function load(url, { seconds, connections, ids }) {
  let n = 0
  const result = await autocannon({
    url,
    connections,
    duration: seconds,
    requests: [{ setupRequest: (request) => ({ ...request, headers: { 'x-user': `user-${n++ % ids}` } }) }],
  })
  return { rps: result.requests.average, requests: result.requests.total, p99: result.latency.p99, non2xx: result.non2xx, errors: result.errors }
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

/** Runs the HTTP scenario; returns Markdown table lines. */
async function httpBenchmark({ rounds = 3, seconds = 5, connections = 64, ids = 1000 } = {}) {
  const redis = await startRedis()
  const apps = {}
  try {
    for (const [name, kind] of Object.entries(APPS)) apps[name] = await startApp(kind, redis.url)
    const results = Object.fromEntries(Object.keys(APPS).map((name) => [name, []]))
    for (let round = 0; round < rounds; round++) {
      const names = Object.keys(APPS)
      if (round % 2) names.reverse()
      for (const name of names) {
        await redis.cli('FLUSHALL')
        const [appBefore, redisBefore] = [await apps[name].cpuMicros(), await redisCpuSeconds(redis)]
        const outcome = await load(apps[name].url, { seconds, connections, ids })
        outcome.appCpu = ((await apps[name].cpuMicros()) - appBefore) / outcome.requests
        outcome.redisCpu = ((await redisCpuSeconds(redis)) - redisBefore) * 1e6 / outcome.requests
        if (outcome.non2xx || outcome.errors) throw new Error(`${name}: ${outcome.non2xx} non-2xx answers, ${outcome.errors} errors`)
        results[name].push(outcome)
        process.stderr.write(`http round ${round + 1}: ${name} ${Math.round(outcome.rps)} req/s, p99 ${outcome.p99} ms, CPU per request ${outcome.appCpu.toFixed(1)} µs (app) ${outcome.redisCpu.toFixed(1)} µs (Redis)\n`)
      }
    }
    const lines = [
      `HTTP on loopback: one Express route, ${connections} connections, ${rounds} rounds of ${seconds} s, ${ids} users, Redis for every limiter:`,
      '',
      '| limiter | req/s | p99 | ratio to express-rate-limit + rate-limit-redis | CPU per request: app / Redis |',
      '|---|---:|---:|---:|---:|',
    ]
    for (const name of Object.keys(APPS)) {
      const ratio = median(results[name].map((r, i) => r.rps / results[BASELINE][i].rps))
      const cpu = (field) => median(results[name].map((r) => r[field])).toFixed(1)
      lines.push(`| ${name} | ${Math.round(median(results[name].map((r) => r.rps))).toLocaleString('en-US')} | ${median(results[name].map((r) => r.p99))} ms | **${ratio.toFixed(2)}x** | ${cpu('appCpu')} / ${cpu('redisCpu')} µs |`)
    }
    return lines
  } finally {
    for (const { child } of Object.values(apps)) child.kill()
    await redis.stop()
  }
}

if (require.main === module) {
  const argv = process.argv.slice(2)
  if (argv[0] === '--serve') {
    serve(argv[1], argv[2]).catch((error) => {
      console.error(error)
      process.exit(1)
    })
  } else {
    const options = {}
    for (let i = 0; i < argv.length; i += 2) options[argv[i].replace(/^--/, '')] = Number(argv[i + 1])
    httpBenchmark(options).then(
      (lines) => console.log(lines.join('\n')),
      (error) => {
        console.error(error)
        process.exit(1)
      },
    )
  }
}

module.exports = { httpBenchmark, redisCpuSeconds }
