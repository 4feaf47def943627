'use strict'

// examples/push-worker.js, run as its users run it (`node examples/push-worker.js`) in its three
// set-ups: a throwaway redis-server of its own, the Redis that REDIS_URL names, and the in-memory
// fallback when no redis-server is on the PATH. Each run must exit 0 having sent every push once,
// and its printed timeline must show what the limits promise, checked here rather than trusting
// the example's own verdict. The three runs go concurrently: each lasts a few seconds, asleep.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')

const { startRedis } = require('./helpers/redis-server.js')

const EXAMPLE = path.join(__dirname, '..', 'examples', 'push-worker.js')
const RUN_TIMEOUT_MS = 60_000
/** The example's defaults. */
const DEFAULTS = { workers: 3, pushes: 40, users: 5, limit: 3, window: 2000, minDifference: 300 }

/** The environment without anything that would steer the example. */
function cleanEnv(extra) {
  const env = { ...process.env, ...extra }
  for (const name of ['REDIS_URL', 'REDIS_SERVER', 'PUSH_WORKER']) if (!(name in (extra ?? {}))) delete env[name]
  return env
}

/** Runs the example; resolves its exit code, signal and output. */
function runExample(args, env) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [EXAMPLE, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk) => (stdout += chunk))
    child.stderr.on('data', (chunk) => (stderr += chunk))
    const timer = setTimeout(() => child.kill('SIGKILL'), RUN_TIMEOUT_MS)
    child.once('error', reject)
    child.once('close', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stdout, stderr, pid: child.pid })
    })
  })
}

const TIMELINE_LINE = /^ *(\d+)\.(\d) ms {2}worker (\d+) {2}(user-\d+) +push +(\d+) {2}waited (\d+) ms$/

/**
 * The timeline and what the run says about itself. Times are kept in tenths of a millisecond,
 * as printed (rounded down, so a spacing read from them is never larger than the real one).
 */
function parseRun(stdout) {
  const lines = stdout.split('\n')
  const sent = []
  for (const line of lines) {
    const match = TIMELINE_LINE.exec(line)
    if (match) {
      sent.push({ tenths: Number(match[1]) * 10 + Number(match[2]), worker: Number(match[3]), user: match[4], push: Number(match[5]) })
    }
  }
  const throwaway = /^Redis: a throwaway redis-server \(pid (\d+)\) on 127\.0\.0\.1:(\d+)$/m.exec(stdout)
  const pids = /worker processes \(pids ([\d, ]+)\)/.exec(stdout)
  return {
    sent,
    throwaway: throwaway && { pid: Number(throwaway[1]), port: Number(throwaway[2]) },
    workerPids: pids ? pids[1].split(', ').map(Number) : [],
  }
}

/**
 * Everything wrong with a timeline: pushes missing or sent twice, a user's pushes split unevenly,
 * two pushes to one user within `minDifference`, more than `limit` to one user after
 * `at - window` up to `at` (the limiter's window).
 */
function timelineProblems(sent, { pushes, users, limit, window, minDifference }) {
  const problems = []
  const ids = sent.map((s) => s.push).sort((a, b) => a - b)
  const expected = Array.from({ length: pushes }, (_, i) => i + 1)
  if (JSON.stringify(ids) !== JSON.stringify(expected)) problems.push(`pushes sent: ${ids.join(',')}`)
  const byUser = new Map()
  for (const s of sent) byUser.set(s.user, [...(byUser.get(s.user) ?? []), s])
  if (byUser.size !== Math.min(users, pushes)) problems.push(`${byUser.size} users got pushes, not ${users}`)
  for (const [user, list] of byUser) {
    if (Math.abs(list.length - pushes / users) >= 1) problems.push(`${user} got ${list.length} pushes`)
    list.sort((a, b) => a.tenths - b.tenths)
    for (let i = 1; i < list.length; i++) {
      if (list[i].tenths - list[i - 1].tenths < minDifference * 10) {
        problems.push(`${user}: pushes ${list[i - 1].push} and ${list[i].push} ${(list[i].tenths - list[i - 1].tenths) / 10} ms apart`)
      }
    }
    for (const s of list) {
      const inWindow = list.filter((other) => other.tenths > s.tenths - window * 10 && other.tenths <= s.tenths)
      if (inWindow.length > limit) problems.push(`${user}: ${inWindow.length} pushes within ${window} ms up to push ${s.push}`)
    }
  }
  return problems
}

/** Some user got two consecutive pushes from different workers: the limit held across workers. */
function crossWorker(sent) {
  const byUser = new Map()
  for (const s of [...sent].sort((a, b) => a.tenths - b.tenths)) byUser.set(s.user, [...(byUser.get(s.user) ?? []), s.worker])
  return [...byUser.values()].some((workers) => workers.some((worker, i) => i > 0 && worker !== workers[i - 1]))
}

function assertGoodRun(run, settings) {
  assert.equal(run.code, 0, `exit code ${run.code} (${run.signal})\n${run.stdout}\n${run.stderr}`)
  const parsed = parseRun(run.stdout)
  assert.equal(parsed.sent.length, settings.pushes, run.stdout)
  assert.deepEqual(timelineProblems(parsed.sent, settings), [], run.stdout)
  assert.ok(crossWorker(parsed.sent), `no user got consecutive pushes from two workers:\n${run.stdout}`)
  assert.match(run.stdout, new RegExp(`^OK: ${settings.pushes} pushes sent once each`, 'm'))
  return parsed
}

function assertWorkerProcesses(parsed, run, workers) {
  assert.equal(parsed.workerPids.length, workers, run.stdout)
  assert.equal(new Set([...parsed.workerPids, run.pid]).size, workers + 1, 'each worker is a process of its own')
  const used = new Set(parsed.sent.map((s) => s.worker))
  assert.ok(used.size >= 2, `only worker(s) ${[...used]} sent pushes`)
}

