'use strict'

// The HTTP scenario of `npm run bench`: one route per framework, limited by the framework's
// rate-limit plugin with its own Redis store and with ratekeeper's on the same Redis, driven by
// autocannon on loopback, bounded in time. One table per framework: Express first (four
// limiters), then Fastify 5, Hono on @hono/node-server, Koa 3 and NestJS 12 (Express platform).
//
//   node benchmark/http.js [--rounds 3] [--seconds 5] [--connections 64] [--ids 1000] [--frameworks express,fastify,hono,koa,nestjs]
//
// Each app runs in a child process (so that the load generator, in this process, does not share
// an event loop with it), keyed by an `x-user` header drawn from `--ids` users, with a limit no
// one reaches (the limiter's work is measured, not 429s), its route answering 'ok', warmed up by a
// second of untimed load. Redis is
// emptied (FLUSHALL) before every run. Rounds alternate the order; each table gives each app's
// median requests per second and p99 latency, the median per-round ratio against the table's
// baseline (the framework's plugin on its own Redis store), and the CPU time each request cost
// the app's process (all its threads) and Redis: on a machine where the load generator, the app
// and Redis share the cores, the framework alone sets the pace, and the CPU per request shows
// what the limiter itself costs.

const { fork } = require('node:child_process')
const autocannon = require('autocannon')

const { startRedis } = require('../__test__/helpers/redis-server.js')
const { version } = require('./results.js')

const WINDOW_MS = 60_000
/** The untimed load each app gets before its table's rounds. */
const WARM_UP_SECONDS = 1
const LIMIT = 1e9

/**
 * The tables, by framework: `apps` maps each row's label to the variant its app builder serves,
 * `baseline` is the row the ratios are to; `heading` names the route in the table's heading line,
 * `stores` where the limiters count (Redis for every limiter unless it says otherwise).
 */
const TABLES = {
  express: {
    heading: () => 'one Express route',
    apps: {
      // The ceiling: what the route serves with no limiter at all.
      'no limiter (Express alone)': 'none',
      'ratekeeper rateLimit (FixedWindow)': 'ratekeeper',
      'express-rate-limit + ratekeeper/express-rate-limit': 'erl-ratekeeper',
      'express-rate-limit + rate-limit-redis (ioredis)': 'erl-rate-limit-redis',
      'rate-limiter-flexible (RateLimiterRedis, ioredis)': 'flexible',
    },
    baseline: 'express-rate-limit + rate-limit-redis (ioredis)',
  },
  fastify: {
    heading: () => `one Fastify ${version('fastify')} route, @fastify/rate-limit ${version('@fastify/rate-limit')}`,
    apps: {
      'no limiter (Fastify alone)': 'none',
      '@fastify/rate-limit + its RedisStore (ioredis)': 'plugin-redis',
      '@fastify/rate-limit + ratekeeper/fastify': 'plugin-ratekeeper',
    },
    baseline: '@fastify/rate-limit + its RedisStore (ioredis)',
  },
  hono: {
    heading: () => `one Hono ${version('hono')} route on @hono/node-server ${version('@hono/node-server')}, hono-rate-limiter ${version('hono-rate-limiter')}`,
    apps: {
      'no limiter (Hono alone)': 'none',
      'hono-rate-limiter + its RedisStore (ioredis)': 'plugin-redis',
      'hono-rate-limiter + ratekeeper/hono': 'plugin-ratekeeper',
    },
    baseline: 'hono-rate-limiter + its RedisStore (ioredis)',
  },
  koa: {
    heading: () => `one Koa ${version('koa')} route, koa-ratelimit ${version('koa-ratelimit')}`,
    apps: {
      'no limiter (Koa alone)': 'none',
      'koa-ratelimit (redis driver, ioredis)': 'plugin-redis',
      'ratekeeper/koa rateLimit (FixedWindow)': 'ratekeeper',
    },
    baseline: 'koa-ratelimit (redis driver, ioredis)',
  },
  nestjs: {
    heading: () => `one NestJS ${version('@nestjs/core')} route (Express platform), @nestjs/throttler ${version('@nestjs/throttler')}`,
    stores:
      'each storage on Redis or in memory as named; the baseline is the official storage, in memory: the Redis storage Nest users install ' +
      '(@nest-lab/throttler-storage-redis 1.2) declares peers up to Nest 11 and does not install beside Nest 12',
    apps: {
      'no limiter (Nest alone)': 'none',
      'ThrottlerGuard + official storage (in memory)': 'official-memory',
      'ThrottlerGuard + RatekeeperThrottlerStorage (Redis)': 'ratekeeper-redis',
      'ThrottlerGuard + RatekeeperThrottlerStorage (in memory)': 'ratekeeper-memory',
    },
    baseline: 'ThrottlerGuard + official storage (in memory)',
  },
}

