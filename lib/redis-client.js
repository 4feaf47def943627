'use strict'

/**
 * Reading the connection settings out of ioredis and node-redis client objects, so that the
 * native side can open its own connection to the same Redis. Duck-typed: neither package is
 * required. Where the settings live:
 *
 * - ioredis `Redis`: `client.options` (`host`, `port`, `path`, `username`, `password`, `db`,
 *   `tls`; in Sentinel mode `sentinels`, `name`, `sentinelUsername`, `sentinelPassword`,
 *   `enableTLSForSentinelMode`), a URL already parsed into them by the constructor.
 * - ioredis `Cluster`: `client.startupNodes` (objects, URLs or ports) and
 *   `client.options.redisOptions` (shared by every node; a startup node's own fields win).
 * - node-redis client: `client.options` (`url`, `socket.{host,port,tls,path}`, `username`,
 *   `password`, `database`, `credentialsProvider`), a URL already parsed into them.
 * - node-redis cluster: `client._options` (`rootNodes`, each like a client's options with an
 *   unparsed `url`, and `defaults` under them).
 */

const { typeError } = require('./errors.js')

/**
 * The kind of Redis client `client` is. Single nodes are told apart exactly as
 * rolling-rate-limiter 0.4 does (`zRemRangeByScore` + `ZREMRANGEBYSCORE` is node-redis,
 * else `zremrangebyscore` is ioredis); the cluster forms are then recognised by their options.
 *
 * @param {unknown} client
 * @returns {'ioredis' | 'ioredis-cluster' | 'node-redis' | 'node-redis-cluster' | null}
 */
function detectClientType(client) {
  if (client === null || typeof client !== 'object') return null
  if ('zRemRangeByScore' in client && 'ZREMRANGEBYSCORE' in client) {
    const options = nodeRedisClusterOptions(client)
    return options && Array.isArray(options.rootNodes) ? 'node-redis-cluster' : 'node-redis'
  }
  if ('zremrangebyscore' in client) {
    return client.isCluster === true && Array.isArray(client.startupNodes) ? 'ioredis-cluster' : 'ioredis'
  }
  return null
}

/**
 * Our connection options for the server (or cluster) `client` talks to.
 *
 * Single node: `{ host, port, username?, password?, db?, tls? }`, or `{ path, ... }` for a unix
 * socket, or `{ sentinels: [{ host, port }], name, sentinelUsername?, sentinelPassword?, ... }`
 * for an ioredis client in Sentinel mode (`db` only when not 0, `tls` only when on: `true`, or the TLS options we take from the
 * client's). Cluster: `{ cluster: ['redis://host:port', ...], username?, password?, tls? }`, the
 * credentials and TLS being those the client uses for its first node.
 *
 * @param {unknown} client an ioredis or node-redis client, single node or cluster
 * @returns {{ host: string, port: number, username?: string, password?: string, db?: number, tls?: true | object }
 *   | { path: string, username?: string, password?: string, db?: number }
 *   | { sentinels: Array<{ host: string, port: number }>, name?: string, sentinelUsername?: string,
 *       sentinelPassword?: string, username?: string, password?: string, db?: number, tls?: true | object }
 *   | { cluster: string[], username?: string, password?: string, tls?: true | object }}
 * @throws {TypeError} `code: 'ERR_INVALID_OPTION'` when `client` is not a recognised client, or
 *   is one whose settings cannot be used (a credentials provider, a node-redis pool, ...)
 */
function connectionOptionsFromClient(client) {
  switch (detectClientType(client)) {
    case 'ioredis':
      if (client.options && client.options.sentinels) return fromIORedisSentinel(client.options)
      return singleNodeOptions(fromIORedis(client.options))
    case 'node-redis':
      return singleNodeOptions(fromNodeRedis(client.options))
    case 'ioredis-cluster': {
      const shared = (client.options && client.options.redisOptions) || {}
      const nodes = client.startupNodes.map((node) => {
        // ioredis takes no TLS from a startup node's URL scheme, only from `redisOptions.tls`.
        const own = typeof node === 'string' ? { ...parseUrl(node), tls: undefined } : typeof node === 'number' ? { port: node } : node || {}
        // As ioredis merges them: a startup node's own fields over `redisOptions`.
        return fromIORedis({ ...shared, ...clean(own), host: own.host || '127.0.0.1', port: own.port || 6379 })
      })
      return clusterOptions(nodes)
    }
    case 'node-redis-cluster': {
      const { rootNodes, defaults = {} } = nodeRedisClusterOptions(client)
      // As node-redis merges them: a root node's own fields over `defaults`.
      const nodes = rootNodes.map((node) =>
        fromNodeRedis({ ...defaults, ...node, socket: { ...defaults.socket, ...(node && node.socket) } }),
      )
      return clusterOptions(nodes)
    }
    default:
      throw invalid(
        `\`client\` must be an ioredis or node-redis client (single node or cluster), got ${describe(client)}`,
      )
  }
}

/** Our options for one node (by TCP address or unix socket `path`) from a client's settings. */
function singleNodeOptions({ host, port, path, username, password, db, tls }) {
  const address = path ? { path } : { host, port }
  return clean({ ...address, username, password, db: db || undefined, tls: tls || undefined })
}

function invalid(message) {
  return typeError('ERR_INVALID_OPTION', message)
}

const INSTEAD = 'pass a Redis URL or an options object as `client` instead'

