'use strict'

// Push-notification workers, as in the ClassDojo post that started rolling-rate-limiter: several
// worker processes drain one queue of pushes from Redis, and whichever worker sends them, a user
// gets at most --limit pushes in any --window and never two within --min-difference. A push that
// may not go yet waits (`await limiter.wait(user)`) instead of being dropped.
//
//   node examples/push-worker.js
//   node examples/push-worker.js --workers 4 --pushes 60 --window 60000 --limit 10 --min-difference 1000
//
// It puts --pushes pushes for --users users on a Redis list, forks --workers worker processes that
// drain it, prints a timeline (per push: when the limiter let it go, counted from the start, the
// worker that sent it, the user, and how long it waited), and stops once the queue is empty. At
// the end it checks the timeline: it exits 1 if a user got two pushes within --min-difference or
// more than --limit in a --window, or if a push was lost or sent twice.
//
// Where the queue and the limiter live:
//   REDIS_URL=redis://host:port  that Redis (a single node); the keys it writes are under
//                                `push-worker:<run>:` and are gone seconds after the run
//   REDIS_URL unset              a throwaway redis-server on a free loopback port (never 6379),
//                                stopped at the end; REDIS_SERVER names the binary (default:
//                                `redis-server` on the PATH)
//   no redis-server on the PATH  the workers run in one process on the in-memory store, and it
//                                says so
//
// Options (default):
//   --workers N          worker processes (3)
//   --pushes N           pushes in the queue (40)
//   --users N            users they go to, evenly (5)
//   --limit N            pushes per user per window (3)
//   --window MS          the rolling window, in milliseconds (2000; a minute is 60000)
//   --min-difference MS  the least time between two pushes to one user (300; at most --window)

const { fork, spawn } = require('node:child_process')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')
const { parseArgs } = require('node:util')
const Redis = require('ioredis')
const { RateLimiter, RedisRateLimiter } = require('..')

const HOST = '127.0.0.1'
const RESERVED_PORT = 6379
const START_TIMEOUT_MS = 10_000
const STOP_GRACE_MS = 3_000

// ---------------------------------------------------------------------------------------------
// The worker: the part to copy.

/**
 * Takes pushes off the queue until it is empty and sends each once the limiter allows it:
 * `wait` resolves when the push may go and has been counted against its user, on the store every
 * worker shares, so two workers never both send within `minDifference` to one user. A worker
 * holds one push at a time: while it waits on a user, the other workers carry on with the queue.
 * `send` stands for the push provider; here it reports to the timeline.
 */
async function work(worker, queue, limiter, send) {
  for (let push; (push = await queue.take()) !== null; ) {
    const taken = performance.now()
    await limiter.wait(push.user)
    const waited = performance.now() - taken
    await send({ push, worker, at: await chargedAt(limiter, push.user), waited })
  }
}

/**
 * When the limiter counted the push it has just allowed, in microseconds since the epoch on the
 * limiter's clock (the Redis server's): the newest entry of the user's log. The timeline uses
 * these instants, not the moment a worker got round to printing, so what it shows is what the
 * limiter decided. Another worker can log a newer entry for this user only `minDifference` later,
 * long after this read (with `--min-difference 0`, two pushes charged at once may show one instant).
 */
async function chargedAt(limiter, user) {
  const log = await limiter.entries(user)
  return Math.round(log[log.length - 1].at * 1000)
}

/** The queue on a Redis list: LPOP hands each push to exactly one worker. */
function redisQueue(redis, key) {
  return {
    async take() {
      const raw = await redis.lpop(key)
      return raw === null ? null : JSON.parse(raw)
    },
  }
}

/** The queue in memory, for workers in one process. */
function memoryQueue(pushes) {
  const left = [...pushes]
  return { take: async () => left.shift() ?? null }
}

/** A forked worker process: its settings come in the PUSH_WORKER environment variable. */
async function workerProcess({ worker, url, queueKey, namespace, limits }) {
  // Exit with the parent: a worker left behind would keep taking pushes nobody reports.
  process.on('disconnect', () => process.exit(1))
  const redis = new Redis(url, { maxRetriesPerRequest: 3 })
  const limiter = new RedisRateLimiter({ client: url, namespace, ...limits })
  const report = (message) => new Promise((resolve, reject) => process.send(message, (error) => (error ? reject(error) : resolve())))
  try {
    await work(worker, redisQueue(redis, queueKey), limiter, (sent) => report({ type: 'sent', ...sent }))
    await report({ type: 'done' })
  } finally {
    redis.disconnect()
  }
  process.removeAllListeners('disconnect')
  process.disconnect()
}