/** hono-rate-limiter's RedisStore takes @upstash/redis's shape of client: these four methods, here on ioredis. */
function upstashShaped(ioredis) {
  return {
    scriptLoad: (script) => ioredis.script('LOAD', script),
    evalsha: (sha, keys, args) => ioredis.evalsha(sha, keys.length, ...keys, ...args),
    decr: (key) => ioredis.decr(key),
    del: (key) => ioredis.del(key),
  }
}

const newIORedis = (redisUrl, options) => new (require('ioredis'))(redisUrl, options)
const fixedWindow = (redisUrl) => new (require('..').FixedWindow)({ client: redisUrl, limits: [{ duration: WINDOW_MS, limit: LIMIT }] })

/**
 * The app builders, by framework: each serves GET / answering 'ok', limited as `variant` says,
 * on a free port of 127.0.0.1, and resolves that port.
 */
const SERVERS = {
  async express(variant, redisUrl) {
    const app = require('express')()
    app.use(await expressMiddleware(variant, redisUrl, (req) => req.get('x-user') ?? 'anonymous'))
    app.get('/', (req, res) => res.send('ok'))
    return new Promise((resolve) => {
      const server = app.listen(0, '127.0.0.1', () => resolve(server.address().port))
    })
  },

  async fastify(variant, redisUrl) {
    const app = require('fastify')()
    if (variant !== 'none') {
      const { ratekeeperStore } = require('../fastify.js')
      await app.register(require('@fastify/rate-limit'), {
        max: LIMIT,
        timeWindow: WINDOW_MS,
        keyGenerator: (req) => req.headers['x-user'] ?? 'anonymous',
        // The plugin's RedisStore, as its README configures it; or ours.
        ...(variant === 'plugin-redis' ? { redis: newIORedis(redisUrl) } : { store: ratekeeperStore({ client: redisUrl }) }),
      })
    }
    app.get('/', async () => 'ok')
    await app.listen({ port: 0, host: '127.0.0.1' })
    return app.server.address().port
  },

  async hono(variant, redisUrl) {
    const { Hono } = require('hono')
    const { serve } = require('@hono/node-server')
    const app = new Hono()
    if (variant !== 'none') {
      const { rateLimiter, RedisStore } = require('hono-rate-limiter')
      const store = variant === 'plugin-redis' ? new RedisStore({ client: upstashShaped(newIORedis(redisUrl)) }) : new (require('../hono.js').Store)({ client: redisUrl })
      app.use('/', rateLimiter({ windowMs: WINDOW_MS, limit: LIMIT, keyGenerator: (c) => c.req.header('x-user') ?? 'anonymous', store }))
    }
    app.get('/', (c) => c.text('ok'))
    return new Promise((resolve) => serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) => resolve(info.port)))
  },

  async koa(variant, redisUrl) {
    const Koa = require('koa')
    const app = new Koa()
    const key = (ctx) => ctx.get('x-user') || 'anonymous'
    if (variant === 'plugin-redis') app.use(require('koa-ratelimit')({ driver: 'redis', db: newIORedis(redisUrl), duration: WINDOW_MS, max: LIMIT, id: key }))
    if (variant === 'ratekeeper') app.use(require('../koa.js').rateLimit({ limiter: fixedWindow(redisUrl), key }))
    app.use((ctx) => {
      ctx.body = 'ok'
    })
    return new Promise((resolve) => {
      const server = app.listen(0, '127.0.0.1', () => resolve(server.address().port))
    })
  },

  async nestjs(variant, redisUrl) {
    require('reflect-metadata')
    const { Controller, Get, Module } = require('@nestjs/common')
    const { NestFactory, APP_GUARD } = require('@nestjs/core')
    class AppController {
      hello() {
        return 'ok'
      }
    }
    Reflect.decorate([Get()], AppController.prototype, 'hello', Object.getOwnPropertyDescriptor(AppController.prototype, 'hello'))
    Controller()(AppController)
    class AppModule {}
    const metadata = { controllers: [AppController] }
    if (variant !== 'none') {
      const { ThrottlerModule, ThrottlerGuard } = require('@nestjs/throttler')
      const { RatekeeperThrottlerStorage } = require('../nestjs.js')
      const storage = { 'ratekeeper-redis': () => new RatekeeperThrottlerStorage({ client: redisUrl }), 'ratekeeper-memory': () => new RatekeeperThrottlerStorage() }[variant]?.()
      const getTracker = (req) => req.headers['x-user'] ?? 'anonymous'
      metadata.imports = [ThrottlerModule.forRoot({ throttlers: [{ ttl: WINDOW_MS, limit: LIMIT }], getTracker, ...(storage && { storage }) })]
      metadata.providers = [{ provide: APP_GUARD, useClass: ThrottlerGuard }]
    }
    Module(metadata)(AppModule)
    const app = await NestFactory.create(AppModule, { logger: false })
    await app.listen(0, '127.0.0.1')
    return app.getHttpServer().address().port
  },
}