/** What `value` is, for an error message (never its contents: it may hold a password). */
function describe(value) {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'an array'
  if (typeof value === 'object') return 'an object that is neither'
  return `a ${typeof value}`
}

/** A node-redis cluster's options (v5 keeps them in `_options`), or undefined. */
function nodeRedisClusterOptions(client) {
  const options = client._options || client.options
  return options && typeof options === 'object' ? options : undefined
}

/** `settings` without its undefined, null and empty-string fields. */
function clean(settings) {
  return Object.fromEntries(Object.entries(settings).filter(([, v]) => v !== undefined && v !== null && v !== ''))
}

/** `{ host, port, username, password, db, tls }` of a `redis://` / `rediss://` URL (or `host:port`). */
function parseUrl(url) {
  let parsed
  try {
    parsed = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(url) ? url : `redis://${url}`)
  } catch {
    throw invalid(`\`client\` has a node address that is not a valid Redis URL; ${INSTEAD}`)
  }
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') {
    throw invalid(`\`client\` uses a ${parsed.protocol} URL, not redis:// or rediss://; ${INSTEAD}`)
  }
  const db = parsed.pathname.length > 1 ? Number(parsed.pathname.slice(1)) : undefined
  return {
    host: parsed.hostname.replace(/^\[(.*)\]$/, '$1') || undefined,
    port: parsed.port ? Number(parsed.port) : undefined,
    username: parsed.username ? decodeURIComponent(parsed.username) : undefined,
    password: parsed.password ? decodeURIComponent(parsed.password) : undefined,
    db: Number.isInteger(db) ? db : undefined,
    tls: parsed.protocol === 'rediss:',
  }
}

/** The settings of one ioredis node from its (already URL-parsed) options. */
function fromIORedis(options) {
  if (!options || typeof options !== 'object') {
    throw invalid(`\`client\` does not expose its connection settings (\`options\`); ${INSTEAD}`)
  }
  return {
    path: options.path || undefined,
    host: options.host || 'localhost',
    port: Number(options.port) || 6379,
    username: options.username,
    password: options.password,
    db: Number(options.db) || 0,
    tls: tlsOf(options.tls),
  }
}

/**
 * Our Sentinel options from an ioredis client in Sentinel mode: its `sentinels` and `name`, the
 * sentinels' credentials, and the data nodes' credentials, `db` and TLS (which ioredis uses only
 * with `enableTLSForSentinelMode`).
 */
function fromIORedisSentinel(options) {
  if (!Array.isArray(options.sentinels)) {
    throw invalid(`\`client\` has \`sentinels\` that are not an array of { host, port }; ${INSTEAD}`)
  }
  if (options.sentinelTLS) {
    throw invalid(`\`client\` reaches its sentinels with TLS (\`sentinelTLS\`), which ratekeeper does not; ${INSTEAD}`)
  }
  const sentinels = options.sentinels.map((sentinel) => ({
    host: (sentinel && sentinel.host) || 'localhost',
    port: Number(sentinel && sentinel.port) || 26379,
  }))
  const { name, sentinelUsername, sentinelPassword, username, password, db } = options
  const tls = options.enableTLSForSentinelMode && tlsOf(options.tls)
  return clean({
    sentinels,
    name,
    sentinelUsername,
    sentinelPassword,
    username,
    password,
    db: Number(db) || undefined,
    tls: tls || undefined,
  })
}

/**
 * Our `tls` from the TLS options a client hands to Node's `tls.connect`: `false`, `true`, or the
 * part we take (`ca`, `cert`, `key`, `servername`, `rejectUnauthorized`).
 */
function tlsOf(options) {
  if (!options) return false
  if (typeof options !== 'object') return true
  const { ca, cert, key, servername, rejectUnauthorized } = options
  const taken = clean({ ca, cert, key, servername, rejectUnauthorized })
  return Object.keys(taken).length > 0 ? taken : true
}

/** The settings of one node-redis node from its options (a `url` wins, as in node-redis). */
function fromNodeRedis(options) {
  if (!options || typeof options !== 'object') {
    throw invalid(
      `\`client\` does not expose its connection settings (node-redis pools, Sentinel clients and legacy() wrappers do not); ${INSTEAD}`,
    )
  }
  const socket = options.socket || {}
  const settings = {
    path: socket.path || undefined,
    host: socket.host || 'localhost',
    port: Number(socket.port) || 6379,
    username: options.username,
    password: options.password,
    db: Number(options.database) || 0,
    tls: socket.tls === true && tlsOf(socket), // node-redis uses TLS only for `tls: true`
    ...(options.url ? clean(parseUrl(options.url)) : {}),
  }
  if (options.credentialsProvider && !settings.username && !settings.password) {
    throw invalid(`\`client\` gets its credentials from a \`credentialsProvider\`, which cannot be read; ${INSTEAD}`)
  }
  return settings
}

/** Our cluster options from the clients' node settings; the first node gives credentials and TLS. */
function clusterOptions(nodes) {
  if (nodes.length === 0) throw invalid(`\`client\` is a cluster client without any node; ${INSTEAD}`)
  const [{ username, password, tls }] = nodes
  const cluster = nodes.map(({ host, port }) => `redis://${host.includes(':') ? `[${host}]` : host}:${port}`)
  // A Cluster's nodes are checked against their own names.
  const { servername, ...clusterTls } = typeof tls === 'object' ? tls : {}
  return clean({ cluster, username, password, tls: typeof tls === 'object' ? clusterTls : tls || undefined })
}

module.exports = { detectClientType, connectionOptionsFromClient }
