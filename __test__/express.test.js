'use strict'

// The Express middleware, and the example app that `npm start` runs.

const { describe, it, after } = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const path = require('node:path')
const express = require('express')

const { RateLimiter, RedisRateLimiter, rateLimit } = require('..')

/** Serves `app` on a free port; resolves its base URL and a close function. */
function serve(app) {
  return new Promise((resolve) => {
    const server = app.listen(0, '127.0.0.1', () => {
      resolve({ url: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => server.close(r)) })
    })
  })
}

function appWith(middlewareOptions) {
  const app = express()
  app.use(rateLimit(middlewareOptions))
  app.get('/', (req, res) => res.send('ok'))
  app.use((error, req, res, next) => res.status(500).send(`error: ${error.code}`))
  return app
}

describe('rateLimit middleware', () => {
  it('checks statusCode, and hands what the message throws to Express instead of leaving the request hanging', async () => {
    const limiter = new RateLimiter({ interval: 60_000, maxInInterval: 1 })
    assert.throws(() => rateLimit({ limiter, statusCode: 'abc' }), { name: 'TypeError', code: 'ERR_INVALID_OPTION' })
    assert.throws(() => rateLimit({ limiter, statusCode: 42 }), { name: 'RangeError', code: 'ERR_INVALID_OPTION' })
    // A fixed message that JSON cannot hold is an option error.
    assert.throws(() => rateLimit({ limiter, message: { big: 1n } }), { name: 'TypeError', code: 'ERR_INVALID_OPTION' })
    const failing = Object.assign(new Error('no message'), { code: 'MESSAGE_FAILED' })
    for (const message of [() => { throw failing }, () => ({ big: 1n })]) {
      const { url, close } = await serve(appWith({ limiter: new RateLimiter({ interval: 60_000, maxInInterval: 1 }), message }))
      try {
        assert.equal((await fetch(url)).status, 200)
        const refused = await fetch(url)
        assert.equal(refused.status, 500)
        assert.match(await refused.text(), /^error: /)
      } finally {
        await close()
      }
    }
  })

  it('answers 429 with Retry-After and the wait, and sets RateLimit headers', async () => {
    const limiter = new RateLimiter({ interval: 60_000, maxInInterval: 2 })
    const { url, close } = await serve(appWith({ limiter }))
    try {
      const first = await fetch(url)
      assert.equal(first.status, 200)
      assert.equal(first.headers.get('ratelimit-limit'), '2')
      assert.equal(first.headers.get('ratelimit-remaining'), '1')
      assert.equal(first.headers.get('ratelimit-reset'), '60')
      const second = await fetch(url)
      assert.equal(second.status, 200)
      assert.equal(second.headers.get('ratelimit-remaining'), '0')
      assert.equal(second.headers.get('ratelimit-reset'), '60')
      const third = await fetch(url)
      assert.equal(third.status, 429)
      assert.equal(third.headers.get('retry-after'), '60')
      assert.match(await third.text(), /you must wait \d+ ms/)
    } finally {
      await close()
    }
  })

  it('keys by the function given, and sends objects as JSON', async () => {
    const limiter = new RateLimiter({ interval: 60_000, maxInInterval: 1 })
    const { url, close } = await serve(appWith({ limiter, key: (req) => req.query.user, message: (timeLeft) => ({ error: 'slow down', timeLeft }) }))
    try {
      assert.equal((await fetch(`${url}/?user=a`)).status, 200)
      assert.equal((await fetch(`${url}/?user=b`)).status, 200)
      const refused = await fetch(`${url}/?user=a`)
      assert.equal(refused.status, 429)
      const body = await refused.json()
      assert.equal(body.error, 'slow down')
      assert.ok(body.timeLeft > 59_000)
    } finally {
      await close()
    }
  })

  it('passes Redis errors to Express, or fails open or closed as asked', async () => {
    const limiter = new RedisRateLimiter({ client: { port: 1, commandTimeoutMs: 200 }, interval: 1000, maxInInterval: 1 })
    for (const [onError, status, body] of [['next', 500, 'error: ERR_STORE_UNAVAILABLE'], ['allow', 200, 'ok'], ['block', 503, 'Rate limiter unavailable']]) {
      const { url, close } = await serve(appWith({ limiter, onError }))
      try {
        const response = await fetch(url)
        assert.equal(response.status, status, onError)
        assert.equal(await response.text(), body)
      } finally {
        await close()
      }
    }
  })

  it('refuses a request whose key is missing instead of sharing one global limit', async () => {
    const limiter = new RateLimiter({ interval: 60_000, maxInInterval: 1 })
    const { url, close } = await serve(appWith({ limiter, key: (req) => req.query.user }))
    try {
      const response = await fetch(url)
      assert.equal(response.status, 500)
      assert.equal(await response.text(), 'error: ERR_INVALID_ID')
      assert.equal((await fetch(`${url}/?user=a`)).status, 200)
    } finally {
      await close()
    }
  })

  it('validates its options', () => {
    assert.throws(() => rateLimit(), { code: 'ERR_INVALID_OPTION' })
    assert.throws(() => rateLimit({ limiter: {} }), { code: 'ERR_INVALID_OPTION' })
    assert.throws(() => rateLimit({ limiter: { limitWithInfo() {} } }), { code: 'ERR_INVALID_OPTION' })
    const limiter = new RateLimiter({ interval: 1000, maxInInterval: 1 })
    assert.throws(() => rateLimit({ limiter, key: 'ip' }), { code: 'ERR_INVALID_OPTION' })
    assert.throws(() => rateLimit({ limiter, onError: 'explode' }), { code: 'ERR_INVALID_OPTION' })
    assert.throws(() => rateLimit({ limiter, keyz: () => 1 }), { code: 'ERR_UNKNOWN_OPTION' })
  })
})

describe('rateLimit with the counting limiters', () => {
  it('limits with a FixedWindow too', async () => {
    const { FixedWindow } = require('..')
    const limiter = new FixedWindow({ limits: [{ duration: 3_600_000, limit: 1 }] })
    const { url, close } = await serve(appWith({ limiter }))
    try {
      const first = await fetch(url)
      assert.equal(first.status, 200)
      assert.equal(first.headers.get('ratelimit-limit'), '1')
      assert.equal(first.headers.get('ratelimit-remaining'), '0')
      const refused = await fetch(url)
      assert.equal(refused.status, 429)
      assert.ok(Number(refused.headers.get('retry-after')) > 0)
    } finally {
      await close()
    }
  })
})

describe('the example app (npm start)', () => {
  let child
  after(() => child && child.kill())

  it('listens on PORT=0, prints its URL and a curl line, and limits', async () => {
    child = spawn(process.execPath, [path.join(__dirname, '..', 'examples', 'express.js')], {
      env: { ...process.env, PORT: '0', REDIS_URL: '' },
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    let output = ''
    const url = await new Promise((resolve, reject) => {
      child.stdout.on('data', (chunk) => {
        output += chunk
        const match = output.match(/listening on (http:\/\/127\.0\.0\.1:\d+\/)/)
        if (match && output.includes('curl')) resolve(match[1])
      })
      child.on('exit', (code) => reject(new Error(`example exited with ${code}: ${output}`)))
    })
    const first = await fetch(url)
    assert.equal(first.status, 200)
    assert.equal((await first.json()).hello, 'world')
    // minDifference is 200 ms: a second request right away is refused.
    const second = await fetch(url)
    assert.equal(second.status, 429)
    assert.equal(second.headers.get('ratelimit-limit'), '5')
  })
})
