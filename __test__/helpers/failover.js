'use strict'

// What the failover tests share: settling a call that may hang, reading a cluster's topology,
// and reading the counts a node holds before its replica is promoted.

const IORedis = require('ioredis')

/**
 * Runs `call()`; resolves `{ value }`, `{ error }` or `{ hung: true }` (not settled within
 * `hangMs`), with when it started and ended and how long it took.
 */
async function settle(call, hangMs) {
  let timer
  const hung = new Promise((resolve) => {
    timer = setTimeout(() => resolve({ hung: true }), hangMs)
  })
  const started = Date.now()
  const outcome = await Promise.race([call().then((value) => ({ value }), (error) => ({ error })), hung])
  clearTimeout(timer)
  const ended = Date.now()
  return { ...outcome, started, ended, took: ended - started }
}

/**
 * `CLUSTER NODES` as seen from `port`:
 * [{ id, port, master, masterId, failed, ranges: [[from, to]] }].
 */
async function clusterNodes(cluster, port) {
  const text = await cluster.cli(port, 'CLUSTER', 'NODES')
  return text.split('\n').filter(Boolean).map((line) => {
    const [id, address, flags, masterId, , , , , ...slots] = line.split(' ')
    return {
      id,
      masterId,
      port: Number(address.split('@')[0].split(':').pop()),
      master: flags.includes('master'),
      failed: flags.includes('fail'),
      ranges: slots.filter((s) => /^\d/.test(s)).map((s) => s.split('-').map(Number)).map(([a, b = a]) => [a, b]),
    }
  })
}

const inRanges = (slot, ranges) => ranges.some(([from, to]) => slot >= from && slot <= to)

/**
 * The integers the string `keys` hold on the node at `port` (0 for a missing key): the counts of
 * rate-limiter-flexible's layout. `readonly` reads a cluster replica.
 */
async function stringCounts(port, keys, { readonly = false } = {}) {
  const node = new IORedis({ host: '127.0.0.1', port, lazyConnect: true })
  try {
    await node.connect()
    if (readonly) await node.call('READONLY')
    const pipeline = node.pipeline()
    for (const key of keys) pipeline.get(key)
    const replies = await pipeline.exec()
    return new Map(keys.map((key, i) => [key, Number(replies[i][1] ?? 0)]))
  } finally {
    node.disconnect()
  }
}

module.exports = { settle, clusterNodes, inRanges, stringCounts }
