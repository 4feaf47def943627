'use strict'

/**
 * `call()`'s promise, or a rejected one when it throws (a bad argument, a caller's getter): so
 * that a Promise method never throws synchronously.
 */
function attempt(call) {
  try {
    return Promise.resolve(call())
  } catch (error) {
    return Promise.reject(error)
  }
}

module.exports = { attempt }
