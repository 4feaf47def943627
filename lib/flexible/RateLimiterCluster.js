'use strict'

/**
 * rate-limiter-flexible's cluster limiters: in the primary, RateLimiterClusterMaster (or, for an
 * app run by PM2, RateLimiterClusterMasterPM2 in a process of its own) holds one
 * RateLimiterMemory per `keyPrefix` and answers the workers; in each worker, RateLimiterCluster
 * sends every call to it over IPC and settles as a limiter in memory would.
 *
 * The messages are rate-limiter-flexible 11's, on its channel, so that its workers and its master
 * talk to these (a fleet moves over one side at a time):
 *
 * - worker to master, once per limiter: `{ channel, type: 'init', opts }`, `opts` being `points`,
 *   `duration`, `blockDuration`, `execEvenly`, `execEvenlyMinDelayMs` and `keyPrefix`; the master
 *   makes a limiter of them unless it has one for that `keyPrefix`, and answers
 *   `{ channel, type: 'init', keyPrefix }` (this master adds `opts`: the options of the limiter it
 *   holds, so that a worker whose own differ can warn);
 * - worker to master, a call: `{ channel, keyPrefix, func, promiseId, data: { key, arg, opts } }`,
 *   `arg` being the points (or a block's seconds); `set` (this worker and master only) adds
 *   `data.secDuration`;
 * - master to worker: `{ channel, keyPrefix, promiseId, type: 'resolve' | 'reject', data }`, `data`
 *   being null, a boolean or a RateLimiterRes's four fields (this master sends
 *   `{ error: { name, message, code } }` for a call that failed, a bad argument).
 *
 * PM2 relays a process's message to the bus as `process:msg` unless it has both `type` and `data`
 * (it then goes out under its `type`): hence an init has no `data` and a call no `type`.
 */

const cluster = require('node:cluster')
const crypto = require('node:crypto')
const RateLimiterAbstract = require('./RateLimiterAbstract.js')
const RateLimiterMemory = require('./RateLimiterMemory.js')
const RateLimiterRes = require('./RateLimiterRes.js')
const { invalidOption, invalidOptionType } = require('./errors.js')
const { plainError, typeError } = require('../errors.js')

const CHANNEL = 'rate_limiter_flexible'
/** rate-limiter-flexible's default time a call waits for the master. */
const DEFAULT_TIMEOUT_MS = 5000
/** The longest timer Node keeps (a longer one fires at once). */
const MAX_TIMEOUT_MS = 2 ** 31 - 1
/** A worker still waiting for the master's init asks again, at most this often (a master started after it). */
const INIT_RETRY_MS = 1000
/** The options a worker sends and a master's limiter is made of. */
const OPTION_NAMES = ['points', 'duration', 'blockDuration', 'execEvenly', 'execEvenlyMinDelayMs', 'keyPrefix']

/** This process's master (RateLimiterClusterMaster or RateLimiterClusterMasterPM2): there is one at most. */
let masterInstance = null

const ignore = () => {}

function optionsOf(limiter) {
  return Object.fromEntries(OPTION_NAMES.map((name) => [name, limiter[name]]))
}

/** A settled call's value as the messages carry it. */
function toMessageData(value) {
  if (value === null || value === true || value === false) return value
  if (value instanceof RateLimiterRes) {
    const { remainingPoints, msBeforeNext, consumedPoints, isFirstInDuration } = value
    return { remainingPoints, msBeforeNext, consumedPoints, isFirstInDuration }
  }
  // A failure (a bad argument): rate-limiter-flexible's worker makes a RateLimiterRes of zeros of it.
  const error = value instanceof Error ? value : new Error(String(value))
  return { error: { name: error.name, message: error.message, code: error.code } }
}

/** A master's answer as the worker settles with it: null, a boolean, a RateLimiterRes, or an Error. */
function fromMessageData(data) {
  if (data === null || data === true || data === false) return data
  const fields = data !== null && typeof data === 'object' ? data : {}
  if (fields.error !== null && typeof fields.error === 'object') {
    const { name, message, code } = fields.error
    const ErrorClass = name === 'RangeError' ? RangeError : name === 'TypeError' ? TypeError : Error
    const error = new ErrorClass(String(message))
    if (code !== undefined) error.code = code
    return error
  }
  return new RateLimiterRes(fields.remainingPoints, fields.msBeforeNext, fields.consumedPoints, fields.isFirstInDuration)
}

