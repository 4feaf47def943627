'use strict'

/**
 * Calls into the native limiters and turns their answers into Promises.
 *
 * A native limiter's `run(mode, id, options, ticket, out)` answers with numbers: at once into
 * `out` for the in-memory store, or later, for Redis, in a batch delivered to the handler below
 * (this module's answer channel) under `ticket`. Making the Promises and the answer objects here, in JavaScript, costs a fraction
 * of what napi charges per object and per Promise (see src/binding/dispatch.rs).
 */

const binding = require('./native.js')
const timers = require('node:timers')
const { directLanes } = require('./direct.js')
const { plainError, rangeError, typeError } = require('./errors.js')
const { settled } = require('./attempt.js')

const VALUES = 5
const RECORD = VALUES + 1

/**
 * The calls waiting for Redis, by slot: each slot's ticket, and the call's resolve, reject and
 * decode, or undefined when the slot is free. A call's token (the low 32 bits of its ticket) is
 * its slot (low 24 bits) and the slot's generation (high 8 bits), which changes each time the
 * slot is taken: an answer for a call that is no longer waiting finds another ticket in the
 * slot and is dropped.
 *
 * Slots in long-lived arrays, cleared once answered, and no object per call: under load, V8
 * keeps alive through its scavenges every young object that an old one points to, dead or not
 * (a Map through which every call passes, or a per-call record that V8 chose to allocate in the
 * old generation, held the calls' Promises and functions so), and the scavenges then took 6-10 ms
 * and set the tail latency (benchmark/RESULTS.md, item 16).
 */
const slotTickets = []
const resolvers = []
const rejecters = []
const decoders = []
const generations = []
const freeSlots = []
const SLOT_BITS = 24
const MAX_SLOTS = 2 ** SLOT_BITS
const out = new Float64Array(VALUES)

/** The slot of the call waiting under `ticket`; -1 when none waits under it. */
function slotOf(ticket) {
  const slot = ticket % MAX_SLOTS
  return slotTickets[slot] === ticket ? slot : -1
}

/** Frees `slot`, whose call is being settled, and lets go of what it held. */
function freeSlot(slot) {
  slotTickets[slot] = 0
  resolvers[slot] = rejecters[slot] = decoders[slot] = undefined
  freeSlots.push(slot)
}

/**
 * This module's answer channel: receives batches of answers from Redis, `answers` holding
 * `ticket, values...` per answer and `failures` `[ticket, error]` pairs.
 */
function settleAnswers(answers, failures) {
  for (let at = 0; at < answers.length; at += RECORD) resolveRecord(answers, at)
  for (const [ticket, error] of failures) rejectTicket(ticket, error)
}

/** Resolves the call whose record (its ticket, then its values) starts at `records[at]`. */
function resolveRecord(records, at) {
  const slot = slotOf(records[at])
  if (slot === -1) return
  const resolve = resolvers[slot]
  const decode = decoders[slot]
  freeSlot(slot)
  resolve(decode(records, at + 1))
}

/** Rejects the call waiting under `ticket` with `error`. */
function rejectTicket(ticket, error) {
  const slot = slotOf(ticket)
  if (slot === -1) return
  const reject = rejecters[slot]
  freeSlot(slot)
  reject(error)
}

const channel = binding.setAnswerHandler(settleAnswers)

/**
 * Takes a free slot for a call and returns its ticket, or -1 when MAX_SLOTS calls already wait
 * (a Node heap holding that many would be over 4 GiB: Redis is not keeping up).
 */
function takeSlot() {
  let slot
  if (freeSlots.length > 0) slot = freeSlots.pop()
  else if (slotTickets.length < MAX_SLOTS) {
    slot = slotTickets.length
    slotTickets.push(0)
    resolvers.push(undefined)
    rejecters.push(undefined)
    decoders.push(undefined)
    generations.push(0)
  } else return -1
  const generation = (generations[slot] + 1) & 0xff
  generations[slot] = generation
  return channel * 0x100000000 + generation * MAX_SLOTS + slot
}

let sendScheduled = false

function sendHeldCalls() {
  sendScheduled = false
  flushCalls()
}

/**
 * Sends the calls held; the only one, when it is a lone call, is offered to its direct lane
 * (lib/direct.js) instead.
 */
function flushCalls() {
  const lone = binding.sendHeldCalls(channel)
  if (lone !== -1) lanes.send(lone)
}

/**
 * Where a direct lane's reply is read (src/binding/direct_lane.rs): how many calls it answered
 * (one, or a union's up to 64: MAX_UNION_KEYS in src/binding/expiring_counter.rs), then each
 * one's ticket and values.
 */
const laneOut = new Float64Array(1 + 64 * RECORD)

