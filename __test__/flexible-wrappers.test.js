'use strict'

// RateLimiterQueue, BurstyRateLimiter, RLWrapperBlackAndWhite and RLWrapperTimeouts of
// ratekeeper/flexible beside rate-limiter-flexible's own: the same calls on both give the same
// answers (resolved or rejected, RateLimiterRes as JSON, the errors' messages and classes), at
// the same moments, and the concrete answers are checked too. In memory the clock and the timers
// are mock timers; the queue and the bursty limiter run on a real redis-server too, with the
// timers mocked and the keys freed by `delete` instead of waiting for Redis to expire them.

const { describe, it, mock } = require('node:test')
const assert = require('node:assert/strict')
const { performance } = require('node:perf_hooks')
const IORedis = require('ioredis')
const rlf = require('rate-limiter-flexible')

const flexible = require('../flexible.js')
const { useRedisServer } = require('./helpers/redis-server.js')

const redis = useRedisServer()

const T0 = 1_700_000_000_000
const T0_SECS = T0 / 1000
const MAX = Number.MAX_SAFE_INTEGER
const METHODS = ['consume', 'penalty', 'reward', 'get', 'set', 'block', 'delete']

/** Both packages (rate-limiter-flexible's index leaves out RateLimiterAbstract and RateLimiterInsuredAbstract). */
const LIBS = {
  theirs: {
    ...rlf,
    RateLimiterAbstract: require('rate-limiter-flexible/lib/RateLimiterAbstract'),
    RateLimiterInsuredAbstract: require('rate-limiter-flexible/lib/RateLimiterInsuredAbstract'),
  },
  ours: flexible,
}

/** A RateLimiterRes of `lib` as JSON; anything else as it is. */
function shown(value, lib) {
  if (value instanceof lib.RateLimiterRes) return value.toJSON()
  assert.ok(!(value instanceof Object && 'toJSON' in value), `a RateLimiterRes of the other package: ${value}`)
  return value
}

/** A call's outcome, as an app sees it: resolved or rejected (with a RateLimiterRes) or failed (with an Error). */
async function outcome(promise, lib) {
  try {
    return { resolved: shown(await promise, lib) }
  } catch (error) {
    if (!(error instanceof Error)) return { rejected: shown(error, lib) }
    const failed = { failed: error.message, name: error.name }
    if (error instanceof lib.RateLimiterQueueError) failed.queueError = true
    return failed
  }
}

/** Until the event loop has run every callback due now (the answers of limiters in memory). */
async function settle() {
  for (let i = 0; i < 5; i++) await new Promise(setImmediate)
}

/**
 * Runs `scenario(lib, tools)` on each package, with mock timers (`Date` too, from T0, in memory),
 * and resolves each one's trace:
 * - `track(label, promise)` records the call's outcome in the trace once it settles;
 * - `settle()` lets the answers due come in: the calls tracked before it were made together;
 * - `step(label, promise)`: `track`, then `settle`;
 * - `outcomes(n)` waits for the trace's `n`th outcome (from Redis), as `settle` does;
 * - `tick(ms)` settles, moves the clock on (a mark in the trace: what follows settled after) and
 *   settles again;
 * - `timers()` counts the timers the package set, and `timerSince(count)` waits for one more.
 */
async function onBoth(scenario, { apis = ['Date', 'setTimeout'], before, after } = {}) {
  const traces = {}
  for (const [name, lib] of Object.entries(LIBS)) {
    const context = before ? await before(name, lib) : {}
    mock.timers.enable({ apis, now: T0 })
    // How many timers the package set (mock.timers.reset puts the real setTimeout back).
    let timersSet = 0
    const mockedSetTimeout = globalThis.setTimeout
    globalThis.setTimeout = function countedSetTimeout(...args) {
      timersSet++
      return mockedSetTimeout.apply(this, args)
    }
    const trace = []
    let together = 0
    try {
      const track = (label, promise) => {
        const made = together
        outcome(promise, lib).then((result) => trace.push([label, result, made]))
      }
      const settled = async () => {
        together++
        await settle()
      }
      const tick = async (ms) => {
        await settled()
        trace.push(`+${ms} ms`)
        mock.timers.tick(ms)
        await settle()
      }
      const answered = async (n) => {
        together++
        await outcomesIn(trace, n)
      }
      const step = (label, promise) => {
        track(label, promise)
        return settled()
      }
      /** Until the package has set a timer since `timersSet` was `before` (a queue waiting: its try was refused). */
      const timerSince = async (before) => {
        const until = performance.now() + 5000
        while (timersSet === before) {
          assert.ok(performance.now() < until, `a timer expected: ${JSON.stringify(trace)}`)
          await new Promise(setImmediate)
        }
      }
      await scenario(lib, { ...context, track, step, tick, settle: settled, outcomes: answered, timers: () => timersSet, timerSince })
      await settle()
      traces[name] = inOrder(trace)
    } finally {
      mock.timers.reset()
      if (after) await after(context)
    }
  }
  return traces
}

/**
 * `trace` without the order in which calls made together settled: between two ticks, the
 * outcomes in the order the calls were made, and those made together in the order of their
 * labels. They may settle in another order on each package (rate-limiter-flexible's
 * RateLimiterMemory answers a refusal and an allowed call in as many microtasks, ours an allowed
 * call two later); what a queue served first shows in the points left.
 */
function inOrder(trace) {
  const sorted = []
  let run = []
  for (const entry of [...trace, null]) {
    if (Array.isArray(entry)) {
      run.push(entry)
      continue
    }
    run.sort(([a, , madeA], [b, , madeB]) => madeA - madeB || a.localeCompare(b, 'en', { numeric: true }))
    sorted.push(...run.map(([label, result]) => [label, result]))
    run = []
    if (entry !== null) sorted.push(entry)
  }
  return sorted
}

