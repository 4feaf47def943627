'use strict'

// Run by __test__/flexible-cluster.test.js: `node cluster-primary.js '<config>'`, the config being
// `{ scenario, transport, master, workers, masterAtPhase }`:
// - `transport`: 'cluster' (cluster.fork() and RateLimiterClusterMaster) or 'pm2' (child
//   processes, and RateLimiterClusterMasterPM2 on a fake `pm2` that relays their messages as
//   PM2's daemon does);
// - `master`: whose master, 'ours' (ratekeeper/flexible), 'rlf' (rate-limiter-flexible) or 'none';
// - `workers`: whose RateLimiterCluster in each of the workers, e.g. ['ours', 'rlf'];
// - `masterAtPhase`: make the master only before that phase (default: before the workers start).
// Starts the workers (helpers/cluster-worker.js), waits until each is ready, runs the scenario's
// phases, and prints `{ phases: [{ [workerIndex]: results }] }` as JSON; exits 1 on a failure, or
// after 20 s.

const cluster = require('node:cluster')
const childProcess = require('node:child_process')
const { EventEmitter } = require('node:events')
const path = require('node:path')
const { scenarios } = require('./cluster-worker.js')

const config = JSON.parse(process.argv[2])
const libs = { ours: () => require('../../flexible.js'), rlf: () => require('rate-limiter-flexible') }
const WORKER = path.join(__dirname, 'cluster-worker.js')
const EXEC_ARGV = ['--no-warnings']

const roundTrip = (value) => JSON.parse(JSON.stringify(value))

/**
 * `pm2` as RateLimiterClusterMasterPM2 uses it, over real child processes, relaying as PM2's
 * daemon does (lib/God/ClusterMode.js and ForkMode.js, lib/God/ActionMethods.js): a process's
 * message with both `type` and `data` goes to the bus under its `type`, any other as
 * `process:msg` with the message as `raw`; `sendDataToProcessId(id, packet)` refuses a packet
 * without `data` or `topic`, else sends it to the process with `id` added. The bus crosses a
 * socket in PM2: messages are copied through JSON both ways.
 */
function fakePm2(children) {
  const bus = new EventEmitter()
  children.forEach((child, pmId) => {
    child.on('message', (msg) => {
      const proc = { pm_id: pmId, name: 'app' }
      if (msg && msg.type && msg.data) bus.emit(msg.type, roundTrip({ at: Date.now(), data: msg.data, process: proc }))
      else bus.emit('process:msg', roundTrip({ at: Date.now(), raw: msg, process: proc }))
    })
  })
  return {
    launchBus(callback) {
      setImmediate(callback, null, bus)
    },
    sendDataToProcessId(id, packet, callback) {
      if (packet.data === undefined || !packet.topic) return callback(new Error('ID, DATA or TOPIC field is missing'), {})
      const sent = roundTrip({ ...packet, id })
      if (!children[id] || !children[id].connected) return callback(new Error(`Process with ID <${id}> offline.`), {})
      children[id].send(sent)
      callback(null, { success: true, data: sent })
    },
  }
}

/** Starts the workers: for each, `send(msg)`, `onMessage(listener)` and `kill()`; and `makeMaster()`. */
function startWorkers() {
  const envOf = (index) => ({ CLUSTER_SCENARIO: config.scenario, CLUSTER_WORKER_LIB: config.workers[index], CLUSTER_WORKER_INDEX: String(index) })
  if (config.transport === 'pm2') {
    const children = config.workers.map((_, index) => childProcess.fork(WORKER, [], { env: { ...process.env, ...envOf(index) }, execArgv: EXEC_ARGV }))
    return {
      makeMaster: () => new (libs[config.master]().RateLimiterClusterMasterPM2)(fakePm2(children)),
      workers: children.map((child) => ({ send: (msg) => child.send(msg), onMessage: (listener) => child.on('message', listener), kill: () => child.kill('SIGKILL') })),
    }
  }
  cluster.setupPrimary({ exec: WORKER, execArgv: EXEC_ARGV })
  const workers = config.workers.map((_, index) => cluster.fork(envOf(index)))
  return {
    makeMaster: () => new (libs[config.master]().RateLimiterClusterMaster)(),
    workers: workers.map((worker) => ({ send: (msg) => worker.send(msg), onMessage: (listener) => worker.on('message', listener), kill: () => worker.process.kill('SIGKILL') })),
  }
}

/** Resolves the next test message of `worker` of kind `kind`. */
function next(worker, kind) {
  return new Promise((resolve, reject) => {
    worker.onMessage((msg) => {
      if (msg === null || typeof msg !== 'object' || msg.test !== kind) return
      if (msg.error) reject(Object.assign(new Error(msg.error.message), msg.error))
      else resolve(msg)
    })
  })
}

async function main() {
  const scenario = scenarios[config.scenario]
  const masterAtPhase = config.masterAtPhase ?? -1
  const started = startWorkers()
  if (config.master !== 'none' && masterAtPhase < 0) started.makeMaster()
  const { workers } = started
  try {
    await Promise.all(workers.map((worker) => next(worker, 'ready')))
    const phases = []
    for (const [phase, { workers: indexes }] of scenario.phases.entries()) {
      if (config.master !== 'none' && phase === masterAtPhase) started.makeMaster()
      const done = await Promise.all(
        indexes.map((index) => {
          const answer = next(workers[index], 'done')
          workers[index].send({ test: 'go', phase })
          return answer
        }),
      )
      phases.push(Object.fromEntries(indexes.map((index, i) => [index, done[i].results])))
    }
    process.stdout.write(JSON.stringify({ phases }))
  } finally {
    for (const worker of workers) worker.kill()
  }
}

setTimeout(() => {
  process.stderr.write('cluster-primary: still running after 20 s\n')
  process.exit(1)
}, 20_000).unref()

main().then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`cluster-primary: ${error.stack ?? error}\n`)
    process.exit(1)
  },
)