/**
 * Settles a call that went by a direct lane (lib/direct.js): answered (with the calls its reply
 * answered along with it) as `laneOut` says, or failed with `error`.
 */
function settleDirect(ticket, error) {
  if (error !== undefined) rejectTicket(ticket, error)
  else for (let i = 0, at = 1; i < laneOut[0]; i++, at += RECORD) resolveRecord(laneOut, at)
}

/** A lone call (nothing else waiting for Redis, the only call held: see `sendSoon`) goes by a direct lane where one is open. */
const lanes = directLanes({
  out: laneOut,
  settle: settleDirect,
  // The calls made while a lane's call was under way were held for it: they leave now.
  afterCall: flushCalls,
})

/** How many calls wait for Redis (their slots taken), a call's own included once it took one. */
const waitingCalls = () => slotTickets.length - freeSlots.length

/**
 * Sends the Redis calls made in this turn of the event loop together once it ends (the native
 * side holds them until then; src/store/batch.rs): the calls an app makes while it handles a
 * burst of requests leave in one batch, which costs Redis far less per call than each alone.
 * `setImmediate`, as ioredis's auto-pipelining: it runs once the turn's I/O callbacks (each
 * followed by its microtasks) are done.
 *
 * A lone call (`waiting`, the calls waiting with it included, is 1: nothing else pending, as a
 * caller awaiting each call makes them) is first offered to its direct lane once the microtasks
 * queued before it have run (`sendLoneCall`), as a JavaScript client writes its request at once:
 * the end of the turn was 4 to 5 µs of the JavaScript thread's time per lone call, on its way
 * from Redis's reply to the next request (benchmark/RESULTS.md, item 46).
 */
function sendSoon(waiting) {
  if (sendScheduled) return
  sendScheduled = true
  // (Queued by `settled`, and the end of the turn by `node:timers`: fake timers replace neither.)
  if (waiting === 1) settled.then(sendLoneCall)
  else timers.setImmediate(sendHeldCalls)
}

/**
 * Sends a lone call by its direct lane when it is still the only call held and its lane is open;
 * otherwise (calls made meanwhile, as `Promise.all` of several makes them; no lane open yet) the
 * calls held leave at the end of the turn, as any. Calls made later in the turn are held until
 * the lane's call is answered, as those of the next turn are (calls leave in the order they were
 * made: src/store/direct.rs).
 */
function sendLoneCall() {
  const lone = binding.sendLoneCall(channel)
  if (lone === -1) {
    timers.setImmediate(sendHeldCalls)
    return
  }
  sendScheduled = false
  lanes.send(lone)
}

/**
 * Runs `mode` of the native limiter `engine` for `id`; resolves `decode(values, offset)`.
 * Bad arguments reject (the native side throws a TypeError or RangeError with a code).
 */
function run(engine, mode, id, options, decode) {
  const ticket = takeSlot()
  if (ticket === -1) {
    return Promise.reject(tooManyWaiting())
  }
  const slot = ticket % MAX_SLOTS
  let answered
  try {
    answered = engine.run(mode, id, options, ticket, out)
  } catch (error) {
    freeSlots.push(slot)
    return Promise.reject(error)
  }
  if (answered) {
    freeSlots.push(slot)
    return Promise.resolve(decode(out, 0))
  }
  sendSoon(waitingCalls())
  return answerOf(ticket, decode)
}

/** The failure of a call that finds every slot taken. */
function tooManyWaiting() {
  return plainError('ERR_STORE_UNAVAILABLE', `${MAX_SLOTS} calls are already waiting for Redis`)
}

/** The Promise of the call waiting under `ticket` (its slot taken): settled by its answer. */
function answerOf(ticket, decode) {
  return new Promise((resolve, reject) => {
    const slot = ticket % MAX_SLOTS
    slotTickets[slot] = ticket
    resolvers[slot] = resolve
    rejecters[slot] = reject
    decoders[slot] = decode
  })
}

/**
 * Runs a native call that answers under `count` tickets (the expiring counter's union, one answer
 * per key): `start(tickets)` makes it, and must throw or leave every answer to Redis. Resolves
 * the answers, each `decode(values, offset)`, in the tickets' order.
 */
function runTogether(count, start, decode) {
  const tickets = []
  const release = () => tickets.forEach((ticket) => freeSlots.push(ticket % MAX_SLOTS))
  for (let i = 0; i < count; i++) {
    const ticket = takeSlot()
    if (ticket === -1) {
      release()
      return Promise.reject(tooManyWaiting())
    }
    tickets.push(ticket)
  }
  try {
    start(tickets)
  } catch (error) {
    release()
    return Promise.reject(error)
  }
  sendSoon(waitingCalls() - count + 1)
  return Promise.all(tickets.map((ticket) => answerOf(ticket, decode)))
}

