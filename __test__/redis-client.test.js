'use strict'

// Reading connection settings out of ioredis and node-redis clients (built without connecting).

const { it, after } = require('node:test')
const assert = require('node:assert/strict')
const IORedis = require('ioredis')
const { createClient, createCluster } = require('redis')

const { detectClientType, connectionOptionsFromClient } = require('../lib/redis-client.js')

const ioredisClients = []
function ioredis(...args) {
  const client = new IORedis(...args)
  ioredisClients.push(client)
  return client
}
after(() => ioredisClients.forEach((c) => c.disconnect()))

it('reads an ioredis client given host, port and credentials', () => {
  const client = ioredis({ lazyConnect: true, host: 'redis.test', port: 6380, username: 'u', password: 'p', db: 3 })
  assert.equal(detectClientType(client), 'ioredis')
  assert.deepEqual(connectionOptionsFromClient(client), { host: 'redis.test', port: 6380, username: 'u', password: 'p', db: 3 })
})

it('reads an ioredis client given a rediss:// URL', () => {
  const client = ioredis('rediss://u:p@redis.test:6390/4', { lazyConnect: true })
  assert.deepEqual(connectionOptionsFromClient(client), { host: 'redis.test', port: 6390, username: 'u', password: 'p', db: 4, tls: true })
})

it('reads an ioredis Cluster client', () => {
  const client = new IORedis.Cluster([{ host: 'a.test', port: 7000 }, 'redis://b.test:7001'], { lazyConnect: true, redisOptions: { password: 'pw' } })
  ioredisClients.push(client)
  assert.equal(detectClientType(client), 'ioredis-cluster')
  assert.deepEqual(connectionOptionsFromClient(client), { cluster: ['redis://a.test:7000', 'redis://b.test:7001'], password: 'pw' })
})

it('reads a node-redis client given a URL or socket options', () => {
  const fromUrl = createClient({ url: 'redis://u:p@redis.test:6391/5' })
  assert.equal(detectClientType(fromUrl), 'node-redis')
  assert.deepEqual(connectionOptionsFromClient(fromUrl), { url: 'redis://u:p@redis.test:6391/5', username: 'u', password: 'p', db: 5 })
  const fromSocket = createClient({ socket: { host: 'redis.test', port: 6392, tls: true }, password: 'x', database: 2 })
  assert.deepEqual(connectionOptionsFromClient(fromSocket), { host: 'redis.test', port: 6392, password: 'x', db: 2, tls: true })
})

it('reads a node-redis cluster client', () => {
  const client = createCluster({ rootNodes: [{ url: 'redis://c.test:7002' }, { socket: { host: 'd.test', port: 7003 } }], defaults: { password: 'q' } })
  assert.equal(detectClientType(client), 'node-redis-cluster')
  assert.deepEqual(connectionOptionsFromClient(client), { cluster: ['redis://c.test:7002', 'redis://d.test:7003'], password: 'q' })
})

it('refuses what is not a client', () => {
  for (const value of [{}, null, 'redis://x', 42, { connect() {} }]) {
    assert.equal(detectClientType(value), null)
    assert.throws(() => connectionOptionsFromClient(value), { name: 'TypeError', code: 'ERR_INVALID_OPTION' })
  }
  const unix = ioredis({ lazyConnect: true, path: '/tmp/redis.sock' })
  assert.throws(() => connectionOptionsFromClient(unix), { code: 'ERR_INVALID_OPTION', message: /unix socket/ })
})
