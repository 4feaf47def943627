'use strict'

const timers = require('node:timers')

/**
 * `call()`'s promise, or a rejected one when it throws (a bad argument, a caller's getter): so
 * that a Promise method never throws synchronously.
 */
function attempt(call) {
  try {
    return Promise.resolve(call())
  } catch (error) {
    return Promise.reject(error)
  }
}

/**
 * A settled Promise, whose `then` queues a microtask: not the global `queueMicrotask`, which test
 * frameworks' fake timers replace (Jest's by default), and which would hold what it queues until
 * the test advanced its timers.
 */
const settled = Promise.resolve()

/**
 * A Promise rejected with `reason` one microtask from now: by then the caller has attached its
 * handler (`await`, `.then`, `.catch` on the returned Promise), so Node's unhandled-rejection
 * tracking has nothing to record. `Promise.reject(reason)` costs 3 to 4 times more (about 600 ns
 * against 150 on a 2-core VM), which a limiter's refusals pay on every call of a busy key. The
 * one difference an app could see: a refusal's handler runs after the handlers of calls answered
 * meanwhile, not before.
 *
 * The microtask is queued by `settled`: a refusal does not wait for a test's fake timers, as
 * rate-limiter-flexible's does not. (Not `settled.then(() => { throw reason })`: a throw in a
 * handler costs about 500 ns more; this way costs less than `queueMicrotask` did, about 600 ns
 * against 750 in a loop of awaited refusals.)
 */
function rejectSoon(reason) {
  return new Promise((resolve, reject) => {
    settled.then(() => reject(reason))
  })
}

/**
 * Calls a node-style `callback` with `args` from a promise's handler, outside its chain: an
 * exception the callback throws is not taken by the chain (as a rejection nobody sees) but thrown
 * again from an immediate, an uncaught exception, as from a callback library's I/O. Not deferred
 * by `process.nextTick`: test frameworks' fake timers replace it (Jest's by default), which would
 * hold every callback until the test advanced its timers (`node:timers` is not replaced).
 */
function callOutside(callback, ...args) {
  try {
    callback(...args)
  } catch (error) {
    timers.setImmediate(() => {
      throw error
    })
  }
}

module.exports = { attempt, rejectSoon, callOutside, settled }