/** Waits (event loop turns, no timers) until `trace` has `n` outcomes, for answers from Redis. */
async function outcomesIn(trace, n) {
  const until = performance.now() + 5000
  while (trace.filter(Array.isArray).length < n) {
    assert.ok(performance.now() < until, `${n} outcomes expected: ${JSON.stringify(trace)}`)
    await new Promise(setImmediate)
  }
  await settle()
}

/**
 * A limiter built on `lib`'s RateLimiterCompatibleAbstract that answers as `inner` does, `delayMs`
 * later (a timer), or as `overrides[method](...args)` says.
 */
function custom(lib, inner, { delayMs = 0, ...overrides } = {}) {
  class Custom extends lib.RateLimiterCompatibleAbstract {
    get keyPrefix() {
      return inner.keyPrefix
    }
    get blockDuration() {
      return inner.blockDuration
    }
    set blockDuration(value) {
      inner.blockDuration = value
    }
    get execEvenly() {
      return inner.execEvenly
    }
    set execEvenly(value) {
      inner.execEvenly = value
    }
    get points() {
      return inner.points
    }
  }
  for (const method of METHODS) {
    Custom.prototype[method] = (...args) => {
      if (overrides[method]) return overrides[method](...args)
      return delayMs > 0 ? later(delayMs).then(() => inner[method](...args)) : inner[method](...args)
    }
  }
  return new Custom()
}

const later = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

