'use strict'

// The middleware's headers: the same bytes as express-rate-limit 8 for the IETF drafts and the
// legacy X-RateLimit-*, the seed's X-Rate-Limit-*, and the policy's window for every limiter.

const { describe, it, mock } = require('node:test')
const assert = require('node:assert/strict')
const express = require('express')
const expressRateLimit = require('express-rate-limit')

const { FixedWindow, rateLimit } = require('..')
const { LIMITERS } = require('./helpers/limiters.js')
const { useRedisServer } = require('./helpers/redis-server.js')
const { serve, clocked } = require('./helpers/express-app.js')

const redis = useRedisServer()

function appWith(middleware) {
  const app = express()
  app.use(middleware)
  app.get('/', (req, res) => res.send('ok'))
  return app
}

const RATE_LIMIT_HEADER = /^(ratelimit|x-ratelimit-|x-rate-limit-|retry-after$)/

/** The status and rate-limit headers of a response (and `Date`, which the legacy mode sets). */
function summary(response) {
  const headers = Object.fromEntries([...response.headers].filter(([name]) => RATE_LIMIT_HEADER.test(name) || name === 'date'))
  return { status: response.status, ...headers }
}

// Instants of the sequence, from the start of a minute: three allowed and a refusal at once, two
// refusals later in the window, then the next window.
const STEPS = [0, 0, 0, 0, 1500, 59_001, 60_000, 90_500]

