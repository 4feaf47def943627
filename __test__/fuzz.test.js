'use strict'

// Property-based fuzzing of the whole public API with fast-check: every constructor and method of
// every limiter, on memory and on a real redis-server, with arbitrary arguments of every JS type
// mixed with valid ones (see helpers/fuzz-worker.js for what is generated and checked).
//
// Each property runs in a child process (helpers/fuzz-worker.js), so that a native crash or a
// hang of the addon fails this test with the seed and the call under way instead of killing the
// test runner.
//
//   RATEKEEPER_FUZZ_RUNS=5000 node --test __test__/fuzz.test.js    # a long run (default 200)
//   RATEKEEPER_FUZZ_SEED=123 RATEKEEPER_FUZZ_PATH=4:1:0 ...          # replay a failure
//   RATEKEEPER_FUZZ_ONLY=counts,express ...                          # some properties only
//   RATEKEEPER_FUZZ_KNOWN=sync-throw,panic ...                       # skip known defects' checks
//   RATEKEEPER_FUZZ_ONLY=rolling-window,counting-limiters ...        # every limiter class and method
//
// A failure prints the counterexample as JavaScript, what went wrong, and the command that replays
// it. RATEKEEPER_FUZZ_KNOWN takes the tags printed in failure messages ([tag: ...]): it lets a
// long run look past defects that are known and not fixed yet; `npm test` never sets it.

const { describe, it, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { fork } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const { startRedis, freePort } = require('./helpers/redis-server.js')

const WORKER = path.join(__dirname, 'helpers', 'fuzz-worker.js')

/** Each property, and the Redis database it works in. */
const PROPERTIES = {
  'rolling-window': 1,
  'counting-limiters': 2,
  redback: 3,
  'callback-api': 4,
  'redis-store': 5,
  express: 6,
  'undefined-id': 7,
  counts: 8,
  'redback-circle': 9,
}

const RUNS = Number(process.env.RATEKEEPER_FUZZ_RUNS) || 200
const SEED = process.env.RATEKEEPER_FUZZ_SEED ? Number(process.env.RATEKEEPER_FUZZ_SEED) : (Date.now() ^ (Math.random() * 0x7fffffff)) | 0
const REPLAY_PATH = process.env.RATEKEEPER_FUZZ_PATH || undefined
const ONLY = process.env.RATEKEEPER_FUZZ_ONLY ? process.env.RATEKEEPER_FUZZ_ONLY.split(',').map((s) => s.trim()) : null
/** How long one call may take before it counts as a hang. */
const CALL_TIMEOUT_MS = 5000
/** A worker silent for this long (no heartbeat: its event loop is blocked) is killed. */
const SILENCE_MS = 20_000
/** How long a worker may take to start (its first heartbeat). */
const STARTUP_MS = 30_000

function replayCommand(property, seed, replayPath) {
  const pathPart = replayPath ? ` RATEKEEPER_FUZZ_PATH=${replayPath}` : ''
  return `RATEKEEPER_FUZZ_SEED=${seed}${pathPart} RATEKEEPER_FUZZ_ONLY=${property} node --test __test__/fuzz.test.js`
}

/** Runs one property in a worker; resolves what the parent saw. */
function runWorker(property, context, { numRuns = RUNS, replayPath = REPLAY_PATH, silenceMs = SILENCE_MS } = {}) {
  const tracePath = path.join(context.dir, `${property}.trace.js`)
  const config = {
    property,
    seed: SEED,
    numRuns,
    path: replayPath,
    livePort: context.server.port,
    deadPort: context.deadPort,
    db: PROPERTIES[property],
    tracePath,
    callTimeoutMs: CALL_TIMEOUT_MS,
  }
  return new Promise((resolve) => {
    const child = fork(WORKER, [JSON.stringify(config)], { stdio: ['ignore', 'pipe', 'pipe', 'ipc'] })
    let output = ''
    const keep = (chunk) => {
      output = (output + chunk).slice(-8000)
    }
    child.stdout.on('data', keep)
    child.stderr.on('data', keep)
    let result
    let killedForSilence = false
    // Until its first heartbeat the worker is starting (loading the addon): give it longer.
    let lastBeat = Date.now() + STARTUP_MS
    let cases = 0
    const watchdog = setInterval(() => {
      if (Date.now() - lastBeat > silenceMs) {
        killedForSilence = true
        child.kill('SIGKILL')
      }
    }, 1000)
    child.on('message', (message) => {
      lastBeat = Date.now()
      if (message.type === 'beat') cases = message.cases
      if (message.type === 'result') result = message
    })
    child.on('exit', (code, signal) => {
      clearInterval(watchdog)
      let trace = ''
      try {
        trace = fs.readFileSync(tracePath, 'utf8')
      } catch {}
      resolve({ property, result, code, signal, output, trace, killedForSilence, cases, silenceMs })
    })
  })
}

describe('fuzz', { concurrency: 2 }, () => {
  const context = {}

  before(async () => {
    context.server = await startRedis()
    context.deadPort = await freePort()
    context.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ratekeeper-fuzz-'))
  })

  after(async () => {
    if (context.server) await context.server.stop()
    if (context.dir) fs.rmSync(context.dir, { recursive: true, force: true })
  })

  for (const property of Object.keys(PROPERTIES)) {
    it(property, { skip: ONLY && !ONLY.includes(property) ? 'not in RATEKEEPER_FUZZ_ONLY' : false }, async (t) => {
      t.diagnostic(`seed ${SEED}, ${RUNS} runs`)
      const seen = await runWorker(property, context)
      if (seen.result) t.diagnostic(`${seen.result.cases} cases; ${JSON.stringify(seen.result.stats)}`)
      const failure = failureOf(seen)
      if (failure) assert.fail(failure)
    })
  }

  describe('reporting', { skip: ONLY ? 'RATEKEEPER_FUZZ_ONLY is set' : false }, () => {
    it('reports a worker that dies (as on a native crash) with the seed and the case under way', async () => {
      const failure = failureOf(await runWorker('self-test-crash', context, { numRuns: 10, replayPath: undefined }))
      assert.match(failure, /died \(exit code null, signal SIGKILL\)/)
      assert.match(failure, new RegExp(`RATEKEEPER_FUZZ_SEED=${SEED} `))
      assert.match(failure, /case #3 of property self-test-crash/)
      assert.match(failure, /crash\(\)/)
    })

    it('reports a worker whose event loop blocks, with the seed and the case under way', async () => {
      const failure = failureOf(await runWorker('self-test-hang', context, { numRuns: 10, replayPath: undefined, silenceMs: 2000 }))
      assert.match(failure, /hung: no heartbeat/)
      assert.match(failure, new RegExp(`RATEKEEPER_FUZZ_SEED=${SEED} `))
      assert.match(failure, /case #2 of property self-test-hang/)
    })
  })
})

/** The failure message for what a worker did, or null when its property held. */
function failureOf(seen) {
  const { property, result } = seen
  if (result && !result.failed) return null
  if (result) {
    return `property ${property} failed (seed ${SEED}).\n${result.report}\n\nReplay: ${replayCommand(property, SEED, result.path)}`
  }
  const how = seen.killedForSilence
    ? `hung: no heartbeat for ${seen.silenceMs / 1000} s (a call blocked the event loop), killed`
    : `died (exit code ${seen.code}, signal ${seen.signal})`
  return (
    `property ${property}: the worker ${how} (seed ${SEED}).\n` +
    `Replay: ${replayCommand(property, SEED)}\n\n` +
    `The case under way, and its calls up to the last one made:\n${seen.trace}\n` +
    `The worker's last output:\n${seen.output}`
  )
}