describe('RateLimiterQueue, beside rate-limiter-flexible, in memory', () => {
  it('serves the requests first come first served, rejects those past maxQueueSize, and keeps one queue per key', async () => {
    const traces = await onBoth(async (lib, { track, tick, settle }) => {
      const limiter = new lib.RateLimiterMemory({ points: 2, duration: 1 })
      const queue = new lib.RateLimiterQueue(limiter, { maxQueueSize: 3 })
      // None waits yet: the six all try the limiter; two get their token, three wait, one is too many.
      for (let n = 1; n <= 6; n++) track(`r${n}`, queue.removeTokens(1))
      await settle()
      track('r7, another key', queue.removeTokens(2, 'other'))
      track('r8, too many tokens', queue.removeTokens(3))
      await tick(999)
      // r3 and r4 get the next second's tokens; r5 waits again, first, and r9 and r10 behind it.
      await tick(1)
      track('r9', queue.removeTokens(1))
      track('r10, 2 tokens', queue.removeTokens(2))
      track('r11', queue.removeTokens(1))
      await tick(1000)
      await tick(1000)
    })
    assert.deepEqual(traces.ours, traces.theirs)
    const full = { failed: "Number of requests reached it's maximum 3", name: 'CustomError', queueError: true }
    assert.deepEqual(traces.ours, [
      ['r1', { resolved: 1 }],
      ['r2', { resolved: 0 }],
      ['r6', full],
      ['r7, another key', { resolved: 0 }],
      ['r8, too many tokens', { failed: 'Requested tokens 3 exceeds maximum 2 tokens per interval', name: 'CustomError', queueError: true }],
      '+999 ms',
      '+1 ms',
      ['r3', { resolved: 1 }],
      ['r4', { resolved: 0 }],
      ['r11', full],
      '+1000 ms',
      ['r5', { resolved: 1 }],
      ['r9', { resolved: 0 }],
      '+1000 ms',
      ['r10, 2 tokens', { resolved: 0 }],
    ])
  })

  it('keeps a request the limiter refuses again, when the queue wakes up, first in the queue', async () => {
    const traces = await onBoth(async (lib, { track, settle, tick }) => {
      const limiter = new lib.RateLimiterMemory({ points: 2, duration: 1 })
      const queue = new lib.RateLimiterQueue(limiter)
      for (let n = 1; n <= 5; n++) track(`r${n}`, queue.removeTokens(1))
      await settle()
      // The key is over its points for 2 s from now: r3 is refused again at 1 s.
      track('set', limiter.set('limiter', 5, 2))
      await tick(1000)
      await tick(1000)
    })
    assert.deepEqual(traces.ours, traces.theirs)
    assert.deepEqual(traces.ours, [
      ['r1', { resolved: 1 }],
      ['r2', { resolved: 0 }],
      ['set', { resolved: { remainingPoints: 0, msBeforeNext: 2000, consumedPoints: 5, isFirstInDuration: false } }],
      '+1000 ms',
      '+1000 ms',
      ['r3', { resolved: 1 }],
      ['r4', { resolved: 0 }],
    ])
  })

  it('rejects a request still waiting at its expiresUnixAt when the queue next wakes up, and serves one at once whatever its deadline', async () => {
    const traces = await onBoth(async (lib, { track, tick, settle }) => {
      const queue = new lib.RateLimiterQueue(new lib.RateLimiterMemory({ points: 1, duration: 10 }))
      track('r1', queue.removeTokens(1, 'k'))
      track('r2, until +5 s', queue.removeTokens(1, 'k', T0_SECS + 5))
      track('r2b, until +10 s', queue.removeTokens(1, 'k', T0_SECS + 10))
      track('r3, until +15 s', queue.removeTokens(1, 'k', T0_SECS + 15))
      track('r4, already past', queue.removeTokens(1, 'k', T0_SECS - 100))
      track('r5, no deadline', queue.removeTokens(1, 'k'))
      // Nothing at +5 s: the queue sleeps until the limiter's msBeforeNext.
      await tick(5000)
      await tick(5000)
      await tick(10_000)
      await tick(10_000)
      // Past its deadline, and served at once: none waits, the limiter allows it.
      track('r6, past', queue.removeTokens(1, 'k', T0_SECS))
      await settle()
      // Past its deadline, refused: rejected when the queue wakes up.
      track('r7, past', queue.removeTokens(1, 'k', T0_SECS))
      await tick(10_000)
    })
    assert.deepEqual(traces.ours, traces.theirs)
    const expired = { failed: 'The request to remove tokens expired before it could be fulfilled', name: 'CustomError', queueError: true }
    assert.deepEqual(traces.ours, [
      ['r1', { resolved: 0 }],
      '+5000 ms',
      '+5000 ms',
      ['r2, until +5 s', expired],
      // Its deadline is now: expired too.
      ['r2b, until +10 s', expired],
      ['r3, until +15 s', { resolved: 0 }],
      ['r4, already past', expired],
      '+10000 ms',
      ['r5, no deadline', { resolved: 0 }],
      '+10000 ms',
      ['r6, past', { resolved: 0 }],
      '+10000 ms',
      ['r7, past', expired],
    ])
  })

  it("getTokensRemaining: the key's points left, the limiter's points when it holds nothing or cannot be read", async () => {
    const traces = await onBoth(async (lib, { track, tick, settle }) => {
      const limiter = new lib.RateLimiterMemory({ points: 5, duration: 10 })
      const queue = new lib.RateLimiterQueue(limiter)
      track('nothing held', queue.getTokensRemaining())
      track('remove 2', queue.removeTokens(2))
      track('remove 3 from k', queue.removeTokens(3, 'k'))
      await settle()
      track('after 2', queue.getTokensRemaining())
      track('k after 3', queue.getTokensRemaining('k'))
      track('never used', queue.getTokensRemaining('never'))
      await limiter.penalty('penalised', 4)
      track('a key only the limiter counted', queue.getTokensRemaining('penalised'))
      const unreadable = custom(lib, limiter, { get: () => Promise.reject(new Error('store down')) })
      track('unreadable', new lib.RateLimiterQueue(unreadable).getTokensRemaining())
      await tick(10_000)
      track('expired', queue.getTokensRemaining())
    })
    assert.deepEqual(traces.ours, traces.theirs)
    assert.deepEqual(traces.ours, [
      ['nothing held', { resolved: 5 }],
      ['remove 2', { resolved: 3 }],
      ['remove 3 from k', { resolved: 2 }],
      ['a key only the limiter counted', { resolved: 1 }],
      ['after 2', { resolved: 3 }],
      ['k after 3', { resolved: 2 }],
      ['never used', { resolved: 5 }],
      ['unreadable', { resolved: 5 }],
      '+10000 ms',
      ['expired', { resolved: 5 }],
    ])
  })

  it("rejects the request a failing limiter was called for with the limiter's Error, and goes on with the next", async () => {
    const traces = await onBoth(async (lib, { track, tick, settle }) => {
      const limiter = new lib.RateLimiterMemory({ points: 1, duration: 1 })
      let calls = 0
      const failing = custom(lib, limiter, {
        consume: (...args) => (++calls === 3 ? Promise.reject(new Error('store down')) : limiter.consume(...args)),
      })
      const queue = new lib.RateLimiterQueue(failing)
      track('r1', queue.removeTokens(1))
      await settle()
      // r2 is refused (the limiter's second call) and waits; r3 and r4 wait behind it.
      track('r2', queue.removeTokens(1))
      await settle()
      track('r3', queue.removeTokens(1))
      track('r4', queue.removeTokens(1))
      await tick(1000)
      await tick(1000)
    })
    assert.deepEqual(traces.ours, traces.theirs)
    assert.deepEqual(traces.ours, [
      ['r1', { resolved: 0 }],
      '+1000 ms',
      ['r2', { failed: 'store down', name: 'Error' }],
      ['r3', { resolved: 0 }],
      '+1000 ms',
      ['r4', { resolved: 0 }],
    ])
  })

  it('lets any number of requests wait by default (1,000 here), none with maxQueueSize 0', async () => {
    const traces = await onBoth(async (lib, { track, tick }) => {
      const queue = new lib.RateLimiterQueue(new lib.RateLimiterMemory({ points: 1, duration: 1 }))
      const none = new lib.RateLimiterQueue(new lib.RateLimiterMemory({ points: 1, duration: 1 }), { maxQueueSize: 0 })
      const answers = []
      for (let n = 0; n < 1000; n++) queue.removeTokens(1).then((remaining) => answers.push(remaining))
      track('none, first', none.removeTokens(1))
      track('none, second', none.removeTokens(1))
      await tick(0)
      for (let s = 0; s < 999; s++) await tick(1000)
      track(`${answers.length} served`, Promise.resolve(answers.every((remaining) => remaining === 0)))
    })
    assert.deepEqual(traces.ours, traces.theirs)
    const served = traces.ours.filter(Array.isArray)
    assert.deepEqual(served, [
      ['none, first', { resolved: 0 }],
      ['none, second', { failed: "Number of requests reached it's maximum 0", name: 'CustomError', queueError: true }],
      ['1000 served', { resolved: true }],
    ])
  })

  it('queues over a BurstyRateLimiter: served by the burst limiter, then waiting for the smaller msBeforeNext', async () => {
    const traces = await onBoth(async (lib, { track, tick, settle }) => {
      const bursty = new lib.BurstyRateLimiter(
        new lib.RateLimiterMemory({ points: 1, duration: 1 }),
        new lib.RateLimiterMemory({ keyPrefix: 'burst', points: 1, duration: 10 }),
      )
      const queue = new lib.RateLimiterQueue(bursty)
      // r1 has the rate limiter's point, r2 the burst limiter's; r3 and r4 wait.
      for (let n = 1; n <= 4; n++) track(`r${n}`, queue.removeTokens(1, 'user'))
      track('too many tokens', queue.removeTokens(2, 'user'))
      await settle()
      track('remaining', queue.getTokensRemaining('user'))
      // The wait is the rate limiter's 1 s, not the burst limiter's 10.
      await tick(1000)
      await tick(1000)
    })
    assert.deepEqual(traces.ours, traces.theirs)
    assert.deepEqual(traces.ours, [
      ['r1', { resolved: 0 }],
      ['r2', { resolved: 0 }],
      ['too many tokens', { failed: 'Requested tokens 2 exceeds maximum 1 tokens per interval', name: 'CustomError', queueError: true }],
      ['remaining', { resolved: 0 }],
      '+1000 ms',
      ['r3', { resolved: 0 }],
      '+1000 ms',
      ['r4', { resolved: 0 }],
    ])
  })

  it("RateLimiterQueueError: an Error with rate-limiter-flexible's own fields", () => {
    for (const [message, extra] of [['full', undefined], ['full', 'details']]) {
      const [theirs, ours] = [new rlf.RateLimiterQueueError(message, extra), new flexible.RateLimiterQueueError(message, extra)]
      assert.ok(ours instanceof Error)
      assert.deepEqual(Object.keys(ours), Object.keys(theirs))
      assert.equal(JSON.stringify(ours), JSON.stringify(theirs))
      assert.equal(String(ours), String(theirs))
      assert.equal(ours.stack.split('\n')[0], theirs.stack.split('\n')[0])
      assert.equal(ours.extra, extra)
    }
  })
})

