'use strict'

/**
 * redback's `RateLimit` API on the native bucket circle: `createRateLimit(action, options)` with
 * `add`, `count` and `addCount`, and redback's `createClient(...).createRateLimit(...)` (see
 * index.d.ts). Every method returns a Promise and, given a node-style callback, calls it too.
 */

const { BucketCircleEngine } = require('./native.js')
const { check, runner, storeErrorPolicy, inMemory } = require('./engine.js')
const { resolveStore } = require('./store.js')
const { typeError, checkOptionsObject, checkKnownOptions } = require('./errors.js')
const { decodeNothing } = require('./verdict.js')
const { attempt, callOutside } = require('./attempt.js')

// The modes of BucketCircleEngine.run.
const ADD = 0
const COUNT = 1
const ADD_COUNT = 2
const CHECK = 3
/** A valid subject, to check an empty array's options with (CHECK changes nothing). */
const ANY_SUBJECT = 'subject'
/** The modes that answer like each mode but change nothing (for `onStoreError: 'allow'`). */
const QUIET_MODES = { [ADD]: null, [COUNT]: COUNT, [ADD_COUNT]: COUNT }

const decodeCount = (values, i) => values[i]

/** redback's optional trailing arguments: a callback, and our `{ now }`, in either order. */
function trailing(args) {
  let callback
  let options
  for (const arg of args) {
    if (typeof arg === 'function') callback = arg
    else if (arg !== undefined) options = arg
  }
  return { callback, options }
}

/**
 * Hands the outcome to `callback` too, outside the promise chain; the promise then never
 * rejects (the error went to the callback). The promise also has the limiter's methods, so that
 * redback's chaining (`ratelimit.add(ip).count(ip, 20, cb)`) works.
 */
function finish(limiter, promise, callback) {
  // redback's calls are often not awaited (`ratelimit.add(ip)`): a failure must not become an
  // unhandled rejection, which ends the process. Whoever awaits the promise still sees it.
  promise.catch(() => {})
  let result = promise
  if (callback) {
    result = promise.then(
      (value) => {
        callOutside(callback, null, value)
        return value
      },
      (error) => {
        callOutside(callback, error)
        return undefined
      },
    )
  }
  // A chained call (`ratelimit.add(ip).count(ip, 60)`) starts once this one has settled, as on
  // redback's one connection: on Redis each kind of call has its own batch, which may leave first.
  const settled = promise.then(
    () => undefined,
    () => undefined,
  )
  for (const method of ['add', 'count', 'addCount']) {
    result[method] = (...args) => finish(limiter, settled.then(() => limiter[method](...args)))
  }
  return result
}

/**
 * The call options of `count` and `addCount` with their `interval` argument: an `interval` key
 * in the options is a mistake (it would be overwritten), refused as an unknown option.
 */
function withInterval(options, interval) {
  if (options !== null && typeof options === 'object' && Object.hasOwn(options, 'interval')) {
    throw typeError('ERR_UNKNOWN_OPTION', 'unknown option `interval` in call options: the interval is the second argument, count(subject, interval)')
  }
  return { ...options, interval }
}

/** Refuses an `interval` key in `add`'s call options: only counts take an interval. */
function refuseInterval(options) {
  if (options !== null && typeof options === 'object' && Object.hasOwn(options, 'interval')) {
    throw typeError('ERR_UNKNOWN_OPTION', 'unknown option `interval` in call options: add takes no interval (count and addCount take it as their second argument)')
  }
}

class RateLimit {
  constructor(action, options) {
    if (typeof action !== 'string' || action === '') {
      throw typeError('ERR_INVALID_OPTION', '`action` must be a non-empty string, e.g. createRateLimit("requests")')
    }
    checkOptionsObject(options, 'RateLimit options', true)
    const { client, namespace = '', onStoreError, ...rest } = options ?? {}
    if (typeof namespace !== 'string') throw typeError('ERR_INVALID_OPTION', '`namespace` must be a string')
    // redback's key: `[namespace:]action:subject`.
    this.key = namespace ? `${namespace}:${action}` : action
    const store = client == null ? null : resolveStore(client, 'client').store
    const policy = storeErrorPolicy(options ?? {}, store !== null)
    this.engine = new BucketCircleEngine({ ...rest, namespace: `${this.key}:` }, store)
    const memory = policy === 'reject' ? null : new BucketCircleEngine(inMemory(rest), null)
    // The fast path's number is the count's interval (src/binding/bucket_circle.rs).
    this.run = runner(this.engine, policy, memory, QUIET_MODES, undefined, 'interval')
  }

  /** Counts one action of `subject` (or of each subject of an array). */
  add(subject, ...rest) {
    const { callback, options } = trailing(rest)
    const added = attempt(() => {
      refuseInterval(options)
      if (!Array.isArray(subject)) return this.run(ADD, subject, options, decodeNothing)
      // Every subject is checked before any is counted; the options even when there is none.
      for (const one of subject.length > 0 ? subject : [ANY_SUBJECT]) check(this.engine, CHECK, one, options)
      return Promise.all(subject.map((one) => this.run(ADD, one, options, decodeNothing))).then(() => undefined)
    })
    return finish(this, added, callback)
  }

  /** How many actions `subject` did in the last `interval` seconds. */
  count(subject, interval, ...rest) {
    const { callback, options } = trailing(rest)
    return finish(this, attempt(() => this.run(COUNT, subject, withInterval(options, interval), decodeCount)), callback)
  }

  /** `add` then `count`, in one atomic step. */
  addCount(subject, interval, ...rest) {
    const { callback, options } = trailing(rest)
    return finish(this, attempt(() => this.run(ADD_COUNT, subject, withInterval(options, interval), decodeCount)), callback)
  }
}

/** redback's `createRateLimit`, on memory unless `options.client` is given. */
function createRateLimit(action, options) {
  return new RateLimit(action, options)
}

/**
 * redback's `createClient(redisOptions?, { namespace? })` (and `use(client, options)`): a factory
 * of rate limits on one Redis (default `redis://127.0.0.1:6379`, as redback).
 */
function createClient(redisOptions, clientOptions) {
  checkOptionsObject(clientOptions, 'createClient options', true)
  checkKnownOptions(clientOptions, ['namespace'], 'createClient options')
  const client = redisOptions ?? 'redis://127.0.0.1:6379'
  const { namespace } = clientOptions ?? {}
  resolveStore(client, 'client')
  return {
    namespace: namespace ?? '',
    createRateLimit: (action, options) => {
      if (options != null && typeof options === 'object' && 'client' in options) {
        throw typeError('ERR_UNKNOWN_OPTION', "the client's createRateLimit takes no `client`: the rate limit uses the client's Redis")
      }
      return new RateLimit(action, { namespace, ...options, client })
    },
  }
}

module.exports = { RateLimit, createRateLimit, createClient, use: createClient }
