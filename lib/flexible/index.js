'use strict'

/**
 * `ratekeeper/flexible`: rate-limiter-flexible's API on ratekeeper's stores. Replace
 * `require('rate-limiter-flexible')` with `require('ratekeeper/flexible')`: the classes, options
 * and answers are rate-limiter-flexible 11's, and RateLimiterRedis keeps its Redis layout, so
 * that both can run on one Redis while a fleet moves over. See flexible.d.ts.
 */

module.exports = {
  RateLimiterRes: require('./RateLimiterRes.js'),
  RateLimiterAbstract: require('./RateLimiterAbstract.js'),
  RateLimiterCompatibleAbstract: require('./RateLimiterCompatibleAbstract.js'),
  RateLimiterInsuredAbstract: require('./RateLimiterInsuredAbstract.js'),
  RateLimiterStoreAbstract: require('./RateLimiterStoreAbstract.js'),
  RateLimiterMemory: require('./RateLimiterMemory.js'),
  RateLimiterRedis: require('./RateLimiterRedis.js'),
  RateLimiterValkey: require('./RateLimiterValkey.js'),
  RateLimiterQueue: require('./RateLimiterQueue.js'),
  RateLimiterQueueError: require('./RateLimiterQueueError.js'),
  BurstyRateLimiter: require('./BurstyRateLimiter.js'),
  RLWrapperBlackAndWhite: require('./RLWrapperBlackAndWhite.js'),
  RLWrapperTimeouts: require('./RLWrapperTimeouts.js'),
  RateLimiterCluster: require('./RateLimiterCluster.js').RateLimiterCluster,
  RateLimiterClusterMaster: require('./RateLimiterCluster.js').RateLimiterClusterMaster,
  RateLimiterClusterMasterPM2: require('./RateLimiterCluster.js').RateLimiterClusterMasterPM2,
  RateLimiterUnion: require('./RateLimiterUnion.js'),
}
