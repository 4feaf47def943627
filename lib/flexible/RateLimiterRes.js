'use strict'

/**
 * What rate-limiter-flexible's limiters resolve with, and reject with when a key is over its
 * points: `remainingPoints`, `msBeforeNext` (-1 for a key that never expires), `consumedPoints`
 * and `isFirstInDuration`, as in rate-limiter-flexible 11.
 */
class RateLimiterRes {
  #remainingPoints
  #msBeforeNext
  #consumedPoints
  #isFirstInDuration

  constructor(remainingPoints = 0, msBeforeNext = 0, consumedPoints = 0, isFirstInDuration = false) {
    this.remainingPoints = remainingPoints
    this.msBeforeNext = msBeforeNext
    this.consumedPoints = consumedPoints
    this.isFirstInDuration = isFirstInDuration
  }

  /** Points left in the current duration (never below 0). */
  get remainingPoints() {
    return this.#remainingPoints
  }

  set remainingPoints(points) {
    this.#remainingPoints = points
  }

  /** Milliseconds before the key's duration (or block) ends; -1 when it never does. */
  get msBeforeNext() {
    return this.#msBeforeNext
  }

  set msBeforeNext(ms) {
    this.#msBeforeNext = ms
  }

  /** Points consumed in the current duration, this call's included. */
  get consumedPoints() {
    return this.#consumedPoints
  }

  set consumedPoints(points) {
    this.#consumedPoints = points
  }

  /** Whether this call started the key's duration. */
  get isFirstInDuration() {
    return this.#isFirstInDuration
  }

  set isFirstInDuration(value) {
    this.#isFirstInDuration = Boolean(value)
  }

  toJSON() {
    return {
      remainingPoints: this.#remainingPoints,
      msBeforeNext: this.#msBeforeNext,
      consumedPoints: this.#consumedPoints,
      isFirstInDuration: this.#isFirstInDuration,
    }
  }

  toString() {
    return JSON.stringify(this.toJSON())
  }

  [Symbol.for('nodejs.util.inspect.custom')]() {
    return this.toJSON()
  }
}

module.exports = RateLimiterRes
