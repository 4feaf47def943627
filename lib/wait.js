'use strict'

/**
 * `wait(ids, { weight, timeoutMs, signal })` for every limiter with `consume`: resolves with the
 * answer once the action is allowed and charged, for workers that would rather wait than drop.
 *
 * - Calls for the same ids on one limiter are served in arrival order within the process: only
 *   the oldest waiter of a queue asks the limiter; the others wait their turn.
 * - The oldest waiter sleeps for the `timeLeft` the limiter answered (no polling), then asks
 *   again: another process may have taken the capacity first, in which case it sleeps again.
 * - A wait that `timeLeft` shows would end past `timeoutMs` rejects at once with
 *   `ERR_WAIT_TIMEOUT`; a waiter still queued behind others rejects so when its time is up.
 * - `signal` aborts with `ERR_ABORTED`. An action charged while the wait was being aborted is
 *   given back (`reward`).
 * - Timers are held only while a wait is pending (so a process with none can exit), and waits
 *   longer than Node's longest timer (about 24.8 days) sleep in steps.
 */

const { typeError, rangeError } = require('./errors.js')

/** Node's longest timer, in milliseconds. */
const MAX_TIMER_MS = 2 ** 31 - 1

const WAIT_OPTIONS = ['weight', 'timeoutMs', 'signal']

/** limiter -> Map(key of the ids -> Queue). */
const queuesByLimiter = new WeakMap()

/** The queue of the waits for `ids` on `limiter`. */
function queueOf(limiter, ids) {
  let queues = queuesByLimiter.get(limiter)
  if (!queues) {
    queues = new Map()
    queuesByLimiter.set(limiter, queues)
  }
  // `1` and `'1'` are one id, as everywhere; a bad id gets a queue too, and its error from consume.
  const key = Array.isArray(ids) ? ids.map(idKey).join('\u0000') : idKey(ids)
  let queue = queues.get(key)
  if (!queue) {
    queue = { waiters: [], busy: false, forget: () => queues.delete(key) }
    queues.set(key, queue)
  }
  return queue
}

function idKey(id) {
  return typeof id === 'string' || typeof id === 'number' ? String(id) : `\u0001${typeof id}`
}

function checkWaitOptions(options) {
  if (options === undefined) return { timeoutMs: Infinity }
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw typeError('ERR_INVALID_ARGUMENT', 'wait options must be an object')
  }
  for (const name of Object.keys(options)) {
    if (!WAIT_OPTIONS.includes(name)) {
      throw typeError('ERR_UNKNOWN_OPTION', `unknown option \`${name}\` in wait options; the options are \`weight\`, \`timeoutMs\`, \`signal\``)
    }
  }
  const { weight, timeoutMs, signal } = options
  if (timeoutMs !== undefined) {
    if (typeof timeoutMs !== 'number') throw typeError('ERR_INVALID_ARGUMENT', `\`timeoutMs\` must be a number of milliseconds, got ${typeof timeoutMs}`)
    if (!(timeoutMs >= 0)) throw rangeError('ERR_INVALID_ARGUMENT', `\`timeoutMs\` must be at least 0 (Infinity for no limit), got ${timeoutMs}`)
  }
  if (
    signal !== undefined &&
    (signal === null ||
      typeof signal !== 'object' ||
      typeof signal.aborted !== 'boolean' ||
      typeof signal.addEventListener !== 'function' ||
      typeof signal.removeEventListener !== 'function')
  ) {
    throw typeError('ERR_INVALID_ARGUMENT', '`signal` must be an AbortSignal')
  }
  return { weight, timeoutMs: timeoutMs ?? Infinity, signal }
}

function abortError(signal) {
  const error = new Error('the wait was aborted', { cause: signal.reason })
  error.name = 'AbortError'
  error.code = 'ERR_ABORTED'
  return error
}

function timeoutError(timeoutMs, timeLeft) {
  const error = new Error(
    timeLeft === undefined
      ? `the wait timed out after ${timeoutMs} ms in the queue`
      : `the action would be allowed in ${timeLeft} ms, past the wait's timeoutMs of ${timeoutMs} ms`,
  )
  error.code = 'ERR_WAIT_TIMEOUT'
  if (timeLeft !== undefined) error.timeLeft = timeLeft
  return error
}

