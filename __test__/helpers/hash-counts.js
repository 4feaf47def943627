'use strict'

const IORedis = require('ioredis')

/**
 * The hash at `key` on a test server (see helpers/redis-server.js), read with redis-cli: an object
 * of its fields (empty when the key does not exist).
 * @returns {Promise<Record<string, string>>}
 */
async function hashOf(server, key) {
  const text = await server.cli('HGETALL', key)
  const lines = text === '' ? [] : text.split('\n')
  return Object.fromEntries(lines.flatMap((value, i) => (i % 2 ? [] : [[value, lines[i + 1]]])))
}

/**
 * A FixedWindow limit's count in an id's hash, as HGETALL reads it: the field
 * `<duration µs>:<window index>` of the newest window (0 when there is none).
 * @param {Record<string, string>} hash
 * @param {number} durationMs
 */
function fixedWindowCount(hash, durationMs) {
  const prefix = `${durationMs * 1000}:`
  let newest = -1
  let count = 0
  for (const [field, value] of Object.entries(hash)) {
    if (!field.startsWith(prefix)) continue
    const window = Number(field.slice(prefix.length))
    if (window > newest) [newest, count] = [window, Number(value)]
  }
  return count
}

/**
 * A FixedWindow limit's count (see fixedWindowCount) in each hash of `keys`, as the node on
 * 127.0.0.1:`port` holds it, read in one pipeline; `readonly` first sends READONLY (to read a
 * Cluster replica).
 * @returns {Promise<Map<string, number>>}
 */
async function hashCounts(port, keys, durationMs, { readonly = false } = {}) {
  const node = new IORedis({ host: '127.0.0.1', port, lazyConnect: true, enableOfflineQueue: true })
  try {
    await node.connect()
    if (readonly) await node.call('READONLY')
    const pipeline = node.pipeline()
    for (const key of keys) pipeline.hgetall(key)
    const replies = await pipeline.exec()
    return new Map(keys.map((key, i) => [key, fixedWindowCount(replies[i][1] ?? {}, durationMs)]))
  } finally {
    node.disconnect()
  }
}

module.exports = { hashOf, hashCounts, fixedWindowCount }