/**
 * A master's limiters, one RateLimiterMemory per `keyPrefix`, made by the first worker's init
 * that names it (a later one with other options gets the first one's), and how it answers a
 * message. Anything but a message of the channel, or a call for a `keyPrefix` no init made, is
 * left unanswered, as rate-limiter-flexible does (the worker's call times out).
 */
class MasterLimiters {
  #byPrefix = new Map()

  /** Handles `msg`, answering through `reply(answer)`. */
  handle(msg, reply) {
    if (msg === null || typeof msg !== 'object' || msg.channel !== CHANNEL) return
    if (msg.type === 'init') {
      this.#init(msg.opts, reply)
      return
    }
    const limiter = this.#byPrefix.get(msg.keyPrefix)
    if (limiter === undefined) return
    const { key, arg, opts, secDuration } = msg.data !== null && typeof msg.data === 'object' ? msg.data : {}
    let call
    switch (msg.func) {
      case 'consume':
      case 'penalty':
      case 'reward':
      case 'block':
        call = limiter[msg.func](key, arg, opts)
        break
      case 'set':
        call = limiter.set(key, arg, secDuration, opts)
        break
      case 'get':
      case 'delete':
        call = limiter[msg.func](key, opts)
        break
      default:
        return
    }
    const answer = (type) => (value) => reply({ channel: CHANNEL, keyPrefix: msg.keyPrefix, promiseId: msg.promiseId, type, data: toMessageData(value) })
    call.then(answer('resolve'), answer('reject'))
  }

  #init(opts, reply) {
    if (opts === null || typeof opts !== 'object') return
    let limiter = this.#byPrefix.get(opts.keyPrefix)
    if (limiter === undefined) {
      try {
        limiter = new RateLimiterMemory(opts)
      } catch {
        // Options no worker sends (its constructor checks them): not the primary's failure.
        return
      }
      this.#byPrefix.set(opts.keyPrefix, limiter)
    }
    reply({ channel: CHANNEL, type: 'init', keyPrefix: opts.keyPrefix, opts: optionsOf(limiter) })
  }
}

/**
 * rate-limiter-flexible's RateLimiterClusterMaster: create it in the primary (before or after
 * `cluster.fork()`), without options; it answers every worker's RateLimiterCluster, from memory.
 * A singleton, as rate-limiter-flexible's: `new` gives this process's master again.
 */
class RateLimiterClusterMaster {
  constructor() {
    if (masterInstance !== null) return masterInstance
    const limiters = new MasterLimiters()
    cluster.on('message', (worker, msg) => {
      limiters.handle(msg, (answer) => {
        // An answer to a worker gone (an `execEvenly` delay outlived it) is dropped, not thrown in the primary.
        if (worker.isConnected()) worker.send(answer, ignore)
      })
    })
    masterInstance = this
  }
}

/**
 * rate-limiter-flexible's RateLimiterClusterMasterPM2, for apps PM2 runs (cluster or fork mode):
 * create it in a process of its own, with the `pm2` module (`require('pm2')`, connected); it
 * answers every app process's RateLimiterCluster through PM2's bus. A singleton, as
 * RateLimiterClusterMaster.
 */
class RateLimiterClusterMasterPM2 {
  constructor(pm2) {
    if (masterInstance !== null) return masterInstance
    if (pm2 === null || pm2 === undefined || typeof pm2.launchBus !== 'function' || typeof pm2.sendDataToProcessId !== 'function') {
      throw invalidOptionType("RateLimiterClusterMasterPM2 takes the pm2 module (require('pm2')), with launchBus and sendDataToProcessId")
    }
    const limiters = new MasterLimiters()
    pm2.launchBus((err, bus) => {
      // Without its bus the master can do nothing: fail as a process PM2 restarts.
      if (err) throw err
      bus.on('process:msg', (packet) => {
        if (packet === null || typeof packet !== 'object' || packet.process === null || typeof packet.process !== 'object') return
        const pmId = packet.process.pm_id
        // PM2 sends a process only a packet with a `topic` and `data`; a process gone fails here, and its call times out.
        limiters.handle(packet.raw, (answer) =>
          pm2.sendDataToProcessId(pmId, { ...answer, topic: CHANNEL, data: answer.data === undefined ? {} : answer.data }, ignore),
        )
      })
    })
    masterInstance = this
  }
}