describe('BurstyRateLimiter, beside rate-limiter-flexible, in memory', () => {
  it("answers with the rate limiter's RateLimiterRes, the burst limiter's msBeforeNext when smaller, and refuses once both do", async () => {
    const traces = await onBoth(async (lib, { step, tick }) => {
      const bursty = new lib.BurstyRateLimiter(
        new lib.RateLimiterMemory({ points: 2, duration: 10 }),
        new lib.RateLimiterMemory({ keyPrefix: 'burst', points: 3, duration: 5 }),
      )
      await step('points', Promise.resolve(bursty.points))
      await step('get, nothing held', bursty.get('k'))
      for (let n = 1; n <= 3; n++) await step(`consume ${n}`, bursty.consume('k'))
      await step('get, the burst limiter sooner', bursty.get('k'))
      await tick(1000)
      await step('consume 2 points', bursty.consume('k', 2))
      await step('consume 1 point', bursty.consume('k', 1))
      await tick(4000)
      // The burst limiter's duration is over: it holds nothing, and msBeforeNext is 0.
      await step('get, the burst limiter empty', bursty.get('k'))
      await step('consume', bursty.consume('k'))
      await tick(5000)
      await step('consume, a new duration', bursty.consume('k'))
    })
    assert.deepEqual(traces.ours, traces.theirs)
    const res = (remainingPoints, msBeforeNext, consumedPoints, isFirstInDuration = false) => ({ remainingPoints, msBeforeNext, consumedPoints, isFirstInDuration })
    assert.deepEqual(traces.ours, [
      ['points', { resolved: 2 }],
      ['get, nothing held', { resolved: null }],
      ['consume 1', { resolved: res(1, 10_000, 1, true) }],
      ['consume 2', { resolved: res(0, 10_000, 2) }],
      ['consume 3', { resolved: res(0, 5000, 3) }],
      ['get, the burst limiter sooner', { resolved: res(0, 5000, 3) }],
      '+1000 ms',
      ['consume 2 points', { resolved: res(0, 4000, 5) }],
      ['consume 1 point', { rejected: res(0, 4000, 6) }],
      '+4000 ms',
      ['get, the burst limiter empty', { resolved: res(0, 0, 6) }],
      ['consume', { resolved: res(0, 5000, 7) }],
      '+5000 ms',
      ['consume, a new duration', { resolved: res(1, 10_000, 1, true) }],
    ])
  })

  it("rejects with a limiter's Error as it is", async () => {
    const traces = await onBoth(async (lib, { track }) => {
      const memory = new lib.RateLimiterMemory({ points: 1, duration: 10 })
      const down = custom(lib, memory, { consume: () => Promise.reject(new Error('burst store down')) })
      const bursty = new lib.BurstyRateLimiter(memory, down)
      track('allowed', bursty.consume('k'))
      track('the burst limiter fails', bursty.consume('k'))
      const rateDown = new lib.BurstyRateLimiter(custom(lib, memory, { consume: () => Promise.reject(new Error('rate store down')) }), memory)
      track('the rate limiter fails', rateDown.consume('k'))
    })
    assert.deepEqual(traces.ours, traces.theirs)
    assert.deepEqual(traces.ours, [
      ['allowed', { resolved: { remainingPoints: 0, msBeforeNext: 10_000, consumedPoints: 1, isFirstInDuration: true } }],
      ['the burst limiter fails', { failed: 'burst store down', name: 'Error' }],
      ['the rate limiter fails', { failed: 'rate store down', name: 'Error' }],
    ])
  })
})

