'use strict'

const IORedis = require('ioredis')

/**
 * The `field` of each hash in `keys` as the node on 127.0.0.1:`port` holds it (0 when absent),
 * read in one pipeline; `readonly` first sends READONLY (to read a Cluster replica).
 * @returns {Promise<Map<string, number>>}
 */
async function hashCounts(port, keys, field, { readonly = false } = {}) {
  const node = new IORedis({ host: '127.0.0.1', port, lazyConnect: true, enableOfflineQueue: true })
  try {
    await node.connect()
    if (readonly) await node.call('READONLY')
    const pipeline = node.pipeline()
    for (const key of keys) pipeline.hget(key, field)
    const replies = await pipeline.exec()
    return new Map(keys.map((key, i) => [key, Number(replies[i][1] ?? 0)]))
  } finally {
    node.disconnect()
  }
}

module.exports = { hashCounts }