// The worker's side: one listener for this process's limiters, there while a call or an init is
// waiting for the master (an idle worker can exit), calls by id.

/** Calls waiting for the master: promiseId -> { keyPrefix, resolve, reject, timer }. */
const pendingCalls = new Map()
/** Limiters waiting for the master's init: keyPrefix -> Set of their callbacks for its answer. */
const awaitingInit = new Map()
/** Ids unique to this copy of the module in this process, and apart from rate-limiter-flexible's (digits). */
const idPrefix = `rk${crypto.randomBytes(6).toString('hex')}-`
let lastId = 0
let listening = false

function updateListener() {
  const needed = pendingCalls.size > 0 || awaitingInit.size > 0
  if (needed && !listening) process.on('message', onMasterMessage)
  else if (!needed && listening) process.off('message', onMasterMessage)
  listening = needed
}

function onMasterMessage(msg) {
  if (msg === null || typeof msg !== 'object' || msg.channel !== CHANNEL) return
  if (msg.type === 'init') {
    const limiters = awaitingInit.get(msg.keyPrefix)
    if (limiters === undefined) return
    awaitingInit.delete(msg.keyPrefix)
    for (const onInit of limiters) onInit(msg.opts)
    updateListener()
    return
  }
  const call = pendingCalls.get(msg.promiseId)
  if (call === undefined || call.keyPrefix !== msg.keyPrefix || (msg.type !== 'resolve' && msg.type !== 'reject')) return
  settleCall(msg.promiseId)
  const value = fromMessageData(msg.data)
  if (msg.type === 'resolve') call.resolve(value)
  else call.reject(value)
}

/** Forgets a waiting call: its entry and its timer. */
function settleCall(promiseId) {
  const call = pendingCalls.get(promiseId)
  if (call === undefined) return
  clearTimeout(call.timer)
  pendingCalls.delete(promiseId)
  updateListener()
}

/** Sends `payload` to the master; a closed channel rejects the call at once. */
function sendCall(payload) {
  process.send(payload, (error) => {
    if (!error) return
    const call = pendingCalls.get(payload.promiseId)
    if (call === undefined) return
    settleCall(payload.promiseId)
    call.reject(error)
  })
}

/** Throws unless this process can reach a master: it has an IPC channel, and runs no master itself. */
function checkWorkerProcess() {
  if (typeof process.send !== 'function') {
    throw typeError(
      'ERR_NOT_SUPPORTED',
      'RateLimiterCluster works in a worker process (cluster.fork(), or an app run by PM2), whose master (RateLimiterClusterMaster in the primary) counts for all: this process has no IPC channel',
    )
  }
  if (cluster.isPrimary && masterInstance !== null) {
    throw typeError(
      'ERR_NOT_SUPPORTED',
      'RateLimiterCluster works in the workers, not in the primary, where RateLimiterClusterMaster answers them: create it in the code cluster.fork() runs',
    )
  }
}

/**
 * rate-limiter-flexible's RateLimiterCluster: a limiter in a cluster worker whose counts are kept
 * by the master (RateLimiterClusterMaster in the primary), so that all workers share them. The
 * options and answers of RateLimiterMemory, plus `timeoutMs` (default 5000): a call the master has
 * not answered by then rejects with an Error ("RateLimiterCluster timeout: no answer from master
 * in time", `code: 'ERR_CLUSTER_TIMEOUT'`). Give each set of options its own `keyPrefix`: the
 * master keeps the first options it is given for a `keyPrefix`, and a worker whose own differ
 * emits a process warning (`code: 'RATEKEEPER_CLUSTER_OPTIONS'`).
 *
 * Calls made before the master has answered the limiter's init wait for it (and ask again once a
 * second, in case the master started later). Throws `ERR_NOT_SUPPORTED` in a process without an
 * IPC channel, or in the primary that runs the master.
 */
class RateLimiterCluster extends RateLimiterAbstract {
  #timeoutMs = DEFAULT_TIMEOUT_MS
  #initiated = false
  #initSentAt = -Infinity
  /** Calls made before the init's answer: promiseId -> message. */
  #queued = new Map()
  #onInitAnswer = (masterOptions) => this.#onInit(masterOptions)

