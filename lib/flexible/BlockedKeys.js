'use strict'

/**
 * Keys blocked in this process's memory (`inMemoryBlockOnConsumed`): key -> the instant
 * (`Date.now()` ms) its block ends. Ended blocks are dropped whenever the map passes 1,000 keys,
 * so that it stays bounded by the keys blocked at once.
 */
class BlockedKeys {
  #ends = new Map()

  /** Blocks `key` for `ms` milliseconds from now. */
  addMs(key, ms) {
    this.#ends.set(key, Date.now() + ms)
    if (this.#ends.size > 999) this.#dropEnded()
  }

  /** Milliseconds left of `key`'s block; 0 when it has none. */
  msBeforeExpire(key) {
    const end = this.#ends.get(key)
    if (end === undefined) return 0
    const left = end - Date.now()
    return left >= 0 ? left : 0
  }

  /** Forgets `key`'s block, or every block when no key is given. */
  delete(key) {
    if (key === undefined) this.#ends.clear()
    else this.#ends.delete(key)
  }

  #dropEnded() {
    const now = Date.now()
    for (const [key, end] of this.#ends) if (end <= now) this.#ends.delete(key)
  }
}

module.exports = BlockedKeys
