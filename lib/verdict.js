'use strict'

/**
 * The answer every counting limiter gives, decoded from the engines' five numbers:
 * allowed (1 or 0), timeLeft, remaining, limit and resetAfter (milliseconds).
 */
function decodeVerdict(values, i) {
  return {
    allowed: values[i] === 1,
    timeLeft: values[i + 1],
    remaining: values[i + 2],
    limit: values[i + 3],
    resetAfter: values[i + 4],
  }
}

const decodeNothing = () => undefined

module.exports = { decodeVerdict, decodeNothing }
