'use strict'

const RateLimiterAbstract = require('./RateLimiterAbstract.js')
const RateLimiterCompatibleAbstract = require('./RateLimiterCompatibleAbstract.js')

/**
 * Whether `limiter` can stand in for a rate-limiter-flexible limiter (an `insuranceLimiter`, a
 * member of a Union, what a wrapper wraps): one of ours, or one built on their base classes.
 */
function isRateLimiterCompatible(limiter) {
  return limiter instanceof RateLimiterAbstract || limiter instanceof RateLimiterCompatibleAbstract
}

module.exports = { isRateLimiterCompatible }
