'use strict'

// The middleware per request: keys (IPv6 grouped by subnet, as express-rate-limit 8), the
// startup warnings about Express's `trust proxy`, and the refunds of skipFailedRequests /
// skipSuccessfulRequests, on both stores.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { isIPv6 } = require('node:net')
const express = require('express')
const fc = require('fast-check')
const { ipKeyGenerator } = require('express-rate-limit')

const { FixedWindow, RateLimiter, TokenBucket, rateLimit } = require('..')
const { ipKey } = require('../lib/express-keys.js')
const { useRedisServer } = require('./helpers/redis-server.js')
const { withApp, clocked, spyingRewards } = require('./helpers/express-app.js')

const redis = useRedisServer()

describe('keys', () => {
  const SUBNETS = [32, 40, 48, 56, 60, 64, false]

  it("are express-rate-limit 8's ipKeyGenerator: IPv6 by subnet, IPv4-mapped as IPv4", () => {
    const addresses = [
      '1.2.3.4',
      '::1',
      '::',
      '::ffff:1.2.3.4',
      '::ffff:102:304',
      '::FFFF:10.0.0.1',
      '::1.2.3.4',
      '::0.0.0.1',
      '64:ff9b::1.2.3.4',
      '2001:db8::1',
      '2001:DB8:0:0:1:0:0:1',
      '2001:db8:1:2ab::1',
      '1:0:0:1:0:0:0:1',
      '0:0:1:0:0:1:0:0',
      'ffff::',
      'fe80::1%eth0',
      '::ffff:1.2.3.4%x',
    ]
    for (const subnet of SUBNETS) {
      for (const ip of addresses) assert.equal(ipKey(ip, subnet), ipKeyGenerator(ip, subnet), `${ip} /${subnet}`)
    }
    assert.equal(ipKey('2001:db8:1:2ab::1', 56), '2001:db8:1:200::/56')
    assert.equal(ipKey('::ffff:10.0.0.1', 56), '10.0.0.1')
  })

  it('are ipKeyGenerator on random IPv6 addresses, in every notation', () => {
    const group = fc.oneof(fc.integer({ min: 0, max: 0xffff }), fc.constant(0), fc.constant(0xffff))
    const address = fc
      .record({
        groups: fc.array(group, { minLength: 8, maxLength: 8 }),
        prefix: fc.constantFrom('none', 'mapped', 'compatible'),
        dotted: fc.boolean(),
        gap: fc.tuple(fc.nat(8), fc.nat(8)),
        upper: fc.boolean(),
      })
      .map(({ groups, prefix, dotted, gap: [a, b], upper }) => {
        const values = prefix === 'none' ? groups : [0, 0, 0, 0, 0, prefix === 'mapped' ? 0xffff : 0, groups[6], groups[7]]
        let parts = values.map((value) => value.toString(16))
        if (dotted) parts = [...parts.slice(0, 6), `${values[6] >> 8}.${values[6] & 255}.${values[7] >> 8}.${values[7] & 255}`]
        const [from, to] = [Math.min(a, b), Math.min(Math.max(a, b), parts.length)]
        const text = to - from >= 1 ? `${parts.slice(0, from).join(':')}::${parts.slice(to).join(':')}` : parts.join(':')
        return upper ? text.toUpperCase() : text
      })
      .filter((text) => isIPv6(text))
    fc.assert(
      fc.property(address, fc.constantFrom(...SUBNETS), (ip, subnet) => ipKey(ip, subnet) === ipKeyGenerator(ip, subnet)),
      { numRuns: 5000 },
    )
  })

  it('group IPv6 clients by /56 through Express (ipv6Subnet: 64 or false splits them)', async () => {
    const keysOf = async (options, addresses) => {
      const limiter = new TokenBucket({ capacity: 100, refillInterval: 1000 })
      const app = express()
      app.set('trust proxy', 'loopback')
      app.use(rateLimit({ limiter, ...options }))
      app.get('/', (req, res) => res.json([req.rateLimit.key, req.rateLimit.remaining]))
      return withApp(app, async (url) => {
        const seen = []
        for (const ip of addresses) seen.push(await (await fetch(url, { headers: { 'x-forwarded-for': ip } })).json())
        return seen
      })
    }
    const addresses = ['2001:db8:1:2ab::1', '2001:db8:1:2cd:ffff::9', '2001:db8:1:300::1', '::ffff:10.0.0.1', '10.0.0.1']
    assert.deepEqual(await keysOf({}, addresses), [
      ['2001:db8:1:200::/56', 99],
      ['2001:db8:1:200::/56', 98], // the same /56: one budget
      ['2001:db8:1:300::/56', 99],
      ['10.0.0.1', 99],
      ['10.0.0.1', 98], // an IPv4-mapped address is its IPv4 client
    ])
    assert.deepEqual(
      (await keysOf({ ipv6Subnet: 64 }, addresses.slice(0, 2))).map(([key]) => key),
      ['2001:db8:1:2ab::/64', '2001:db8:1:2cd::/64'],
    )
    assert.deepEqual(
      (await keysOf({ ipv6Subnet: false }, addresses.slice(0, 2))).map(([key]) => key),
      ['2001:db8:1:2ab::1', '2001:db8:1:2cd:ffff::9'],
    )
  })

  it('group in the middleware function itself, without Express', async () => {
    const limiter = new RateLimiter({ interval: 60_000, maxInInterval: 2 })
    const middleware = rateLimit({ limiter, ipv6Subnet: 48 })
    const call = (ip) =>
      new Promise((resolve, reject) => {
        const headers = {}
        const req = { ip, headers: {} }
        const res = { headersSent: false, setHeader: (name, value) => (headers[name] = value), end: () => resolve([req.rateLimit.key, 429]) }
        middleware(req, res, (error) => (error ? reject(error) : resolve([req.rateLimit.key, 200, headers.RateLimit])))
      })
    assert.deepEqual(await call('2001:db8:1:2ab::1'), ['2001:db8:1::/48', 200, 'limit=2, remaining=1, reset=60'])
    assert.deepEqual(await call('2001:db8:1:ffff::2'), ['2001:db8:1::/48', 200, 'limit=2, remaining=0, reset=60'])
    assert.deepEqual(await call('2001:db8:1:1234::3'), ['2001:db8:1::/48', 429])
    assert.deepEqual(await call('2001:db8:2::1'), ['2001:db8:2::/48', 200, 'limit=2, remaining=1, reset=60'])
  })
})

