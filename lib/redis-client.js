'use strict'

/**
 * Reading the connection settings out of ioredis and node-redis client objects, so that the
 * native side can open its own connection to the same Redis. Duck-typed: neither package is
 * required.
 */

const { typeError } = require('./errors.js')

/**
 * The kind of Redis client `client` is, detected as rolling-rate-limiter does for single nodes.
 *
 * @param {unknown} client
 * @returns {'ioredis' | 'ioredis-cluster' | 'node-redis' | 'node-redis-cluster' | null}
 */
function detectClientType(client) {
  if (client === null || typeof client !== 'object') return null
  if ('zRemRangeByScore' in client && 'ZREMRANGEBYSCORE' in client) {
    return Array.isArray(clusterOptions(client).rootNodes) ? 'node-redis-cluster' : 'node-redis'
  }
  if ('zremrangebyscore' in client) {
    return client.isCluster === true || Array.isArray(client.startupNodes) ? 'ioredis-cluster' : 'ioredis'
  }
  return null
}

/** A node-redis cluster's options (v5 keeps them in `_options`). */
function clusterOptions(client) {
  return client._options || client.options || {}
}

/** `{ username, password, tls }` without the undefined ones. */
function defined(settings) {
  return Object.fromEntries(Object.entries(settings).filter(([, value]) => value !== undefined && value !== null && value !== ''))
}

/** Settings of one ioredis node (`client.options` or a cluster's startup node). */
function fromIORedisOptions(options) {
  if (options.path) {
    throw typeError('ERR_INVALID_OPTION', '`client` connects through a unix socket: pass `{ url: "redis+unix:///path" }` instead')
  }
  return defined({
    host: options.host,
    port: options.port,
    username: options.username,
    password: options.password,
    db: options.db || undefined,
    tls: options.tls ? true : undefined,
  })
}

/** Settings of one node-redis node (`client.options` or a cluster's root node). */
function fromNodeRedisOptions(options) {
  const socket = options.socket || {}
  if (socket.path) {
    throw typeError('ERR_INVALID_OPTION', '`client` connects through a unix socket: pass `{ url: "redis+unix:///path" }` instead')
  }
  return defined({
    url: options.url,
    host: options.url ? undefined : socket.host,
    port: options.url ? undefined : socket.port,
    username: options.username,
    password: options.password,
    db: options.database || undefined,
    tls: socket.tls ? true : undefined,
  })
}

/** A node URL for a cluster's node list. */
function nodeUrl(node, tls) {
  if (typeof node === 'string') return node.includes('://') ? node : `redis://${node}`
  if (typeof node === 'number') return `redis://127.0.0.1:${node}`
  const { url, host = '127.0.0.1', port = 6379 } = node
  return url || `${tls ? 'rediss' : 'redis'}://${host}:${port}`
}

/**
 * Our connection options for the same server as `client`.
 *
 * @param {object} client an ioredis or node-redis client, single node or cluster
 * @returns {object} options for `new RedisStore(options)`
 */
function connectionOptionsFromClient(client) {
  switch (detectClientType(client)) {
    case 'ioredis':
      return fromIORedisOptions(client.options || {})
    case 'node-redis':
      return fromNodeRedisOptions(client.options || {})
    case 'ioredis-cluster': {
      const shared = fromIORedisOptions((client.options && client.options.redisOptions) || {})
      const nodes = client.startupNodes || []
      return defined({ cluster: nodes.map((n) => nodeUrl(n, shared.tls)), username: shared.username, password: shared.password, tls: shared.tls })
    }
    case 'node-redis-cluster': {
      const options = clusterOptions(client)
      const shared = fromNodeRedisOptions(options.defaults || {})
      const nodes = options.rootNodes.map((n) => nodeUrl(fromNodeRedisOptions(n), shared.tls))
      return defined({ cluster: nodes, username: shared.username, password: shared.password, tls: shared.tls })
    }
    default:
      throw typeError('ERR_INVALID_OPTION', '`client` is not a recognised Redis client (ioredis or node-redis)')
  }
}

module.exports = { detectClientType, connectionOptionsFromClient }
