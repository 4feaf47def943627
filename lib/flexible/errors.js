'use strict'

/**
 * rate-limiter-flexible's option errors, with its messages (apps and their tests match them) and
 * ratekeeper's stable `code`: a TypeError or RangeError, so still an `Error` as theirs are.
 */

const { typeError, rangeError } = require('../errors.js')

const invalidOption = (message) => rangeError('ERR_INVALID_OPTION', message)
const invalidOptionType = (message) => typeError('ERR_INVALID_OPTION', message)

module.exports = { invalidOption, invalidOptionType }