/** Whether a process with this pid exists (a zombie would count: the example must reap it). */
function alive(pid) {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    if (error.code === 'ESRCH') return false
    throw error
  }
}

function portAnswers(port) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1')
    socket.once('connect', () => {
      socket.destroy()
      resolve(true)
    })
    socket.once('error', () => resolve(false))
  })
}

describe('timelineProblems (the check the runs below rely on)', () => {
  const settings = { pushes: 4, users: 2, limit: 2, window: 1000, minDifference: 300 }
  const at = (ms, user, push, worker = 1) => ({ tenths: Math.round(ms * 10), user, push, worker })

  it('passes pushes spaced by exactly minDifference, and a window boundary as the limiter counts it', () => {
    const sent = [at(0, 'user-1', 1), at(300, 'user-1', 2), at(1000, 'user-1', 3), at(50, 'user-2', 4), at(350, 'user-2', 5), at(1050, 'user-2', 6)]
    assert.deepEqual(timelineProblems(sent, { ...settings, pushes: 6 }), [])
  })

  it('catches a gap under minDifference, a full window, and a push lost or sent twice', () => {
    assert.match(timelineProblems([at(0, 'user-1', 1), at(299.9, 'user-1', 2), at(0, 'user-2', 3), at(900, 'user-2', 4)], settings).join('\n'), /299\.9 ms apart/)
    assert.match(
      timelineProblems([at(0, 'user-1', 1), at(300, 'user-1', 2), at(999.9, 'user-1', 3), at(0, 'user-2', 4)], { ...settings, users: 2 }).join('\n'),
      /3 pushes within 1000 ms/,
    )
    assert.match(timelineProblems([at(0, 'user-1', 1), at(400, 'user-1', 1), at(0, 'user-2', 3), at(400, 'user-2', 4)], settings).join('\n'), /pushes sent: 1,1,3,4/)
  })
})

describe('examples/push-worker.js', { concurrency: true, timeout: 90_000 }, () => {
  it('with REDIS_URL unset, starts a throwaway redis-server, forks the workers, and leaves no server behind', async () => {
    const run = await runExample([], cleanEnv())
    const parsed = assertGoodRun(run, DEFAULTS)
    assertWorkerProcesses(parsed, run, DEFAULTS.workers)
    assert.ok(parsed.throwaway, run.stdout)
    assert.notEqual(parsed.throwaway.port, 6379)
    assert.match(run.stdout, new RegExp(`^stopped the throwaway redis-server \\(pid ${parsed.throwaway.pid}\\)$`, 'm'))
    assert.equal(alive(parsed.throwaway.pid), false, 'the throwaway redis-server still runs')
    assert.equal(await portAnswers(parsed.throwaway.port), false, 'something still answers on its port')
    for (const pid of parsed.workerPids) assert.equal(alive(pid), false, `worker pid ${pid} still runs`)
  })

  it('with REDIS_URL, uses that Redis for the queue and the limits, with the options given as flags', async () => {
    const server = await startRedis()
    try {
      const settings = { workers: 4, pushes: 24, users: 4, limit: 2, window: 1500, minDifference: 400 }
      const args = ['--workers', '4', '--pushes', '24', '--users', '4', '--limit', '2', '--window', '1500', '--min-difference', '400']
      const run = await runExample(args, cleanEnv({ REDIS_URL: server.url }))
      const parsed = assertGoodRun(run, settings)
      assertWorkerProcesses(parsed, run, settings.workers)
      assert.equal(parsed.throwaway, null)
      assert.match(run.stdout, new RegExp(`^Redis: ${server.url}/? \\(REDIS_URL\\)$`, 'm'))
      // Every push was taken off this server's list, plus one empty LPOP per worker at the end.
      assert.match(await server.cli('INFO', 'commandstats'), new RegExp(`^cmdstat_lpop:calls=${settings.pushes + settings.workers},`, 'm'))
      // Nothing is left for good: the queue is gone and the limiter's keys expire.
      for (const key of (await server.cli('KEYS', '*')).split('\n').filter(Boolean)) {
        assert.match(key, /^push-worker:\d+\.[0-9a-z]+:user-\d+$/)
        const ttl = Number(await server.cli('PTTL', key))
        assert.ok(ttl > 0 || ttl === -2, `${key} has PTTL ${ttl}`)
      }
    } finally {
      await server.stop()
    }
  })

  it('without a redis-server on the PATH, runs the workers in one process on the in-memory store, and says so', async () => {
    const emptyDir = fs.mkdtempSync(path.join(os.tmpdir(), 'push-worker-path-'))
    try {
      const run = await runExample([], cleanEnv({ PATH: emptyDir }))
      const parsed = assertGoodRun(run, DEFAULTS)
      assert.match(run.stdout, /^No redis-server on the PATH .*in ONE process, on the in-memory store\.$/m)
      assert.equal(parsed.throwaway, null)
      assert.deepEqual(parsed.workerPids, [])
      assert.equal(new Set(parsed.sent.map((s) => s.worker)).size >= 2, true, run.stdout)
    } finally {
      fs.rmSync(emptyDir, { recursive: true, force: true })
    }
  })

  it('refuses bad options with exit code 2 and the usage, before starting anything', async () => {
    for (const args of [['--limit', '0'], ['--window', '100', '--min-difference', '200'], ['--nope']]) {
      const run = await runExample(args, cleanEnv({ PATH: '/nonexistent' }))
      assert.equal(run.code, 2, `${args}: ${run.stdout}${run.stderr}`)
      assert.match(run.stderr, /^usage: node examples\/push-worker\.js/m)
      assert.equal(run.stdout, '')
    }
  })
})