// The fast path's options (see `fastOptions`): NaN when not given.
let fastNumber = NaN
let fastNow = NaN

/**
 * Reads a call's options for the in-memory fast path (src/binding/fast.rs) into `fastNow` and
 * `fastNumber` (the option named `numberName`: `weight`, or redback's `interval`): true when
 * they are absent or hold only these two as numbers (the native side checks their ranges), false
 * when the general path must read (and check) them.
 */
function fastOptions(options, numberName) {
  fastNumber = NaN
  fastNow = NaN
  if (options === undefined) return true
  if (typeof options !== 'object' || options === null) return false
  try {
    // (Inside the try: Array.isArray throws on a revoked Proxy.)
    if (Array.isArray(options)) return false
    for (const name in options) {
      // Any other name, even with an undefined value, is the general path's to refuse.
      if (name !== 'now' && name !== numberName) return false
      const value = options[name]
      if (value === undefined) continue
      if (typeof value !== 'number' || value !== value) return false
      if (name === 'now') fastNow = value
      else fastNumber = value
    }
  } catch {
    // A getter threw: the general path reads the options again and reports it.
    return false
  }
  return true
}

/**
 * The function a limiter calls `engine` through: `(mode, id, options, decode) => Promise`, as
 * `run`. An in-memory engine answers a call with one string id on its fast path (one bare native
 * call, no object crossing), and any other call as `run` does. `numberName` is the call option
 * the fast path takes besides `now` (see `fastOptions`).
 */
function caller(engine, numberName = 'weight') {
  const fast = typeof engine.fastPath === 'function' ? engine.fastPath(out) : null
  const send = fast === null && typeof engine.sendPath === 'function' ? engine.sendPath() : null
  if (send !== null) return sendingCaller(engine, send, numberName)
  if (fast === null) return (mode, id, options, decode) => run(engine, mode, id, options, decode)
  return (mode, id, options, decode) => {
    if (typeof id === 'string' && fastOptions(options, numberName)) {
      try {
        if (fast(mode, id, fastNumber, fastNow)) return Promise.resolve(decode(out, 0))
      } catch (error) {
        return Promise.reject(error)
      }
    }
    return run(engine, mode, id, options, decode)
  }
}

/**
 * `caller` on Redis: a call with one string id and `{ now, weight }` at most is sent by the
 * engine's `sendPath` (src/binding/fast.rs: no class method, and its options read here rather than
 * through N-API), any other as `run` sends it.
 */
function sendingCaller(engine, send, numberName) {
  return (mode, id, options, decode) => {
    if (typeof id === 'string' && fastOptions(options, numberName)) {
      const ticket = takeSlot()
      if (ticket === -1) return Promise.reject(tooManyWaiting())
      let sent
      try {
        sent = send(mode, id, fastNumber, fastNow, ticket)
      } catch (error) {
        freeSlots.push(ticket % MAX_SLOTS)
        return Promise.reject(error)
      }
      if (sent) {
        sendSoon(waitingCalls())
        return answerOf(ticket, decode)
      }
      freeSlots.push(ticket % MAX_SLOTS)
    }
    return run(engine, mode, id, options, decode)
  }
}

/**
 * The synchronous twin of `caller`: `(mode, id, options, decode)` returns the answer, and bad
 * arguments throw. On Redis (`onRedis`) every call throws `ERR_SYNC_ON_REDIS`, naming `limiterName`.
 */
function syncCaller(engine, onRedis, limiterName) {
  if (onRedis) {
    return () => {
      throw typeError('ERR_SYNC_ON_REDIS', `${limiterName}'s synchronous methods answer from memory only, and this limiter is on Redis (\`client\`): use the Promise methods`)
    }
  }
  const fast = typeof engine.fastPath === 'function' ? engine.fastPath(out) : null
  return (mode, id, options, decode) => {
    if (fast !== null && typeof id === 'string' && fastOptions(options, 'weight') && fast(mode, id, fastNumber, fastNow)) {
      return decode(out, 0)
    }
    engine.run(mode, id, options, 0, out)
    return decode(out, 0)
  }
}

/**
 * Runs `mode` of `engine` for a call that only checks its arguments and answers at once (it
 * throws the TypeError or RangeError a bad argument gets).
 */
function check(engine, mode, id, options) {
  engine.run(mode, id, options, 0, out)
}

/** After Redis was found unavailable, how long calls go to the fallback before trying it again. */
const RETRY_REDIS_AFTER_MS = 500

const STORE_ERROR_POLICIES = ['reject', 'allow', 'memory']