/** The Express table's middleware for `variant`. */
async function expressMiddleware(variant, redisUrl, key) {
  if (variant === 'none') return (req, res, next) => next()
  if (variant === 'ratekeeper') return require('..').rateLimit({ limiter: fixedWindow(redisUrl), key })
  const client = newIORedis(redisUrl, { enableAutoPipelining: true })
  if (variant === 'flexible') {
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
    variant === 'erl-ratekeeper'
      ? new (require('../express-rate-limit.js').Store)({ client: redisUrl })
      : new (require('rate-limit-redis').RedisStore)({ sendCommand: (...args) => client.call(...args) })
  return rateLimit({ windowMs: WINDOW_MS, limit: LIMIT, keyGenerator: key, store, standardHeaders: 'draft-7', legacyHeaders: false, validate: false })
}

/** In a child process: serve `framework`'s route limited as `variant` says; report the port. */
async function serve(framework, variant, redisUrl) {
  const port = await SERVERS[framework](variant, redisUrl)
  // The process's CPU time so far (every thread: a native client's too), in microseconds.
  process.on('message', () => {
    const { user, system } = process.cpuUsage()
    process.send({ cpuMicros: user + system })
  })
  process.on('disconnect', () => process.exit(0))
  process.send({ port })
}

function startApp(framework, variant, redisUrl) {
  return new Promise((resolve, reject) => {
    const child = fork(__filename, ['--serve', framework, variant, redisUrl], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
    const cpuMicros = () => new Promise((answered) => {
      child.once('message', (message) => answered(message.cpuMicros))
      child.send('cpu')
    })
    const exited = new Promise((resolveExit) => child.once('exit', resolveExit))
    const stop = () => {
      if (child.exitCode === null && child.signalCode === null) child.kill()
      return exited
    }
    child.once('message', ({ port }) => resolve({ url: `http://127.0.0.1:${port}/`, cpuMicros, stop }))
    child.once('exit', (code) => reject(new Error(`the ${framework} ${variant} app exited with ${code}`)))
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

/** Measures `framework`'s table on `redis`; returns its Markdown lines. */
async function frameworkTable(framework, redis, { rounds, seconds, connections, ids }) {
  const { heading, stores = 'Redis for every limiter', apps: labels, baseline } = TABLES[framework]
  const names = Object.keys(labels)
  const apps = {}
  try {
    for (const name of names) apps[name] = await startApp(framework, labels[name], redis.url)
    // An untimed second of load for each app first, so that no round times code still cold.
    for (const name of names) await load(apps[name].url, { seconds: WARM_UP_SECONDS, connections, ids })
    const results = Object.fromEntries(names.map((name) => [name, []]))
    for (let round = 0; round < rounds; round++) {
      for (const name of round % 2 ? [...names].reverse() : names) {
        await redis.cli('FLUSHALL')
        const [appBefore, redisBefore] = [await apps[name].cpuMicros(), await redisCpuSeconds(redis)]
        const outcome = await load(apps[name].url, { seconds, connections, ids })
        outcome.appCpu = ((await apps[name].cpuMicros()) - appBefore) / outcome.requests
        outcome.redisCpu = ((await redisCpuSeconds(redis)) - redisBefore) * 1e6 / outcome.requests
        if (outcome.non2xx || outcome.errors) throw new Error(`${name}: ${outcome.non2xx} non-2xx answers, ${outcome.errors} errors`)
        results[name].push(outcome)
        process.stderr.write(`http ${framework} round ${round + 1}: ${name} ${Math.round(outcome.rps)} req/s, p99 ${outcome.p99} ms, CPU per request ${outcome.appCpu.toFixed(1)} µs (app) ${outcome.redisCpu.toFixed(1)} µs (Redis)\n`)
      }
    }
    const lines = [
      `HTTP on loopback: ${heading()}, ${connections} connections, ${rounds} rounds of ${seconds} s, ${ids} users, ${stores}:`,
      '',
      `| limiter | req/s | p99 | ratio to ${baseline} | CPU per request: app / Redis |`,
      '|---|---:|---:|---:|---:|',
    ]
    for (const name of names) {
      const ratio = median(results[name].map((r, i) => r.rps / results[baseline][i].rps))
      const cpu = (field) => median(results[name].map((r) => r[field])).toFixed(1)
      lines.push(`| ${name} | ${Math.round(median(results[name].map((r) => r.rps))).toLocaleString('en-US')} | ${median(results[name].map((r) => r.p99))} ms | **${ratio.toFixed(2)}x** | ${cpu('appCpu')} / ${cpu('redisCpu')} µs |`)
    }
    return lines
  } finally {
    await Promise.all(Object.values(apps).map((app) => app.stop()))
  }
}

/**
 * Runs the HTTP scenario, one table per framework of `frameworks` (a list or a comma-separated
 * string; all of them by default) on one Redis; returns the tables' Markdown lines.
 */
async function httpBenchmark({ rounds = 3, seconds = 5, connections = 64, ids = 1000, frameworks = Object.keys(TABLES) } = {}) {
  const chosen = typeof frameworks === 'string' ? frameworks.split(',').map((name) => name.trim()).filter(Boolean) : frameworks
  const unknown = chosen.filter((name) => !Object.hasOwn(TABLES, name))
  if (unknown.length) throw new Error(`unknown framework ${unknown.join(', ')}: choose among ${Object.keys(TABLES).join(', ')}`)
  const redis = await startRedis()
  try {
    const lines = []
    for (const framework of chosen) {
      if (lines.length) lines.push('')
      lines.push(...(await frameworkTable(framework, redis, { rounds, seconds, connections, ids })))
    }
    return lines
  } finally {
    await redis.stop()
  }
}

if (require.main === module) {
  const argv = process.argv.slice(2)
  if (argv[0] === '--serve') {
    serve(argv[1], argv[2], argv[3]).catch((error) => {
      console.error(error)
      process.exit(1)
    })
  } else {
    const options = {}
    for (let i = 0; i < argv.length; i += 2) {
      const name = argv[i].replace(/^--/, '')
      options[name] = name === 'frameworks' ? argv[i + 1] : Number(argv[i + 1])
    }
    httpBenchmark(options).then(
      (lines) => console.log(lines.join('\n')),
      (error) => {
        console.error(error)
        process.exit(1)
      },
    )
  }
}

module.exports = { httpBenchmark, redisCpuSeconds, TABLES }