  constructor(opts = {}) {
    super(opts)
    this.timeoutMs = opts.timeoutMs
    checkWorkerProcess()
    this.#sendInit()
  }

  get timeoutMs() {
    return this.#timeoutMs
  }

  set timeoutMs(value) {
    const ms = value === undefined ? DEFAULT_TIMEOUT_MS : Math.abs(parseInt(value, 10))
    if (!(ms <= MAX_TIMEOUT_MS)) throw invalidOption(`timeoutMs must be a number of milliseconds, at most ${MAX_TIMEOUT_MS}`)
    this.#timeoutMs = ms
  }

  consume(key, pointsToConsume = 1, options = {}) {
    return this.#call('consume', { key, arg: pointsToConsume, opts: options })
  }

  penalty(key, points = 1, options = {}) {
    return this.#call('penalty', { key, arg: points, opts: options })
  }

  reward(key, points = 1, options = {}) {
    return this.#call('reward', { key, arg: points, opts: options })
  }

  /** Blocks `key` for `secDuration` seconds (0: for good). */
  block(key, secDuration, options = {}) {
    return this.#call('block', { key, arg: secDuration, opts: options })
  }

  /**
   * Sets `key`'s points for `secDuration` seconds (0: for good; default `duration`). Not in
   * rate-limiter-flexible's RateLimiterCluster: its master leaves it unanswered (a timeout).
   */
  set(key, points, secDuration, options = {}) {
    return this.#call('set', { key, arg: points, secDuration, opts: options })
  }

  /** `key`'s RateLimiterRes, or null when it holds nothing. */
  get(key, options = {}) {
    return this.#call('get', { key, opts: options })
  }

  /** Deletes `key`: resolves whether it held a count. */
  delete(key, options = {}) {
    return this.#call('delete', { key, opts: options })
  }

  /** The master's answer to the init, with the options of its limiter (rate-limiter-flexible's master sends none). */
  #onInit(masterOptions) {
    if (this.#initiated) return
    this.#initiated = true
    if (masterOptions !== null && typeof masterOptions === 'object') {
      const own = optionsOf(this)
      if (OPTION_NAMES.some((name) => masterOptions[name] !== own[name])) {
        process.emitWarning(
          `RateLimiterCluster: the master already holds a limiter for keyPrefix ${JSON.stringify(this.keyPrefix)} with other options, ` +
            `${JSON.stringify(masterOptions)}, and answers by them, not by this one's ${JSON.stringify(own)}: give each set of options its own keyPrefix`,
          { code: 'RATEKEEPER_CLUSTER_OPTIONS' },
        )
      }
    }
    const queued = this.#queued
    this.#queued = new Map()
    for (const payload of queued.values()) sendCall(payload)
  }

  #sendInit() {
    this.#initSentAt = Date.now()
    let limiters = awaitingInit.get(this.keyPrefix)
    if (limiters === undefined) awaitingInit.set(this.keyPrefix, (limiters = new Set()))
    limiters.add(this.#onInitAnswer)
    updateListener()
    process.send({ channel: CHANNEL, type: 'init', opts: optionsOf(this) }, ignore)
  }

  #call(func, data) {
    return new Promise((resolve, reject) => {
      const promiseId = `${idPrefix}${++lastId}`
      const timer = setTimeout(() => {
        settleCall(promiseId)
        this.#queued.delete(promiseId)
        reject(plainError('ERR_CLUSTER_TIMEOUT', 'RateLimiterCluster timeout: no answer from master in time'))
      }, this.#timeoutMs)
      pendingCalls.set(promiseId, { keyPrefix: this.keyPrefix, resolve, reject, timer })
      updateListener()
      const payload = { channel: CHANNEL, keyPrefix: this.keyPrefix, func, promiseId, data }
      if (this.#initiated) {
        sendCall(payload)
        return
      }
      this.#queued.set(promiseId, payload)
      if (Date.now() - this.#initSentAt >= INIT_RETRY_MS) this.#sendInit()
    })
  }
}

module.exports = { RateLimiterClusterMaster, RateLimiterClusterMasterPM2, RateLimiterCluster }
