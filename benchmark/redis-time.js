'use strict'

// Redis's own time per lone call, ratekeeper's against each peer's (issue 24): the scenarios of
// `npm run bench` on Redis, on its clients (the peers' ioredis on its defaults), one caller, each
// call awaited before the next. Per run, on an emptied Redis with its command stats reset, after
// untimed calls: the microseconds Redis spent in the top-level commands (EVALSHA or EVAL, FCALL,
// or MULTI and EXEC; commands run inside them are counted in these too) over the calls, and how
// many of each command a call ran; and, around the same calls, the wall time per call, the CPU
// time this process spent per call (every thread's: the client's side) and redis-server's whole
// CPU time per call (every thread's, from /proc: reading the request, the commands, writing the
// reply, the system calls), of which what is not in the top-level commands is the server's work
// around them. What the wall time holds beyond the two CPU times is waiting: each side waking the
// other. Rounds alternate who goes first; medians. benchmark/RESULTS.md, items 36, 39 and 40.
//
// --replay: each library's lone call is captured once (MONITOR) and sent again by
// redis-benchmark (`-c 1`), so that the client is the same for both sides and only Redis's work
// differs: per run CALLS calls on one known id, then CALLS calls each on a new id (the captured
// id replaced by redis-benchmark's __rand_int__); Redis's time per call (`usec_per_call`) and its
// whole CPU per call. A call the library sends as more than one command is not replayed. An
// argument that carries the caller's clock is replayed as captured: a known id then stays as of
// that instant (its later calls are refused, as most calls over 10 ids are in `npm run bench`).
// Ratekeeper's lone call on the server's clock (the direct lane's estimate of it, "~<µs>", or "",
// read by the script with TIME) is also replayed with "" in that place, and with this host's
// clock, as a peer sends its own: what the read costs, and what the estimate spares.
//
// --floor: each library's calls against the floor of a lone call on this thread: its captured
// request (as --replay captures it) written, for each id, by a bare client (the bytes built
// beforehand, one socket, `onread` into one buffer, the reply's end found and nothing parsed),
// each call awaited before the next. Four paths in one process (ratekeeper, the peer, and the
// bare client sending each one's request), in blocks of CALLS calls (500 by default), ROUNDS
// rounds (30) in a turning order, over 10 and over 10,000 ids; per block each path's wall time
// per call, then the medians of the blocks' ratios, pair by pair: a library against the bare
// client sending its request is what its client adds to the floor; the bare clients against each
// other is what Redis's work for the two requests adds.
//
//   npm run bench:redis-time [-- "token bucket"] [-- --rounds 5 --calls 3000] [-- --eval] [-- --replay | --floor]
//
// (--eval: ratekeeper's scripts as EVALSHA, as on Redis 6.2, instead of Redis Functions.
// BENCH_CLOCK=local: see benchmark/bench.js.)

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const net = require('node:net')
const { scenarios, connectClients } = require('./bench.js')
const { respCommand, startRedis } = require('../__test__/helpers/redis-server.js')

const argv = process.argv.slice(2)
const option = (name, fallback) => {
  const at = argv.indexOf(`--${name}`)
  return at === -1 ? fallback : Number(argv[at + 1])
}
/** `--floor`: each library against a bare client sending its request (see above). */
const FLOOR = argv.includes('--floor')
const ROUNDS = option('rounds', FLOOR ? 30 : 5)
const CALLS = option('calls', FLOOR ? 500 : 3000)
const ONLY = argv.find((arg, i) => !arg.startsWith('--') && !['--rounds', '--calls'].includes(argv[i - 1]))
/** `--replay`: each side's captured lone call sent again by redis-benchmark (see above). */
const REPLAY = argv.includes('--replay')
/** The id a replayed call is captured with, replaced in its keys and arguments. */
const PROBE_ID = 'replay-probe'
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

