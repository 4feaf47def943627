'use strict'

// Redis's cost of a script's lone path (lua/lone.lua), one git revision's lua/ against the working
// tree's, with little of the noise of a call's round trip (issue 24; benchmark/RESULTS.md, item
// 41). On a shared machine a call sent alone moves by several µs from run to run (the network,
// the wake-ups, Redis's own work per command), more than a trim of a script saves; here one FCALL
// runs the lone path LOOPS times, so Redis's time per FCALL (INFO commandstats), divided, is the
// script's own work (its redis.call()s included) and little else.
//
// Per scenario of `npm run bench` on Redis: ratekeeper's lone call is captured once (MONITOR),
// which gives its script and arguments. Each revision's script is loaded as a Function library
// whose function builds the script's configured part (as src/store/script.rs does) and runs its
// lone path LOOPS times over the captured arguments: on one known id (over 10 ids most calls are
// refused, as here after the first few), then on a new id each time (over 10,000 ids most are
// new). CALLS such FCALLs per run, rounds alternating which revision goes first; medians.
//
//   npm run bench:lua-cost [-- "token bucket"] [-- --against HEAD~1] [-- --rounds 9 --loops 2000 --calls 10]
//
// Needs Redis 7 or later (Functions). Prints a table; writes no files.

const { execFileSync } = require('node:child_process')
const path = require('node:path')
const { scenarios, connectClients } = require('./bench.js')
const { capturedCall, median, PROBE_ID } = require('./redis-time.js')
const { startRedis } = require('../__test__/helpers/redis-server.js')
const { configuredPart } = require('../__test__/helpers/lua-scripts.js')

const argv = process.argv.slice(2)
const VALUED = ['--rounds', '--loops', '--calls', '--against']
const option = (name, fallback) => {
  const at = argv.indexOf(`--${name}`)
  return at === -1 ? fallback : argv[at + 1]
}
const ROUNDS = Number(option('rounds', 9))
const LOOPS = Number(option('loops', 2000))
const CALLS = Number(option('calls', 10))
const AGAINST = option('against', 'HEAD')
const ONLY = argv.find((arg, i) => !arg.startsWith('--') && !VALUED.includes(argv[i - 1]))
const ROOT = path.join(__dirname, '..')

/** A reader of lua/'s files at git revision `revision`, or in the working tree for null. */
function luaAt(revision) {
  if (revision === null) return undefined
  return (file) => execFileSync('git', ['-C', ROOT, 'show', `${revision}:lua/${file}`], { encoding: 'utf8' })
}

/**
 * A Function library named `name` whose function runs the lone path of `script` (at `revision`)
 * `KEYS[2]` times: on the key `KEYS[1]`, or, when `KEYS[3]` is "new", on `KEYS[1]` followed by
 * the loop's count. It answers 1, or fails when the lone path did not answer.
 */
function loopLibrary(name, script, revision) {
  const configured = configuredPart(script, luaAt(revision))
  if (configured === null) throw new Error(`lua/${script}.lua at ${revision ?? 'the working tree'} has no lone path`)
  return `#!lua name=${name}
local KEYS, ARGV
local function configure()
${configured}
return lone_consume
end
redis.register_function('${name}', function(keys, args)
  ARGV = args
  local lone_consume = configure()
  local prefix, loops, new = keys[1], tonumber(keys[2]), keys[3] == 'new'
  KEYS = { prefix }
  for i = 1, loops do
    if new then
      KEYS[1] = prefix .. i
    end
    if not lone_consume() then
      return redis.error_reply('the lone path did not answer')
    end
  end
  return 1
end)
`
}

/** Redis's µs per lone path: CALLS FCALLs of `library` on `key` (known or new ids). */
async function perLonePath(client, library, key, kind, args) {
  await client.flushall()
  await client.config('RESETSTAT')
  for (let call = 0; call < CALLS; call++) {
    await client.call('FCALL', library, 3, kind === 'new' ? `${key}:${call}:` : key, String(LOOPS), kind, ...args)
  }
  const stats = await client.info('commandstats')
  const usec = Number(stats.match(/cmdstat_fcall:calls=\d+,usec=(\d+)/)[1])
  return usec / (CALLS * LOOPS)
}

async function main() {
  const server = await startRedis()
  const clients = await connectClients(server.port, { autoPipelining: false })
  const client = clients.ioredis
  const version = (await client.info('server')).match(/redis_version:(\S+)/)[1]
  console.log(`Redis ${version}: µs per lone path, ${LOOPS} in each FCALL, ${CALLS} FCALLs per run, medians of ${ROUNDS} rounds\n`)
  console.log(`| scenario | script | ids | ${AGAINST} | working tree | change (its rounds' least to greatest) |`)
  console.log('|---|---|---|---:|---:|---:|')
  for (const scenario of scenarios(clients).filter((s) => s.redis && (!ONLY || s.name.includes(ONLY)))) {
    const attempt = scenario.ours()
    // A first call loads the script (and opens the lane): the captured one is a lone call's.
    await attempt('lua-cost-warm')
    await attempt('lua-cost-warm')
    const sent = await capturedCall(clients, attempt)
    const library = sent.length === 1 && sent[0][0].toUpperCase() === 'FCALL' ? sent[0][1].match(/^ratekeeper_(\w+)_[0-9a-f]{12}(_compact)?$/) : null
    if (library === null || Number(sent[0][2]) !== 1) {
      console.log(`| ${scenario.name} | (not measured: a call sends ${sent.map((args) => args[0]).join(', ') || 'nothing'}, not one FCALL of one key) | | | | |`)
      continue
    }
    const script = library[1]
    const key = sent[0][3].split(PROBE_ID).join('lua-cost')
    // A lone call on the direct lane goes to the Function's compact entry, its configuration joined
    // by newlines (src/store/script.rs): the loop takes ARGV whole.
    const args = library[2] ? [...sent[0][4].split('\n'), ...sent[0].slice(5)] : sent[0].slice(4)
    const names = { against: `lua_cost_${script}_against`, working: `lua_cost_${script}_working` }
    await client.call('FUNCTION', 'LOAD', 'REPLACE', loopLibrary(names.against, script, AGAINST))
    await client.call('FUNCTION', 'LOAD', 'REPLACE', loopLibrary(names.working, script, null))
    // A call whose arguments hold something of its own (the rolling window's member) is not the
    // same call when repeated: its lone path may hand it on to the batch path.
    const failed = await perLonePath(client, names.working, key, 'known', args).then(() => null, (error) => error.message)
    if (failed !== null) {
      console.log(`| ${scenario.name} | ${script} | (not measured: ${failed}) | | | |`)
      continue
    }
    for (const kind of ['known', 'new']) {
      const micros = { against: [], working: [] }
      for (let round = 0; round < ROUNDS; round++) {
        for (const which of round % 2 ? ['working', 'against'] : ['against', 'working']) {
          micros[which].push(await perLonePath(client, names[which], key, kind, args))
        }
      }
      // The change round by round (each round's two runs are next to each other, so that a slow
      // spell of the machine weighs on both): its median, and its least and greatest.
      const changes = micros.working.map((after, round) => after - micros.against[round])
      const spread = `${Math.min(...changes).toFixed(2)} to ${Math.max(...changes).toFixed(2)}`
      const ids = kind === 'known' ? 'one known id' : 'a new id each'
      console.log(`| ${scenario.name} | ${script} | ${ids} | ${median(micros.against).toFixed(2)} µs | ${median(micros.working).toFixed(2)} µs | ${median(changes).toFixed(2)} µs (${spread}) |`)
    }
  }
  client.disconnect()
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
