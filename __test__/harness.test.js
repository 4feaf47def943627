'use strict'

// The Redis test harness itself: real redis-server processes on free ports, restart, stop, cluster.

const { describe, it, after } = require('node:test')
const assert = require('node:assert/strict')
const net = require('node:net')

const { freePort, startRedis, startCluster, clusterSkip } = require('./helpers/redis-server.js')

/** Resolves true if something accepts a TCP connection on `port`, false if refused. */
function accepts(port) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1')
    socket.setTimeout(1000, () => {
      socket.destroy()
      resolve(false)
    })
    socket.on('connect', () => {
      socket.destroy()
      resolve(true)
    })
    socket.on('error', () => resolve(false))
  })
}

describe('freePort', () => {
  it('gives a loopback port that is not 6379 and can be listened on', async () => {
    const port = await freePort()
    assert.ok(Number.isInteger(port) && port > 0 && port < 65536)
    assert.notEqual(port, 6379)
    const server = net.createServer()
    await new Promise((resolve, reject) => {
      server.on('error', reject)
      server.listen(port, '127.0.0.1', resolve)
    })
    await new Promise((resolve) => server.close(resolve))
  })
})

describe('startRedis', () => {
  let server
  after(() => server && server.stop())

  it('starts a server that answers redis-cli', async () => {
    server = await startRedis()
    assert.equal(server.host, '127.0.0.1')
    assert.notEqual(server.port, 6379)
    assert.equal(server.url, `redis://127.0.0.1:${server.port}`)
    assert.equal(await server.cli('SET', 'a', '1'), 'OK')
    assert.equal(await server.cli('GET', 'a'), '1')
    assert.equal(await server.cli('RPUSH', 'list', 'x', 'y'), '2')
    assert.equal(await server.cli('LRANGE', 'list', '0', '-1'), 'x\ny')
  })

  it('resolves an error reply as its text (redis-cli exits 0 on those)', async () => {
    assert.match(await server.cli('INCR', 'list'), /^WRONGTYPE/)
  })

  it('restarts on the same port without keeping data', async () => {
    const { port, pid } = server
    await server.restart()
    assert.equal(server.port, port)
    assert.notEqual(server.pid, pid)
    assert.equal(await server.cli('EXISTS', 'a'), '0')
    assert.equal(await server.cli('DBSIZE'), '0')
    assert.equal(await server.cli('SET', 'b', '2'), 'OK')
  })

  it('stops: the port refuses connections, and stopping again is harmless', async () => {
    assert.equal(await accepts(server.port), true)
    await server.stop()
    assert.equal(await accepts(server.port), false)
    await server.stop()
  })

  it('passes extra arguments to redis-server', async () => {
    const other = await startRedis({ args: ['--maxmemory', '12345678'] })
    try {
      assert.equal(await other.cli('CONFIG', 'GET', 'maxmemory'), 'maxmemory\n12345678')
    } finally {
      await other.stop()
    }
  })
})

describe('startCluster', { skip: clusterSkip() }, () => {
  let cluster
  after(() => cluster && cluster.stop())

  it('starts a 6-node cluster with 3 masters and 3 replicas', async () => {
    cluster = await startCluster()
    assert.equal(cluster.nodes.length, 6)
    assert.deepEqual(
      cluster.urls,
      cluster.nodes.map((n) => `redis://127.0.0.1:${n.port}`),
    )
    const roles = []
    for (const node of cluster.nodes) {
      assert.notEqual(node.port, 6379)
      assert.match(await cluster.cli(node.port, 'CLUSTER', 'INFO'), /cluster_state:ok/)
      roles.push((await cluster.cli(node.port, 'ROLE')).split('\n')[0])
    }
    assert.deepEqual(roles.sort(), ['master', 'master', 'master', 'slave', 'slave', 'slave'])
    // -c follows MOVED redirections across the masters.
    assert.equal(await cluster.cli(cluster.nodes[0].port, '-c', 'SET', 'k', 'v'), 'OK')
  })

  it('stops every node', async () => {
    await cluster.stop()
    for (const node of cluster.nodes) assert.equal(await accepts(node.port), false)
    await cluster.stop()
  })
})
