'use strict'

const RateLimiterRedis = require('./RateLimiterRedis.js')

/**
 * rate-limiter-flexible's RateLimiterValkey: RateLimiterRedis on a Valkey server, whose
 * `storeClient` is an iovalkey client (or any form RateLimiterRedis takes).
 */
class RateLimiterValkey extends RateLimiterRedis {}

module.exports = RateLimiterValkey
