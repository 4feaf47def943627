'use strict'

/**
 * Errors raised by the JavaScript layer, with the same stable codes as the native ones
 * (`ERR_INVALID_OPTION`, `ERR_INVALID_ARGUMENT`, ...).
 */

function withCode(error, code) {
  error.code = code
  return error
}

/** An `Error` with `code` (a failure that is not the caller's argument). */
function plainError(code, message) {
  return withCode(new Error(message), code)
}

/** A `TypeError` with `code`. */
function typeError(code, message) {
  return withCode(new TypeError(message), code)
}

/** A `RangeError` with `code`. */
function rangeError(code, message) {
  return withCode(new RangeError(message), code)
}

/**
 * A value as an error message shows it: a number, boolean, null or undefined as itself, a string
 * quoted (at most 40 characters), anything else by its kind. Never the value's own conversion:
 * an object without a prototype, or a symbol, throws when put in a template string.
 */
function shown(value) {
  if (value === null || ['number', 'boolean', 'undefined', 'bigint'].includes(typeof value)) return String(value)
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value)
  if (Array.isArray(value)) return 'an array'
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`
}

/** Throws unless `options` is a plain object (or, when `optional`, undefined). */
function checkOptionsObject(options, context, optional = false) {
  if (options === undefined && optional) return
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw typeError('ERR_INVALID_OPTION', `${context} must be an object`)
  }
}

/** Throws `ERR_UNKNOWN_OPTION` for a key of `options` that is not in `known` (a typo). */
function checkKnownOptions(options, known, context) {
  for (const name of Object.keys(options ?? {})) {
    if (!known.includes(name)) {
      throw typeError('ERR_UNKNOWN_OPTION', `unknown option \`${name}\` in ${context}; the options are ${known.map((n) => `\`${n}\``).join(', ')}`)
    }
  }
}

module.exports = { plainError, typeError, rangeError, shown, checkOptionsObject, checkKnownOptions }