// ---------------------------------------------------------------------------------------------
// The run: options, the pushes, where they live, the timeline and the check.

const OPTIONS = {
  workers: { default: 3, min: 1, max: 64 },
  pushes: { default: 40, min: 1, max: 100_000 },
  users: { default: 5, min: 1, max: 10_000 },
  limit: { default: 3, min: 1, max: 100_000 },
  window: { default: 2000, min: 1, max: 86_400_000 },
  'min-difference': { default: 300, min: 0, max: 86_400_000 },
}

const USAGE = `usage: node examples/push-worker.js [--workers N] [--pushes N] [--users N] [--limit N] [--window MS] [--min-difference MS]
environment: REDIS_URL (use that Redis), REDIS_SERVER (the redis-server binary to start when REDIS_URL is unset)`

class UsageError extends Error {}
/** An error worth its message only. */
class Fatal extends Error {}

function readOptions(argv) {
  let values
  try {
    values = parseArgs({
      args: argv,
      options: {
        ...Object.fromEntries(Object.keys(OPTIONS).map((name) => [name, { type: 'string' }])),
        help: { type: 'boolean', short: 'h' },
      },
    }).values
  } catch (error) {
    throw new UsageError(error.message)
  }
  if (values.help) return null
  const options = {}
  for (const [name, { default: fallback, min, max }] of Object.entries(OPTIONS)) {
    const text = values[name]
    const value = text === undefined ? fallback : Number(text)
    if (!Number.isInteger(value) || value < min || value > max) {
      throw new UsageError(`--${name} must be a whole number from ${min} to ${max}, got ${text}`)
    }
    options[name] = value
  }
  // The limiter looks for the previous push within the window only.
  if (options['min-difference'] > options.window) {
    throw new UsageError(`--min-difference (${options['min-difference']}) must be at most --window (${options.window})`)
  }
  return {
    workers: options.workers,
    pushes: options.pushes,
    users: options.users,
    limits: { interval: options.window, maxInInterval: options.limit, minDifference: options['min-difference'] },
  }
}

/** `count` pushes, spread evenly over `users` users, in a shuffled but reproducible order. */
function makePushes(count, users) {
  const to = Array.from({ length: count }, (_, i) => `user-${(i % users) + 1}`)
  let seed = 8 // mulberry32
  const random = () => {
    seed = (seed + 0x6d2b79f5) | 0
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32
  }
  for (let i = to.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1))
    ;[to[i], to[j]] = [to[j], to[i]]
  }
  return to.map((user, i) => ({ id: i + 1, user }))
}

/** A free TCP port on the loopback interface, never 6379. */
async function freePort() {
  const held = []
  try {
    for (;;) {
      const probe = net.createServer()
      held.push(probe)
      await new Promise((resolve, reject) => probe.once('error', reject).listen(0, HOST, resolve))
      const { port } = probe.address()
      if (port !== RESERVED_PORT) return port
    }
  } finally {
    await Promise.all(held.map((probe) => new Promise((resolve) => probe.close(() => resolve()))))
  }
}

/**
 * Starts `binary` as a throwaway redis-server on a free loopback port (no persistence); resolves
 * `{ url, pid, stop() }`, or `null` when there is no such binary.
 */
async function startThrowawayRedis(binary) {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort()
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'push-worker-redis-'))
    const child = spawn(binary, ['--bind', HOST, '--port', String(port), '--save', '', '--appendonly', 'no', '--dir', dir], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    const exited = new Promise((resolve) => child.once('close', resolve))
    const stop = async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS)
      await exited
      clearTimeout(timer)
      fs.rmSync(dir, { recursive: true, force: true })
    }
    // If this process dies first, the server goes with it.
    const killOnExit = () => child.kill('SIGKILL')
    process.once('exit', killOnExit)
    const outcome = await new Promise((resolve) => {
      let log = ''
      const timer = setTimeout(() => resolve({ error: `did not start within ${START_TIMEOUT_MS} ms:\n${log}` }), START_TIMEOUT_MS)
      const done = (result) => {
        clearTimeout(timer)
        resolve(result)
      }
      const read = (chunk) => {
        log += chunk
        if (/Ready to accept connections/.test(log)) done({ ready: true })
      }
      child.stdout.on('data', read)
      child.stderr.on('data', read)
      child.once('error', (error) => done({ error: error.message, missing: error.code === 'ENOENT' }))
      child.once('exit', () => done({ error: `exited at start:\n${log}` }))
    })
    if (outcome.ready) {
      child.stdout.resume()
      child.stderr.resume()
      return {
        url: `redis://${HOST}:${port}`,
        pid: child.pid,
        async stop() {
          await stop()
          process.off('exit', killOnExit)
        },
      }
    }
    await stop()
    process.off('exit', killOnExit)
    if (outcome.missing) return null
    // Most likely someone took the port first: try another one.
    if (attempt >= 3) throw new Error(`${binary} ${outcome.error}`)
  }
}

