'use strict'

// Reading connection settings out of ioredis and node-redis clients. Every client here is built
// without connecting (ioredis `lazyConnect: true`, node-redis without `connect()`): these tests
// never touch a Redis server.

const { describe, it, after } = require('node:test')
const assert = require('node:assert/strict')
const IORedis = require('ioredis')
const { createClient, createCluster, createClientPool, createSentinel } = require('redis')
const { RedisRateLimiter } = require('rolling-rate-limiter')

const { detectClientType, connectionOptionsFromClient } = require('../lib/redis-client.js')

const ioredisClients = []
function ioredis(...args) {
  const client = new IORedis(...args)
  ioredisClients.push(client)
  return client
}
function ioredisCluster(nodes, options) {
  const client = new IORedis.Cluster(nodes, { lazyConnect: true, ...options })
  ioredisClients.push(client)
  return client
}
after(() => ioredisClients.forEach((client) => client.disconnect()))

function assertInvalid(fn, message) {
  assert.throws(fn, (error) => {
    assert.ok(error instanceof TypeError)
    assert.equal(error.code, 'ERR_INVALID_OPTION')
    assert.match(error.message, /`client`/)
    if (message) assert.match(error.message, message)
    return true
  })
}

describe('ioredis', () => {
  it('reads host, port and credentials given as an object', () => {
    const client = ioredis({ lazyConnect: true, host: 'redis.test', port: 6380, username: 'u', password: 'p', db: 3 })
    assert.equal(detectClientType(client), 'ioredis')
    assert.deepEqual(connectionOptionsFromClient(client), {
      host: 'redis.test',
      port: 6380,
      username: 'u',
      password: 'p',
      db: 3,
    })
  })

  it('reads the defaults', () => {
    assert.deepEqual(connectionOptionsFromClient(ioredis({ lazyConnect: true })), { host: 'localhost', port: 6379 })
  })

  it('reads a redis:// URL with user, password and db', () => {
    const client = ioredis('redis://al%40ice:s%3Acret@redis.test:6390/4', { lazyConnect: true })
    assert.deepEqual(connectionOptionsFromClient(client), {
      host: 'redis.test',
      port: 6390,
      username: 'al@ice',
      password: 's:cret',
      db: 4,
    })
  })

  it('reads a rediss:// URL as TLS', () => {
    const client = ioredis('rediss://:pw@redis.test:6391', { lazyConnect: true })
    assert.deepEqual(connectionOptionsFromClient(client), { host: 'redis.test', port: 6391, password: 'pw', tls: true })
  })

  it('reads `tls: {}` as TLS', () => {
    const client = ioredis({ lazyConnect: true, host: 'redis.test', tls: {} })
    assert.deepEqual(connectionOptionsFromClient(client), { host: 'redis.test', port: 6379, tls: true })
  })

  it('reads a unix socket given as `path` or as the first argument', () => {
    const client = ioredis({ lazyConnect: true, path: '/tmp/redis.sock', password: 'pw', db: 2 })
    assert.deepEqual(connectionOptionsFromClient(client), { path: '/tmp/redis.sock', password: 'pw', db: 2 })
    assert.deepEqual(connectionOptionsFromClient(ioredis('/tmp/redis.sock', { lazyConnect: true })), { path: '/tmp/redis.sock' })
  })

  it('reads Sentinel mode: the sentinels, the master name and both sets of credentials', () => {
    const sentinel = ioredis({
      lazyConnect: true,
      sentinels: [{ host: 's1.test', port: 26380 }, { host: 's2.test' }],
      name: 'mymaster',
      sentinelPassword: 'spw',
      password: 'pw',
      db: 2,
      tls: { servername: 'ignored.test' }, // ioredis uses it only with enableTLSForSentinelMode
    })
    assert.equal(detectClientType(sentinel), 'ioredis')
    assert.deepEqual(connectionOptionsFromClient(sentinel), {
      sentinels: [{ host: 's1.test', port: 26380 }, { host: 's2.test', port: 26379 }],
      name: 'mymaster',
      sentinelPassword: 'spw',
      password: 'pw',
      db: 2,
    })
    const withTls = ioredis({ lazyConnect: true, sentinels: [{ host: 's.test', port: 26379 }], name: 'm', enableTLSForSentinelMode: true, tls: {} })
    assert.equal(connectionOptionsFromClient(withTls).tls, true)
    const sentinelTls = ioredis({ lazyConnect: true, sentinels: [{ host: 's.test', port: 26379 }], name: 'm', sentinelTLS: {} })
    assertInvalid(() => connectionOptionsFromClient(sentinelTls), /sentinelTLS/)
  })
})

describe('ioredis Cluster', () => {
  it('reads startup nodes given as objects, URLs and ports, and the shared redisOptions', () => {
    const client = ioredisCluster([{ host: 'a.test', port: 7000 }, 'redis://b.test:7001', 'c.test:7002', 7003, { host: '::1' }], {
      redisOptions: { username: 'u', password: 'pw' },
    })
    assert.equal(detectClientType(client), 'ioredis-cluster')
    assert.deepEqual(connectionOptionsFromClient(client), {
      cluster: [
        'redis://a.test:7000',
        'redis://b.test:7001',
        'redis://c.test:7002',
        'redis://127.0.0.1:7003',
        'redis://[::1]:6379',
      ],
      username: 'u',
      password: 'pw',
    })
  })

  it('reads TLS from redisOptions', () => {
    const client = ioredisCluster([{ host: 'a.test', port: 7000 }], { redisOptions: { tls: {} } })
    assert.deepEqual(connectionOptionsFromClient(client), { cluster: ['redis://a.test:7000'], tls: true })
  })

  it("takes the first node's own credentials over redisOptions, as ioredis does", () => {
    const client = ioredisCluster([{ host: 'a.test', port: 7000, password: 'own' }], { redisOptions: { password: 'shared' } })
    assert.deepEqual(connectionOptionsFromClient(client), { cluster: ['redis://a.test:7000'], password: 'own' })
  })
})