describe('RateLimiterQueue and BurstyRateLimiter, beside rate-limiter-flexible on one redis-server', () => {
  /** Each package on its own ioredis client and key prefix; the timers mocked, Date not (Redis keeps the time). */
  const onRedis = (scenario) =>
    onBoth(scenario, {
      apis: ['setTimeout'],
      before: async (name) => {
        const client = new IORedis(redis.server.port, '127.0.0.1')
        await client.ping()
        return { client, prefix: `wrappers-${name}` }
      },
      after: ({ client }) => client.disconnect(),
    })

  it('RateLimiterQueue: first come first served, maxQueueSize, getTokensRemaining, and the keys Redis holds', async () => {
    const traces = await onRedis(async (lib, { client, prefix, track, tick, outcomes }) => {
      const limiter = new lib.RateLimiterRedis({ storeClient: client, keyPrefix: `${prefix}-queue`, points: 2, duration: 60 })
      const queue = new lib.RateLimiterQueue(limiter, { maxQueueSize: 2 })
      for (let n = 1; n <= 5; n++) track(`r${n}`, queue.removeTokens(1))
      await outcomes(3)
      track('too many tokens', queue.removeTokens(3))
      track('other key', queue.removeTokens(1, 'other'))
      await outcomes(5)
      track('remaining', queue.getTokensRemaining())
      track('remaining, other', queue.getTokensRemaining('other'))
      track('remaining, never used', queue.getTokensRemaining('never'))
      await outcomes(8)
      // Free the key rather than wait a minute for Redis, then wake the queue up.
      track('delete', limiter.delete('limiter'))
      await outcomes(9)
      await tick(60_000)
      await outcomes(11)
      track('key', client.get(`${prefix}-queue:limiter`))
      await outcomes(12)
    })
    assert.deepEqual(traces.ours, traces.theirs)
    assert.deepEqual(traces.ours, [
      ['r1', { resolved: 1 }],
      ['r2', { resolved: 0 }],
      ['r5', { failed: "Number of requests reached it's maximum 2", name: 'CustomError', queueError: true }],
      ['other key', { resolved: 1 }],
      ['too many tokens', { failed: 'Requested tokens 3 exceeds maximum 2 tokens per interval', name: 'CustomError', queueError: true }],
      ['remaining', { resolved: 0 }],
      ['remaining, never used', { resolved: 2 }],
      ['remaining, other', { resolved: 1 }],
      ['delete', { resolved: true }],
      '+60000 ms',
      ['r3', { resolved: 1 }],
      ['r4', { resolved: 0 }],
      ['key', { resolved: '2' }],
    ])
  })

  it('BurstyRateLimiter: the same answers and keys, and a queue over it', async () => {
    const traces = await onRedis(async (lib, { client, prefix, track, tick, outcomes, timers, timerSince }) => {
      const rate = new lib.RateLimiterRedis({ storeClient: client, keyPrefix: `${prefix}-rate`, points: 2, duration: 60 })
      const burst = new lib.RateLimiterRedis({ storeClient: client, keyPrefix: `${prefix}-burst`, points: 2, duration: 600 })
      const bursty = new lib.BurstyRateLimiter(rate, burst)
      for (let n = 1; n <= 5; n++) {
        track(`consume ${n}`, bursty.consume('k'))
        await outcomes(n)
      }
      track('get', bursty.get('k'))
      track('get, nothing held', bursty.get('nobody'))
      await outcomes(7)
      track('keys', Promise.all([client.get(`${prefix}-rate:k`), client.get(`${prefix}-burst:k`)]))
      await outcomes(8)
      const queue = new lib.RateLimiterQueue(bursty)
      const before = timers()
      track('queued', queue.removeTokens(1, 'k'))
      // Its first try refused (the queue waits on a timer) before the key is freed: else the
      // refusal could come back after the clock has moved on, and its timer never fire.
      await timerSince(before)
      track('delete', rate.delete('k'))
      await outcomes(9)
      await tick(60_000)
      await outcomes(10)
    })
    // Time passes between the two packages' calls: msBeforeNext within 50 ms, then compared in seconds.
    const ms = (entry) => Array.isArray(entry) && (entry[1].resolved ?? entry[1].rejected)?.msBeforeNext
    for (const [index, entry] of traces.ours.entries()) {
      const [ours, theirs] = [ms(entry), ms(traces.theirs[index])]
      assert.ok(ours === theirs || Math.abs(ours - theirs) <= 50, `${entry[0]}: ${ours} against ${theirs}`)
    }
    assert.deepEqual(inSeconds(traces.ours), inSeconds(traces.theirs))
    const res = (remainingPoints, consumedPoints, isFirstInDuration = false) => ({ remainingPoints, msBeforeNext: '60 s', consumedPoints, isFirstInDuration })
    assert.deepEqual(inSeconds(traces.ours), [
      ['consume 1', { resolved: res(1, 1, true) }],
      ['consume 2', { resolved: res(0, 2) }],
      // The burst limiter's 600 s are not shown: the rate limiter's 60 s are sooner.
      ['consume 3', { resolved: res(0, 3) }],
      ['consume 4', { resolved: res(0, 4) }],
      ['consume 5', { rejected: res(0, 5) }],
      ['get', { resolved: res(0, 5) }],
      ['get, nothing held', { resolved: null }],
      ['keys', { resolved: ['5', '3'] }],
      ['delete', { resolved: true }],
      '+60000 ms',
      ['queued', { resolved: 1 }],
    ])
  })
})

/** `trace` with each RateLimiterRes's msBeforeNext in whole seconds. */
function inSeconds(trace) {
  return trace.map((entry) => {
    if (!Array.isArray(entry)) return entry
    const [label, result] = entry
    const [how, answer] = Object.entries(result)[0]
    if (!(answer instanceof Object && 'msBeforeNext' in answer)) return entry
    return [label, { [how]: { ...answer, msBeforeNext: `${Math.round(answer.msBeforeNext / 1000)} s` } }]
  })
}