/** A Redis URL with its password hidden, for printing. */
function printable(url) {
  try {
    const parsed = new URL(url)
    if (parsed.password) parsed.password = '***'
    return parsed.toString()
  } catch {
    return '(REDIS_URL)'
  }
}

/** Fills the queue on Redis, forks the workers and relays what they send to `onSent`. */
async function runOnRedis(url, pushes, config, onStart, onSent) {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 3, retryStrategy: () => null })
  let lastError = null
  redis.on('error', (error) => (lastError = error))
  try {
    await redis.connect()
  } catch (error) {
    throw new Fatal(`cannot reach Redis at ${printable(url)}: ${(lastError ?? error).message}`)
  }
  try {
    const run = `push-worker:${process.pid}.${Date.now().toString(36)}:`
    const queueKey = `${run}queue`
    await redis.rpush(queueKey, ...pushes.map((push) => JSON.stringify(push)))
    // The timeline counts from here, on the clock the limiter reads: the Redis server's.
    const [seconds, micros] = await redis.time()
    const startUs = Number(seconds) * 1e6 + Number(micros)
    const children = Array.from({ length: config.workers }, (_, i) => {
      const worker = i + 1
      const settings = { worker, url, queueKey, namespace: run, limits: config.limits }
      return fork(__filename, [], {
        env: { ...process.env, PUSH_WORKER: JSON.stringify(settings) },
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      })
    })
    onStart(startUs, children.map((child) => child.pid))
    const failures = await Promise.all(children.map((child, i) => supervise(child, i + 1, onSent)))
    await redis.del(queueKey)
    return failures.filter(Boolean)
  } finally {
    redis.disconnect()
  }
}

/** Resolves null once the worker reported `done` and exited cleanly, or what went wrong. */
function supervise(child, worker, onSent) {
  return new Promise((resolve) => {
    let done = false
    child.on('message', (message) => {
      if (message.type === 'sent') onSent(message)
      else if (message.type === 'done') done = true
    })
    child.once('error', (error) => resolve(`worker ${worker}: ${error.message}`))
    // 'close' comes after the last message.
    child.once('close', (code, signal) => {
      if (code === 0 && done) resolve(null)
      else resolve(`worker ${worker} (pid ${child.pid}) stopped early (${signal ?? `exit code ${code}`})`)
    })
  })
}

/** The same workers as promises in this process, on the in-memory store. */
async function runInMemory(pushes, config, onStart, onSent) {
  const limiter = new RateLimiter(config.limits)
  const queue = memoryQueue(pushes)
  onStart(Date.now() * 1000, [])
  const workers = Array.from({ length: config.workers }, (_, i) => work(i + 1, queue, limiter, onSent))
  const results = await Promise.allSettled(workers)
  return results.flatMap((result, i) => (result.status === 'rejected' ? [`worker ${i + 1}: ${result.reason.message}`] : []))
}

/** Microseconds as milliseconds with one decimal, rounded down (so spacings are never overstated). */
function formatMs(micros) {
  const tenths = Math.floor(micros / 100)
  return `${Math.floor(tenths / 10)}.${tenths % 10}`
}

function timelineLine(startUs, { push, worker, at, waited }) {
  return `${formatMs(at - startUs).padStart(9)} ms  worker ${worker}  ${push.user.padEnd(8)}  push ${String(push.id).padStart(3)}  waited ${Math.round(waited)} ms`
}

/**
 * What went wrong in a run: pushes lost or sent twice, two pushes to one user within
 * `minDifference`, more than `maxInInterval` to one user within `interval` (a window holds the
 * pushes after `at - interval`, up to `at`, as the limiter counts).
 */
