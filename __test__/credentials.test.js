'use strict'

// TLS with a private CA (certificates made here with openssl) and ACL users, on real
// redis-servers: what works, and that what fails says why without giving a secret away.

const { describe, it, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const { FixedWindow, RedisStore } = require('..')
const { startRedis, startUnlessRefused, freePort } = require('./helpers/redis-server.js')
const { hashOf, fixedWindowCount } = require('./helpers/hash-counts.js')

/** Makes a CA, a server certificate for `redis.test` only (no IP), and a client certificate. */
function makeCertificates(dir) {
  const openssl = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' })
  const sign = (name, subject, extensions) => {
    openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subject)
    fs.writeFileSync(path.join(dir, `${name}.ext`), extensions)
    openssl('x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', `${name}.crt`,
      '-days', '2', '-extfile', `${name}.ext`)
  }
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=ratekeeper test CA')
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'other-ca.key', '-out', 'other-ca.crt', '-days', '2', '-subj', '/CN=another CA')
  sign('server', '/CN=redis.test', 'subjectAltName=DNS:redis.test\nextendedKeyUsage=serverAuth\n')
  sign('client', '/CN=client', 'extendedKeyUsage=clientAuth\n')
  const read = (name) => fs.readFileSync(path.join(dir, name), 'utf8')
  return {
    dir,
    ca: read('ca.crt'),
    otherCa: read('other-ca.crt'),
    clientCert: read('client.crt'),
    clientKey: read('client.key'),
  }
}

const limits = [{ duration: 60_000, limit: 5 }]

/** One consume through a fresh store built from `options`; closes the store. */
async function consumeWith(options) {
  const store = new RedisStore({ connectTimeoutMs: 2000, commandTimeoutMs: 2000, ...options })
  try {
    return await new FixedWindow({ client: store, limits }).consume('a')
  } finally {
    await store.close()
  }
}