describe('RLWrapperBlackAndWhite, beside rate-limiter-flexible', () => {
  const KEYS = ['white', 'black', 'on both lists', 'w-by-function', 'b-by-function', 'neither', 7, '7']
  const CALLS = [
    ['consume', 'consume'],
    ['consume 2', 'consume', 2],
    ['penalty', 'penalty'],
    ['reward', 'reward'],
    ['get', 'get'],
    ['set 1 for 5 s', 'set', 1, 5],
    ['block for 3 s', 'block', 3],
    ['get after block', 'get'],
    ['delete', 'delete'],
    ['get after delete', 'get'],
  ]

  for (const runActionAnyway of [false, true]) {
    it(`answers every method for keys on the lists, by function and on neither, runActionAnyway ${runActionAnyway}`, async () => {
      const traces = await onBoth(async (lib, { track, settle }) => {
        const limiter = new lib.RateLimiterMemory({ points: 2, duration: 10 })
        const wrapper = new lib.RLWrapperBlackAndWhite({
          limiter,
          whiteList: ['white', 'on both lists'],
          blackList: ['black', 'on both lists', 7],
          isWhiteListed: (key) => String(key).startsWith('w-'),
          isBlackListed: (key) => String(key).startsWith('b-'),
          runActionAnyway,
        })
        for (const key of KEYS) {
          for (const [label, method, ...args] of CALLS) {
            track(`${label} ${JSON.stringify(key)}`, wrapper[method](key, ...args))
            await settle()
          }
          track(`the limiter, ${JSON.stringify(key)}`, limiter.get(key))
          await settle()
        }
      })
      assert.deepEqual(traces.ours, traces.theirs)
      const answers = new Map(traces.ours)
      const res = (remainingPoints, msBeforeNext, consumedPoints, isFirstInDuration = false) => ({ remainingPoints, msBeforeNext, consumedPoints, isFirstInDuration })
      const white = res(MAX, 0, 0)
      const black = res(0, MAX, 0)
      // The white list wins over the black one.
      for (const key of ['"white"', '"on both lists"', '"w-by-function"']) {
        for (const label of ['consume', 'consume 2', 'penalty', 'reward', 'set 1 for 5 s', 'block for 3 s']) assert.deepEqual(answers.get(`${label} ${key}`), { resolved: white }, `${label} ${key}`)
      }
      for (const key of ['"black"', '"b-by-function"', '7']) {
        assert.deepEqual(answers.get(`consume ${key}`), { rejected: black }, key)
        for (const label of ['penalty', 'reward', 'set 1 for 5 s', 'block for 3 s']) assert.deepEqual(answers.get(`${label} ${key}`), { resolved: black }, `${label} ${key}`)
      }
      // A list matches a key as given: the string '7' is on neither, and the limiter answers.
      for (const key of ['"neither"', '"7"']) {
        assert.deepEqual(answers.get(`consume 2 ${key}`), { rejected: res(0, 10_000, 3) }, key)
        assert.deepEqual(answers.get(`get after block ${key}`), { resolved: res(0, 3000, 3) }, key)
        assert.deepEqual(answers.get(`delete ${key}`), { resolved: true }, key)
      }
      if (runActionAnyway) {
        // Every call ran on the limiter too, and `get` answers from it whatever the lists.
        assert.deepEqual(answers.get('get "white"'), { resolved: res(0, 10_000, 3) })
        assert.deepEqual(answers.get('get after block 7'), { resolved: res(0, 3000, 3) })
        assert.deepEqual(answers.get('delete "black"'), { resolved: true })
      } else {
        assert.deepEqual(answers.get('get "white"'), { resolved: white })
        assert.deepEqual(answers.get('get after block 7'), { resolved: black })
        // `delete` goes to the limiter, which never saw the key.
        assert.deepEqual(answers.get('delete "black"'), { resolved: false })
      }
    })
  }

  it('takes lists and functions after construction, and gives the limiter its blockDuration and execEvenly', async () => {
    const traces = await onBoth(async (lib, { step }) => {
      const limiter = new lib.RateLimiterMemory({ points: 1, duration: 10, keyPrefix: 'bw' })
      const wrapper = new lib.RLWrapperBlackAndWhite({ limiter, whiteList: 'not an array' })
      const now = (value) => Promise.resolve(value)
      await step('defaults', now([wrapper.whiteList, wrapper.blackList, wrapper.runActionAnyway, wrapper.isWhiteListed('x'), wrapper.isBlackListed('x')]))
      await step('keyPrefix', now(wrapper.keyPrefix))
      wrapper.blockDuration = 30
      wrapper.execEvenly = 1
      await step('the limiter', now([limiter.blockDuration, limiter.execEvenly, wrapper.blockDuration, wrapper.execEvenly]))
      wrapper.blackList = 'late'
      await step('a string is no list', now(wrapper.blackList))
      wrapper.blackList = ['late']
      await step('black-listed later', wrapper.consume('late'))
      wrapper.isWhiteListed = (key) => key === 'late'
      await step('white-listed later, by a function', wrapper.consume('late'))
      await step('somewhere', now([wrapper.isBlackListedSomewhere('late'), wrapper.isWhiteListedSomewhere('late'), wrapper.isWhiteListedSomewhere('x')]))
      wrapper.runActionAnyway = 0
      await step('runActionAnyway as given', now(wrapper.runActionAnyway))
      await step('a limiter blocking for blockDuration', wrapper.consume('x', 2))
    })
    assert.deepEqual(traces.ours, traces.theirs)
    assert.deepEqual(traces.ours, [
      ['defaults', { resolved: [[], [], false, false, false] }],
      ['keyPrefix', { resolved: 'bw' }],
      ['the limiter', { resolved: [30, true, 30, true] }],
      ['a string is no list', { resolved: [] }],
      ['black-listed later', { rejected: { remainingPoints: 0, msBeforeNext: MAX, consumedPoints: 0, isFirstInDuration: false } }],
      ['white-listed later, by a function', { resolved: { remainingPoints: MAX, msBeforeNext: 0, consumedPoints: 0, isFirstInDuration: false } }],
      ['somewhere', { resolved: [true, true, false] }],
      ['runActionAnyway as given', { resolved: 0 }],
      ['a limiter blocking for blockDuration', { rejected: { remainingPoints: 0, msBeforeNext: 30_000, consumedPoints: 2, isFirstInDuration: true } }],
    ])
  })

  it("refuses bad options with rate-limiter-flexible's messages, as a TypeError with a code", () => {
    const limiter = (lib) => new lib.RateLimiterMemory({ points: 1, duration: 1 })
    const cases = [
      [() => ({}), 'limiter is not set'],
      [(lib) => ({ limiter: limiter(lib), isBlackListed: 5 }), 'isBlackListed must be function'],
      [(lib) => ({ limiter: limiter(lib), isWhiteListed: null }), 'isWhiteListed must be function'],
    ]
    for (const [options, message] of cases) {
      assert.throws(() => new rlf.RLWrapperBlackAndWhite(options(rlf)), { message })
      assert.throws(() => new flexible.RLWrapperBlackAndWhite(options(flexible)), { name: 'TypeError', code: 'ERR_INVALID_OPTION', message })
    }
  })
})

