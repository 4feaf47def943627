'use strict'

/**
 * The counting limiters' classes: `consume`, `peek` and `reset` over one id or several, answered
 * with `{ allowed, timeLeft, remaining, limit, resetAfter }` (see index.d.ts). Each class names
 * its native engine; the rest is shared.
 */

const { FixedWindowEngine, SlidingWindowEngine } = require('../binding.js')
const { run } = require('./engine.js')
const { resolveStore } = require('./store.js')
const { checkOptionsObject } = require('./errors.js')
const { decodeVerdict, decodeNothing } = require('./verdict.js')

// The modes of the engines' `run`.
const CONSUME = 0
const PEEK = 1
const RESET = 2

class CountingLimiter {
  constructor(options) {
    const name = new.target.name
    checkOptionsObject(options, `${name} options`)
    const { client, ...rest } = options
    const store = client == null ? null : resolveStore(client, 'client').store
    this.engine = new new.target.Engine(rest, store)
    this.limits = rest.limits.map((limit) => ({ ...limit }))
  }

  consume(ids, options) {
    return run(this.engine, CONSUME, ids, options, decodeVerdict)
  }

  peek(ids, options) {
    return run(this.engine, PEEK, ids, options, decodeVerdict)
  }

  reset(ids) {
    return run(this.engine, RESET, ids, undefined, decodeNothing)
  }

  /** How many ids hold state in memory (0 on Redis). */
  get trackedIds() {
    return this.engine.trackedIds
  }
}

class FixedWindow extends CountingLimiter {
  static Engine = FixedWindowEngine
}

class SlidingWindow extends CountingLimiter {
  static Engine = SlidingWindowEngine
}

module.exports = { FixedWindow, SlidingWindow }
