'use strict'

// A redis-server listening on a unix socket (and, for the check, on a loopback port): reached by
// a `redis+unix://` URL, by the `path` option, and through ioredis and node-redis clients that
// connect by socket. Every key written has a TTL.

const { describe, it, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const IORedis = require('ioredis')
const { createClient } = require('redis')

const { FixedWindow, RedisStore } = require('..')
const { startRedis } = require('./helpers/redis-server.js')

describe('a unix socket', () => {
  let server
  let dir
  let socket
  const clients = []
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ratekeeper-sock-'))
    socket = path.join(dir, 'redis.sock')
    server = await startRedis({ args: ['--unixsocket', socket, '--unixsocketperm', '700'] })
  })
  after(async () => {
    await Promise.all(clients.map((client) => client.quit().catch(() => {})))
    await server.stop()
    fs.rmSync(dir, { recursive: true, force: true })
  })

  /** Consumes once through a limiter on `client` (namespace `ns`); the key is on the server, with a TTL. */
  async function consumesThrough(client, ns) {
    const limiter = new FixedWindow({ client, namespace: ns, limits: [{ duration: 60_000, limit: 5 }] })
    assert.equal((await limiter.consume('id')).remaining, 4)
    assert.equal((await limiter.consume('id')).remaining, 3)
    const ttl = Number(await server.cli('PTTL', `${ns}id`))
    assert.ok(ttl > 0, `${ns}id has a TTL (${ttl})`)
  }

  it('is reached by a redis+unix:// URL and by `path`', async () => {
    const byUrl = await RedisStore.connect(`redis+unix://${socket}`)
    const byPath = await RedisStore.connect({ path: socket, commandTimeoutMs: 2000 })
    try {
      await consumesThrough(byUrl, 'url:')
      await consumesThrough(byPath, 'path:')
    } finally {
      await byUrl.close()
      await byPath.close()
    }
  })

  it('is reached through ioredis and node-redis clients connected by socket', async () => {
    const ioredis = new IORedis({ path: socket, lazyConnect: true })
    const nodeRedis = createClient({ socket: { path: socket } })
    clients.push(ioredis, nodeRedis)
    await consumesThrough(ioredis, 'ioredis:')
    await consumesThrough(nodeRedis, 'node-redis:')
  })

  it('refuses `path` beside another address or TLS, and a socket that is not there', async () => {
    for (const other of [{ host: '127.0.0.1' }, { port: 6380 }, { url: 'redis://127.0.0.1' }, { tls: true }, { cluster: ['redis://127.0.0.1:7000'] }]) {
      assert.throws(
        () => new RedisStore({ path: socket, ...other }),
        (error) => error instanceof RangeError && error.code === 'ERR_INVALID_OPTION' && /`path`/.test(error.message),
      )
    }
    assert.throws(() => new RedisStore({ path: 42 }), (error) => error instanceof TypeError && error.code === 'ERR_INVALID_OPTION')
    await assert.rejects(RedisStore.connect({ path: path.join(dir, 'none.sock') }), (error) => {
      assert.equal(error.code, 'ERR_STORE_UNAVAILABLE')
      assert.match(error.message, /none\.sock/)
      return true
    })
  })
})
