'use strict'

/**
 * How many times `call` makes a test server run each command in `names` (lowercase, as INFO
 * commandstats names them; a script's own commands included), read from INFO commandstats, reset
 * before the call. Commands run not at all are left out.
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
  for (const [, name, calls] of stats.matchAll(/cmdstat_(\w+):calls=(\d+)/g)) {
    if (counted.has(name)) counts[name] = Number(calls)
  }
  return counts
}

module.exports = { commandsRun }
