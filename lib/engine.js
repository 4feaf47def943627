'use strict'

/**
 * Calls into the native limiters and turns their answers into Promises.
 *
 * A native limiter's `run(mode, id, options, ticket, out)` answers with numbers: at once into
 * `out` for the in-memory store, or later, for Redis, in a batch delivered to the handler below
 * (this module's answer channel) under `ticket`. Making the Promises and the answer objects here, in JavaScript, costs a fraction
 * of what napi charges per object and per Promise (see src/binding/dispatch.rs).
 */

const binding = require('../binding.js')

const VALUES = 5
const RECORD = VALUES + 1

/** ticket -> { resolve, reject, decode } of the calls waiting for Redis. */
const pending = new Map()
let lastToken = 0
const out = new Float64Array(VALUES)

const channel = binding.setAnswerHandler((answers, failures) => {
  for (let i = 0; i < answers.length; i += RECORD) {
    const call = pending.get(answers[i])
    pending.delete(answers[i])
    if (call) call.resolve(call.decode(answers, i + 1))
  }
  for (const [ticket, error] of failures) {
    const call = pending.get(ticket)
    pending.delete(ticket)
    if (call) call.reject(error)
  }
})

/**
 * Runs `mode` of the native limiter `engine` for `id`; resolves `decode(values, offset)`.
 * Bad arguments reject (the native side throws a TypeError or RangeError with a code).
 */
function run(engine, mode, id, options, decode) {
  lastToken = lastToken >= 0xffffffff ? 1 : lastToken + 1
  const ticket = channel * 0x100000000 + lastToken
  let answered
  try {
    answered = engine.run(mode, id, options, ticket, out)
  } catch (error) {
    return Promise.reject(error)
  }
  if (answered) return Promise.resolve(decode(out, 0))
  return new Promise((resolve, reject) => pending.set(ticket, { resolve, reject, decode }))
}

module.exports = { run }
