'use strict'

// ratekeeper/flexible's RateLimiterCluster, RateLimiterClusterMaster and
// RateLimiterClusterMasterPM2 with real processes: a primary (helpers/cluster-primary.js) starts
// 2 workers (cluster.fork(), or child processes under a fake PM2 bus that relays as PM2's daemon
// does) that consume on shared keys and report every answer. The same scenarios run on
// rate-limiter-flexible's own classes and give the same answers, and either side (master or
// worker) may be rate-limiter-flexible's: the messages are its own.

const { describe, it, after } = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const path = require('node:path')

const flexible = require('../flexible.js')

const ROOT = path.join(__dirname, '..')
const PRIMARY = path.join(__dirname, 'helpers', 'cluster-primary.js')

/** Every process a test started and has not seen exit: killed at the end whatever happens. */
const running = new Set()
after(() => {
  for (const child of running) child.kill('SIGKILL')
})

/** Runs `node args...` in the package's folder: resolves its exit code, stdout and stderr (killed after 30 s). */
function run(args, { ipc = false } = {}) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe', ...(ipc ? ['ipc'] : [])] })
    running.add(child)
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk) => (stdout += chunk))
    child.stderr.on('data', (chunk) => (stderr += chunk))
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000)
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      running.delete(child)
      resolve({ code: code ?? signal, stdout, stderr })
    })
  })
}

/** Runs a scenario of helpers/cluster-worker.js: its phases' results, `[{ [workerIndex]: results }]`. */
async function scenario(name, { transport = 'cluster', master = 'ours', workers = ['ours', 'ours'], masterAtPhase } = {}) {
  const config = { scenario: name, transport, master, workers, masterAtPhase }
  const { code, stdout, stderr } = await run([PRIMARY, JSON.stringify(config)])
  assert.equal(code, 0, `${JSON.stringify(config)}: ${stderr}`)
  return JSON.parse(stdout).phases
}

/** Runs `code` with `node -e` (with an IPC channel to this process when `ipc`): what it printed, parsed. */
async function evaluate(code, options) {
  const result = await run(['-e', code], options)
  assert.equal(result.code, 0, result.stderr)
  return JSON.parse(result.stdout)
}

const answerOf = (outcome) => outcome.resolved ?? outcome.rejected

/** An outcome without its `msBeforeNext`, and that apart. */
function split(outcome) {
  const answer = answerOf(outcome)
  if (answer === null || typeof answer !== 'object') return { rest: outcome, ms: undefined }
  const { msBeforeNext, ...rest } = answer
  return { rest: { ...outcome, [outcome.resolved !== undefined ? 'resolved' : 'rejected']: rest }, ms: msBeforeNext }
}

/**
 * Asserts two runs' phases answered alike. `msBeforeNext` is the time left when the master
 * answered, and the two runs' calls come a few ms apart, more on a busy machine: within 500 ms
 * (the durations in play differ by 10 s at least, and -1 is compared exactly).
 */
function assertSameAnswers(actual, expected, context) {
  assert.equal(actual.length, expected.length, context)
  for (const [phase, byWorker] of expected.entries()) {
    for (const [worker, results] of Object.entries(byWorker)) {
      assert.equal(actual[phase][worker].length, results.length, context)
      for (const [n, result] of results.entries()) {
        const at = `${context}, phase ${phase}, worker ${worker}, ${JSON.stringify(result.step)}`
        const [ours, theirs] = [split(actual[phase][worker][n]), split(result)]
        assert.deepEqual(ours.rest, theirs.rest, at)
        if (theirs.ms === undefined || theirs.ms < 0) assert.equal(ours.ms, theirs.ms, at)
        else assert.ok(Math.abs(ours.ms - theirs.ms) <= 500, `${at}: msBeforeNext ${ours.ms} against ${theirs.ms}`)
      }
    }
  }
}

