'use strict'

/**
 * How many times `call` makes a test server run each command in `names` (lowercase, as INFO
 * commandstats names them; a script's own commands included), read from INFO commandstats, reset
 * before the call. Commands run not at all are left out. `script` counts the calls of ratekeeper's
 * scripts, whether sent as FCALL (a Redis Function: Redis 7 and later, Valkey) or EVALSHA (Redis
 * 6.2): see src/store/script.rs.
 *
 * @param {{ cli: (...args: string[]) => Promise<string> }} server a test server (helpers/redis-server.js)
 * @param {Iterable<string>} names
 * @param {() => Promise<unknown>} call
 * @returns {Promise<Record<string, number>>}
 */
async function commandsRun(server, names, call) {
  const counted = new Set(names)
  await server.cli('CONFIG', 'RESETSTAT')
  await call()
  const stats = await server.cli('INFO', 'commandstats')
  const counts = {}
  for (const [, command, calls] of stats.matchAll(/cmdstat_(\w+):calls=(\d+)/g)) {
    const name = counted.has('script') && (command === 'fcall' || command === 'evalsha') ? 'script' : command
    if (counted.has(name)) counts[name] = (counts[name] ?? 0) + Number(calls)
  }
  return counts
}

module.exports = { commandsRun }
