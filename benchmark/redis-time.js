'use strict'

// Redis's own time per lone call, ratekeeper's against each peer's (issue 24): the scenarios of
// `npm run bench` on Redis, on its clients (the peers' ioredis on its defaults), one caller, each
// call awaited before the next. Per run, on an emptied Redis with its command stats reset, after
// untimed calls: the microseconds Redis spent in the top-level commands (EVALSHA or EVAL, or MULTI
// and EXEC; commands run inside them are counted in these too) over the calls, and how many of
// each command a call ran; and, around the same calls, the wall time per call and redis-server's
// whole CPU time per call (every thread's, from /proc: reading the request, the commands, writing
// the reply, the system calls), of which what is not in the top-level commands is the server's work
// around them. Rounds alternate who goes first; medians. benchmark/RESULTS.md, items 36 and 39.
//
//   npm run bench:redis-time [-- "token bucket"] [-- --rounds 5 --calls 3000] [-- --eval]
//
// (--eval: ratekeeper's scripts as EVALSHA, as on Redis 6.2, instead of Redis Functions.
// BENCH_CLOCK=local: see benchmark/bench.js.)

const fs = require('node:fs')
const { scenarios, connectClients } = require('./bench.js')
const { startRedis } = require('../__test__/helpers/redis-server.js')

const argv = process.argv.slice(2)
const option = (name, fallback) => {
  const at = argv.indexOf(`--${name}`)
  return at === -1 ? fallback : Number(argv[at + 1])
}
const ROUNDS = option('rounds', 5)
const CALLS = option('calls', 3000)
const ONLY = argv.find((arg, i) => !arg.startsWith('--') && !['--rounds', '--calls'].includes(argv[i - 1]))
/** `--eval`: ratekeeper's store with `functions: false` (EVALSHA, as on Redis 6.2). */
const FUNCTIONS = !argv.includes('--eval')
const UNTIMED = 300
/** The commands a client sends around a call's own (a script's or a transaction's run its nested ones). */
const TOP_LEVEL = new Set(['evalsha', 'eval', 'multi', 'exec', 'fcall'])
/** The benchmark's own commands, not the calls'. */
const OWN = new Set(['info', 'config', 'flushall', 'select', 'client', 'hello', 'ping', 'script', 'function'])

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

/** Redis's microseconds in the calls' top-level commands since the last reset, and each command's count; resets. */
async function commandStats(client) {
  const stats = await client.info('commandstats')
  await client.config('RESETSTAT')
  let micros = 0
  const counts = {}
  for (const [, name, calls, usec] of stats.matchAll(/cmdstat_([\w|]+):calls=(\d+),usec=(\d+)/g)) {
    if (OWN.has(name.split('|')[0])) continue
    counts[name] = Number(calls)
    if (TOP_LEVEL.has(name)) micros += Number(usec)
  }
  return { micros, counts }
}

/** The CPU time redis-server's threads have used, in microseconds (/proc/<pid>/task/<tid>/schedstat). */
function serverCpuMicros(pid) {
  let nanos = 0
  for (const task of fs.readdirSync(`/proc/${pid}/task`)) {
    nanos += Number(fs.readFileSync(`/proc/${pid}/task/${task}/schedstat`, 'utf8').split(' ')[0])
  }
  return nanos / 1000
}

async function main() {
  const server = await startRedis()
  const clients = await connectClients(server.port, { autoPipelining: false, functions: FUNCTIONS })
  console.log('| scenario | ids | ratekeeper µs per call | peer µs per call | ratekeeper / peer: redis-server CPU per call | wall per call | ratekeeper commands per call | peer commands per call |')
  console.log('|---|---:|---:|---:|---:|---:|---|---|')
  for (const scenario of scenarios(clients).filter((s) => s.redis && (!ONLY || s.name.includes(ONLY)))) {
    for (const ids of [10, 10_000]) {
      const micros = { ours: [], theirs: [] }
      const serverCpu = { ours: [], theirs: [] }
      const wall = { ours: [], theirs: [] }
      const perCall = {}
      for (let round = 0; round < ROUNDS; round++) {
        for (const who of round % 2 ? ['theirs', 'ours'] : ['ours', 'theirs']) {
          await clients.flush()
          const warm = scenario[who]()
          for (let i = 0; i < UNTIMED; i++) await warm(`warm-${i % ids}`)
          await clients.flush()
          await commandStats(clients.ioredis)
          const attempt = scenario[who]()
          const cpuBefore = serverCpuMicros(server.pid)
          const started = process.hrtime.bigint()
          for (let i = 0; i < CALLS; i++) await attempt(`user-${(i * 7919) % ids}`)
          wall[who].push(Number(process.hrtime.bigint() - started) / 1000 / CALLS)
          serverCpu[who].push((serverCpuMicros(server.pid) - cpuBefore) / CALLS)
          const { micros: spent, counts } = await commandStats(clients.ioredis)
          micros[who].push(spent / CALLS)
          perCall[who] = Object.entries(counts).map(([name, n]) => `${name} ${(n / CALLS).toFixed(2)}`).join(', ')
        }
      }
      const pair = (values) => `${median(values.ours).toFixed(1)} / ${median(values.theirs).toFixed(1)}`
      console.log(`| ${scenario.name} | ${ids} | ${median(micros.ours).toFixed(2)} | ${median(micros.theirs).toFixed(2)} | ${pair(serverCpu)} | ${pair(wall)} | ${perCall.ours} | ${perCall.theirs} |`)
    }
  }
  clients.ioredis.disconnect()
  clients.ioredis4.disconnect()
  clients.nodeRedis3.quit()
  await clients.store.close()
  await server.stop()
  process.exit(0)
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