describe('node-redis', () => {
  it('reads socket options, credentials and database', () => {
    const client = createClient({
      socket: { host: 'redis.test', port: 6392, tls: true },
      username: 'u',
      password: 'x',
      database: 2,
    })
    assert.equal(detectClientType(client), 'node-redis')
    assert.deepEqual(connectionOptionsFromClient(client), {
      host: 'redis.test',
      port: 6392,
      username: 'u',
      password: 'x',
      db: 2,
      tls: true,
    })
  })

  it('reads the defaults', () => {
    assert.deepEqual(connectionOptionsFromClient(createClient()), { host: 'localhost', port: 6379 })
  })

  it('reads a redis:// URL with user, password and db', () => {
    const client = createClient({ url: 'redis://u:p%2Fq@redis.test:6393/5' })
    assert.deepEqual(connectionOptionsFromClient(client), {
      host: 'redis.test',
      port: 6393,
      username: 'u',
      password: 'p/q',
      db: 5,
    })
  })

  it('reads a rediss:// URL as TLS', () => {
    const client = createClient({ url: 'rediss://redis.test' })
    assert.deepEqual(connectionOptionsFromClient(client), { host: 'redis.test', port: 6379, tls: true })
  })

  it('reads a duplicate like its original', () => {
    const client = createClient({ url: 'redis://redis.test:6394/1' })
    assert.deepEqual(connectionOptionsFromClient(client.duplicate()), connectionOptionsFromClient(client))
  })

  it('reads a unix socket', () => {
    const client = createClient({ socket: { path: '/tmp/redis.sock' }, username: 'u', password: 'p', database: 1 })
    assert.deepEqual(connectionOptionsFromClient(client), { path: '/tmp/redis.sock', username: 'u', password: 'p', db: 1 })
  })

  it('refuses a credentials provider, pools, Sentinel clients and legacy() wrappers', () => {
    const provider = { type: 'async-credentials-provider', credentials: async () => ({ password: 'p' }) }
    assertInvalid(() => connectionOptionsFromClient(createClient({ credentialsProvider: provider })), /credentialsProvider/)

    const pool = createClientPool({ url: 'redis://redis.test:6395' })
    const sentinel = createSentinel({ name: 'mymaster', sentinelRootNodes: [{ host: 's.test', port: 26379 }] })
    const legacy = createClient({ url: 'redis://redis.test:6396' }).legacy()
    assert.equal(detectClientType(pool), 'node-redis')
    assert.equal(detectClientType(sentinel), 'node-redis')
    assert.equal(detectClientType(legacy), 'node-redis')
    for (const client of [pool, sentinel, legacy]) {
      assertInvalid(() => connectionOptionsFromClient(client), /does not expose its connection settings/)
    }
  })
})

describe('node-redis cluster', () => {
  it('reads root nodes given as URLs and socket options, and the shared defaults', () => {
    const client = createCluster({
      rootNodes: [{ url: 'redis://c.test:7002' }, { socket: { host: 'd.test', port: 7003 } }, { url: 'redis://e.test' }],
      defaults: { username: 'u', password: 'q' },
    })
    assert.equal(detectClientType(client), 'node-redis-cluster')
    assert.deepEqual(connectionOptionsFromClient(client), {
      cluster: ['redis://c.test:7002', 'redis://d.test:7003', 'redis://e.test:6379'],
      username: 'u',
      password: 'q',
    })
  })

  it('reads TLS and credentials from rediss:// root URLs or from defaults.socket', () => {
    const fromUrls = createCluster({ rootNodes: [{ url: 'rediss://:pw@c.test:7002' }, { url: 'rediss://:pw@d.test:7003' }] })
    assert.deepEqual(connectionOptionsFromClient(fromUrls), {
      cluster: ['redis://c.test:7002', 'redis://d.test:7003'],
      password: 'pw',
      tls: true,
    })
    const fromDefaults = createCluster({
      rootNodes: [{ socket: { host: 'c.test', port: 7002 } }],
      defaults: { password: 'pw', socket: { tls: true } },
    })
    assert.deepEqual(connectionOptionsFromClient(fromDefaults), { cluster: ['redis://c.test:7002'], password: 'pw', tls: true })
  })
})

describe('what is not a client', () => {
  it('is not detected and is refused', () => {
    for (const value of [{}, null, undefined, 'redis://redis.test', 42, [], { connect() {} }, { options: { host: 'h' } }]) {
      assert.equal(detectClientType(value), null)
      assertInvalid(() => connectionOptionsFromClient(value), /ioredis or node-redis client/)
    }
  })

  it('never echoes a URL, which may hold a password', () => {
    assertInvalid(() => connectionOptionsFromClient('redis://u:secret@redis.test'), /got a string$/)
  })
})

describe('detection', () => {
  it('agrees with rolling-rate-limiter 0.4.2 on single nodes', () => {
    const clients = [
      ioredis({ lazyConnect: true }),
      createClient(),
      createClient().legacy(),
      createClientPool(),
      { zremrangebyscore() {} },
      { zRemRangeByScore() {}, ZREMRANGEBYSCORE() {} },
      {},
    ]
    for (const client of clients) {
      assert.equal(detectClientType(client), RedisRateLimiter.determineRedisClientType(client))
    }
  })
})
