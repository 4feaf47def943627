'use strict'

const { rangeError } = require('../errors.js')

/**
 * The points of a call as a whole number, as rate-limiter-flexible's RateLimiterRedis takes them
 * (a number, or a string of digits): anything else rejects with its message, with a `code`.
 * In memory too, where rate-limiter-flexible would cut a fraction off silently.
 */
function wholePoints(points) {
  if (typeof points === 'string') {
    if (!/^[1-9][0-9]*$/.test(points)) {
      throw rangeError('ERR_INVALID_ARGUMENT', 'Consuming string different than integer values is not supported by this package')
    }
    return Number(points)
  }
  if (!Number.isInteger(points)) {
    throw rangeError('ERR_INVALID_ARGUMENT', 'Consuming decimal number of points is not supported by this package')
  }
  return points
}

module.exports = { wholePoints }
