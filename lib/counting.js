'use strict'

/**
 * The counting limiters' classes: `consume`, `peek` and `reset` over one id or several, answered
 * with `{ allowed, timeLeft, remaining, limit, resetAfter }` (see index.d.ts). Each class names
 * its native engine; the rest is shared.
 */

const { FixedWindowEngine, SlidingWindowEngine } = require('../binding.js')
const { runner, storeErrorPolicy, inMemory } = require('./engine.js')
const { resolveStore } = require('./store.js')
const { checkOptionsObject } = require('./errors.js')
const { decodeVerdict, decodeNothing } = require('./verdict.js')

// The modes of the engines' `run`.
const CONSUME = 0
const PEEK = 1
const RESET = 2
/** The modes that answer like each mode but change nothing (for `onStoreError: 'allow'`). */
const QUIET_MODES = { [CONSUME]: PEEK, [PEEK]: PEEK, [RESET]: PEEK }

class CountingLimiter {
  constructor(options) {
    const name = new.target.name
    checkOptionsObject(options, `${name} options`)
    const { client, onStoreError, ...rest } = options
    const store = client == null ? null : resolveStore(client, 'client').store
    const policy = storeErrorPolicy(options, store !== null)
    const { Engine } = new.target
    this.engine = new Engine(rest, store)
    this.limits = rest.limits.map((limit) => ({ ...limit }))
    const memory = policy === 'reject' ? null : new Engine(inMemory(rest), null)
    this.run = runner(this.engine, policy, memory, QUIET_MODES)
  }

  consume(ids, options) {
    return this.run(CONSUME, ids, options, decodeVerdict)
  }

  peek(ids, options) {
    return this.run(PEEK, ids, options, decodeVerdict)
  }

  reset(ids) {
    return this.run(RESET, ids, undefined, decodeNothing)
  }

  /** How many ids hold state in memory (0 on Redis). */
  get trackedIds() {
    return this.engine.trackedIds
  }

  /** How many active ids the in-memory store evicted to stay within `maxKeys`. */
  get evictedIds() {
    return this.engine.evictedIds
  }
}

class FixedWindow extends CountingLimiter {
  static Engine = FixedWindowEngine
}

class SlidingWindow extends CountingLimiter {
  static Engine = SlidingWindowEngine
}

module.exports = { FixedWindow, SlidingWindow }
