'use strict'

// wait(): FIFO per id within a process, timeouts known in advance, aborts, many waiters across
// processes sharing Redis, waits longer than Node's longest timer, and a process that exits once
// no wait is pending. These tests run on real time with short windows; they assert orders and
// outcomes, never durations.

const { describe, it, mock } = require('node:test')
const assert = require('node:assert/strict')

const { FixedWindow, SlidingLog, RateLimiter, TokenBucket } = require('..')
const { wait, MAX_TIMER_MS } = require('../lib/wait.js')
const { useRedisServer } = require('./helpers/redis-server.js')
const { runScript } = require('./helpers/run-script.js')

const redis = useRedisServer()

describe('wait', () => {
  it('serves the waits for one id in arrival order, each once allowed and charged', async () => {
    const limiter = new FixedWindow({ limits: [{ duration: 40, limit: 1 }] })
    const order = []
    const waits = [0, 1, 2, 3, 4].map((i) => limiter.wait('x').then((answer) => order.push([i, answer.allowed])))
    await Promise.all(waits)
    assert.deepEqual(order, [[0, true], [1, true], [2, true], [3, true], [4, true]])
  })

  it('lets no later waiter overtake a heavier one at the head of the queue', async () => {
    const limiter = new SlidingLog({ interval: 60, maxInInterval: 3 })
    await limiter.consume('x', { weight: 2 })
    const order = []
    await Promise.all([
      limiter.wait('x', { weight: 3 }).then(() => order.push('heavy')),
      // This one would fit at once, but arrived later.
      limiter.wait('x', { weight: 1 }).then(() => order.push('light')),
    ])
    assert.deepEqual(order, ['heavy', 'light'])
  })

  it('keeps separate queues per id', async () => {
    const limiter = new FixedWindow({ limits: [{ duration: 60_000, limit: 1 }] })
    await limiter.consume('busy')
    const controller = new AbortController()
    const blocked = limiter.wait('busy', { signal: controller.signal })
    // Another id is not held up behind it.
    assert.equal((await limiter.wait('free')).allowed, true)
    controller.abort()
    await assert.rejects(blocked, { code: 'ERR_ABORTED' })
  })

  it('rejects at once when timeLeft shows the wait would pass timeoutMs', async () => {
    // A token bucket: its wait is an hour whatever the clock says (a fixed window's would end at
    // the next full hour, which may be less than timeoutMs away).
    const limiter = new TokenBucket({ capacity: 1, refillInterval: 3_600_000 })
    await limiter.consume('x')
    const error = await limiter.wait('x', { timeoutMs: 60_000 }).then(
      () => assert.fail('allowed'),
      (e) => e,
    )
    assert.equal(error.code, 'ERR_WAIT_TIMEOUT')
    // Known from the limiter's answer, not found by sleeping: the error carries that answer.
    assert.ok(error.timeLeft > 60_000 && error.timeLeft <= 3_600_000, String(error.timeLeft))
  })

  it('times out a waiter queued behind another when its time is up, and the queue goes on', async () => {
    const limiter = new FixedWindow({ limits: [{ duration: 3_600_000, limit: 1 }] })
    await limiter.consume('x')
    const controller = new AbortController()
    const head = limiter.wait('x', { signal: controller.signal })
    const queued = limiter.wait('x', { timeoutMs: 20 })
    const error = await queued.then(() => assert.fail('allowed'), (e) => e)
    assert.equal(error.code, 'ERR_WAIT_TIMEOUT')
    assert.equal(error.timeLeft, undefined)
    controller.abort(new Error('shutting down'))
    const aborted = await head.then(() => assert.fail('allowed'), (e) => e)
    assert.equal(aborted.code, 'ERR_ABORTED')
    assert.equal(aborted.name, 'AbortError')
    assert.equal(aborted.cause.message, 'shutting down')
  })

  it('aborts a sleeping head, a queued waiter, or a wait whose signal is already aborted', async () => {
    const limiter = new RateLimiter({ interval: 80, maxInInterval: 1 })
    await limiter.consume('x')
    const first = new AbortController()
    const second = new AbortController()
    const order = []
    const head = limiter.wait('x', { signal: first.signal }).then(() => order.push('head'), (e) => order.push(e.code))
    const middle = limiter.wait('x', { signal: second.signal }).then(() => order.push('middle'), (e) => order.push(e.code))
    const last = limiter.wait('x').then((answer) => order.push(`last ${answer.allowed}`))
    second.abort()
    first.abort()
    await Promise.all([head, middle, last])
    assert.deepEqual(order, ['ERR_ABORTED', 'ERR_ABORTED', 'last true'])
    const controller = new AbortController()
    controller.abort()
    await assert.rejects(limiter.wait('x', { signal: controller.signal }), { code: 'ERR_ABORTED' })
  })

  it('refuses a weight that can never be allowed, and bad options', async () => {
    const limiter = new FixedWindow({ limits: [{ duration: 1000, limit: 3 }] })
    await assert.rejects(limiter.wait('x', { weight: 4 }), { name: 'RangeError', code: 'ERR_INVALID_ARGUMENT' })
    await assert.rejects(limiter.wait('x', { weight: 0 }), { code: 'ERR_INVALID_ARGUMENT' })
    await assert.rejects(limiter.wait('x', { timeoutMs: -1 }), { name: 'RangeError', code: 'ERR_INVALID_ARGUMENT' })
    await assert.rejects(limiter.wait('x', { timeoutMs: NaN }), { name: 'RangeError', code: 'ERR_INVALID_ARGUMENT' })
    await assert.rejects(limiter.wait('x', { timeoutMs: '5' }), { name: 'TypeError', code: 'ERR_INVALID_ARGUMENT' })
    await assert.rejects(limiter.wait('x', { signal: {} }), { name: 'TypeError', code: 'ERR_INVALID_ARGUMENT' })
    await assert.rejects(limiter.wait('x', { timeout: 5 }), { name: 'TypeError', code: 'ERR_UNKNOWN_OPTION' })
    await assert.rejects(limiter.wait('x', 5), { name: 'TypeError', code: 'ERR_INVALID_ARGUMENT' })
    await assert.rejects(limiter.wait(undefined), { code: 'ERR_INVALID_ID' })
    // Regressions (found by the fuzz test): a signal-like object without removeEventListener left
    // the wait hanging, and ids whose reading throws made wait throw instead of reject.
    await assert.rejects(limiter.wait('x', { timeoutMs: 0, signal: { aborted: false, addEventListener() {} } }), { name: 'TypeError', code: 'ERR_INVALID_ARGUMENT' })
    const hostile = new Proxy([], { get() { throw new Error('from a getter') } })
    const outcome = limiter.wait(hostile)
    assert.ok(outcome instanceof Promise)
    await assert.rejects(outcome, { message: 'from a getter' })
    // The queue of a failed wait does not hold up the next one.
    assert.equal((await limiter.wait('x')).allowed, true)
  })

  it('gives back an action charged while its wait was being aborted', async () => {
    const limiter = new FixedWindow({ limits: [{ duration: 60_000, limit: 2 }] })
    const controller = new AbortController()
    const waiting = limiter.wait('x', { signal: controller.signal })
    // The first consume is in flight (it answers in a later tick): abort now.
    controller.abort()
    await assert.rejects(waiting, { code: 'ERR_ABORTED' })
    await new Promise((resolve) => setImmediate(resolve))
    assert.equal((await limiter.peek('x')).remaining, 2)
  })

  it('sleeps past Node\'s longest timer (24.8 days) in steps', async (t) => {
    mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 })
    t.after(() => mock.timers.reset())
    const thirtyDays = 30 * 24 * 3_600_000
    assert.ok(thirtyDays > MAX_TIMER_MS)
    let calls = 0
    // A limiter whose next action is allowed 30 days from now.
    const limiter = {
      consume: async () => {
        calls++
        const left = thirtyDays - Date.now()
        return left <= 0 ? { allowed: true, timeLeft: 0 } : { allowed: false, timeLeft: left }
      },
      reward: async () => {},
    }
    let answer = null
    wait(limiter, 'x', { timeoutMs: Infinity }).then((a) => (answer = a))
    await flush()
    assert.equal(calls, 1)
    mock.timers.tick(MAX_TIMER_MS)
    await flush()
    assert.equal(answer, null, 'still waiting after the first step')
    mock.timers.tick(thirtyDays - MAX_TIMER_MS)
    await flush()
    assert.deepEqual(answer, { allowed: true, timeLeft: 0 })
    assert.equal(calls, 2, 'asked again only once the whole wait was over')
  })

  it('serves many waiters on one id across 3 processes sharing Redis, within the limit', async () => {
    // 3 per 400 ms window, 3 processes x 4 waits: every wait ends allowed, each process's in
    // its own order, and no window admitted more than 3.
    const outputs = await Promise.all([0, 1, 2].map((n) => runWorker(n)))
    const answers = outputs.flat()
    assert.equal(answers.length, 12)
    for (const output of outputs) assert.deepEqual(output.map((a) => a.index), [0, 1, 2, 3])
    const perWindow = new Map()
    for (const { windowEnd } of answers) perWindow.set(windowEnd, (perWindow.get(windowEnd) ?? 0) + 1)
    for (const [windowEnd, count] of perWindow) assert.ok(count <= 3, `${count} admitted in the window ending at ${windowEnd}`)
  })

  it('lets the process exit once no wait is pending (resolved, timed out, aborted)', async () => {
    const { code, output } = await runScript(`
      const { FixedWindow } = require('.')
      const limiter = new FixedWindow({ limits: [{ duration: 3600000, limit: 1 }] })
      ;(async () => {
        console.log((await limiter.wait('a')).allowed)
        const controller = new AbortController()
        const pending = limiter.wait('a', { signal: controller.signal }).catch((e) => e.code)
        const queued = limiter.wait('a', { timeoutMs: 30 }).catch((e) => e.code)
        console.log(await queued)
        setTimeout(() => controller.abort(), 20)
        console.log(await pending)
      })()
    `)
    assert.equal(code, 0)
    assert.equal(output, 'true\nERR_WAIT_TIMEOUT\nERR_ABORTED\n')
  })
})

/** Lets pending promise callbacks run. */
async function flush() {
  for (let i = 0; i < 10; i++) await Promise.resolve()
}

/** One worker process: 4 waits on the shared id; resolves their answers in the order they ended. */
async function runWorker(n) {
  const { code, output } = await runScript(`
    const { FixedWindow } = require('.')
    const limiter = new FixedWindow({ client: '${redis.server.url}', namespace: 'wait-procs:', clock: 'local', limits: [{ duration: 400, limit: 3 }] })
    const answers = []
    Promise.all([0, 1, 2, 3].map((index) =>
      limiter.wait('shared', { timeoutMs: 30000 }).then((answer) => {
        // The window this action was counted in, from the answer (windows are aligned to the clock).
        const windowEnd = Math.round((Date.now() + answer.resetAfter) / 400) * 400
        answers.push({ index, allowed: answer.allowed, windowEnd })
      }),
    )).then(() => console.log(JSON.stringify(answers)), (e) => { console.error(e); process.exitCode = 1 })
  `)
  assert.equal(code, 0, `worker ${n}`)
  const answers = JSON.parse(output)
  for (const answer of answers) assert.equal(answer.allowed, true)
  return answers
}