/** Each side's calls made in this process, timed as the header above says: a table row per id count. */
async function measureInProcess(scenario, clients, server) {
  for (const ids of [10, 10_000]) {
    const micros = { ours: [], theirs: [] }
    const serverCpu = { ours: [], theirs: [] }
    const clientCpu = { ours: [], theirs: [] }
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
        const clientBefore = process.cpuUsage()
        const started = process.hrtime.bigint()
        for (let i = 0; i < CALLS; i++) await attempt(`user-${(i * 7919) % ids}`)
        wall[who].push(Number(process.hrtime.bigint() - started) / 1000 / CALLS)
        const client = process.cpuUsage(clientBefore)
        clientCpu[who].push((client.user + client.system) / CALLS)
        serverCpu[who].push((serverCpuMicros(server.pid) - cpuBefore) / CALLS)
        const { micros: spent, counts } = await commandStats(clients.ioredis)
        micros[who].push(spent / CALLS)
        perCall[who] = Object.entries(counts).map(([name, n]) => `${name} ${(n / CALLS).toFixed(2)}`).join(', ')
      }
    }
    const pair = (values) => `${median(values.ours).toFixed(1)} / ${median(values.theirs).toFixed(1)}`
    console.log(`| ${scenario.name} | ${ids} | ${median(micros.ours).toFixed(2)} | ${median(micros.theirs).toFixed(2)} | ${pair(serverCpu)} | ${pair(clientCpu)} | ${pair(wall)} | ${perCall.ours} | ${perCall.theirs} |`)
  }
}

/**
 * An argument as it was sent, from MONITOR's rendering of it (Redis escapes it as sdscatrepr does:
 * `\n`, `\r`, `\t`, `\a`, `\b`, `\\`, `\"` and `\xHH`; ioredis undoes only `\"`). A lone call on the
 * direct lane sends its configuration joined by newlines (src/store/script.rs, compact_command).
 */