// Whether this redis-server serves TLS is found by starting one with a TLS port: a build without
// TLS refuses it (Redis 6.2 does not know `tls-port`; Valkey says "Failed finding TLS support").
describe('TLS', async () => {
  const certs = makeCertificates(fs.mkdtempSync(path.join(os.tmpdir(), 'ratekeeper-tls-')))
  // The plain port answers the helper's readiness check; the TLS port is what the tests use.
  // (One server cannot ask for client certificates on one TLS port and not another: the
  // mutual TLS server is a second one.)
  const tlsArgs = (port, authClients) => [
    '--tls-port', port,
    '--tls-cert-file', path.join(certs.dir, 'server.crt'),
    '--tls-key-file', path.join(certs.dir, 'server.key'),
    '--tls-ca-cert-file', path.join(certs.dir, 'ca.crt'),
    '--tls-auth-clients', authClients,
  ]
  // The fewest settings a TLS port needs (the tests' own then fail rather than skip).
  const probe = await startUnlessRefused({ args: [...tlsArgs('{busPort}', 'no').slice(0, 6), '--tls-auth-clients', 'no'] })
  await probe.server?.stop()
  const skip = probe.refused !== undefined && `this redis-server does not serve TLS: ${probe.refused}`
  let server
  let tlsPort
  let mutualPort
  before(async () => {
    if (skip) return
    ;[tlsPort, mutualPort] = [await freePort(), await freePort()]
    server = await startRedis({ args: tlsArgs(tlsPort, 'no') })
    server.mutual = await startRedis({ args: tlsArgs(mutualPort, 'yes') })
  })
  after(async () => {
    await server?.stop()
    await server?.mutual.stop()
    fs.rmSync(certs.dir, { recursive: true, force: true })
  })

  it('connects with rediss:// and a private CA, checking the certificate against servername', { skip }, async () => {
    const verdict = await consumeWith({ url: `rediss://127.0.0.1:${tlsPort}`, tls: { ca: certs.ca, servername: 'redis.test' } })
    assert.equal(verdict.remaining, 4)
    // The same with bytes (a Uint8Array), host and port, and an array of CAs.
    const again = await consumeWith({
      host: '127.0.0.1',
      port: tlsPort,
      tls: { ca: [certs.otherCa, new Uint8Array(Buffer.from(certs.ca))], servername: 'redis.test', rejectUnauthorized: true },
    })
    assert.equal(again.remaining, 3)
    // It went over TLS: the plain port holds the same data.
    assert.equal(fixedWindowCount(await hashOf(server, 'ratekeeper:fixed:a'), 60_000), 2)
  })

  it('refuses a certificate from another CA, or for another name, with a clear error', { skip }, async () => {
    await assert.rejects(
      consumeWith({ url: `rediss://127.0.0.1:${tlsPort}`, tls: { ca: certs.otherCa, servername: 'redis.test' } }),
      (error) => {
        assert.equal(error.code, 'ERR_STORE_UNAVAILABLE')
        assert.match(error.message, new RegExp(`127\\.0\\.0\\.1:${tlsPort}`))
        assert.match(error.message, /certificate/i)
        return true
      },
    )
    // The certificate names redis.test, not 127.0.0.1.
    await assert.rejects(consumeWith({ url: `rediss://127.0.0.1:${tlsPort}`, tls: { ca: certs.ca } }), (error) => {
      assert.equal(error.code, 'ERR_STORE_UNAVAILABLE')
      assert.match(error.message, /certificate|name/i)
      return true
    })
    // Plain TCP to a TLS port does not get an answer.
    await assert.rejects(consumeWith({ url: `redis://127.0.0.1:${tlsPort}`, commandTimeoutMs: 500 }), { code: 'ERR_STORE_UNAVAILABLE' })
  })

  it("takes the CA and servername of an ioredis or node-redis client's TLS options", { skip }, async () => {
    const IORedis = require('ioredis')
    const { createClient } = require('redis')
    const clients = [
      new IORedis({ host: '127.0.0.1', port: tlsPort, lazyConnect: true, tls: { ca: certs.ca, servername: 'redis.test' } }),
      createClient({ socket: { host: '127.0.0.1', port: tlsPort, tls: true, ca: certs.ca, servername: 'redis.test' } }),
    ]
    for (const client of clients) {
      const limiter = new FixedWindow({ client, namespace: 'tls-client:', limits })
      assert.equal((await limiter.consume(clients.indexOf(client))).remaining, 4)
    }
  })

  it('rejectUnauthorized: false accepts any certificate (for tests only)', { skip }, async () => {
    const verdict = await consumeWith({ url: `rediss://127.0.0.1:${tlsPort}`, tls: { rejectUnauthorized: false } })
    assert.equal(verdict.limit, 5)
  })

  it('presents a client certificate to a server that asks for one', { skip }, async () => {
    const tls = { ca: certs.ca, servername: 'redis.test' }
    assert.equal((await consumeWith({ url: `rediss://127.0.0.1:${mutualPort}`, tls: { ...tls, cert: certs.clientCert, key: certs.clientKey } })).remaining, 4)
    await assert.rejects(consumeWith({ url: `rediss://127.0.0.1:${mutualPort}`, tls }), { code: 'ERR_STORE_UNAVAILABLE' })
  })
})

describe('ACL users', () => {
  let server
  before(async () => {
    server = await startRedis()
    await server.cli('ACL', 'SETUSER', 'limiter', 'on', '>s3cret-pw', '~*', '+@all')
    await server.cli('ACL', 'SETUSER', 'default', 'off')
  })
  after(() => server?.stop())

  const url = () => `redis://127.0.0.1:${server.port}`

  it('connects as a user with username and password, or in the URL', async () => {
    assert.equal((await consumeWith({ url: url(), username: 'limiter', password: 's3cret-pw' })).remaining, 4)
    assert.equal((await consumeWith({ url: `redis://limiter:s3cret-pw@127.0.0.1:${server.port}` })).remaining, 3)
  })

  it('fails fast with ERR_STORE_UNAVAILABLE on a wrong password, saying so without the password', async () => {
    for (const options of [
      { url: url(), username: 'limiter', password: 'wrong-pw-123' },
      { url: `redis://limiter:wrong-pw-123@127.0.0.1:${server.port}` },
      { url: url() }, // the default user is off
    ]) {
      const started = Date.now()
      await assert.rejects(consumeWith({ ...options, commandTimeoutMs: 5000 }), (error) => {
        assert.equal(error.code, 'ERR_STORE_UNAVAILABLE')
        assert.match(error.message, /auth|WRONGPASS|NOAUTH|password/i)
        const said = `${error.message} ${error.cause?.message} ${error.cause?.code}`
        assert.doesNotMatch(said, /wrong-pw-123|s3cret-pw/)
        return true
      })
      // Well before commandTimeoutMs: Redis said no, there is nothing to wait for.
      assert.ok(Date.now() - started < 4000)
    }
  })
})
