'use strict'

// Real redis-server processes for the tests, on free loopback ports (never 6379), stopped after
// the tests and killed on exit if a test fails halfway.

const { spawn, execFile, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')

const HOST = '127.0.0.1'
const running = new Set()

process.on('exit', () => {
  for (const child of running) {
    try {
      child.kill('SIGKILL')
    } catch {}
  }
})

/** A free TCP port on the loopback interface. */
function freePort() {
  return new Promise((resolve, reject) => {
    const probe = net.createServer()
    probe.unref()
    probe.on('error', reject)
    probe.listen(0, HOST, () => {
      const { port } = probe.address()
      probe.close(() => resolve(port))
    })
  })
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** Resolves true once something on `port` answers PING with PONG. */
function ping(port) {
  return new Promise((resolve) => {
    const socket = net.connect(port, HOST)
    let reply = ''
    const done = (ok) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(1000, () => done(false))
    socket.on('error', () => done(false))
    socket.on('connect', () => socket.write('*1\r\n$4\r\nPING\r\n'))
    socket.on('data', (chunk) => {
      reply += chunk
      if (reply.includes('\r\n')) done(reply.startsWith('+PONG'))
    })
  })
}

/** Runs redis-cli against `port`; resolves its trimmed output (`--raw`: one value per line). */
function cli(port, ...args) {
  return new Promise((resolve, reject) => {
    execFile('redis-cli', ['-h', HOST, '-p', String(port), '--raw', '--no-auth-warning', ...args.map(String)], (error, stdout) => {
      if (error) reject(error)
      else resolve(stdout.trim())
    })
  })
}

/** Starts one redis-server process on `port` in `dir`; resolves once it answers PING. */
async function launch(port, dir, extraArgs) {
  const args = ['--bind', HOST, '--port', String(port), '--save', '', '--appendonly', 'no', '--dir', dir, '--daemonize', 'no', ...extraArgs]
  const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] })
  let log = ''
  child.stdout.on('data', (chunk) => (log += chunk))
  child.stderr.on('data', (chunk) => (log += chunk))
  running.add(child)
  const exited = new Promise((resolve) => child.once('exit', resolve))
  child.exited = exited.then(() => running.delete(child))
  for (let attempt = 0; attempt < 100; attempt++) {
    if (child.exitCode !== null) break
    if (await ping(port)) return child
    await sleep(100)
  }
  child.kill('SIGKILL')
  await child.exited
  throw new Error(`redis-server on port ${port} did not start:\n${log}`)
}

async function terminate(child) {
  if (!child || child.exitCode !== null || child.signalCode !== null) return
  child.kill('SIGTERM')
  const timer = setTimeout(() => child.kill('SIGKILL'), 3000)
  await child.exited
  clearTimeout(timer)
}

/**
 * Starts a redis-server on a free port.
 * @returns {Promise<{ host: string, port: number, url: string, pid: number, stop(): Promise<void>, restart(): Promise<void>, cli(...args): Promise<string> }>}
 */
async function startRedis(options = {}) {
  const port = await freePort()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ratekeeper-redis-'))
  const extraArgs = options.args || []
  let child = await launch(port, dir, extraArgs)
  const server = {
    host: HOST,
    port,
    url: `redis://${HOST}:${port}`,
    get pid() {
      return child.pid
    },
    cli: (...args) => cli(port, ...args),
    async stop() {
      await terminate(child)
    },
    /** Stops the server and starts a new one on the same port (it keeps no data). */
    async restart() {
      await terminate(child)
      fs.mkdirSync(dir, { recursive: true })
      let lastError
      for (let attempt = 0; attempt < 20; attempt++) {
        try {
          child = await launch(port, dir, extraArgs)
          return
        } catch (error) {
          lastError = error
          await sleep(200)
        }
      }
      throw lastError
    },
  }
  const stop = server.stop
  server.stop = async () => {
    await stop()
    fs.rmSync(dir, { recursive: true, force: true })
  }
  return server
}

/**
 * Starts a 6-node Redis Cluster (3 masters, 3 replicas) on free ports.
 * @returns {Promise<{ nodes: Array<{ host: string, port: number, url: string }>, urls: string[], stop(): Promise<void>, cli(port, ...args): Promise<string> }>}
 */
async function startCluster() {
  const nodes = []
  try {
    for (let i = 0; i < 6; i++) {
      nodes.push(
        await startRedis({
          args: ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '2000'],
        }),
      )
    }
    const created = spawnSync(
      'redis-cli',
      ['--cluster', 'create', ...nodes.map((n) => `${HOST}:${n.port}`), '--cluster-replicas', '1', '--cluster-yes'],
      { encoding: 'utf8', timeout: 60_000 },
    )
    if (created.status !== 0) throw new Error(`redis-cli --cluster create failed:\n${created.stdout}\n${created.stderr}`)
    for (let attempt = 0; ; attempt++) {
      const infos = await Promise.all(nodes.map((n) => n.cli('CLUSTER', 'INFO')))
      if (infos.every((info) => info.includes('cluster_state:ok') && info.includes('cluster_slots_assigned:16384'))) break
      if (attempt > 300) throw new Error(`the cluster did not become ready:\n${infos.join('\n')}`)
      await sleep(100)
    }
  } catch (error) {
    await Promise.all(nodes.map((n) => n.stop()))
    throw error
  }
  return {
    nodes: nodes.map(({ host, port, url }) => ({ host, port, url })),
    urls: nodes.map((n) => n.url),
    cli: (port, ...args) => cli(port, ...args),
    async stop() {
      await Promise.all(nodes.map((n) => n.stop()))
    },
  }
}

module.exports = { freePort, startRedis, startCluster }

/**
 * For a test file: starts a redis-server before its tests and stops it after.
 * @returns {{ server: Awaited<ReturnType<typeof startRedis>> }} filled in once the tests run
 */
function useRedisServer() {
  const { before, after } = require('node:test')
  const context = {}
  before(async () => {
    context.server = await startRedis()
  })
  after(() => context.server && context.server.stop())
  return context
}

/** Runs `test(server)` with a redis-server of its own, stopped afterwards. */
async function withRedisServer(test) {
  const server = await startRedis()
  try {
    return await test(server)
  } finally {
    await server.stop()
  }
}

module.exports.useRedisServer = useRedisServer
module.exports.withRedisServer = withRedisServer