/** The `shared` scenario's checks: per key, 20 consumes from 2 workers, exactly 5 allowed, every count once. */
function assertShared(phases, context) {
  const outcomes = [...phases[0][0], ...phases[0][1]]
  assert.equal(outcomes.length, 40, context)
  for (const key of ['a', 'b']) {
    const ofKey = outcomes.filter((outcome) => outcome.key === key)
    const allowed = ofKey.filter((outcome) => outcome.resolved)
    assert.equal(allowed.length, 5, `${context}, key ${key}`)
    // The master counts one call at a time: each of 1..20 consumed points exactly once.
    const counts = ofKey.map((outcome) => answerOf(outcome).consumedPoints).sort((a, b) => a - b)
    assert.deepEqual(counts, Array.from({ length: 20 }, (_, i) => i + 1), `${context}, key ${key}`)
    for (const outcome of ofKey) {
      const res = answerOf(outcome)
      assert.equal(outcome.resolved !== undefined, res.consumedPoints <= 5, `${context}: ${JSON.stringify(outcome)}`)
      assert.equal(res.remainingPoints, Math.max(5 - res.consumedPoints, 0), `${context}: ${JSON.stringify(outcome)}`)
      assert.equal(res.isFirstInDuration, res.consumedPoints === 1, `${context}: ${JSON.stringify(outcome)}`)
      assert.ok(res.msBeforeNext > 50_000 && res.msBeforeNext <= 60_000, `${context}: ${JSON.stringify(outcome)}`)
    }
  }
}

const TIMEOUT = { name: 'Error', message: 'RateLimiterCluster timeout: no answer from master in time', code: 'ERR_CLUSTER_TIMEOUT' }