/**
 * Waits until `limiter.consume(ids, { weight })` allows the action; resolves with its answer.
 * See the module comment.
 */
function wait(limiter, ids, options) {
  let checked
  let queue
  try {
    checked = checkWaitOptions(options)
    if (checked.signal?.aborted) return Promise.reject(abortError(checked.signal))
    // Reading the ids may run the caller's code (a getter, a Proxy): what it throws rejects.
    queue = queueOf(limiter, ids)
  } catch (error) {
    return Promise.reject(error)
  }
  const { weight, timeoutMs, signal } = checked
  return new Promise((resolve, reject) => {
    const waiter = {
      deadline: Date.now() + timeoutMs,
      sleep: null,
      deadlineTimer: null,
      settled: false,
      settle(error, answer) {
        if (waiter.settled) return
        waiter.settled = true
        clearLongTimeout(waiter.sleep)
        clearLongTimeout(waiter.deadlineTimer)
        signal?.removeEventListener('abort', onAbort)
        const at = queue.waiters.indexOf(waiter)
        if (at !== -1) queue.waiters.splice(at, 1)
        if (queue.waiters.length === 0 && !queue.busy) queue.forget()
        if (error) reject(error)
        else resolve(answer)
        // The head gave way (a sleeping head was aborted or timed out): the next one goes on.
        if (at === 0 && !queue.busy) pump()
      },
    }
    const onAbort = () => waiter.settle(abortError(signal))
    signal?.addEventListener('abort', onAbort, { once: true })
    if (timeoutMs !== Infinity) {
      // A timer can fire up to a millisecond early by the clock (Node starts it at the loop's
      // cached time, and rounds): it is armed again until the deadline has really passed.
      const onDeadline = () => {
        const left = waiter.deadline - Date.now()
        if (left > 0) waiter.deadlineTimer = setLongTimeout(onDeadline, Math.ceil(left))
        else waiter.settle(timeoutError(timeoutMs))
      }
      waiter.deadlineTimer = setLongTimeout(onDeadline, timeoutMs)
    }
    queue.waiters.push(waiter)
    pump()
  })

  /** Lets the oldest waiter of the queue ask the limiter, unless it is asking already. */
  function pump() {
    const head = queue.waiters[0]
    if (!head || queue.busy) return
    queue.busy = true
    limiter.consume(ids, weight === undefined ? undefined : { weight }).then(
      (answer) => {
        queue.busy = false
        if (head.settled) {
          // Aborted or timed out while asking: what was charged goes back.
          if (answer.allowed) limiter.reward(ids, weight === undefined ? undefined : { weight }).catch(() => {})
        } else if (answer.allowed) {
          head.settle(null, answer)
        } else if (answer.timeLeft === Infinity) {
          head.settle(rangeError('ERR_INVALID_ARGUMENT', `a weight of ${weight ?? 1} exceeds a limit: the action can never be allowed`))
        } else if (Date.now() + answer.timeLeft > head.deadline) {
          head.settle(timeoutError(timeoutMs, answer.timeLeft))
        } else {
          head.sleep = setLongTimeout(() => {
            head.sleep = null
            pump()
          }, answer.timeLeft)
          return
        }
        if (queue.waiters.length === 0) queue.forget()
        else pump()
      },
      (error) => {
        queue.busy = false
        if (!head.settled) head.settle(error)
        else pump()
      },
    )
  }
}

/** `setTimeout` for any delay: past Node's longest timer, in steps. */
function setLongTimeout(callback, ms) {
  const handle = { timer: null }
  const step = (left) => {
    if (left > MAX_TIMER_MS) {
      handle.timer = setTimeout(step, MAX_TIMER_MS, left - MAX_TIMER_MS)
    } else {
      handle.timer = setTimeout(callback, Math.max(0, left))
    }
  }
  step(ms)
  return handle
}

function clearLongTimeout(handle) {
  if (handle) clearTimeout(handle.timer)
}

module.exports = { wait, MAX_TIMER_MS }
