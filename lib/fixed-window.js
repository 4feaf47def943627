'use strict'

/**
 * Fixed window counters: `FixedWindow` with `consume`, `peek` and `reset` (see index.d.ts).
 */

const { FixedWindowEngine } = require('../binding.js')
const { run } = require('./engine.js')
const { resolveStore } = require('./store.js')
const { checkOptionsObject } = require('./errors.js')
const { decodeVerdict, decodeNothing } = require('./verdict.js')

// The modes of FixedWindowEngine.run.
const CONSUME = 0
const PEEK = 1
const RESET = 2

class FixedWindow {
  constructor(options) {
    checkOptionsObject(options, 'FixedWindow options')
    const { client, ...rest } = options
    const store = client == null ? null : resolveStore(client, 'client').store
    this.engine = new FixedWindowEngine(rest, store)
    this.limits = rest.limits.map(({ duration, limit }) => ({ duration, limit }))
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

  /** How many ids hold counters in memory (0 on Redis). */
  get trackedIds() {
    return this.engine.trackedIds
  }
}

module.exports = { FixedWindow }