describe('headers as express-rate-limit 8 writes them', () => {
  // Which express-rate-limit options give the same headers as ours.
  const MODES = [
    ['draft-6', { standardHeaders: 'draft-6', legacyHeaders: false }],
    ['draft-7', { standardHeaders: 'draft-7', legacyHeaders: false }],
    ['draft-8', { standardHeaders: 'draft-8', legacyHeaders: false }],
    ['legacy', { standardHeaders: false, legacyHeaders: true }],
    [['draft-7', 'legacy'], { standardHeaders: 'draft-7', legacyHeaders: true }],
    [['draft-8', 'legacy'], { standardHeaders: 'draft-8', legacyHeaders: true }],
  ]

  /**
   * Runs STEPS through our middleware (a FixedWindow of 3 per minute, on `store`) and through
   * express-rate-limit (its MemoryStore, 3 per minute: its window starts at the first request, so
   * the sequence starts at a minute's start), on a clock both read (Date, mocked).
   */
  async function bothOver(headers, options, store) {
    const start = Math.ceil(Date.now() / 60_000) * 60_000
    const clock = {
      get now() {
        return Date.now()
      },
    }
    mock.timers.enable({ apis: ['Date'], now: start })
    const client = store === 'Redis' ? { client: redis.server.url, namespace: `headers:${Math.random()}:` } : {}
    const limiter = clocked(new FixedWindow({ limits: [{ duration: 60_000, limit: 3 }], ...client }), clock)
    const ours = await serve(appWith(rateLimit({ limiter, headers })))
    const theirs = await serve(appWith(expressRateLimit.rateLimit({ windowMs: 60_000, limit: 3, validate: false, ...options })))
    try {
      const answers = { ours: [], theirs: [] }
      for (const step of STEPS) {
        mock.timers.setTime(start + step)
        answers.ours.push(summary(await fetch(ours.url)))
        answers.theirs.push(summary(await fetch(theirs.url)))
      }
      return { start, ...answers }
    } finally {
      mock.timers.reset()
      await Promise.all([ours.close(), theirs.close()])
    }
  }

  for (const store of ['memory', 'Redis']) {
    for (const [headers, options] of MODES) {
      it(`${[headers].flat().join(' + ')}, on ${store}: the same headers over a window and into the next`, async () => {
        const { ours, theirs } = await bothOver(headers, options, store)
        // Node's own Date header is not mocked: compare it only where the middleware sets it.
        if (!headers.includes('legacy')) for (const answer of [...ours, ...theirs]) delete answer.date
        assert.deepEqual(ours, theirs)
        assert.deepEqual(
          ours.map((answer) => answer.status),
          [200, 200, 200, 429, 429, 429, 200, 200],
        )
      })
    }
  }

  it('the numbers, for every mode at once (draft-8 apart: it writes RateLimit in its own format)', async () => {
    const { start, ours } = await bothOver(['draft-6', 'draft-7', 'legacy', 'x-rate-limit'], {}, 'memory')
    const end = (start + 60_000) / 1000
    const row = (status, remaining, reset, epoch, retryAfter) => ({
      status,
      'ratelimit-policy': '3;w=60',
      'ratelimit-limit': '3',
      'ratelimit-remaining': String(remaining),
      'ratelimit-reset': String(reset),
      ratelimit: `limit=3, remaining=${remaining}, reset=${reset}`,
      'x-ratelimit-limit': '3',
      'x-ratelimit-remaining': String(remaining),
      'x-ratelimit-reset': String(epoch),
      'x-rate-limit-limit': '3',
      'x-rate-limit-remaining': String(remaining),
      ...(retryAfter === undefined ? {} : { 'retry-after': String(retryAfter) }),
    })
    for (const answer of ours) delete answer.date
    assert.deepEqual(ours, [
      row(200, 2, 60, end),
      row(200, 1, 60, end),
      row(200, 0, 60, end),
      row(429, 0, 60, end, 60),
      row(429, 0, 59, end, 59), // 58.5 s left, rounded up
      row(429, 0, 1, end, 1),
      row(200, 2, 60, end + 60),
      row(200, 1, 30, end + 60),
    ])
  })

  it('draft-8: the named policy with q, w and the partition key of the client, r and t', async () => {
    const { ours } = await bothOver('draft-8', {}, 'memory')
    // base64 of the first 12 hex digits of sha256('127.0.0.1').
    const pk = Buffer.from(require('node:crypto').createHash('sha256').update('127.0.0.1').digest('hex').slice(0, 12)).toString('base64')
    assert.equal(pk, 'MTJjYTE3YjQ5YWYy')
    assert.deepEqual(
      ours.map((answer) => [answer.status, answer.ratelimit, answer['ratelimit-policy'], answer['retry-after']]),
      [
        [200, '"3-in-1min"; r=2; t=60', `"3-in-1min"; q=3; w=60; pk=:${pk}:`, undefined],
        [200, '"3-in-1min"; r=1; t=60', `"3-in-1min"; q=3; w=60; pk=:${pk}:`, undefined],
        [200, '"3-in-1min"; r=0; t=60', `"3-in-1min"; q=3; w=60; pk=:${pk}:`, undefined],
        [429, '"3-in-1min"; r=0; t=60', `"3-in-1min"; q=3; w=60; pk=:${pk}:`, '60'],
        [429, '"3-in-1min"; r=0; t=59', `"3-in-1min"; q=3; w=60; pk=:${pk}:`, '59'],
        [429, '"3-in-1min"; r=0; t=1', `"3-in-1min"; q=3; w=60; pk=:${pk}:`, '1'],
        [200, '"3-in-1min"; r=2; t=60', `"3-in-1min"; q=3; w=60; pk=:${pk}:`, undefined],
        [200, '"3-in-1min"; r=1; t=30', `"3-in-1min"; q=3; w=60; pk=:${pk}:`, undefined],
      ],
    )
  })
})