describe('RLWrapperTimeouts, beside rate-limiter-flexible', () => {
  it('rejects a call the limiter answers too late with "Operation timed out", and answers one in time as the limiter does', async () => {
    const traces = await onBoth(async (lib, { track, step, tick }) => {
      const memory = new lib.RateLimiterMemory({ points: 2, duration: 10 })
      const wrapper = (delayMs, timeoutMs) => new lib.RLWrapperTimeouts({ limiter: custom(lib, memory, { delayMs }), timeoutMs })
      track('answered in 50 ms of 100', wrapper(50, 100).consume('k'))
      track('answered in 100 ms of 100', wrapper(100, 100).consume('k'))
      track('answered in 200 ms of 100', wrapper(200, 100).consume('k'))
      await tick(50)
      await tick(50)
      await tick(100)
      // The late consumes counted all the same: 3 of 2 points.
      await step('the limiter', memory.get('k'))
      track('get in time', wrapper(10, 100).get('k'))
      track('penalty too late', wrapper(10, 5).penalty('k'))
      await tick(10)
      track('set in time', wrapper(10, 100).set('k', 1, 5))
      track('block in time', wrapper(10, 100).block('other', 5))
      track('reward in time', wrapper(10, 100).reward('k'))
      track('delete too late', wrapper(10, 0).delete('other'))
      await tick(10)
      track('refused in time', wrapper(10, 100).consume('k', 3))
      track('timeoutMs 0, a limiter in memory', new lib.RLWrapperTimeouts({ limiter: memory }).consume('fast'))
      await tick(10)
    })
    assert.deepEqual(traces.ours, traces.theirs)
    const timedOut = { failed: 'Operation timed out', name: 'Error' }
    const res = (remainingPoints, msBeforeNext, consumedPoints, isFirstInDuration = false) => ({ remainingPoints, msBeforeNext, consumedPoints, isFirstInDuration })
    assert.deepEqual(traces.ours, [
      '+50 ms',
      ['answered in 50 ms of 100', { resolved: res(1, 10_000, 1, true) }],
      '+50 ms',
      // A tie: the wrapper's timer was set first.
      ['answered in 100 ms of 100', timedOut],
      ['answered in 200 ms of 100', timedOut],
      '+100 ms',
      ['the limiter', { resolved: res(0, 9850, 3) }],
      '+10 ms',
      ['get in time', { resolved: res(0, 9840, 3) }],
      ['penalty too late', timedOut],
      '+10 ms',
      ['block in time', { resolved: res(0, 5000, 3) }],
      ['delete too late', timedOut],
      ['reward in time', { resolved: res(2, 5000, 0) }],
      ['set in time', { resolved: res(0, 5000, 1) }],
      ['timeoutMs 0, a limiter in memory', { resolved: res(1, 10_000, 1, true) }],
      '+10 ms',
      ['refused in time', { rejected: res(0, 4990, 3) }],
    ])
  })

  it("lets the insuranceLimiter answer a call that timed out or failed, not one the limiter refused; takes the limiter's own", async () => {
    const traces = await onBoth(async (lib, { track, step, tick }) => {
      // Its blockDuration becomes the wrapper's (0), as for any insured limiter.
      const insuranceLimiter = new lib.RateLimiterMemory({ points: 1, duration: 5, blockDuration: 60 })
      const memory = new lib.RateLimiterMemory({ points: 1, duration: 10 })
      const insured = (limiter) => new lib.RLWrapperTimeouts({ limiter, timeoutMs: 100, insuranceLimiter })
      track('too late: the insurance', insured(custom(lib, memory, { delayMs: 200 })).consume('k'))
      await tick(100)
      await step('failed: the insurance', insured(custom(lib, memory, { consume: () => Promise.reject(new Error('down')) })).consume('k'))
      await step('insurance blockDuration', Promise.resolve(insuranceLimiter.blockDuration))
      await step('in time', insured(memory).consume('j'))
      await step('refused in time: not the insurance', insured(memory).consume('j'))

      // A limiter built on RateLimiterInsuredAbstract: the wrapper takes its insurance limiter.
      class SlowInsured extends lib.RateLimiterInsuredAbstract {
        _consume(...args) {
          return later(500).then(() => memory.consume(...args))
        }
      }
      const own = new lib.RateLimiterMemory({ points: 3, duration: 5 })
      const slowInsured = new SlowInsured({ points: 1, duration: 10, blockDuration: 7, insuranceLimiter: own })
      await step("the limiter's insurance blockDuration", Promise.resolve(own.blockDuration))
      const wrapper = new lib.RLWrapperTimeouts({ limiter: slowInsured, timeoutMs: 100 })
      await step('taken', Promise.resolve([wrapper.insuranceLimiter === own, own.blockDuration, wrapper.keyPrefix, wrapper.points, wrapper.duration, wrapper.timeoutMs]))
      track("too late: the limiter's insurance", wrapper.consume('i', 2))
      await tick(100)
    })
    assert.deepEqual(traces.ours, traces.theirs)
    const res = (remainingPoints, msBeforeNext, consumedPoints, isFirstInDuration = false) => ({ remainingPoints, msBeforeNext, consumedPoints, isFirstInDuration })
    assert.deepEqual(traces.ours, [
      '+100 ms',
      ['too late: the insurance', { resolved: res(0, 5000, 1, true) }],
      ['failed: the insurance', { rejected: res(0, 5000, 2) }],
      ['insurance blockDuration', { resolved: 0 }],
      ['in time', { resolved: res(0, 10_000, 1, true) }],
      ['refused in time: not the insurance', { rejected: res(0, 10_000, 2) }],
      ["the limiter's insurance blockDuration", { resolved: 7 }],
      ['taken', { resolved: [true, 0, 'rlflx', 0, 0, 100] }],
      '+100 ms',
      ["too late: the limiter's insurance", { resolved: res(1, 5000, 2, true) }],
    ])
  })

  it('gives a slow limiter built on RateLimiterAbstract the same deadline', async () => {
    const traces = await onBoth(async (lib, { track, tick }) => {
      const memory = new lib.RateLimiterMemory({ points: 5, duration: 10 })
      class SlowMemory extends lib.RateLimiterAbstract {}
      for (const method of METHODS) SlowMemory.prototype[method] = (...args) => later(300).then(() => memory[method](...args))
      const hasty = new lib.RLWrapperTimeouts({ limiter: new SlowMemory({ points: 5, duration: 10 }), timeoutMs: 200 })
      const patient = new lib.RLWrapperTimeouts({ limiter: new SlowMemory({ points: 5, duration: 10 }), timeoutMs: 400 })
      track('consume, 200 ms allowed', hasty.consume('k'))
      await tick(200)
      // Its late consume is counted at 300 ms.
      await tick(100)
      track('get, 400 ms allowed', patient.get('k'))
      await tick(300)
    })
    assert.deepEqual(traces.ours, traces.theirs)
    assert.deepEqual(traces.ours, [
      '+200 ms',
      ['consume, 200 ms allowed', { failed: 'Operation timed out', name: 'Error' }],
      '+100 ms',
      '+300 ms',
      ['get, 400 ms allowed', { resolved: { remainingPoints: 4, msBeforeNext: 9700, consumedPoints: 1, isFirstInDuration: false } }],
    ])
  })

  it("refuses bad options with rate-limiter-flexible's messages, with a code", () => {
    const limiter = (lib) => new lib.RateLimiterMemory({ points: 1, duration: 1 })
    const cases = [
      [() => ({}), 'limiter must be an instance of RateLimiterAbstract or RateLimiterCompatibleAbstract', 'TypeError'],
      [() => ({ limiter: { consume() {} } }), 'limiter must be an instance of RateLimiterAbstract or RateLimiterCompatibleAbstract', 'TypeError'],
      [(lib) => ({ limiter: limiter(lib), timeoutMs: -1 }), 'timeoutMs must be a non-negative number', 'TypeError'],
      [(lib) => ({ limiter: limiter(lib), timeoutMs: '100' }), 'timeoutMs must be a non-negative number', 'TypeError'],
      [(lib) => ({ limiter: limiter(lib), insuranceLimiter: {} }), 'insuranceLimiter must be instance of RateLimiterAbstract or RateLimiterCompatibleAbstract', 'Error'],
      [(lib) => ({ limiter: limiter(lib), keyPrefix: 1 }), 'keyPrefix must be string', 'Error'],
    ]
    for (const [options, message, theirName] of cases) {
      assert.throws(() => new rlf.RLWrapperTimeouts(options(rlf)), { message, name: theirName })
      assert.throws(() => new flexible.RLWrapperTimeouts(options(flexible)), (error) => error instanceof TypeError && error.message === message && error.code === 'ERR_INVALID_OPTION')
    }
    // Any false `timeoutMs`: 0.
    for (const lib of [rlf, flexible]) {
      for (const timeoutMs of [undefined, null, false, '', NaN]) assert.equal(new lib.RLWrapperTimeouts({ limiter: limiter(lib), timeoutMs }).timeoutMs, 0, String(timeoutMs))
    }
  })
})