/**
 * Reads `onStoreError` (what a Redis-backed limiter answers while Redis is unavailable) out of
 * `options`, which must not hold it any more when they reach the native engine.
 *
 * @returns {'reject' | 'allow' | 'memory'}
 */
function storeErrorPolicy(options, onRedis) {
  const policy = options.onStoreError
  if (policy === undefined) return 'reject'
  if (!STORE_ERROR_POLICIES.includes(policy)) {
    throw rangeError('ERR_INVALID_OPTION', `\`onStoreError\` must be 'reject', 'allow' or 'memory', got ${typeof policy === 'string' ? JSON.stringify(policy) : typeof policy}`)
  }
  if (!onRedis) throw rangeError('ERR_INVALID_OPTION', '`onStoreError` applies to limiters on Redis (`client`); the in-memory store does not fail')
  return policy
}

/**
 * How often the in-memory stores that no call used meanwhile are swept (src/store/memory.rs
 * `sweep_if_quiet`): a burst of ids is given back once idle even when no call comes at all.
 */
const QUIET_SWEEP_MS = 30_000
/** WeakRefs to the engines whose stores the sweep visits (a limiter dropped is not kept alive). */
const watchedEngines = new Set()
let sweepTimer = null

/** Sweeps the in-memory store of every live engine that no call used since the last time. */
function sweepQuietStores() {
  for (const ref of watchedEngines) {
    const engine = ref.deref()
    if (engine === undefined) watchedEngines.delete(ref)
    else engine.sweepIfQuiet(QUIET_SWEEP_MS)
  }
  if (watchedEngines.size === 0 && sweepTimer !== null) {
    timers.clearInterval(sweepTimer)
    sweepTimer = null
  }
}

/** Has the quiet sweep visit `engine` (a timer that never keeps the process alive). */
function sweepWhenQuiet(engine) {
  watchedEngines.add(new WeakRef(engine))
  if (sweepTimer === null) {
    sweepTimer = timers.setInterval(sweepQuietStores, QUIET_SWEEP_MS)
    sweepTimer.unref()
  }
}

/**
 * The function a limiter calls its engine through: `(mode, id, options, decode) => Promise`.
 *
 * With `policy` `'reject'` calls go to `engine` and its failures reject. Otherwise a call that
 * fails with `ERR_STORE_UNAVAILABLE` is answered by `memory`, an in-memory engine with the same
 * settings: as itself (`'memory'`: a limiter of this process alone, until Redis is back), or
 * with `quietModes[mode]`, a mode that changes nothing (`'allow'`: on an engine that is never
 * written, it allows every call; `null` for a mode that answers nothing). Then, for
 * RETRY_REDIS_AFTER_MS, calls go straight to the fallback; the next call after that tries Redis
 * again, and so on until Redis answers. Answer objects from the fallback carry
 * `reason: 'store-unavailable'` and `store: 'memory'` or `'none'`. `wrap(call)` wraps the calls
 * that go to `engine` (the block cache: it learns from the store's answers only). `numberName`:
 * see `caller`.
 */
function runner(engine, policy, memory, quietModes, wrap = (call) => call, numberName = 'weight') {
  sweepWhenQuiet(engine)
  if (memory !== null) sweepWhenQuiet(memory)
  // `wrap` (the block cache) sees the store's answers only, never the fallback's.
  const primary = wrap(caller(engine, numberName))
  if (policy === 'reject') return primary
  const store = policy === 'memory' ? 'memory' : 'none'
  const fallback = (mode, id, options, decode) => {
    const fallbackMode = policy === 'memory' ? mode : quietModes[mode]
    if (fallbackMode === null) return Promise.resolve(undefined)
    return run(memory, fallbackMode, id, options, decode).then((answer) =>
      answer !== null && typeof answer === 'object' ? { ...answer, reason: 'store-unavailable', store } : answer,
    )
  }
  let redisAfter = 0
  return (mode, id, options, decode) => {
    if (redisAfter !== 0 && Date.now() < redisAfter) return fallback(mode, id, options, decode)
    return primary(mode, id, options, decode).then(
      (answer) => {
        redisAfter = 0
        return answer
      },
      (error) => {
        if (error === null || typeof error !== 'object' || error.code !== 'ERR_STORE_UNAVAILABLE') throw error
        redisAfter = Date.now() + RETRY_REDIS_AFTER_MS
        return fallback(mode, id, options, decode)
      },
    )
  }
}

/** A Redis-backed limiter's options for its in-memory twin: without what only Redis takes. */
function inMemory(options) {
  const { clock, hashIds, namespace, ...rest } = options
  return rest
}

module.exports = { run, runTogether, sendSoon, settleAnswers, check, runner, syncCaller, storeErrorPolicy, inMemory, sweepQuietStores }