describe('headers of our own', () => {
  it('draft-8 policies of two middlewares on one route add up, named by identifier', async () => {
    const clock = { now: 0 }
    const perSecond = clocked(new FixedWindow({ limits: [{ duration: 1000, limit: 10 }] }), clock)
    const perDay = clocked(new FixedWindow({ limits: [{ duration: 86_400_000, limit: 1000 }] }), clock)
    const app = express()
    app.use(rateLimit({ limiter: perSecond, headers: 'draft-8', key: () => 'alice' }))
    app.use(rateLimit({ limiter: perDay, headers: 'draft-8', key: () => 'alice', identifier: (req) => `daily "${req.method}"` }))
    app.get('/', (req, res) => res.send('ok'))
    const { url, close } = await serve(app)
    try {
      const response = await fetch(url)
      const pk = 'MmJkODA2Yzk3ZjBl' // sha256('alice')
      assert.equal(response.headers.get('ratelimit'), '"10-in-1sec"; r=9; t=1, "daily \\"GET\\""; r=999; t=86400')
      assert.equal(response.headers.get('ratelimit-policy'), `"10-in-1sec"; q=10; w=1; pk=:${pk}:, "daily \\"GET\\""; q=1000; w=86400; pk=:${pk}:`)
    } finally {
      await close()
    }
  })

  it("x-rate-limit: the seed's X-Rate-Limit-Limit and X-Rate-Limit-Remaining; false: none, but Retry-After on a refusal", async () => {
    const clock = { now: 0 }
    for (const [headers, expected] of [
      ['x-rate-limit', [['2', '1', null], ['2', '0', null], ['2', '0', '10']]],
      [false, [[null, null, null], [null, null, null], [null, null, '10']]],
    ]) {
      const limiter = clocked(new FixedWindow({ limits: [{ duration: 10_000, limit: 2 }] }), clock)
      const { url, close } = await serve(appWith(rateLimit({ limiter, headers })))
      try {
        const seen = []
        for (let i = 0; i < 3; i++) {
          const response = await fetch(url)
          assert.equal([...response.headers.keys()].filter((name) => /^ratelimit/.test(name)).length, 0)
          seen.push(['x-rate-limit-limit', 'x-rate-limit-remaining', 'retry-after'].map((name) => response.headers.get(name)))
        }
        assert.deepEqual(seen, expected, String(headers))
      } finally {
        await close()
      }
    }
  })

  it('a refusal reports no capacity left in any header, even when a lighter request would pass', async () => {
    const clock = { now: 0 }
    for (const headers of [['draft-6', 'draft-7', 'legacy', 'x-rate-limit'], 'draft-8']) {
      const limiter = clocked(new FixedWindow({ limits: [{ duration: 10_000, limit: 3 }] }), clock)
      const { url, close } = await serve(appWith(rateLimit({ limiter, headers, weight: 2 })))
      try {
        assert.equal((await fetch(url)).status, 200)
        const refused = summary(await fetch(url))
        if (headers !== 'draft-8') {
          // The legacy reset is in epoch seconds of the real clock: 10 s after the Date it sets.
          const reset = Number(refused['x-ratelimit-reset']) - Date.parse(refused.date) / 1000
          assert.ok(reset === 10 || reset === 11, String(reset))
          delete refused['x-ratelimit-reset']
        }
        delete refused.date
        const expected =
          headers === 'draft-8'
            ? { ratelimit: '"3-in-10sec"; r=0; t=10', 'ratelimit-policy': '"3-in-10sec"; q=3; w=10; pk=:MTJjYTE3YjQ5YWYy:' }
            : {
                'ratelimit-policy': '3;w=10',
                'ratelimit-limit': '3',
                'ratelimit-remaining': '0',
                'ratelimit-reset': '10',
                ratelimit: 'limit=3, remaining=0, reset=10',
                'x-ratelimit-limit': '3',
                'x-ratelimit-remaining': '0',
                'x-rate-limit-limit': '3',
                'x-rate-limit-remaining': '0',
              }
        assert.deepEqual(refused, { status: 429, ...expected, 'retry-after': '10' })
      } finally {
        await close()
      }
    }
  })
})