describe('RateLimiterCluster in forked workers, answered by RateLimiterClusterMaster', () => {
  it('shares the counts of 2 workers: points 5, 10 consumes each on two keys, exactly 5 allowed per key', async () => {
    assertShared(await scenario('shared'), 'ours')
  })

  it('answers every call: consume, block on the first one over, penalty, reward, get, block, delete, as the other worker then sees them', async () => {
    const [first, second] = await scenario('sequence')
    const answers = first[0].map((outcome) => split(outcome))
    const res = (remainingPoints, consumedPoints, isFirstInDuration) => ({ remainingPoints, consumedPoints, isFirstInDuration })
    assert.deepEqual(
      answers.map(({ rest }) => rest),
      [
        { step: ['get', 'nobody'], resolved: null },
        { step: ['consume', 'k'], resolved: res(2, 1, true) },
        { step: ['consume', 'k', 2], resolved: res(0, 3, false) },
        // Over the 3 points: blocked for the blockDuration of 120 s.
        { step: ['consume', 'k'], rejected: res(0, 4, true) },
        { step: ['get', 'k'], resolved: res(0, 4, false) },
        { step: ['penalty', 'p', 2], resolved: res(1, 2, true) },
        { step: ['reward', 'p'], resolved: res(2, 1, false) },
        { step: ['get', 'p'], resolved: res(2, 1, false) },
        { step: ['block', 'b', 30], resolved: res(0, 4, false) },
        { step: ['consume', 'c', 1, { customDuration: 10 }], resolved: res(2, 1, true) },
        { step: ['delete', 'k'], resolved: true },
        { step: ['delete', 'k'], resolved: false },
        { step: ['get', 'k'], resolved: null },
        { step: ['consume', 'k'], resolved: res(2, 1, true) },
        { step: ['block', 'forever', 0], resolved: res(0, 4, false) },
        { step: ['get', 'forever'], resolved: res(0, 4, false) },
      ],
    )
    // The time left: the duration, the block's, customDuration's, -1 for a block for good.
    const ms = answers.map((answer) => answer.ms)
    const near = (actual, expected) => actual <= expected && actual > expected - 1000
    for (const [i, expected] of [[1, 60_000], [3, 120_000], [4, 120_000], [5, 60_000], [8, 30_000], [9, 10_000], [13, 60_000]]) {
      assert.ok(near(ms[i], expected), `step ${i}: ${ms[i]}`)
    }
    assert.deepEqual([ms[14], ms[15]], [-1, -1])
    assert.deepEqual(
      second[1].map((outcome) => split(outcome).rest),
      [
        { step: ['get', 'p'], resolved: res(2, 1, false) },
        { step: ['get', 'b'], resolved: res(0, 4, false) },
        { step: ['get', 'c'], resolved: res(2, 1, false) },
        { step: ['consume', 'k'], resolved: res(1, 2, false) },
        { step: ['consume', 'b'], rejected: res(0, 5, false) },
        { step: ['get', 'nobody'], resolved: null },
      ],
    )
  })

  it("rejects a call the master does not answer after timeoutMs, with rate-limiter-flexible's message and a code", async () => {
    const [[ours], [theirs]] = await Promise.all([
      scenario('timeout', { master: 'none', workers: ['ours', 'ours'] }),
      scenario('timeout', { master: 'none', workers: ['rlf', 'rlf'] }),
    ])
    assert.deepEqual(ours[0], [
      { step: ['consume', 'k'], failed: TIMEOUT },
      { step: ['get', 'k'], failed: TIMEOUT },
    ])
    assert.deepEqual(theirs[0], [
      { step: ['consume', 'k'], failed: { name: 'Error', message: TIMEOUT.message } },
      { step: ['get', 'k'], failed: { name: 'Error', message: TIMEOUT.message } },
    ])
  })

  it("asks a master started after the worker again (rate-limiter-flexible's worker waits for good)", async () => {
    const [ours, theirs] = await Promise.all([
      scenario('late', { masterAtPhase: 1 }),
      scenario('late', { masterAtPhase: 1, workers: ['rlf', 'rlf'] }),
    ])
    assert.deepEqual(ours[0][0], [{ step: ['consume', 'k'], failed: TIMEOUT }])
    // The call that timed out was never sent: the master counts only the one after.
    assert.deepEqual(
      ours[1][0].map((outcome) => split(outcome).rest),
      [
        { step: ['consume', 'k'], resolved: { remainingPoints: 4, consumedPoints: 1, isFirstInDuration: true } },
        { step: ['get', 'k'], resolved: { remainingPoints: 4, consumedPoints: 1, isFirstInDuration: false } },
      ],
    )
    assert.deepEqual(
      theirs[1][0].map((outcome) => outcome.failed.message),
      [TIMEOUT.message, TIMEOUT.message],
    )
  })

  it('sets a key, and rejects a bad argument with the Error the master met', async () => {
    const [phase] = await scenario('extras')
    const rest = phase[0].map((outcome) => split(outcome).rest)
    assert.deepEqual(rest, [
      {
        step: ['consume', 'k', 1.5],
        failed: { name: 'RangeError', message: 'Consuming decimal number of points is not supported by this package', code: 'ERR_INVALID_ARGUMENT' },
      },
      { step: ['set', 's', 4, 30], resolved: { remainingPoints: 0, consumedPoints: 4, isFirstInDuration: false } },
      { step: ['get', 's'], resolved: { remainingPoints: 1, consumedPoints: 4, isFirstInDuration: false } },
      { step: ['consume', 's'], resolved: { remainingPoints: 0, consumedPoints: 5, isFirstInDuration: false } },
      { step: ['consume', 's'], rejected: { remainingPoints: 0, consumedPoints: 6, isFirstInDuration: false } },
      { step: ['set', 'forever', 2, 0], resolved: { remainingPoints: 0, consumedPoints: 2, isFirstInDuration: false } },
      { step: ['get', 'forever'], resolved: { remainingPoints: 3, consumedPoints: 2, isFirstInDuration: false } },
    ])
    assert.ok(split(phase[0][1]).ms <= 30_000 && split(phase[0][1]).ms > 29_000)
    assert.deepEqual([split(phase[0][5]).ms, split(phase[0][6]).ms], [-1, -1])
  })

  it("keeps a keyPrefix's first options, as rate-limiter-flexible, and warns the worker whose options differ", async () => {
    const [ours, theirs] = await Promise.all([scenario('mismatch'), scenario('mismatch', { master: 'rlf', workers: ['rlf', 'rlf'] })])
    const { warnings, results } = ours[1][1]
    assert.equal(warnings.length, 1)
    assert.equal(warnings[0].code, 'RATEKEEPER_CLUSTER_OPTIONS')
    assert.match(warnings[0].message, /keyPrefix "mm" with other options, \{"points":5,/)
    // Counted against the first worker's 5 points, not this one's 2.
    assert.deepEqual(
      results.map((outcome) => answerOf(outcome).remainingPoints),
      [4, 3, 2],
    )
    assertSameAnswers([{}, { 1: results }], [{}, { 1: theirs[1][1].results }], 'mismatch')
  })
})

describe("beside rate-limiter-flexible's RateLimiterCluster and its master", () => {
  it('answers the sequence as rate-limiter-flexible does', async () => {
    const [ours, theirs] = await Promise.all([scenario('sequence'), scenario('sequence', { master: 'rlf', workers: ['rlf', 'rlf'] })])
    assertSameAnswers(ours, theirs, 'ours against theirs')
  })

  it("talks to rate-limiter-flexible's side: its workers to our master, ours to its master, both kinds at once", async () => {
    const reference = await scenario('sequence', { master: 'rlf', workers: ['rlf', 'rlf'] })
    const mixes = [
      { master: 'ours', workers: ['rlf', 'rlf'] },
      { master: 'rlf', workers: ['ours', 'ours'] },
      { master: 'ours', workers: ['ours', 'rlf'] },
      { master: 'rlf', workers: ['rlf', 'ours'] },
    ]
    const runs = await Promise.all(mixes.map((mix) => scenario('sequence', mix)))
    for (const [i, phases] of runs.entries()) assertSameAnswers(phases, reference, JSON.stringify(mixes[i]))
    const shared = [
      { master: 'ours', workers: ['ours', 'rlf'] },
      { master: 'rlf', workers: ['ours', 'rlf'] },
    ]
    const sharedRuns = await Promise.all(shared.map((mix) => scenario('shared', mix)))
    for (const [i, phases] of sharedRuns.entries()) assertShared(phases, JSON.stringify(shared[i]))
  })

  it("with rate-limiter-flexible's master, set is left unanswered (its protocol has none) and a fraction is counted", async () => {
    const [phase] = await scenario('extras', { master: 'rlf' })
    const rest = phase[0].map((outcome) => split(outcome).rest)
    assert.deepEqual(rest[0], { step: ['consume', 'k', 1.5], resolved: { remainingPoints: 4, consumedPoints: 1, isFirstInDuration: true } })
    assert.deepEqual(rest[1], { step: ['set', 's', 4, 30], failed: TIMEOUT })
    assert.deepEqual(rest[2], { step: ['get', 's'], resolved: null })
  })
})

describe('RateLimiterClusterMasterPM2, on a bus that relays as PM2 does', () => {
  it('shares the counts of 2 app processes, ours or rate-limiter-flexible, on either master', async () => {
    const mixes = [
      { master: 'ours', workers: ['ours', 'ours'] },
      { master: 'ours', workers: ['ours', 'rlf'] },
      { master: 'rlf', workers: ['ours', 'ours'] },
    ]
    const runs = await Promise.all(mixes.map((mix) => scenario('shared', { transport: 'pm2', ...mix })))
    for (const [i, phases] of runs.entries()) assertShared(phases, `pm2 ${JSON.stringify(mixes[i])}`)
  })

  it("answers the sequence as rate-limiter-flexible's RateLimiterClusterMasterPM2 does", async () => {
    const [ours, theirs] = await Promise.all([
      scenario('sequence', { transport: 'pm2', master: 'ours', workers: ['ours', 'rlf'] }),
      scenario('sequence', { transport: 'pm2', master: 'rlf', workers: ['rlf', 'rlf'] }),
    ])
    assertSameAnswers(ours, theirs, 'pm2')
  })
})

describe('RateLimiterCluster: where it runs, options, exports', () => {
  const catching = `
    const flexible = require('./flexible.js')
    const rlf = require('rate-limiter-flexible')
    const caught = (make) => {
      try {
        make()
        return null
      } catch (error) {
        return { name: error.name, message: error.message, code: error.code }
      }
    }
  `

  it('throws in a process without an IPC channel, or in the primary that runs the master', async () => {
    const options = "{ keyPrefix: 'x', points: 1, duration: 1 }"
    const noChannel = await evaluate(`${catching}
      console.log(JSON.stringify({
        ours: caught(() => new flexible.RateLimiterCluster(${options})),
        theirs: caught(() => new rlf.RateLimiterCluster(${options})),
      }))`)
    assert.deepEqual(noChannel.theirs, { name: 'TypeError', message: 'process.send is not a function' })
    assert.equal(noChannel.ours.name, 'TypeError')
    assert.equal(noChannel.ours.code, 'ERR_NOT_SUPPORTED')
    assert.match(noChannel.ours.message, /RateLimiterCluster works in a worker process .*no IPC channel/)
    // A process with a channel (a fork of this one) that runs the master: the primary.
    const primary = await evaluate(
      `${catching}
      new flexible.RateLimiterClusterMaster()
      console.log(JSON.stringify(caught(() => new flexible.RateLimiterCluster(${options}))))
      process.disconnect()`,
      { ipc: true },
    )
    assert.equal(primary.code, 'ERR_NOT_SUPPORTED')
    assert.match(primary.message, /not in the primary, where RateLimiterClusterMaster answers them/)
  })

  it("checks its options first, with rate-limiter-flexible's messages, and timeoutMs", async () => {
    const result = await evaluate(`${catching}
      console.log(JSON.stringify({
        points: [caught(() => new flexible.RateLimiterCluster({ duration: 1 })), caught(() => new rlf.RateLimiterCluster({ duration: 1 }))],
        keyPrefix: [caught(() => new flexible.RateLimiterCluster({ points: 1, duration: 1, keyPrefix: 5 }))],
        timeoutMs: [caught(() => new flexible.RateLimiterCluster({ points: 1, duration: 1, timeoutMs: 'soon' })), caught(() => new flexible.RateLimiterCluster({ points: 1, duration: 1, timeoutMs: 2 ** 31 }))],
        pm2: caught(() => new flexible.RateLimiterClusterMasterPM2({})),
      }))`)
    assert.deepEqual(result.points[0], { name: 'RangeError', message: result.points[1].message, code: 'ERR_INVALID_OPTION' })
    assert.equal(result.points[1].message, 'points must be set and must be a finite number')
    assert.deepEqual(result.keyPrefix[0], { name: 'TypeError', message: 'keyPrefix must be string', code: 'ERR_INVALID_OPTION' })
    for (const error of result.timeoutMs) assert.deepEqual(error, { name: 'RangeError', message: 'timeoutMs must be a number of milliseconds, at most 2147483647', code: 'ERR_INVALID_OPTION' })
    assert.equal(result.pm2.code, 'ERR_INVALID_OPTION')
  })

  it('has one master per process, as rate-limiter-flexible: new gives it again, whichever class', async () => {
    const result = await evaluate(`
      const flexible = require('./flexible.js')
      const master = new flexible.RateLimiterClusterMaster()
      console.log(JSON.stringify([master === new flexible.RateLimiterClusterMaster(), master === new flexible.RateLimiterClusterMasterPM2(null)]))`)
    assert.deepEqual(result, [true, true])
  })

  it("exports the three classes as rate-limiter-flexible does, from the entry, its ESM and lib/RateLimiterCluster", async () => {
    const theirs = require('rate-limiter-flexible/lib/RateLimiterCluster')
    const ours = require('ratekeeper/flexible/lib/RateLimiterCluster')
    assert.deepEqual(Object.keys(ours).sort(), Object.keys(theirs).sort())
    const esm = await import('ratekeeper/flexible')
    for (const name of Object.keys(theirs)) {
      assert.equal(typeof ours[name], 'function', name)
      assert.equal(flexible[name], ours[name], name)
      assert.equal(esm[name], ours[name], name)
    }
    assert.ok(Object.getPrototypeOf(flexible.RateLimiterCluster.prototype) === flexible.RateLimiterAbstract.prototype)
  })
})