function check(pushes, deliveries, { interval, maxInInterval, minDifference }) {
  const problems = []
  const times = new Map()
  for (const { push } of deliveries) times.set(push.id, (times.get(push.id) ?? 0) + 1)
  for (const push of pushes) {
    const count = times.get(push.id) ?? 0
    if (count !== 1) problems.push(`push ${push.id} (${push.user}) was sent ${count} times`)
  }
  const byUser = new Map()
  for (const delivery of deliveries) byUser.set(delivery.push.user, [...(byUser.get(delivery.push.user) ?? []), delivery])
  for (const [user, sent] of byUser) {
    sent.sort((a, b) => a.at - b.at)
    for (let i = 1; i < sent.length; i++) {
      const gap = sent[i].at - sent[i - 1].at
      if (gap < minDifference * 1000) {
        problems.push(`${user} got pushes ${sent[i - 1].push.id} and ${sent[i].push.id} only ${formatMs(gap)} ms apart`)
      }
    }
    for (let last = 0, first = 0; last < sent.length; last++) {
      while (sent[first].at <= sent[last].at - interval * 1000) first++
      if (last - first + 1 > maxInInterval) {
        problems.push(`${user} got ${last - first + 1} pushes within ${interval} ms, up to push ${sent[last].push.id}`)
      }
    }
  }
  return problems
}

async function main() {
  let config
  try {
    config = readOptions(process.argv.slice(2))
  } catch (error) {
    if (!(error instanceof UsageError)) throw error
    console.error(`${error.message}\n${USAGE}`)
    return 2
  }
  if (config === null) {
    console.log(USAGE)
    return 0
  }
  const { limits } = config
  const pushes = makePushes(config.pushes, config.users)

  let server = null
  let url = process.env.REDIS_URL || null
  if (url) {
    console.log(`Redis: ${printable(url)} (REDIS_URL)`)
  } else {
    server = await startThrowawayRedis(process.env.REDIS_SERVER || 'redis-server')
    if (server) {
      url = server.url
      console.log(`Redis: a throwaway redis-server (pid ${server.pid}) on ${url.slice('redis://'.length)}`)
    } else if (process.env.REDIS_SERVER) {
      console.error(`REDIS_SERVER=${process.env.REDIS_SERVER}: no such program`)
      return 1
    } else {
      console.log(
        `No redis-server on the PATH (install one, or set REDIS_URL): the ${config.workers} workers run in ONE process, on the in-memory store.`,
      )
    }
  }
  // Ctrl-C: stop the throwaway server too (the 'exit' hook kills it if this does not finish).
  const interrupt = () => (server ? server.stop() : Promise.resolve()).finally(() => process.exit(130))
  process.once('SIGINT', interrupt)
  process.once('SIGTERM', interrupt)

  const deliveries = []
  let startUs = 0
  const onStart = (start, pids) => {
    startUs = start
    const who = pids.length ? `${config.workers} worker processes (pids ${pids.join(', ')})` : `${config.workers} workers`
    console.log(
      `${pushes.length} pushes for ${config.users} users, ${who}: at most ${limits.maxInInterval} per user in any ${limits.interval} ms, at least ${limits.minDifference} ms apart.`,
    )
    console.log('     time      worker    user      push      waited')
  }
  const onSent = (delivery) => {
    deliveries.push(delivery)
    console.log(timelineLine(startUs, delivery))
  }

  let failures
  try {
    failures = url ? await runOnRedis(url, pushes, config, onStart, onSent) : await runInMemory(pushes, config, onStart, onSent)
  } finally {
    if (server) {
      await server.stop()
      console.log(`stopped the throwaway redis-server (pid ${server.pid})`)
    }
  }

  const problems = [...failures, ...check(pushes, deliveries, limits)]
  const lastAt = Math.max(startUs, ...deliveries.map((d) => d.at))
  if (problems.length > 0) {
    for (const problem of problems) console.log(`FAILED: ${problem}`)
    return 1
  }
  console.log(
    `OK: ${pushes.length} pushes sent once each in ${formatMs(lastAt - startUs)} ms; no user got two within ${limits.minDifference} ms, nor more than ${limits.maxInInterval} in any ${limits.interval} ms.`,
  )
  return 0
}

if (process.env.PUSH_WORKER) {
  workerProcess(JSON.parse(process.env.PUSH_WORKER)).catch((error) => {
    console.error(`worker: ${error.stack}`)
    process.exit(1)
  })
} else {
  main().then(
    (code) => (process.exitCode = code),
    (error) => {
      console.error(error instanceof Fatal ? error.message : error.stack)
      process.exitCode = 1
    },
  )
}