describe('ratekeeper/flexible: where the wrappers differ from rate-limiter-flexible, on purpose', () => {
  it("never throw synchronously: a list function's or a limiter's exception rejects the call", async () => {
    const boom = () => {
      throw new Error('boom')
    }
    const options = (lib) => ({ limiter: new lib.RateLimiterMemory({ points: 1, duration: 1 }), isWhiteListed: boom })
    // rate-limiter-flexible throws from consume itself.
    assert.throws(() => new rlf.RLWrapperBlackAndWhite(options(rlf)).consume('k'), { message: 'boom' })
    await assert.rejects(new flexible.RLWrapperBlackAndWhite(options(flexible)).consume('k'), { message: 'boom' })
    // rate-limiter-flexible would leave that rejection unhandled and time out: here it rejects at once.
    const throwing = custom(flexible, new flexible.RateLimiterMemory({ points: 1, duration: 1 }), { consume: boom })
    await assert.rejects(new flexible.RLWrapperTimeouts({ limiter: throwing, timeoutMs: 10_000 }).consume('k'), { message: 'boom' })
    await assert.rejects(new flexible.BurstyRateLimiter(throwing, throwing).consume('k'), { message: 'boom' })
    await assert.rejects(new flexible.RateLimiterQueue(throwing).removeTokens(1), { message: 'boom' })
  })
})

describe("RateLimiterQueue: a wait past Node's longest timer", () => {
  it('wakes up after 2^31 - 1 ms and asks again (Node would fire a longer timer after 1 ms, again and again)', async (t) => {
    mock.timers.enable({ apis: ['Date', 'setTimeout'], now: T0 })
    t.after(() => mock.timers.reset())
    const memory = new flexible.RateLimiterMemory({ points: 1, duration: 30 * 24 * 3600 })
    const queue = new flexible.RateLimiterQueue(memory)
    await queue.removeTokens(1)
    // Refused: the key's 30 days are left.
    let servedAt = null
    queue.removeTokens(1).then(() => (servedAt = Date.now() - T0))
    await settle()
    await memory.delete('limiter')
    mock.timers.tick(2 ** 31 - 2)
    await settle()
    assert.equal(servedAt, null)
    mock.timers.tick(1)
    await settle()
    assert.equal(servedAt, 2 ** 31 - 1)
  })
})

describe('ratekeeper/flexible: the new classes by every path', () => {
  it('the same class by require, by lib/<Name> and by import', async () => {
    const esm = await import('ratekeeper/flexible')
    for (const name of ['RateLimiterQueue', 'RateLimiterQueueError', 'BurstyRateLimiter', 'RLWrapperBlackAndWhite', 'RLWrapperTimeouts']) {
      assert.equal(typeof flexible[name], 'function', name)
      assert.equal(require(`ratekeeper/flexible/lib/${name}`), flexible[name], name)
      assert.equal(esm[name], flexible[name], name)
    }
  })
})