describe("warnings about Express's trust proxy", () => {
  /** What `log` received over `requests` (each `{ headers }`) to an app configured by `setup`. */
  async function warnings(options, setup, requests) {
    const logged = []
    const app = express()
    setup(app)
    app.use(rateLimit({ limiter: new FixedWindow({ limits: [{ duration: 60_000, limit: 100 }] }), log: (...args) => logged.push(args), ...options }))
    app.get('/', (req, res) => res.send(req.ip))
    await withApp(app, async (url) => {
      for (const headers of requests) assert.equal((await fetch(url, { headers })).status, 200)
    })
    return logged
  }
  const forwarded = Array(5).fill({ 'x-forwarded-for': '203.0.113.7' })

  it("warns once when requests carry X-Forwarded-For and trust proxy is off (every client shares the proxy's limit)", async () => {
    const logged = await warnings({}, () => {}, forwarded)
    assert.equal(logged.length, 1)
    assert.equal(logged[0].length, 1)
    assert.match(logged[0][0], /^ratekeeper rateLimit: requests carry an X-Forwarded-For header but Express's 'trust proxy' setting is off/)
    assert.match(logged[0][0], /app\.set\('trust proxy', 1\)/)
  })

  it('warns once when trust proxy is true (clients choose their own key)', async () => {
    const logged = await warnings({}, (app) => app.set('trust proxy', true), forwarded)
    assert.equal(logged.length, 1)
    assert.match(logged[0][0], /^ratekeeper rateLimit: Express's 'trust proxy' setting is true/)
    assert.match(logged[0][0], /app\.set\('trust proxy', 1\)/)
  })

  it('is silent with validate: false, with a key of your own, with trust proxy set to the proxies, and without a proxy', async () => {
    assert.deepEqual(await warnings({ validate: false }, () => {}, forwarded), [])
    assert.deepEqual(await warnings({ validate: false }, (app) => app.set('trust proxy', true), forwarded), [])
    assert.deepEqual(await warnings({ key: (req) => req.get('x-user') ?? 'anonymous' }, () => {}, forwarded), [])
    assert.deepEqual(await warnings({}, (app) => app.set('trust proxy', 1), forwarded), [])
    assert.deepEqual(await warnings({}, () => {}, [{}, {}]), [])
  })
})

describe('skipFailedRequests and skipSuccessfulRequests', () => {
  /** Resolves once `count` requests reached the route (the list of their close promises grows). */
  async function arrival(closed, count) {
    while (closed.length < count) await new Promise((resolve) => setTimeout(resolve, 1))
  }

  /**
   * An app whose routes answer /ok 200, /fail 500, /hang never (the client gives up), others 404; a
   * `responded(path)` promise settles once the middleware has seen the response end (its
   * listeners come first), and `rewards` collects the limiter's `reward` calls.
   */
  function refundingApp(limiter, options) {
    const { limiter: spy, rewards } = spyingRewards(limiter)
    const closed = []
    const app = express()
    app.use(rateLimit({ limiter: spy, key: () => 'client', weight: 2, ...options }))
    app.use((req, res, next) => {
      closed.push(new Promise((resolve) => res.once('close', resolve)))
      next()
    })
    app.get('/ok', (req, res) => res.send('ok'))
    app.get('/fail', (req, res) => res.status(500).send('failed'))
    app.get('/hang', () => {})
    return { app, rewards, closed }
  }

  for (const store of ['memory', 'Redis']) {
    const create = () =>
      new FixedWindow({ limits: [{ duration: 3_600_000, limit: 10 }], ...(store === 'Redis' ? { client: redis.server.url, namespace: `refund:${Math.random()}:` } : {}) })

    it(`skipFailedRequests gives a failed request's weight back (a 5xx, a closed connection), on ${store}`, async () => {
      const limiter = create()
      const { app, rewards, closed } = refundingApp(limiter, { skipFailedRequests: true })
      await withApp(app, async (url) => {
        const remaining = async () => (await limiter.peek('client')).remaining
        assert.equal((await fetch(`${url}/ok`)).status, 200)
        await closed.at(-1)
        assert.equal(rewards.length, 0)
        assert.equal(await remaining(), 8)
        const failed = await fetch(`${url}/fail`)
        assert.match(failed.headers.get('ratelimit'), /^limit=10, remaining=6, reset=\d+$/)
        await failed.text()
        await closed.at(-1)
        assert.equal(rewards.length, 1)
        assert.deepEqual((await rewards[0]).remaining, 8)
        assert.equal(await remaining(), 8)
        // A 4xx failed too (Express's 404 here).
        const missing = await fetch(`${url}/missing`)
        assert.equal(missing.status, 404)
        await missing.text()
        await closed.at(-1)
        assert.equal(rewards.length, 2)
        await rewards[1]
        assert.equal(await remaining(), 8)
        // The client gives up on a response that never comes: the request failed.
        const controller = new AbortController()
        const hanging = fetch(`${url}/hang`, { signal: controller.signal })
        await arrival(closed, 4)
        controller.abort()
        await assert.rejects(hanging, { name: 'AbortError' })
        await closed.at(-1)
        assert.equal(rewards.length, 3)
        await rewards[2]
        assert.equal(await remaining(), 8)
      })
    })

    it(`skipSuccessfulRequests gives a successful request's weight back, on ${store}`, async () => {
      const limiter = create()
      const { app, rewards, closed } = refundingApp(limiter, { skipSuccessfulRequests: true })
      await withApp(app, async (url) => {
        for (const path of ['/ok', '/ok', '/fail', '/ok']) {
          await (await fetch(url + path)).text()
          await closed.at(-1)
        }
        assert.equal(rewards.length, 3)
        await Promise.all(rewards)
        assert.equal((await limiter.peek('client')).remaining, 8) // only the failure counts
      })
    })
  }

  it('gives back only what was charged: a refusal, never; a refund after the window ended, never below empty', async () => {
    const clock = { now: 0 }
    const limiter = new FixedWindow({ limits: [{ duration: 10_000, limit: 3 }] })
    const timed = clocked(limiter, clock)
    const { app, rewards, closed } = refundingApp(timed, { skipFailedRequests: true, weight: (req) => (req.path === '/hang' ? 1 : 2) })
    await withApp(app, async (url) => {
      assert.equal((await fetch(`${url}/ok`)).status, 200)
      const refused = await fetch(`${url}/fail`) // 1 left, costs 2: refused, the 429 is no refund
      assert.equal(refused.status, 429)
      await refused.text()
      await closed.at(-1)
      assert.equal(rewards.length, 0)
      assert.equal((await limiter.peek('client', { now: clock.now })).remaining, 1)
      // A request charged in one window that fails in the next: nothing to give back there (the
      // new window stays at 3 left, not 4).
      const controller = new AbortController()
      clock.now = 9999
      const hanging = fetch(`${url}/hang`, { signal: controller.signal }).catch(() => {})
      await arrival(closed, 2)
      clock.now = 10_000
      controller.abort()
      await hanging
      await closed.at(-1)
      assert.equal(rewards.length, 1)
      assert.equal((await rewards[0]).remaining, 3)
    })
  })
})