describe("the policy's window, from the limiter", () => {
  // Every limiter of the table: capacity 5. The window limiters' first limit is 5 per second;
  // the rolling windows' interval is a second; the buckets' natural windows are the time to
  // refill from empty (5 tokens at 3 per second), to drain a full bucket (5 at 2 per 300 ms),
  // and for GCRA a burst of 5 at 3 per second.
  const WINDOWS = {
    FixedWindow: ['5;w=1', '5-in-1sec'],
    SlidingWindow: ['5;w=1', '5-in-1sec'],
    SlidingLog: ['5;w=1', '5-in-1sec'],
    'RateLimiter (consume, minDifference)': ['5;w=1', '5-in-1sec'],
    SlidingTail: ['5;w=1', '5-in-1sec'],
    LeakyBucket: ['5;w=1', '5-in-0.75sec'],
    TokenBucket: ['5;w=2', '5-in-1.6666666666666667sec'],
    Gcra: ['5;w=2', '5-in-1.6666666666666667sec'],
  }

  for (const store of ['memory', 'Redis']) {
    it(`every limiter of the table, on ${store}`, async () => {
      const clock = { now: Date.now() }
      assert.deepEqual(Object.keys(WINDOWS), Object.keys(LIMITERS))
      for (const [name, create] of Object.entries(LIMITERS)) {
        const client = store === 'Redis' ? { client: redis.server.url, namespace: `window:${name}:` } : {}
        const limiter = clocked(create(client), clock)
        const app = express()
        app.get('/7', rateLimit({ limiter, key: () => '7' }), (req, res) => res.send('ok'))
        app.get('/8', rateLimit({ limiter, key: () => '8', headers: 'draft-8' }), (req, res) => res.send('ok'))
        const { url, close } = await serve(app)
        try {
          const [policy, policyName] = WINDOWS[name]
          const draft7 = await fetch(`${url}/7`)
          assert.equal(draft7.headers.get('ratelimit-policy'), policy, name)
          assert.match(draft7.headers.get('ratelimit'), /^limit=5, remaining=[04], reset=\d+$/, name)
          const draft8 = await fetch(`${url}/8`)
          assert.match(draft8.headers.get('ratelimit-policy'), new RegExp(`^"${policyName.replace(/\./g, '\\.')}"; q=5; w=${policy.split('=')[1]}; pk=:`), name)
        } finally {
          await close()
        }
      }
    })
  }

  it('a limiter of several limits reports the one that decided, with its window', async () => {
    const clock = { now: 0 }
    const limiter = clocked(new FixedWindow({ limits: [{ duration: 1000, limit: 5 }, { duration: 4000, limit: 12 }] }), clock)
    const app = express()
    app.get('/7', rateLimit({ limiter, key: () => 'a' }), (req, res) => res.send('ok'))
    app.get('/8', rateLimit({ limiter, key: () => 'a', headers: 'draft-8' }), (req, res) => res.send('ok'))
    const { url, close } = await serve(app)
    try {
      const seen = []
      const request = async (path) => {
        const response = await fetch(url + path)
        seen.push([clock.now, response.status, response.headers.get('ratelimit-policy'), response.headers.get('ratelimit'), response.headers.get('retry-after')])
      }
      for (let i = 0; i < 5; i++) await request('/7')
      clock.now = 1000
      for (let i = 0; i < 5; i++) await request('/7')
      clock.now = 2000
      await request('/7') // the 11th: 4 left this second, 1 in these 4 s
      await request('/8')
      await request('/7')
      assert.deepEqual(seen.slice(3, 6), [
        [0, 200, '5;w=1', 'limit=5, remaining=1, reset=4', null],
        [0, 200, '5;w=1', 'limit=5, remaining=0, reset=4', null],
        [1000, 200, '5;w=1', 'limit=5, remaining=4, reset=3', null],
      ])
      assert.deepEqual(seen.slice(10), [
        [2000, 200, '12;w=4', 'limit=12, remaining=1, reset=2', null],
        [2000, 200, '"12-in-4sec"; q=12; w=4; pk=:Y2E5NzgxMTJjYTFi:', '"12-in-4sec"; r=0; t=2', null],
        [2000, 429, '12;w=4', 'limit=12, remaining=0, reset=2', '2'],
      ])
    } finally {
      await close()
    }
  })

  it('a limiter of its own kind: the policy without a window', async () => {
    const limiter = { consume: async () => ({ allowed: true, timeLeft: 0, remaining: 6, limit: 7, resetAfter: 1200 }) }
    const app = express()
    app.get('/7', rateLimit({ limiter }), (req, res) => res.send('ok'))
    app.get('/8', rateLimit({ limiter, headers: 'draft-8', key: () => 'a' }), (req, res) => res.send('ok'))
    const { url, close } = await serve(app)
    try {
      const draft7 = await fetch(`${url}/7`)
      assert.equal(draft7.headers.get('ratelimit-policy'), '7')
      assert.equal(draft7.headers.get('ratelimit'), 'limit=7, remaining=6, reset=2')
      const draft8 = await fetch(`${url}/8`)
      assert.equal(draft8.headers.get('ratelimit-policy'), '"7"; q=7; pk=:Y2E5NzgxMTJjYTFi:')
    } finally {
      await close()
    }
  })
})
