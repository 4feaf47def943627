'use strict'

// What fake timers do to the globals they replace until a test advances its clock: nothing.
// (Jest's replace `setImmediate`, `queueMicrotask` and `process.nextTick`, among others, by
// default.) For tests that an answer does not wait on one of them.

/**
 * Runs `body()` while the globals `queueMicrotask` and `setImmediate` do nothing, and
 * `process.nextTick` too with `{ nextTick: true }`; puts them back after. (This process's
 * `process.nextTick` is the one Node's own streams and sockets use, which Jest's sandbox keeps
 * apart: fake it only around work without I/O.)
 */
async function withTimersFaked(body, { nextTick = false } = {}) {
  const real = { queueMicrotask: globalThis.queueMicrotask, setImmediate: globalThis.setImmediate, nextTick: process.nextTick }
  globalThis.queueMicrotask = () => {}
  globalThis.setImmediate = () => {}
  if (nextTick) process.nextTick = () => {}
  try {
    return await body()
  } finally {
    globalThis.queueMicrotask = real.queueMicrotask
    globalThis.setImmediate = real.setImmediate
    process.nextTick = real.nextTick
  }
}

/** What `promise` settles to, or a failure saying `what` was never answered after 3 s. */
async function answeredWithin3s(promise, what) {
  let timer
  const stalled = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} was never answered`)), 3000)
  })
  try {
    return await Promise.race([promise, stalled])
  } finally {
    clearTimeout(timer)
  }
}

module.exports = { withTimersFaked, answeredWithin3s }