const MONITOR_ESCAPES = { n: '\n', r: '\r', t: '\t', a: '\x07', b: '\b', '\\': '\\', '"': '"' }
const unescapeMonitor = (arg) => arg.replace(/\\(x[0-9a-f]{2}|[nrtab\\"])/g, (_, code) => (code.length === 3 ? String.fromCharCode(parseInt(code.slice(1), 16)) : MONITOR_ESCAPES[code]))

/**
 * The command(s) one call of `attempt` sends, as MONITOR sees them: those naming PROBE_ID (not
 * the commands scripts run, nor a connection's own set-up).
 */
async function capturedCall(clients, attempt) {
  const monitor = await clients.ioredis.monitor()
  const sent = []
  monitor.on('monitor', (time, args, source) => {
    if (source !== 'lua' && args.some((arg) => arg.includes(PROBE_ID))) sent.push(args.map(unescapeMonitor))
  })
  await attempt(PROBE_ID)
  // MONITOR's feed may trail the reply: a PING through it comes after what it saw before.
  await clients.ioredis.ping()
  await new Promise((resolve) => setTimeout(resolve, 50))
  monitor.disconnect()
  return sent
}

/**
 * Whether `arg` is a clock: the caller's, now in milliseconds or microseconds, or ratekeeper's
 * direct lane's estimate of the server's (`~` and microseconds), give or take a day.
 */
const isClock = (arg) => /^~?(\d{13}|\d{16})$/.test(arg) && Math.abs(Number(arg.replace('~', '').slice(0, 13)) - Date.now()) < 86_400_000

/** Whether `arg` is the direct lane's estimate of the server's clock (src/store/direct.rs). */
const isEstimate = (arg) => arg.startsWith('~') && isClock(arg)

/** `command` sent CALLS times by redis-benchmark, one at a time: Redis's µs per call and its whole CPU per call. */
async function replayed(clients, server, command, id) {
  await clients.flush()
  await commandStats(clients.ioredis)
  const args = command.map((arg) => arg.split(PROBE_ID).join(id))
  const cpuBefore = serverCpuMicros(server.pid)
  const run = spawnSync('redis-benchmark', ['-h', '127.0.0.1', '-p', String(server.port), '-c', '1', '-n', String(CALLS), '-r', '1000000000', ...args], { encoding: 'utf8' })
  const cpu = (serverCpuMicros(server.pid) - cpuBefore) / CALLS
  const { micros, counts } = await commandStats(clients.ioredis)
  const name = command[0].toLowerCase()
  if (run.status !== 0 || counts[name] !== CALLS) {
    throw new Error(`redis-benchmark did not replay ${name} ${CALLS} times (${counts[name]}): ${run.stderr || run.stdout.slice(-300)}`)
  }
  return { micros: micros / CALLS, cpu }
}

/**
 * Each side's lone call as one command, captured twice (see `capturedCall`): { ours, theirs }, or
 * null (with a table row that says why) when a side sends more than one command per call or an
 * argument of the call's own (the sliding log's member, which would make every replay the same
 * action again; the caller's clock is replayed as captured).
 */
async function loneCommands(scenario, clients) {
  const commands = {}
  for (const who of ['ours', 'theirs']) {
    const attempt = scenario[who]()
    // A first call loads the scripts (and opens ratekeeper's lane): the captured one is a lone call's.
    await attempt('replay-warm')
    await attempt('replay-warm')
    const sent = await capturedCall(clients, attempt)
    const again = await capturedCall(clients, attempt)
    const library = who === 'ours' ? 'ratekeeper' : 'the peer'
    const skip = (why) => {
      console.log(`| ${scenario.name} | (not replayed: ${library} ${why}) | | | |`)
      return null
    }
    if (sent.length !== 1 || again.length !== 1) {
      return skip(`sends ${sent.map((args) => args[0]).join(', ') || 'nothing'} per call`)
    }
    if (sent[0].some((arg, i) => arg !== again[0][i] && !isClock(arg))) return skip('sends an argument of its own with each call')
    commands[who] = sent[0]
  }
  return commands
}

/** Each side's lone call replayed (--replay): a table row per id kind. */
async function measureReplayed(scenario, clients, server) {
  const commands = await loneCommands(scenario, clients)
  if (commands === null) return
  // Ratekeeper's lone call on the server's clock sends the direct lane's estimate of it ("~" and
  // µs), or "" (its script reads TIME) until the lane has one: also replayed with "" there, and
  // with this host's clock, as the peers send theirs (µs, as captured).
  const estimated = commands.ours.findIndex(isEstimate)
  const clockAt = estimated !== -1 ? estimated : commands.ours.lastIndexOf('')
  if (clockAt !== -1) {
    if (estimated !== -1) commands.time = commands.ours.map((arg, i) => (i === clockAt ? '' : arg))
    commands.given = commands.ours.map((arg, i) => (i === clockAt ? String(Date.now() * 1000) : arg))
  }
  const sides = Object.keys(commands)
  for (const [kind, id] of [['one known id', 'replay-known'], ['a new id each', 'replay-__rand_int__']]) {
    const micros = Object.fromEntries(sides.map((who) => [who, []]))
    const cpu = Object.fromEntries(sides.map((who) => [who, []]))
    for (let round = 0; round < ROUNDS; round++) {
      for (const who of round % 2 ? [...sides].reverse() : sides) {
        const run = await replayed(clients, server, commands[who], id)
        micros[who].push(run.micros)
        cpu[who].push(run.cpu)
      }
    }
    const row = (values) => ['ours', 'time', 'given', 'theirs'].map((who) => (values[who] ? median(values[who]).toFixed(2) : '-')).join(' / ')
    console.log(`| ${scenario.name} | ${kind} | ${row(micros)} | ${row(cpu)} | ${commands.ours[0]} ${commands.ours.length - 1} arguments / ${commands.theirs[0]} ${commands.theirs.length - 1} |`)
  }
}

/** Where the RESP2 reply that starts at `at` in `bytes` ends, or -1 when it is not all there. */
function replyEnd(bytes, at) {
  const line = bytes.indexOf('\r\n', at)
  if (line === -1) return -1
  const type = bytes[at]
  if (type !== 0x24 /* $ */ && type !== 0x2a /* * */) return line + 2
  const length = Number(bytes.toString('latin1', at + 1, line))
  if (type === 0x24) return length < 0 ? line + 2 : line + 2 + length + 2 <= bytes.length ? line + 2 + length + 2 : -1
  let end = line + 2
  for (let i = 0; i < length && end !== -1; i++) end = replyEnd(bytes, end)
  return end
}

/**
 * The bare client of --floor on `port`: `call(bytes)` writes a request built beforehand and
 * resolves once its whole reply came, read by `onread` into one buffer, nothing parsed.
 */
async function bareClient(port) {
  let waiting = null
  let held = Buffer.alloc(0)
  const received = (bytes) => {
    // (Copied only when a reply comes in several reads: the read buffer is reused.)
    const all = held.length === 0 ? bytes : Buffer.concat([held, bytes])
    if (replyEnd(all, 0) !== all.length) {
      held = Buffer.from(all)
      return
    }
    held = Buffer.alloc(0)
    const resolve = waiting
    waiting = null
    resolve()
  }
  const onread = { buffer: Buffer.allocUnsafeSlow(64 * 1024), callback: (length, buffer) => received(buffer.subarray(0, length)) }
  const socket = net.connect({ port, host: '127.0.0.1', onread })
  socket.setNoDelay(true)
  await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject))
  return {
    call: (bytes) =>
      new Promise((resolve) => {
        waiting = resolve
        socket.write(bytes)
      }),
    close: () => socket.destroy(),
  }
}

/** The calls of --floor, over `ids` ids: the same order of ids on every path. */
const floorIds = (ids) => Array.from({ length: CALLS }, (_, i) => (i * 7919) % ids)

/**
 * Each side's calls against the bare client sending its request (--floor): a table row per id
 * count, each path's median wall time per call and the medians of the blocks' ratios.
 */
async function measureFloor(scenario, clients, server) {
  const commands = await loneCommands(scenario, clients)
  if (commands === null) return
  const bare = await bareClient(server.port)
  try {
    for (const ids of [10, 10_000]) {
      await clients.flush()
      const order = floorIds(ids)
      // Each path on ids of its own: the bare clients' requests are built for each id beforehand.
      const library = { ours: scenario.ours(), theirs: scenario.theirs() }
      const built = (who) => Array.from({ length: ids }, (_, k) => Buffer.from(respCommand(commands[who].map((arg) => arg.split(PROBE_ID).join(`bare-${who}-${k}`)))))
      const requests = { ours: built('ours'), theirs: built('theirs') }
      const paths = {
        ours: (k) => library.ours(`user-${k}`),
        theirs: (k) => library.theirs(`user-${k}`),
        'bare ours': (k) => bare.call(requests.ours[k]),
        'bare theirs': (k) => bare.call(requests.theirs[k]),
      }
      const names = Object.keys(paths)
      // Untimed first: the ids past their first calls (over 10 ids, past their limit, as the
      // calls of `npm run bench` mostly are) and the JIT warm.
      const untimed = ids <= 100 ? ids * 150 : UNTIMED
      for (const name of names) for (let i = 0; i < untimed; i++) await paths[name](order[i % CALLS])
      const wall = Object.fromEntries(names.map((name) => [name, []]))
      for (let round = 0; round < ROUNDS; round++) {
        const turned = names.slice(round % names.length).concat(names.slice(0, round % names.length))
        for (const name of round % 2 ? turned.reverse() : turned) {
          const call = paths[name]
          const started = process.hrtime.bigint()
          for (let i = 0; i < CALLS; i++) await call(order[i])
          wall[name].push(Number(process.hrtime.bigint() - started) / 1000 / CALLS)
        }
      }
      const ratio = (a, b) => median(wall[a].map((value, i) => value / wall[b][i])).toFixed(3)
      const micros = names.map((name) => median(wall[name]).toFixed(1)).join(' / ')
      console.log(`| ${scenario.name} | ${ids.toLocaleString('en')} | ${micros} | ${ratio('ours', 'bare ours')} | ${ratio('theirs', 'bare theirs')} | ${ratio('bare theirs', 'bare ours')} | ${ratio('theirs', 'ours')} |`)
    }
  } finally {
    bare.close()
  }
}

async function main() {
  const server = await startRedis()
  const clients = await connectClients(server.port, { autoPipelining: false, functions: FUNCTIONS })
  if (FLOOR) {
    console.log(`One caller, ${ROUNDS} rounds of ${CALLS} awaited calls per path, medians:\n`)
    console.log('| scenario | ids | wall µs per call: ratekeeper / peer / bare client with ratekeeper\'s request / with the peer\'s | ratekeeper / its bare client | peer / its bare client | bare: peer\'s request / ratekeeper\'s | speed, ratekeeper / peer |')
    console.log('|---|---:|---|---:|---:|---:|---:|')
  } else if (REPLAY) {
    console.log('| scenario | calls on | Redis µs per call (ratekeeper as sent / reading TIME / with its now given / peer) | redis-server CPU per call | command sent |')
    console.log('|---|---|---:|---:|---|')
  } else {
    console.log('| scenario | ids | ratekeeper µs per call | peer µs per call | ratekeeper / peer: redis-server CPU per call | this process\'s CPU per call | wall per call | ratekeeper commands per call | peer commands per call |')
    console.log('|---|---:|---:|---:|---:|---:|---:|---|---|')
  }
  for (const scenario of scenarios(clients).filter((s) => s.redis && (!ONLY || s.name.includes(ONLY)))) {
    await (FLOOR ? measureFloor : REPLAY ? measureReplayed : measureInProcess)(scenario, clients, server)
  }
  clients.ioredis.disconnect()
  clients.ioredis4.disconnect()
  clients.nodeRedis3.quit()
  await clients.store.close()
  await server.stop()
  process.exit(0)
}

if (require.main === module) {
  main().catch((error) => {
    console.error(error)
    process.exit(1)
  })
}

module.exports = { capturedCall, median, PROBE_ID }
