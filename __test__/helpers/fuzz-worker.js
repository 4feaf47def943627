'use strict'

// One property of __test__/fuzz.test.js, run with fast-check in a child process of its own, so
// that a native crash or a hang of the addon is reported by the parent (with the seed) instead of
// killing the test runner.
//
// argv[2] is JSON: { property, seed, numRuns, path?, livePort, deadPort, db, tracePath,
// callTimeoutMs }. The worker sends the parent `{ type: 'beat' }` every 500 ms (a blocked event
// loop stops them) and, at the end, `{ type: 'result', failed, report, stats }`. Before every
// call into the library it writes what it is about to do to `tracePath` (synchronously, so that
// it survives a crash): the parent shows that file when the worker dies.
//
// The properties (PROPERTIES below):
// - rolling-window (RateLimiter & co., SlidingLog), counting-limiters (FixedWindow,
//   SlidingWindow, SlidingTail, LeakyBucket, TokenBucket, Gcra): every limiter class (one entry
//   each in LIMITERS), built from options of a valid shape with hostile fields (or anything at
//   all), in memory, on Redis or on a dead store, then random method calls with arbitrary
//   arguments, one after the other or all at once; `wait` with timeouts and AbortSignals that
//   end it within WAIT_BOUND_MS, checked against a model of its options (waitOptionsModel);
// - redback: createRateLimit / createClient(...).createRateLimit, add / count / addCount with
//   callbacks, chaining, and calls nobody awaits;
// - callback-api: RateLimiter(options) without `new`, limiter(id?, cb?);
// - redis-store: new RedisStore(anything), RedisStore.connect(loopback targets), and
//   RedisRateLimiter.determineRedisClientType;
// - express: rateLimit(options), then requests through the middleware on real (socketless)
//   http.ServerResponse objects;
// - undefined-id: the class API refuses an undefined id; the callback API's global limit stays;
// - counts, redback-circle: counting stays exact (a model says what must be admitted, given
//   back by `reward`, and charged by `wait`).
// Every outcome must be a well-formed answer or a documented error (a TypeError / RangeError with
// an input code; a store code only on Redis; `wait`'s ERR_WAIT_TIMEOUT and ERR_ABORTED, plain
// Errors, only with a timeout or an aborted signal; the fuzzer's own errors, recognised by a
// mark, may come back as they are); never a synchronous throw from a method that returns a Promise, a hang
// (each call is bounded by callTimeoutMs), an unhandled rejection, an accepted unknown option,
// a password in an error message, or a wrong count.
//
// The generated arguments are *specs*, plain data that `build` turns into the hostile values
// (Proxies, throwing getters, 1 MB strings, ...) at call time and `render` prints as JavaScript,
// so that a counterexample reads as a reproduction. Each case starts on an empty database, so
// that a counterexample replays alone.
//
// Never does anything here connect anywhere but to the test's own redis-server (`livePort`) or to
// a loopback port where nothing listens (`deadPort`): calls are made only on limiters whose
// store is one of those (`ref` specs), and RedisStore.connect only gets options whose target is.

const fs = require('node:fs')
const http = require('node:http')
const net = require('node:net')
const util = require('node:util')
const fc = require('fast-check')
const ratekeeper = require('../..')
const { respCommand } = require('./redis-server.js')

const {
  RateLimiter,
  InMemoryRateLimiter,
  RedisRateLimiter,
  NodeRedisRateLimiter,
  IORedisRateLimiter,
  SlidingLog,
  FixedWindow,
  SlidingWindow,
  SlidingTail,
  LeakyBucket,
  TokenBucket,
  Gcra,
  RedisStore,
  createRateLimit,
  createClient,
  rateLimit,
} = ratekeeper

const config = JSON.parse(process.argv[2])
const CALL_TIMEOUT_MS = config.callTimeoutMs || 5000
const LIVE_PORT = config.livePort
const DEAD_PORT = config.deadPort
const DB = config.db || 0
const LIVE_URL = `redis://127.0.0.1:${LIVE_PORT}/${DB}`
const DEAD_URL = `redis://127.0.0.1:${DEAD_PORT}`
if (!(LIVE_PORT > 0) || !(DEAD_PORT > 0) || LIVE_PORT === 6379 || DEAD_PORT === 6379) {
  throw new Error('fuzz-worker: bad ports (never 6379)')
}

/**
 * Defects already known, whose checks are skipped (RATEKEEPER_FUZZ_KNOWN=tag,tag), to look past
 * them for other ones. Each failure message names its tag.
 */
const KNOWN = new Set((process.env.RATEKEEPER_FUZZ_KNOWN || '').split(',').map((tag) => tag.trim()).filter(Boolean))
const known = (tag) => KNOWN.has(tag)

/** A password that must never show up in an error message. */
const SECRET = 'S3CRET-pw'

// ---------------------------------------------------------------------------------------------
// Errors the fuzzer's own hostile values throw (getters, Proxy traps, callbacks): they may come
// back out of the library as they are, and are recognised by this mark.

const MARK = 'ratekeeperFuzzMarker'

function userError(where) {
  const error = new Error(`thrown by the fuzzer's own value (${where})`)
  error[MARK] = true
  return error
}

function isMarker(error) {
  try {
    return error !== null && typeof error === 'object' && error[MARK] === true
  } catch {
    return false
  }
}

/** What a revoked Proxy throws when touched: the user's object's own error too. */
function isRevokedProxyError(error) {
  try {
    return error instanceof TypeError && /revoked/.test(error.message) && error.code === undefined
  } catch {
    return false
  }
}

// ---------------------------------------------------------------------------------------------
// Unhandled rejections and uncaught exceptions, checked at the end of every case.

const strays = []

/** Installed once the property starts (not earlier: a load error must still crash the worker). */
function catchStrays() {
  process.on('unhandledRejection', (reason) => strays.push({ kind: 'unhandled rejection', error: reason }))
  process.on('uncaughtException', (error) => strays.push({ kind: 'uncaught exception', error }))
}

// ---------------------------------------------------------------------------------------------
// The trace file: the case under way and the call about to be made, written synchronously.

const traceFd = config.tracePath ? fs.openSync(config.tracePath, 'w') : null
let tracePosition = 0
let caseNumber = -1

function traceWrite(text) {
  if (traceFd === null) return
  const buffer = Buffer.from(text)
  fs.writeSync(traceFd, buffer, 0, buffer.length, tracePosition)
  tracePosition += buffer.length
}

function beginCase(rendered) {
  caseNumber++
  if (traceFd !== null) {
    fs.ftruncateSync(traceFd, 0)
    tracePosition = 0
  }
  traceWrite(`// case #${caseNumber} of property ${config.property} (seed ${config.seed})\n${rendered}\n// calls made:\n`)
}

function trace(line) {
  traceWrite(`${line}\n`)
}

// ---------------------------------------------------------------------------------------------
// Redis stores shared by the cases.

let liveStore
let deadStore
let closedStore

/** A raw connection to the test's redis-server, to empty this property's database before each case. */
let flusher

function openFlusher() {
  return new Promise((resolve, reject) => {
    const socket = net.connect(LIVE_PORT, '127.0.0.1')
    const waiting = []
    let buffer = ''
    socket.setEncoding('utf8')
    socket.on('data', (chunk) => {
      buffer += chunk
      for (let end = buffer.indexOf('\r\n'); end >= 0; end = buffer.indexOf('\r\n')) {
        const line = buffer.slice(0, end)
        buffer = buffer.slice(end + 2)
        const settle = waiting.shift()
        if (settle) settle(line)
      }
    })
    socket.once('error', reject)
    socket.once('connect', () => {
      const send = (...args) =>
        new Promise((settle) => {
          waiting.push(settle)
          socket.write(respCommand(args))
        })
      resolve({ send })
    })
  })
}

async function openStores() {
  flusher = await openFlusher()
  const selected = await flusher.send('SELECT', String(DB))
  if (selected !== '+OK') throw new Error(`fuzz-worker: SELECT ${DB} answered ${selected}`)
  liveStore = await RedisStore.connect({ url: LIVE_URL, commandTimeoutMs: 3000 })
  deadStore = new RedisStore({ port: DEAD_PORT, connectTimeoutMs: 50, commandTimeoutMs: 50 })
  closedStore = new RedisStore({ port: LIVE_PORT, db: DB })
  await closedStore.close()
}

/** The safe store-like values a `ref` spec names. */
const REFS = {
  store: { build: () => liveStore, render: 'store' },
  liveUrl: { build: () => LIVE_URL, render: 'LIVE_URL' },
  liveOptions: {
    build: () => ({ host: '127.0.0.1', port: LIVE_PORT, db: DB, commandTimeoutMs: 3000 }),
    render: '{ host: "127.0.0.1", port: LIVE_PORT, db: DB, commandTimeoutMs: 3000 }',
  },
  liveIoredis: {
    build: () => ({ zremrangebyscore() {}, options: { host: '127.0.0.1', port: LIVE_PORT, db: DB } }),
    render: '{ zremrangebyscore() {}, options: { host: "127.0.0.1", port: LIVE_PORT, db: DB } } /* ioredis-shaped */',
  },
  liveNodeRedis: {
    build: () => ({
      zRemRangeByScore() {},
      ZREMRANGEBYSCORE() {},
      options: { socket: { host: '127.0.0.1', port: LIVE_PORT }, database: DB },
    }),
    render: '{ zRemRangeByScore() {}, ZREMRANGEBYSCORE() {}, options: { socket: { host: "127.0.0.1", port: LIVE_PORT }, database: DB } } /* node-redis-shaped */',
  },
  liveCluster: {
    build: () => ({ cluster: [`redis://127.0.0.1:${LIVE_PORT}`], connectTimeoutMs: 300, commandTimeoutMs: 300 }),
    render: '{ cluster: [`redis://127.0.0.1:${LIVE_PORT}`], connectTimeoutMs: 300, commandTimeoutMs: 300 }',
  },
  deadStore: { build: () => deadStore, render: 'deadStore' },
  deadUrl: { build: () => DEAD_URL, render: 'DEAD_URL' },
  closedStore: { build: () => closedStore, render: 'closedStore' },
  livePort: { build: () => LIVE_PORT, render: 'LIVE_PORT' },
  deadPort: { build: () => DEAD_PORT, render: 'DEAD_PORT' },
}

const PREAMBLE = [
  "// const { RedisStore, ... } = require('ratekeeper')",
  '// LIVE_PORT: a redis-server of the test; DEAD_PORT: a loopback port where nothing listens',
  '// const LIVE_URL = `redis://127.0.0.1:${LIVE_PORT}/${DB}`, DEAD_URL = `redis://127.0.0.1:${DEAD_PORT}`',
  '// const store = await RedisStore.connect({ url: LIVE_URL, commandTimeoutMs: 3000 })',
  '// const deadStore = new RedisStore({ port: DEAD_PORT, connectTimeoutMs: 50, commandTimeoutMs: 50 })',
  '// const closedStore = new RedisStore({ port: LIVE_PORT }); await closedStore.close()',
  '// const marker = (where) => Object.assign(new Error(where), { [MARK]: true }) // the fuzzer\'s own errors',
  '// const T = Date.now() // per case',
  '// const abortSoon = (ms, reason) => { const c = new AbortController(); setTimeout(() => c.abort(reason), ms); return c.signal }',
].join('\n')

// ---------------------------------------------------------------------------------------------
// Specs: plain data for values. A primitive stands for itself; `{ $: kind, ... }` for the rest.

const ABSENT = Object.freeze({ $: 'absent' })
const isAbsent = (spec) => spec === ABSENT || (spec !== null && typeof spec === 'object' && spec.$ === 'absent')

const TRAPS = [
  'get',
  'has',
  'ownKeys',
  'getOwnPropertyDescriptor',
  'getPrototypeOf',
  'set',
  'defineProperty',
  'deleteProperty',
  'isExtensible',
  'apply',
]

function throwingHandler(traps) {
  const handler = {}
  for (const trap of traps) {
    handler[trap] = () => {
      throw userError(`Proxy ${trap} trap`)
    }
  }
  return handler
}

function define(object, key, value) {
  Object.defineProperty(object, key, { value, enumerable: true, writable: true, configurable: true })
}

const FUNCTIONS = {
  noop: () => function noop() {},
  throws: () =>
    function throws() {
      throw userError('function')
    },
  true: () => () => true,
  false: () => () => false,
  async: () => async () => 'a',
}

/** The value a spec stands for (a fresh one each time). */
function build(spec, ctx) {
  if (spec === null || typeof spec !== 'object') return spec
  switch (spec.$) {
    case 'sym':
      return Symbol(spec.d)
    case 'fn':
      return FUNCTIONS[spec.v]()
    case 'returns': {
      // A function (key(req), message(timeLeft), ...) returning the value of a spec.
      const inner = spec.v
      return () => build(inner, ctx)
    }
    case 'obj': {
      const object = {}
      for (const [key, value] of spec.e) define(object, key, build(value, ctx))
      return object
    }
    case 'nullProto': {
      const object = Object.create(null)
      for (const [key, value] of spec.e) define(object, key, build(value, ctx))
      return object
    }
    case 'getter': {
      const object = {}
      for (const [key, value] of spec.e) if (key !== spec.k) define(object, key, build(value, ctx))
      const name = spec.k
      Object.defineProperty(object, name, {
        enumerable: true,
        configurable: true,
        get() {
          throw userError(`getter ${JSON.stringify(name)}`)
        },
      })
      return object
    }
    case 'arr':
      return spec.a.map((item) => build(item, ctx))
    case 'arrGetter': {
      const array = spec.a.map((item) => build(item, ctx))
      const index = Math.min(spec.i, array.length)
      Object.defineProperty(array, index, {
        enumerable: true,
        configurable: true,
        get() {
          throw userError(`array getter [${index}]`)
        },
      })
      return array
    }
    case 'sparse':
      return new Array(spec.n)
    case 'many':
      return Array.from({ length: spec.n }, (_, i) => {
        if (spec.v === 'same') return 'id'
        if (spec.v === 'lastBad' && i === spec.n - 1) return null
        return `id${i}`
      })
    case 'deep': {
      let array = ['x']
      for (let i = 0; i < spec.d; i++) array = [array]
      return array
    }
    case 'big':
      return spec.c.repeat(spec.n)
    case 'proxy':
      return new Proxy(build(spec.t, ctx), throwingHandler(spec.traps))
    case 'revoked': {
      const { proxy, revoke } = Proxy.revocable(build(spec.t, ctx), {})
      revoke()
      return proxy
    }
    case 'date':
      return new Date(0)
    case 'regexp':
      return /a|b/g
    case 'map':
      return new Map([['now', 1]])
    case 'f64':
      return new Float64Array(5)
    case 'boxedString':
      return new String('a') // eslint-disable-line no-new-wrappers
    case 'boxedNumber':
      return new Number(1) // eslint-disable-line no-new-wrappers
    case 'promise':
      return Promise.resolve('a')
    case 'error':
      return new Error('an error as a value')
    case 'arrayLike':
      return { length: 1, 0: 'a' }
    case 'toPrim': {
      const v = spec.v
      const give = () => {
        if (v === 'throws') throw userError('toPrimitive')
        return v
      }
      return { [Symbol.toPrimitive]: give, toString: give, valueOf: give }
    }
    case 'ref':
      return REFS[spec.w].build()
    case 'T':
      return ctx.T + spec.o
    case 'cb':
      return ctx.callback()
    case 'limiter':
      return MIDDLEWARE_LIMITERS[spec.w].build(ctx)
    case 'url':
      return urlOf(spec, LIVE_PORT, DEAD_PORT)
    case 'signal':
      return harnessSignal(spec, ctx)
    case 'duck': {
      const signal = DUCKS[spec.v].build()
      ctx.signals.push(signal)
      if (DUCKS[spec.v].tag) ctx.tags.add(DUCKS[spec.v].tag)
      return signal
    }
    default:
      throw new Error(`fuzz-worker: unknown spec ${spec.$}`)
  }
}

function renderString(s) {
  if (s.length > 64) {
    for (const unit of [s.slice(0, 1), s.slice(0, 2), s.slice(0, 4)]) {
      if (unit && s.length % unit.length === 0 && unit.repeat(s.length / unit.length) === s) {
        return `${JSON.stringify(unit)}.repeat(${s.length / unit.length})`
      }
    }
  }
  return JSON.stringify(s)
}

function renderKey(key) {
  return /^[A-Za-z_$][\w$]*$/.test(key) ? key : renderString(key)
}

/** A spec as JavaScript source. */
function render(spec) {
  if (spec === undefined) return 'undefined'
  if (spec === null) return 'null'
  switch (typeof spec) {
    case 'number':
      return Object.is(spec, -0) ? '-0' : String(spec)
    case 'bigint':
      return `${spec}n`
    case 'string':
      return renderString(spec)
    case 'boolean':
      return String(spec)
    default:
      break
  }
  const entries = (list) => list.map(([k, v]) => `${renderKey(k)}: ${render(v)}`).join(', ')
  switch (spec.$) {
    case 'absent':
      return '/* absent */'
    case 'sym':
      return `Symbol(${JSON.stringify(spec.d)})`
    case 'fn':
      return {
        noop: '() => {}',
        throws: '() => { throw marker("function") }',
        true: '() => true',
        false: '() => false',
        async: 'async () => "a"',
      }[spec.v]
    case 'returns':
      return `() => (${render(spec.v)})`
    case 'obj':
      return spec.e.length ? `{ ${entries(spec.e)} }` : '{}'
    case 'nullProto':
      return `Object.assign(Object.create(null), { ${entries(spec.e)} })`
    case 'getter': {
      const rest = spec.e.filter(([k]) => k !== spec.k)
      return `{ ${rest.length ? `${entries(rest)}, ` : ''}get ${renderKey(spec.k)}() { throw marker("getter") } }`
    }
    case 'arr':
      return `[${spec.a.map(render).join(', ')}]`
    case 'arrGetter':
      return `Object.defineProperty([${spec.a.map(render).join(', ')}], ${spec.i}, { get() { throw marker("array getter") } })`
    case 'sparse':
      return `new Array(${spec.n})`
    case 'many':
      return {
        same: `Array(${spec.n}).fill("id")`,
        distinct: `Array.from({ length: ${spec.n} }, (_, i) => "id" + i)`,
        lastBad: `[...Array.from({ length: ${spec.n - 1} }, (_, i) => "id" + i), null]`,
      }[spec.v]
    case 'deep':
      return `/* ["x"] nested ${spec.d} deep */ nest(["x"], ${spec.d})`
    case 'big':
      return `${JSON.stringify(spec.c)}.repeat(${spec.n})`
    case 'proxy':
      return spec.traps.length
        ? `new Proxy(${render(spec.t)}, { ${spec.traps.map((t) => `${t}() { throw marker("${t}") }`).join(', ')} })`
        : `new Proxy(${render(spec.t)}, {})`
    case 'revoked':
      return `/* revoked */ Proxy.revocable(${render(spec.t)}, {}).proxy`
    case 'date':
      return 'new Date(0)'
    case 'regexp':
      return '/a|b/g'
    case 'map':
      return 'new Map([["now", 1]])'
    case 'f64':
      return 'new Float64Array(5)'
    case 'boxedString':
      return 'new String("a")'
    case 'boxedNumber':
      return 'new Number(1)'
    case 'promise':
      return 'Promise.resolve("a")'
    case 'error':
      return 'new Error("an error as a value")'
    case 'arrayLike':
      return '{ length: 1, 0: "a" }'
    case 'toPrim':
      return spec.v === 'throws'
        ? '{ [Symbol.toPrimitive]() { throw marker("toPrimitive") } }'
        : `{ [Symbol.toPrimitive]: () => ${render(spec.v)}, toString: () => ${render(spec.v)} }`
    case 'ref':
      return REFS[spec.w].render
    case 'T':
      return spec.o === 0 ? 'T' : `T ${spec.o < 0 ? '-' : '+'} ${Math.abs(spec.o)}`
    case 'cb':
      return 'cb'
    case 'limiter':
      return MIDDLEWARE_LIMITERS[spec.w].render
    case 'url':
      return `\`${urlOf(spec)}\``
    case 'signal':
      return {
        aborted: () => `AbortSignal.abort(${render(spec.reason)})`,
        soon: () => `abortSoon(${spec.ms}, ${render(spec.reason)})`,
        timeout: () => `AbortSignal.timeout(${spec.ms})`,
        never: () => 'new AbortController().signal',
      }[spec.v]()
    case 'duck':
      return DUCKS[spec.v].render
    default:
      return `/* ${spec.$} */`
  }
}

/**
 * AbortSignals for `wait` (the `signal` spec): already aborted, aborted by a timer `ms` from when
 * the call's arguments are built, AbortSignal.timeout(ms), or never. Each one built is kept in
 * `ctx.signals`, for the checks of ERR_ABORTED.
 */
function harnessSignal(spec, ctx) {
  const reason = build(spec.reason, ctx)
  let signal
  if (spec.v === 'aborted') signal = AbortSignal.abort(reason)
  else if (spec.v === 'timeout') signal = AbortSignal.timeout(spec.ms)
  else {
    const controller = new AbortController()
    if (spec.v === 'soon') setTimeout(() => controller.abort(reason), spec.ms)
    signal = controller.signal
  }
  ctx.signals.push(signal)
  return signal
}

/**
 * Objects that pass for an AbortSignal without being one (`wait` checks `aborted` and
 * `addEventListener`): `bounded` when a wait given one ends by itself, without a `timeoutMs`.
 */
const DUCKS = {
  noRemove: {
    build: () => ({ aborted: false, addEventListener() {} }),
    render: '{ aborted: false, addEventListener() {} } /* a signal-like object without removeEventListener */',
    tag: 'duck-signal',
  },
  aborted: {
    build: () => ({ aborted: true, reason: 'duck', addEventListener() {}, removeEventListener() {} }),
    render: '{ aborted: true, reason: "duck", addEventListener() {}, removeEventListener() {} }',
    bounded: true,
  },
  throwsOnAdd: {
    build: () => ({
      aborted: false,
      addEventListener() {
        throw userError('addEventListener')
      },
      removeEventListener() {},
    }),
    render: '{ aborted: false, addEventListener() { throw marker("addEventListener") }, removeEventListener() {} }',
    bounded: true,
  },
  eventTarget: {
    build: () => Object.assign(new EventTarget(), { aborted: false }),
    render: 'Object.assign(new EventTarget(), { aborted: false })',
  },
}

/** The spec of `key` in an options spec (looking through Proxies), ABSENT when it has none. */
function fieldOf(spec, key) {
  if (spec === null || typeof spec !== 'object') return ABSENT
  if (spec.$ === 'proxy' || spec.$ === 'revoked') return fieldOf(spec.t, key)
  if (spec.$ === 'getter' && spec.k === key) return { $: 'fn', v: 'throws' } // throws when read
  if (spec.$ === 'obj' || spec.$ === 'nullProto' || spec.$ === 'getter') {
    let found = ABSENT
    for (const [k, v] of spec.e) if (k === key) found = v
    return found
  }
  return ABSENT
}

/**
 * Whether a limiter built from these options may be called: its store is memory or one of the
 * `ref` stores. Anything else (an arbitrary object as `client` could mean 127.0.0.1:6379) is only
 * constructed, never called.
 */
function storeIsSafe(optionsSpec, key = 'client') {
  const client = fieldOf(optionsSpec, key)
  if (isAbsent(client) || client === undefined || client === null) return true
  if (client.$ === 'fn' && client.v === 'throws') return true
  return client.$ === 'ref'
}

/** Whether the limiter is on Redis (a `ref` client). */
function onRedis(optionsSpec, key = 'client') {
  const client = fieldOf(optionsSpec, key)
  return client !== null && typeof client === 'object' && client.$ === 'ref'
}

// ---------------------------------------------------------------------------------------------
// Arbitraries.

const SPECIAL_NUMBERS = [
  0, -0, 1, -1, 0.5, 1.5, 2, 3, 5, 10, 100, 600, 1000, 1200, 3600, 60_000, NaN, Infinity, -Infinity,
  1e400, Number.MIN_VALUE, Number.EPSILON, Number.MAX_VALUE, Number.MAX_SAFE_INTEGER, 2 ** 53, 2 ** 53 + 2,
  -(2 ** 53), 2 ** 31 - 1, 2 ** 31, 2 ** 32, 2 ** 64, 1e12, 1e12 + 1, 1e15, 1e15 + 1, 1e16, 4e12, 4e12 + 1,
  1e21, 1e308, 1e-300, 0.001, 0.0004, 0.0005, 0.0015, 31_536_000, 31_536_001, 100_000, 1_000_000,
  1_000_001, 65535, 65536, 17, 16,
]

const SPECIAL_STRINGS = [
  '', ' ', 'a', 'A', '0', '1', '-1', 'NaN', 'undefined', 'null', '|', 'a|b', '||', '{', '}', '{}', '{a}b',
  '{a', 'a}', '\0', 'a\0b', '\uD800', '\uDBFF\uDBFF', '\uDC00', 'a\uD800b', '\uFFFD', '😀', '👨‍👩‍👧', 'é',
  'e\u0301', '\u202E', '\r\n', '\t', '%s', '*', '"', "'", '\\', '__proto__', 'constructor', 'toString',
  'redis', 'local', 'next', 'allow', 'block', 'ratekeeper:', 'fixed:a', 'x'.repeat(1024), 'x'.repeat(1025),
  'é'.repeat(512), 'é'.repeat(513), '😀'.repeat(256), '😀'.repeat(257), '\uD800'.repeat(341),
  '\uD800'.repeat(342),
]

const utf16Unit = fc.integer({ min: 0, max: 0xffff }).map((code) => String.fromCharCode(code))
const trickyUnit = fc.constantFrom('|', '{', '}', '\0', ':', '\uD800', '\uDC00', '😀', 'é', 'a', ' ')

const anyString = fc.oneof(
  fc.string({ maxLength: 24 }),
  fc.string({ unit: 'binary', maxLength: 12 }),
  fc.string({ unit: utf16Unit, maxLength: 12 }),
  fc.string({ unit: trickyUnit, maxLength: 12 }),
)

const anyNumber = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...SPECIAL_NUMBERS) },
  { weight: 1, arbitrary: fc.double() },
  { weight: 1, arbitrary: fc.integer() },
)

const primitive = fc.oneof(
  { weight: 4, arbitrary: anyNumber },
  { weight: 3, arbitrary: anyString },
  { weight: 3, arbitrary: fc.constantFrom(...SPECIAL_STRINGS) },
  { weight: 3, arbitrary: fc.constantFrom(undefined, null, true, false) },
  { weight: 1, arbitrary: fc.oneof(fc.bigInt(), fc.constantFrom(0n, 1n, -1n, 2n ** 64n)) },
)

const LEAVES = [
  { $: 'sym', d: 'id' },
  { $: 'fn', v: 'noop' },
  { $: 'fn', v: 'throws' },
  { $: 'fn', v: 'async' },
  { $: 'date' },
  { $: 'regexp' },
  { $: 'map' },
  { $: 'f64' },
  { $: 'boxedString' },
  { $: 'boxedNumber' },
  { $: 'promise' },
  { $: 'error' },
  { $: 'arrayLike' },
  { $: 'toPrim', v: 'a' },
  { $: 'toPrim', v: 5 },
  { $: 'toPrim', v: 'throws' },
  { $: 'sparse', n: 3 },
  { $: 'revoked', t: { $: 'obj', e: [] } },
  { $: 'revoked', t: { $: 'arr', a: ['a'] } },
  { $: 'proxy', t: { $: 'obj', e: [] }, traps: TRAPS },
  { $: 'proxy', t: { $: 'arr', a: ['a'] }, traps: TRAPS },
  { $: 'proxy', t: { $: 'obj', e: [] }, traps: [] },
]

const leaf = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...LEAVES) },
  {
    weight: 1,
    arbitrary: fc.record({
      $: fc.constant('big'),
      n: fc.constantFrom(1025, 65536, 1 << 20),
      c: fc.constantFrom('x', '\0', 'é', '😀', '\uD800', '|', '{'),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ $: fc.constant('many'), n: fc.constantFrom(17, 10_000), v: fc.constantFrom('same', 'distinct', 'lastBad') }),
  },
  { weight: 1, arbitrary: fc.record({ $: fc.constant('deep'), d: fc.constantFrom(2, 100, 10_000) }) },
)

const OPTION_KEYS = [
  'now', 'weight', 'meta', 'interval', 'maxInInterval', 'minDifference', 'recordBlocked', 'limits', 'client',
  'redis', 'namespace', 'clock', 'duration', 'limit', 'precision', 'url', 'host', 'port', 'db', '', '__proto__',
  'constructor', 'then', 'length', '0', 'capacity', 'leakAmount', 'leakInterval', 'refillAmount', 'refillInterval',
  'initial', 'forgetAfter', 'period', 'burst', 'timeoutMs', 'signal',
]
const keyArb = fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...OPTION_KEYS) }, { weight: 1, arbitrary: fc.string({ maxLength: 8 }) })

/** Any value at all (as a spec). */
const { hostile } = fc.letrec((tie) => ({
  hostile: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    { weight: 6, arbitrary: primitive },
    { weight: 2, arbitrary: leaf },
    { weight: 2, arbitrary: tie('container') },
  ),
  container: fc.oneof(
    fc.record({ $: fc.constant('obj'), e: fc.array(fc.tuple(keyArb, tie('hostile')), { maxLength: 3 }) }),
    fc.record({ $: fc.constant('arr'), a: fc.array(tie('hostile'), { maxLength: 3 }) }),
    fc.record({ $: fc.constant('getter'), e: fc.array(fc.tuple(keyArb, tie('hostile')), { maxLength: 2 }), k: keyArb }),
    fc.record({ $: fc.constant('arrGetter'), a: fc.array(tie('hostile'), { maxLength: 2 }), i: fc.nat(2) }),
    fc.record({ $: fc.constant('nullProto'), e: fc.array(fc.tuple(keyArb, tie('hostile')), { maxLength: 2 }) }),
    fc.record({
      $: fc.constant('proxy'),
      t: fc.oneof(
        fc.record({ $: fc.constant('obj'), e: fc.array(fc.tuple(keyArb, tie('hostile')), { maxLength: 2 }) }),
        fc.record({ $: fc.constant('arr'), a: fc.array(tie('hostile'), { maxLength: 2 }) }),
      ),
      traps: fc.subarray(TRAPS),
    }),
  ),
}))

/** Any value but a top-level `undefined` (the `undefined` id has a property of its own). */
const hostileDefined = hostile.filter((spec) => spec !== undefined)

/** A string that is a valid id: non-empty, well-formed (no lone surrogate), at most 1 KiB of UTF-8. */
const isValidIdString = (s) => typeof s === 'string' && s.length > 0 && s.isWellFormed() && Buffer.byteLength(s) <= 1024

const validId = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.constantFrom(
      'a', 'b', 'user:1', '10.0.0.1', '{tag}a', 'a|b', '|', '{', '}', '\0', 'a\0b', '😀', 'é', '\uFFFD', 'x'.repeat(1024), 'é'.repeat(512), '😀'.repeat(256), 0, 1, -1, 1.5, -0, 1e21, Number.MAX_VALUE,
      Number.MIN_VALUE,
    ),
  },
  { weight: 3, arbitrary: anyString.filter(isValidIdString) },
  { weight: 1, arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }) },
  { weight: 1, arbitrary: fc.integer() },
)

/** An id argument: mostly valid, sometimes anything (never a top-level `undefined`). */
const idSlot = fc.oneof(
  { weight: 6, arbitrary: validId },
  { weight: 2, arbitrary: hostileDefined },
  { weight: 1, arbitrary: fc.array(fc.oneof(validId, hostile), { maxLength: 3 }).map((a) => ({ $: 'arr', a })) },
)

/** Ids of the counting limiters: one, or an array of them. */
const idsSlot = fc.oneof(
  { weight: 5, arbitrary: validId },
  { weight: 3, arbitrary: fc.array(validId, { minLength: 1, maxLength: 16 }).map((a) => ({ $: 'arr', a })) },
  { weight: 2, arbitrary: hostileDefined },
  { weight: 1, arbitrary: fc.array(fc.oneof(validId, hostile), { maxLength: 18 }).map((a) => ({ $: 'arr', a })) },
)

const validNow = fc.oneof(
  { weight: 8, arbitrary: fc.integer({ min: -100_000, max: 10_000_000 }).map((o) => ({ $: 'T', o })) },
  { weight: 1, arbitrary: fc.constantFrom(0, -0, 1.5, 0.0004, 4e12, 1e12, 3999999999999.9995) },
)
const validWeight = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 1, max: 4 }) },
  { weight: 1, arbitrary: fc.constantFrom(1e15, 2 ** 31, 100, 1_000_000) },
)
const validMeta = fc.oneof(
  fc.string({ maxLength: 10 }),
  fc.constantFrom('', '|', 'a|b', '{}', 'x'.repeat(1024), '😀', '\uD800', '\0'),
)
const validNamespace = fc.oneof(
  { weight: 3, arbitrary: fc.nat(1_000_000).map((n) => `fz:${n}:`) },
  // (At most 1 KiB with redback's `:action:` added.)
  { weight: 1, arbitrary: fc.constantFrom('', 'ratekeeper:', 'a', '{tag}', 'x'.repeat(1000)) },
  { weight: 1, arbitrary: anyString },
)
const validClock = fc.constantFrom('redis', 'local')

const safeClient = fc.oneof(
  { weight: 8, arbitrary: fc.constant({ $: 'ref', w: 'store' }) },
  { weight: 2, arbitrary: fc.constant({ $: 'ref', w: 'liveUrl' }) },
  { weight: 1, arbitrary: fc.constant({ $: 'ref', w: 'deadStore' }) },
  { weight: 1, arbitrary: fc.constant({ $: 'ref', w: 'deadUrl' }) },
  { weight: 1, arbitrary: fc.constant({ $: 'ref', w: 'closedStore' }) },
  { weight: 1, arbitrary: fc.constantFrom(...['liveOptions', 'liveIoredis', 'liveNodeRedis', 'liveCluster'].map((w) => ({ $: 'ref', w }))) },
)

/** A client option: absent (memory), one of the test's stores, or (rarely) anything. */
const clientSlot = fc.oneof(
  { weight: 5, arbitrary: fc.constant(ABSENT) },
  { weight: 5, arbitrary: safeClient },
  { weight: 1, arbitrary: hostile },
)

/**
 * An options object of a valid shape whose fields are sometimes hostile, sometimes missing, and
 * which is sometimes wrapped (unknown key, throwing getter, Proxy, no prototype) or replaced.
 * `fields`: name -> { valid: arbitrary, required?: boolean, absent?: weight, hostile?: weight,
 * raw?: true (the arbitrary gives the field's final spec, ABSENT included) }.
 */
function optionsArb(fields, { replace = true, calm = false, alsoKnown = [] } = {}) {
  const names = Object.keys(fields)
  // Options the object takes but this property does not generate: never "unknown".
  const optionNames = [...names, ...alsoKnown]
  const entries = names.map((name) => {
    const field = fields[name]
    if (field.raw) return field.valid.map((value) => [name, value])
    return fc
      .oneof(
        { weight: Math.round(10 * (field.absent ?? (field.required ? (calm ? 0.1 : 0.3) : 3))), arbitrary: fc.constant(ABSENT) },
        { weight: 100, arbitrary: field.valid },
        { weight: Math.round(10 * (field.hostile ?? (calm ? 0.2 : 0.4))), arbitrary: hostile },
      )
      .map((value) => [name, value])
  })
  const mutations = [
    { weight: calm ? 150 : 50, arbitrary: fc.constant({ m: 'none' }) },
    { weight: 2, arbitrary: fc.record({ m: fc.constant('unknown'), k: keyArb, v: hostile }) },
    { weight: 2, arbitrary: fc.record({ m: fc.constant('getter'), k: fc.oneof(fc.constantFrom(...names), keyArb) }) },
    { weight: 2, arbitrary: fc.record({ m: fc.constant('proxy'), traps: fc.subarray(TRAPS) }) },
    { weight: 1, arbitrary: fc.constant({ m: 'nullProto' }) },
  ]
  if (replace) mutations.push({ weight: 2, arbitrary: fc.record({ m: fc.constant('replace'), v: hostile }) })
  return fc.tuple(fc.tuple(...entries), fc.oneof(...mutations)).map(([pairs, mutation]) => {
    const e = pairs.filter(([, value]) => !isAbsent(value))
    switch (mutation.m) {
      case 'unknown':
        // Marked when the key is really no option: such an object must be refused.
        return optionNames.includes(mutation.k) ? { $: 'obj', e: [...e, [mutation.k, mutation.v]] } : { $: 'obj', e: [...e, [mutation.k, mutation.v]], unknown: mutation.k }
      case 'getter':
        return { $: 'getter', e, k: mutation.k }
      case 'proxy':
        return { $: 'proxy', t: { $: 'obj', e }, traps: mutation.traps }
      case 'nullProto':
        return { $: 'nullProto', e }
      case 'replace':
        return mutation.v
      default:
        return { $: 'obj', e }
    }
  })
}

/** A call-options argument: absent, a (mostly valid) options object, or anything. */
function callOptionsSlot(fields) {
  return fc.oneof(
    { weight: 3, arbitrary: fc.constant(ABSENT) },
    { weight: 8, arbitrary: optionsArb(fields, { replace: false }) },
    { weight: 1, arbitrary: hostile },
  )
}

const NOW_FIELDS = { now: { valid: validNow, absent: 1 } }
const WEIGHT_FIELDS = { now: { valid: validNow, absent: 1 }, weight: { valid: validWeight } }
const LOG_FIELDS = { now: { valid: validNow, absent: 1 }, weight: { valid: validWeight }, meta: { valid: validMeta } }

// ---------------------------------------------------------------------------------------------
// Oracles.

/** A broken property: the message says what, on which call. */
class Violation extends Error {}

function fail(message) {
  throw new Violation(message)
}

function describe(value) {
  try {
    if (value instanceof Error) {
      const code = value.code === undefined ? '' : `, code ${JSON.stringify(value.code)}`
      const mark = isMarker(value) ? ' (the fuzzer\'s own)' : ''
      return `${value.constructor.name}(${JSON.stringify(value.message)}${code})${mark}`
    }
    return util.inspect(value, { depth: 2, maxStringLength: 80, maxArrayLength: 6, breakLength: Infinity, showProxy: true })
  } catch (error) {
    return `<uninspectable: ${error && error.message}>`
  }
}

const INPUT_CODES = new Set(['ERR_INVALID_OPTION', 'ERR_UNKNOWN_OPTION', 'ERR_INVALID_ID', 'ERR_INVALID_ARGUMENT'])
const STORE_CODES = new Set(['ERR_STORE_UNAVAILABLE', 'ERR_STORE_ERROR', 'ERR_STORE_CLOSED'])

/**
 * Why `error` is not an acceptable error, or null. Acceptable: the fuzzer's own errors, and
 * ratekeeper's documented errors (input codes as TypeError/RangeError; store codes only from a
 * Redis-backed call), whose messages never show the password.
 */
function errorProblem(error, { redis = false } = {}) {
  if (isMarker(error) || isRevokedProxyError(error)) return null
  if (!(error instanceof Error)) return `a non-Error was thrown: ${describe(error)}`
  const { code } = error
  if (known('panic') && (code === 'GenericFailure' || code === 'ERR_INTERNAL')) return null
  if (typeof code !== 'string' || !code.startsWith('ERR_')) return `an error without an ERR_ code [tag: panic]: ${describe(error)}`
  if (INPUT_CODES.has(code)) {
    if (!(error instanceof TypeError || error instanceof RangeError)) return `${code} is not a TypeError or RangeError: ${describe(error)}`
  } else if (STORE_CODES.has(code)) {
    if (!redis) return `${code} from a call that does not involve Redis: ${describe(error)}`
  } else {
    return `an error with an undocumented code${code === 'ERR_INTERNAL' ? ' [tag: panic]' : ''}: ${describe(error)}`
  }
  if (typeof error.message !== 'string' || error.message === '') return `an error without a message: ${describe(error)}`
  const cause = error.cause && typeof error.cause === 'object' ? String(error.cause.message) : ''
  if (error.message.includes(SECRET) || cause.includes(SECRET)) return `an error message shows the password: ${describe(error)}`
  return null
}

const isWhole = (n) => typeof n === 'number' && Number.isInteger(n) && n >= 0

function keysAre(value, keys) {
  const own = Object.keys(value).sort().join(',')
  const want = [...keys].sort().join(',')
  return own === want ? null : `its keys are ${own}, not ${want}`
}

/**
 * The keys an answer carries when `onStoreError` answered it instead of Redis (`fallback`: the
 * `store` it must name, 'none' or 'memory'; null when the limiter has no such policy), or why
 * they are wrong.
 */
function fallbackKeys(v, fallback) {
  if (!fallback || !('reason' in v || 'store' in v)) return { keys: [] }
  if (v.reason !== 'store-unavailable' || v.store !== fallback) {
    return { problem: `\`reason\` ${describe(v.reason)} and \`store\` ${describe(v.store)}, not 'store-unavailable' and '${fallback}'` }
  }
  return { keys: ['reason', 'store'] }
}

/** `{ allowed, timeLeft, remaining, limit, resetAfter }` of a counting limiter. */
function verdictProblem(v, limits, fallback = null) {
  if (v === null || typeof v !== 'object') return 'not an object'
  const extra = fallbackKeys(v, fallback)
  if (extra.problem) return extra.problem
  const keys = keysAre(v, ['allowed', 'timeLeft', 'remaining', 'limit', 'resetAfter', ...extra.keys])
  if (keys) return keys
  if (typeof v.allowed !== 'boolean') return '`allowed` is not a boolean'
  if (typeof v.timeLeft !== 'number' || Number.isNaN(v.timeLeft) || v.timeLeft < 0) return '`timeLeft` is not a number >= 0'
  if (v.timeLeft !== Infinity && !Number.isInteger(v.timeLeft)) return '`timeLeft` is not whole milliseconds'
  if (!isWhole(v.remaining)) return '`remaining` is not a whole number >= 0'
  if (!isWhole(v.limit) || v.limit < 1) return '`limit` is not a whole number >= 1'
  if (typeof v.resetAfter !== 'number' || !Number.isFinite(v.resetAfter) || v.resetAfter < 0) return '`resetAfter` is not a finite number >= 0'
  if (v.allowed && v.timeLeft !== 0) return 'allowed, yet `timeLeft` is not 0'
  if (!v.allowed && v.timeLeft === 0) return 'refused, yet `timeLeft` is 0'
  if (v.remaining > v.limit) return '`remaining` exceeds `limit`'
  if (limits && !limits.includes(v.limit)) return `\`limit\` ${v.limit} is none of the limits (${limits.join(', ')})`
  return null
}

/** rolling-rate-limiter's `{ blocked, blockedDueToCount, blockedDueToMinDifference, millisecondsUntilAllowed, actionsRemaining }`. */
function infoProblem(v, maxInInterval, fallback = null) {
  if (v === null || typeof v !== 'object') return 'not an object'
  const extra = fallbackKeys(v, fallback)
  if (extra.problem) return extra.problem
  const keys = keysAre(v, ['blocked', 'blockedDueToCount', 'blockedDueToMinDifference', 'millisecondsUntilAllowed', 'actionsRemaining', ...extra.keys])
  if (keys) return keys
  for (const k of ['blocked', 'blockedDueToCount', 'blockedDueToMinDifference']) {
    if (typeof v[k] !== 'boolean') return `\`${k}\` is not a boolean`
  }
  if (!isWhole(v.millisecondsUntilAllowed)) return '`millisecondsUntilAllowed` is not whole milliseconds >= 0'
  if (!isWhole(v.actionsRemaining)) return '`actionsRemaining` is not a whole number >= 0'
  if (v.actionsRemaining > maxInInterval) return '`actionsRemaining` exceeds maxInInterval'
  if (v.blocked !== (v.blockedDueToCount || v.blockedDueToMinDifference)) return '`blocked` disagrees with its reasons'
  if (v.blocked && v.millisecondsUntilAllowed === 0) return 'blocked, yet `millisecondsUntilAllowed` is 0'
  return null
}

function entriesProblem(v, maxInInterval) {
  if (!Array.isArray(v)) return 'not an array'
  if (v.length > maxInInterval && !known('entries-over-max')) return `${v.length} entries, more than maxInInterval [tag: entries-over-max]`
  let previous = -Infinity
  for (const entry of v) {
    if (entry === null || typeof entry !== 'object') return 'an entry is not an object'
    const extra = Object.keys(entry).filter((k) => k !== 'at' && k !== 'meta')
    if (extra.length) return `an entry has the keys ${extra}`
    if (typeof entry.at !== 'number' || !Number.isFinite(entry.at) || entry.at < 0) return '`at` is not a finite number >= 0'
    if (entry.meta !== undefined && typeof entry.meta !== 'string') return '`meta` is not a string'
    if (entry.at < previous) return 'the entries are not oldest first'
    previous = entry.at
  }
  return null
}

const isUndefined = (v) => (v === undefined ? null : 'not undefined')
const isBoolean = (v) => (typeof v === 'boolean' ? null : 'not a boolean')
const isCount = (v) => (isWhole(v) && Number.isFinite(v) ? null : 'not a whole number >= 0')

// ---------------------------------------------------------------------------------------------
// Calling, with a time limit.

const tick = () => new Promise((resolve) => setImmediate(resolve))
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

function settleWithin(promise, ms = CALL_TIMEOUT_MS) {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve({ timeout: true, ms }), ms)
    promise.then(
      (value) => {
        clearTimeout(timer)
        resolve({ resolved: true, value })
      },
      (error) => {
        clearTimeout(timer)
        resolve({ rejected: true, error })
      },
    )
  })
}

/** How the calls went, reported to the parent (how deep the fuzzing gets). */
const stats = { constructed: 0, refusedToConstruct: 0, resolved: 0, rejected: 0, threw: 0 }
/** How the waits went (the limiter properties). */
const waitStats = { resolved: 0, timedOut: 0, aborted: 0, refused: 0 }

/** Runs `thunk` (synchronously); then waits, within the time limit, for the Promise it returned. */
function outcomeOf(thunk, ms = CALL_TIMEOUT_MS) {
  let result
  try {
    result = thunk()
  } catch (error) {
    stats.threw++
    return Promise.resolve({ threw: true, error })
  }
  if (!(result instanceof Promise)) return Promise.resolve({ returned: true, value: result })
  return settleWithin(result, ms).then((outcome) => {
    if (outcome.resolved) stats.resolved++
    if (outcome.rejected) stats.rejected++
    return { ...outcome, promise: result }
  })
}

function describeOutcome(outcome) {
  if (outcome.threw) return `threw ${describe(outcome.error)}`
  if (outcome.returned) return `returned ${describe(outcome.value)}`
  if (outcome.timeout) return `did not settle within ${outcome.ms} ms`
  if (outcome.rejected) return `rejected with ${describe(outcome.error)}`
  return `resolved ${describe(outcome.value)}`
}

/** A method that returns a Promise: it resolves a good answer or rejects with a good error. */
function expectAnswer(outcome, label, { redis, check }) {
  if (outcome.threw && !(known('sync-throw') && !errorProblem(outcome.error, { redis }))) {
    fail(`${label} threw synchronously instead of returning a rejected Promise [tag: sync-throw]: ${describe(outcome.error)}`)
  }
  if (outcome.threw) return
  if (outcome.returned) fail(`${label} returned ${describe(outcome.value)} instead of a Promise`)
  if (outcome.timeout) fail(`${label} did not settle within ${CALL_TIMEOUT_MS} ms (a hang)`)
  if (outcome.rejected) {
    const problem = errorProblem(outcome.error, { redis })
    if (problem) fail(`${label} rejected with a bad error: ${problem}`)
    return
  }
  const problem = check(outcome.value)
  if (problem) fail(`${label} resolved a bad answer (${problem}): ${describe(outcome.value)}`)
}

/** The key that is no option in an options object among `specs` (or nested in one), if any. */
function unknownOption(specs) {
  for (const spec of specs) {
    if (spec === null || typeof spec !== 'object') continue
    if (typeof spec.unknown === 'string') return spec.unknown
    const nested = spec.$ === 'arr' ? spec.a : spec.$ === 'obj' || spec.$ === 'nullProto' || spec.$ === 'getter' ? spec.e.map(([, v]) => v) : spec.$ === 'proxy' ? [spec.t] : []
    const found = unknownOption(nested)
    if (found !== undefined) return found
  }
  return undefined
}

/** Fails when a call or constructor accepted an options object with a key that is no option. */
function refuseUnknown(label, specs) {
  const key = unknownOption(specs)
  if (key !== undefined && !known('unknown-option')) {
    fail(`${label} accepted options with the unknown key ${JSON.stringify(key)} (ERR_UNKNOWN_OPTION expected) [tag: unknown-option]`)
  }
}

/** A constructor or factory: a value, or a thrown good error. `specs`: what it was given. */
function constructed(label, make, specs = []) {
  trace(label)
  let value
  try {
    value = make()
  } catch (error) {
    stats.refusedToConstruct++
    const problem = errorProblem(error)
    if (problem) fail(`${label} threw a bad error: ${problem}`)
    return { error }
  }
  stats.constructed++
  refuseUnknown(label, specs)
  return { value }
}

/**
 * Fails on unhandled rejections and on uncaught exceptions other than the fuzzer's own. `ctx`,
 * when given, may name the tags of known defects its values run into.
 */
async function checkStrays(ctx) {
  await tick()
  await tick()
  const found = strays.splice(0).filter((stray) => !(stray.kind === 'uncaught exception' && isMarker(stray.error)))
  const tags = [`unhandled-${config.property}`, ...(ctx ? ctx.tags : [])]
  if (found.length && !tags.some(known)) {
    fail(found.map((stray) => `${stray.kind} [tag: ${tags.join(', tag: ')}]: ${describe(stray.error)}`).join('\n'))
  }
}

/** Starts a case on an empty database (so that a case replays alone); resolves its context. */
async function newCase() {
  let flushed = await flusher.send('FLUSHDB')
  if (flushed.startsWith('-BUSY')) {
    // A script ran past Redis's busy time (5 s): Redis answers BUSY to every client until it ends.
    const since = Date.now()
    while (flushed.startsWith('-BUSY') && Date.now() - since < 60_000) {
      await sleep(100)
      flushed = await flusher.send('FLUSHDB')
    }
    if (!known('long-script')) {
      fail(
        `Redis answered BUSY for ${Date.now() - since} ms before this case: a Lua script of the previous case (or of another property's ` +
          `worker on the same redis-server) kept Redis busy for more than 5 s, blocking every client [tag: long-script]`,
      )
    }
  }
  if (flushed !== '+OK') throw new Error(`fuzz-worker: FLUSHDB answered ${flushed}`)
  return newContext()
}

/** Per-case context: the time origin, and the callbacks the case's specs built. */
function newContext() {
  strays.length = 0
  const ctx = {
    T: Date.now(),
    records: [],
    /** The AbortSignals (and signal-like objects) built for `wait`, in order. */
    signals: [],
    /** Tags of known defects that the case's values may run into (named in its failure messages). */
    tags: new Set(),
    callback() {
      const record = { calls: [] }
      ctx.records.push(record)
      const cb = (...args) => {
        record.calls.push(args)
      }
      cb.record = record
      return cb
    },
  }
  return ctx
}

/** Args from specs, leaving out trailing absent ones (an absent one in the middle is `undefined`). */
function buildArgs(specs, ctx) {
  const last = specs.findLastIndex((spec) => !isAbsent(spec))
  return specs.slice(0, last + 1).map((spec) => (isAbsent(spec) ? undefined : build(spec, ctx)))
}

function renderArgs(specs) {
  const last = specs.findLastIndex((spec) => !isAbsent(spec))
  return specs
    .slice(0, last + 1)
    .map((spec) => (isAbsent(spec) ? 'undefined' : render(spec)))
    .join(', ')
}

/** Runs `calls` one after the other or all at once; `run(call)` makes one and checks it. */
async function runAll(calls, concurrent, run) {
  if (concurrent) {
    const results = await Promise.allSettled(calls.map((call) => run(call)))
    const failure = results.find((r) => r.status === 'rejected')
    if (failure) throw failure.reason
  } else {
    for (const call of calls) await run(call)
  }
}

/** Gives a case its rendering as the counterexample fast-check prints. */
function renderable(arbitrary, renderCase) {
  return arbitrary.map((c) => Object.defineProperty(c, fc.toStringMethod, { value: () => `\n${renderCase(c)}\n`, enumerable: false }))
}

// ---------------------------------------------------------------------------------------------
// Option arbitraries of the limiters.

const durationArb = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(1, 10, 1000, 60_000, 1e12, 0.5, 0.001, 1.5) },
  { weight: 1, arbitrary: fc.constantFrom(0.0004, 1e-300, Number.MIN_VALUE, 0.0015) },
  { weight: 2, arbitrary: fc.double({ min: 0.001, max: 1e12, noNaN: true }) },
)
const maxArb = fc.oneof({ weight: 6, arbitrary: fc.integer({ min: 1, max: 5 }) }, { weight: 1, arbitrary: fc.constantFrom(100_000, 100) })
const minDifferenceArb = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(0, 1, 100, 1000, 1e12, 0.0004, 0.5, -0) },
  { weight: 1, arbitrary: fc.double({ min: 0, max: 1e12, noNaN: true }) },
)
const limitArb = fc.oneof({ weight: 6, arbitrary: fc.integer({ min: 1, max: 5 }) }, { weight: 1, arbitrary: fc.constantFrom(1e15, 100, 2 ** 31) })
/** A bucket's capacity, or what leaks or refills per interval: a whole number from 1 to 1e15. */
const amountArb = fc.oneof({ weight: 6, arbitrary: fc.integer({ min: 1, max: 5 }) }, { weight: 1, arbitrary: fc.constantFrom(1e15, 100, 2 ** 31, 7) })

/**
 * The options every limiter with `consume` takes besides its own: where it keeps its state
 * (`client`: the arbitrary gives the spec as it is, ABSENT included) and how.
 */
function limiterStoreFields(client) {
  return {
    namespace: { valid: validNamespace },
    clock: { valid: fc.oneof({ weight: 6, arbitrary: fc.constant('local') }, { weight: 1, arbitrary: validClock }), absent: 6 },
    client: { valid: client, raw: true },
    // (Rarely: maxKeys is for memory only, onStoreError for Redis only.)
    hashIds: { valid: fc.boolean(), absent: 100 },
    maxKeys: { valid: fc.constantFrom(1, 2, 3, 100, 1e6), absent: 150, hostile: 0.2 },
    onStoreError: { valid: fc.constantFrom('reject', 'allow', 'memory'), absent: 100, hostile: 0.2 },
  }
}

/** The options of a rolling window class: mostly what that class takes, sometimes anything. */
function rollingOptions(ctor) {
  const redisOnly = ['RedisRateLimiter', 'NodeRedisRateLimiter', 'IORedisRateLimiter'].includes(ctor)
  const client =
    ctor === 'InMemoryRateLimiter'
      ? fc.oneof({ weight: 8, arbitrary: fc.constant(ABSENT) }, { weight: 1, arbitrary: safeClient }, { weight: 1, arbitrary: hostile })
      : redisOnly
        ? fc.oneof({ weight: 1, arbitrary: fc.constant(ABSENT) }, { weight: 8, arbitrary: safeClient }, { weight: 1, arbitrary: hostile })
        : clientSlot
  return optionsArb({
    interval: { valid: durationArb, required: true },
    maxInInterval: { valid: maxArb, required: true },
    minDifference: { valid: minDifferenceArb },
    recordBlocked: { valid: fc.boolean(), absent: ctor === 'SlidingLog' ? 30 : 3 },
    ...limiterStoreFields(client),
  })
}

function limitsArb(withPrecision) {
  const fields = {
    duration: { valid: durationArb, required: true },
    limit: { valid: limitArb, required: true },
  }
  if (withPrecision) {
    fields.precision = {
      valid: fc.oneof(
        { weight: 6, arbitrary: fc.constantFrom(1, 10, 100, 1000, 0.5, 1e12) },
        { weight: 2, arbitrary: fc.double({ min: 0.001, max: 1e12, noNaN: true }) },
        { weight: 1, arbitrary: fc.constantFrom(0.001, 0.0004, 1e-300) },
      ),
      absent: 8,
    }
  }
  const one = optionsArb(fields, { calm: true })
  return fc.oneof(
    { weight: 12, arbitrary: fc.array(one, { minLength: 1, maxLength: 3 }).map((a) => ({ $: 'arr', a })) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        { $: 'arr', a: [] },
        { $: 'arr', a: Array.from({ length: 17 }, () => ({ $: 'obj', e: [['duration', 1000], ['limit', 1]] })) },
      ),
    },
  )
}

// ---------------------------------------------------------------------------------------------
// `wait`: its options, and what it must answer for them.

/** Every wait the fuzzer makes ends within about this (a timeout, an abort), or is refused. */
const WAIT_BOUND_MS = 20
/** A wait that has not settled after this is a hang (its timers do not wait for Redis). */
const WAIT_HANG_MS = Math.min(CALL_TIMEOUT_MS, 2000)
const WAIT_KEYS = ['weight', 'timeoutMs', 'signal']

const validTimeoutMs = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 0, max: 8 }) },
  { weight: 1, arbitrary: fc.constantFrom(-0, 0.5, 1.5, WAIT_BOUND_MS) },
)
const abortReason = fc.constantFrom(undefined, 'why', { $: 'error' }, 0)
const signalArb = fc.oneof(
  { weight: 4, arbitrary: fc.record({ $: fc.constant('signal'), v: fc.constant('soon'), ms: fc.integer({ min: 0, max: 12 }), reason: abortReason }) },
  { weight: 3, arbitrary: fc.record({ $: fc.constant('signal'), v: fc.constant('aborted'), reason: abortReason }) },
  { weight: 1, arbitrary: fc.record({ $: fc.constant('signal'), v: fc.constant('timeout'), ms: fc.integer({ min: 0, max: 12 }) }) },
  { weight: 2, arbitrary: fc.constant({ $: 'signal', v: 'never' }) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(...Object.keys(DUCKS).map((v) => ({ $: 'duck', v }))),
  },
)
const WAIT_FIELDS = {
  weight: { valid: validWeight },
  timeoutMs: { valid: validTimeoutMs, absent: 2, hostile: 1.5 },
  signal: { valid: signalArb, absent: 4, hostile: 1 },
}
const waitOptionsSlot = fc.oneof(
  { weight: 1, arbitrary: fc.constant(ABSENT) },
  { weight: 10, arbitrary: optionsArb(WAIT_FIELDS, { replace: false }) },
  { weight: 1, arbitrary: hostile },
)

/** Objects whose own enumerable keys are no wait option, and objects without any. */
const KEYED_LEAVES = ['f64', 'boxedString', 'arrayLike', 'toPrim']
const KEYLESS_LEAVES = ['date', 'regexp', 'map', 'boxedNumber', 'promise', 'error']
/** Specs of values that are not objects, or are arrays: never options. */
const NOT_OPTIONS = ['fn', 'returns', 'cb', 'sym', 'arr', 'arrGetter', 'sparse', 'many', 'deep', 'big', 'T', 'url']

/**
 * What `wait(ids, options)` does with the options of this spec, before it asks the limiter:
 * `verdict` is 'valid', the code it must reject with ('ERR_INVALID_ARGUMENT',
 * 'ERR_UNKNOWN_OPTION'), or 'unsure' (one of the fuzzer's traps or getters throws first, or a
 * signal-like object); `timeoutMs` (Infinity for none) when known; `abortedAtCall` when its
 * signal is aborted already; `ends` when the wait ends within WAIT_BOUND_MS (or so) whatever
 * the limiter answers. Modelled on index.d.ts's WaitOptions: an object (not an array) whose
 * keys are `weight`, `timeoutMs` (a number >= 0) and `signal` (an AbortSignal).
 */
function waitOptionsModel(spec) {
  const refused = (verdict) => ({ verdict, ends: true })
  const throws = { verdict: 'unsure', ends: true }
  if (isAbsent(spec) || spec === undefined) return { verdict: 'valid', timeoutMs: Infinity, ends: false }
  if (spec === null || typeof spec !== 'object') return refused('ERR_INVALID_ARGUMENT')
  switch (spec.$) {
    case 'obj':
    case 'nullProto':
    case 'getter':
      return waitEntriesModel(spec)
    case 'proxy': {
      if (spec.t.$ !== 'obj') return refused('ERR_INVALID_ARGUMENT')
      const traps = spec.traps
      if (traps.includes('ownKeys') || traps.includes('get') || (traps.includes('getOwnPropertyDescriptor') && spec.t.e.length)) return throws
      return waitOptionsModel(spec.t)
    }
    case 'revoked':
      return throws
    default:
      if (KEYED_LEAVES.includes(spec.$)) return refused('ERR_UNKNOWN_OPTION')
      if (KEYLESS_LEAVES.includes(spec.$)) return { verdict: 'valid', timeoutMs: Infinity, ends: false }
      if (NOT_OPTIONS.includes(spec.$)) return refused('ERR_INVALID_ARGUMENT')
      return { verdict: 'unsure', ends: false }
  }
}

function waitEntriesModel(spec) {
  const values = new Map()
  for (const [key, value] of spec.e) if (!(spec.$ === 'getter' && key === spec.k)) values.set(key, value)
  const keys = [...values.keys(), ...(spec.$ === 'getter' ? [spec.k] : [])]
  if (keys.some((key) => !WAIT_KEYS.includes(key))) return { verdict: 'ERR_UNKNOWN_OPTION', ends: true }
  if (spec.$ === 'getter') return { verdict: 'unsure', ends: true } // the getter of an option throws
  let timeoutMs = Infinity
  if (values.get('timeoutMs') !== undefined) {
    timeoutMs = values.get('timeoutMs')
    if (typeof timeoutMs !== 'number' || !(timeoutMs >= 0)) return { verdict: 'ERR_INVALID_ARGUMENT', ends: true }
  }
  const signal = signalModel(values.get('signal'))
  if (signal.kind === 'invalid') return { verdict: 'ERR_INVALID_ARGUMENT', ends: true }
  if (signal.kind === 'throws') return { verdict: 'unsure', ends: true }
  return {
    verdict: signal.kind === 'duck' ? 'unsure' : 'valid',
    timeoutMs,
    abortedAtCall: Boolean(signal.aborted),
    duck: signal.kind === 'duck',
    ends: timeoutMs <= WAIT_BOUND_MS || Boolean(signal.ends),
  }
}

/** What a `signal` spec is to `wait`: none, one of the fuzzer's signals, a signal-like object, invalid, or a value that throws when read. */
function signalModel(spec) {
  if (spec === undefined) return { kind: 'none' }
  if (spec === null || typeof spec !== 'object') return { kind: 'invalid' }
  switch (spec.$) {
    case 'signal':
      return { kind: 'signal', ends: spec.v !== 'never', aborted: spec.v === 'aborted' }
    case 'duck':
      return { kind: 'duck', ends: Boolean(DUCKS[spec.v].bounded), aborted: spec.v === 'aborted' }
    case 'revoked':
      return { kind: 'throws' }
    case 'proxy':
      return spec.traps.includes('get') ? { kind: 'throws' } : signalModel(spec.t)
    case 'obj':
    case 'nullProto':
    case 'getter':
      // No `aborted` boolean: not an AbortSignal. (With one, it is unsure: say it throws.)
      return spec.e.some(([key]) => key === 'aborted') || spec.k === 'aborted' ? { kind: 'throws' } : { kind: 'invalid' }
    default:
      return { kind: 'invalid' }
  }
}

/**
 * Whether an id (or ids) spec is a valid id for a limiter (`arrays`: it takes arrays of 1 to 16
 * ids): 'valid', 'invalid' (ERR_INVALID_ID), or 'unsure' (a Proxy, a getter: it may throw
 * first).
 */
function idVerdict(spec, arrays) {
  if (spec !== null && typeof spec === 'object' && ['arr', 'many', 'sparse', 'deep'].includes(spec.$)) {
    if (!arrays) return 'invalid'
    if (spec.$ === 'many') return spec.n > 16 ? 'invalid' : 'unsure'
    const items = spec.$ === 'arr' ? spec.a : spec.$ === 'sparse' ? new Array(spec.n).fill(undefined) : [{ $: 'arr', a: [] }]
    if (items.length === 0 || items.length > 16) return 'invalid'
    const verdicts = items.map((item) => (item !== null && typeof item === 'object' && ['arr', 'many', 'sparse', 'deep'].includes(item.$) ? 'invalid' : oneIdVerdict(item)))
    return verdicts.includes('unsure') ? 'unsure' : verdicts.includes('invalid') ? 'invalid' : 'valid'
  }
  return oneIdVerdict(spec)
}

function oneIdVerdict(spec) {
  if (typeof spec === 'string') return isValidIdString(spec) ? 'valid' : 'invalid'
  if (typeof spec === 'number') return Number.isFinite(spec) ? 'valid' : 'invalid'
  if (spec === null || typeof spec !== 'object') return 'invalid' // undefined, booleans, BigInts
  if (spec.$ === 'T') return 'valid'
  if (['proxy', 'revoked', 'arrGetter', 'getter', 'url'].includes(spec.$)) return 'unsure'
  return 'invalid' // objects, functions, symbols, strings over 1 KiB
}

/** The queue `wait` puts an id spec in (lib/wait.js keys its queues by the ids' strings), roughly. */
function waitQueueOf(spec) {
  const one = (s) => (typeof s === 'string' || typeof s === 'number' ? String(s) : s !== null && typeof s === 'object' && s.$ === 'T' ? `T${s.o}` : '\u0001')
  if (spec !== null && typeof spec === 'object' && spec.$ === 'arr') return spec.a.map(one).join('\u0000')
  if (spec !== null && typeof spec === 'object' && spec.$ === 'many') return `many:${spec.n}:${spec.v}`
  return one(spec)
}

/** Whether a generated wait ends by itself (or is refused): the fuzzer makes no other. */
function waitEnds([ids, options], arrays) {
  const model = waitOptionsModel(options)
  if (model.ends) return true
  // A wait without a bound for an invalid id is refused by the limiter (after the waits before
  // it in its queue, which all end).
  return model.verdict === 'valid' && idVerdict(ids, arrays) === 'invalid'
}

/** A plain Error with `code` and `name` (ERR_WAIT_TIMEOUT, ERR_ABORTED), or why not. */
function waitErrorProblem(error, name) {
  if (Object.getPrototypeOf(error) !== Error.prototype) return `${error.code} is not a plain Error: ${describe(error)}`
  if (error.name !== name) return `${error.code} has the name ${describe(error.name)}, not ${name}`
  if (typeof error.message !== 'string' || error.message === '') return `an error without a message: ${describe(error)}`
  return null
}

/** The tags of known defects that the signal-like objects in a spec run into. */
function duckTags(spec) {
  if (spec === null || typeof spec !== 'object') return []
  if (spec.$ === 'duck') return DUCKS[spec.v].tag ? [DUCKS[spec.v].tag] : []
  const inner = spec.$ === 'obj' || spec.$ === 'nullProto' || spec.$ === 'getter' ? spec.e.map(([, v]) => v) : spec.$ === 'proxy' ? [spec.t] : []
  return inner.flatMap(duckTags)
}

/** Makes one generated `wait` call and checks its outcome against waitOptionsModel. */
async function checkedWaitCall(limiter, call, label, ctx, k) {
  const [idSpec, optionsSpec] = call.args
  const skipped = duckTags(optionsSpec).filter(known)
  if (skipped.length) {
    // (Not made rather than not generated: a seed replays the same cases whatever is known.)
    trace(`// (not made: a known defect [tag: ${skipped.join(', tag: ')}])`)
    return
  }
  const model = waitOptionsModel(optionsSpec)
  const ids = idVerdict(idSpec, k.arrays)
  // A wait that must be refused for its id: nothing else is wrong, and no other wait shares its queue.
  const strictId = ids === 'invalid' && model.verdict === 'valid' && !model.abortedAtCall && !k.concurrent && k.waitQueues.get(waitQueueOf(idSpec)) === 1
  let signals = []
  const started = Date.now()
  const outcome = await outcomeOf(() => {
    const from = ctx.signals.length
    const args = buildArgs(call.args, ctx)
    signals = ctx.signals.slice(from)
    return limiter.wait(...args)
  }, WAIT_HANG_MS)
  const elapsed = Date.now() - started
  const waitCode = outcome.rejected && outcome.error !== null && typeof outcome.error === 'object' ? outcome.error.code : undefined
  if (outcome.resolved) waitStats.resolved++
  else if (waitCode === 'ERR_WAIT_TIMEOUT') waitStats.timedOut++
  else if (waitCode === 'ERR_ABORTED') waitStats.aborted++
  else waitStats.refused++
  const tags = [...ctx.tags].map((tag) => ` [tag: ${tag}]`).join('')
  if (outcome.threw && !(known('sync-throw') && !errorProblem(outcome.error, { redis: k.redis }))) {
    fail(`${label} threw synchronously instead of returning a rejected Promise [tag: sync-throw]: ${describe(outcome.error)}`)
  }
  if (outcome.threw) return
  if (outcome.returned) fail(`${label} returned ${describe(outcome.value)} instead of a Promise`)
  if (outcome.timeout) fail(`${label} did not settle within ${WAIT_HANG_MS} ms (a hang: the fuzzer's waits end within ${WAIT_BOUND_MS} ms)${tags}`)
  const expected = model.verdict === 'ERR_INVALID_ARGUMENT' || model.verdict === 'ERR_UNKNOWN_OPTION' ? model.verdict : strictId ? 'ERR_INVALID_ID' : null
  if (outcome.resolved) {
    if (expected) fail(`${label} resolved, but it must reject with ${expected}: ${describe(outcome.value)}`)
    const v = outcome.value
    const problem = verdictProblem(v, k.limits, k.fallback) || (v.allowed === true ? null : 'not allowed')
    if (problem) fail(`${label} resolved a bad answer (${problem}): ${describe(v)}`)
    refuseUnknown(label, call.args)
    return
  }
  const error = outcome.error
  const code = error !== null && typeof error === 'object' && !isMarker(error) && !isRevokedProxyError(error) ? error.code : undefined
  if (code === 'ERR_WAIT_TIMEOUT') {
    const problem = waitErrorProblem(error, 'Error')
    if (problem) fail(`${label} rejected with a bad error: ${problem}`)
    if (!(model.timeoutMs < Infinity)) fail(`${label} rejected with ERR_WAIT_TIMEOUT, but it has no timeoutMs: ${describe(error)}`)
    if (error.timeLeft === undefined) {
      // Timed out in the queue: not before timeoutMs (timers fire late, never early; 1 ms of rounding).
      if (elapsed + 1 < model.timeoutMs) fail(`${label} timed out after ${elapsed} ms, before its timeoutMs: ${describe(error)}`)
    } else if (!Number.isInteger(error.timeLeft) || error.timeLeft < 1) {
      fail(`${label} rejected with ERR_WAIT_TIMEOUT whose timeLeft is ${describe(error.timeLeft)}, not a whole number of ms >= 1`)
    }
  } else if (code === 'ERR_ABORTED') {
    const problem = waitErrorProblem(error, 'AbortError')
    if (problem) fail(`${label} rejected with a bad error: ${problem}`)
    const aborted = signals.filter((signal) => signal.aborted === true)
    if (!aborted.length) fail(`${label} rejected with ERR_ABORTED, but no signal of it was aborted: ${describe(error)}`)
    if (!aborted.some((signal) => Object.is(error.cause, signal.reason))) {
      fail(`${label} rejected with ERR_ABORTED whose cause ${describe(error.cause)} is not the signal's reason ${describe(aborted[0].reason)}`)
    }
  } else {
    const problem = errorProblem(error, { redis: k.redis })
    if (problem) fail(`${label} rejected with a bad error: ${problem}`)
  }
  if (expected && code !== expected) fail(`${label} must reject with ${expected}, but it ${describeOutcome(outcome)}`)
}

// ---------------------------------------------------------------------------------------------
// The limiter classes, one entry each.

const VERDICT = (k) => (v) => verdictProblem(v, k.limits, k.fallback)
const trailingArb = fc.oneof({ weight: 12, arbitrary: fc.constant(ABSENT) }, { weight: 1, arbitrary: hostile })

const ROLLING_METHODS = {
  limit: { opts: NOW_FIELDS, check: () => isBoolean },
  limitWithInfo: { opts: NOW_FIELDS, check: (k) => (v) => infoProblem(v, k.limits[0], k.fallback) },
  wouldLimit: { opts: NOW_FIELDS, check: () => isBoolean },
  wouldLimitWithInfo: { opts: NOW_FIELDS, check: (k) => (v) => infoProblem(v, k.limits[0], k.fallback) },
  clear: { opts: null, check: () => isUndefined },
  consume: { opts: LOG_FIELDS, check: VERDICT },
  peek: { opts: LOG_FIELDS, check: VERDICT },
  reward: { opts: WEIGHT_FIELDS, check: VERDICT },
  wait: { wait: true },
  reset: { opts: null, check: () => isUndefined },
  entries: { opts: NOW_FIELDS, check: (k) => (v) => entriesProblem(v, k.limits[0]) },
  trackedIds: { property: true, only: InMemoryRateLimiter },
  evictedIds: { property: true, only: InMemoryRateLimiter },
}

const COUNTING_METHODS = {
  consume: { opts: WEIGHT_FIELDS, check: VERDICT },
  peek: { opts: WEIGHT_FIELDS, check: VERDICT },
  reward: { opts: WEIGHT_FIELDS, check: VERDICT },
  wait: { wait: true },
  reset: { opts: null, check: () => isUndefined },
  trackedIds: { property: true },
  evictedIds: { property: true },
}

/**
 * Every limiter class with `consume`, by name (as exported): `options()`, the arbitrary of its
 * options; `methods`; `ids`, the arbitrary of its ids, and `arrays`, whether it takes an array
 * of them; `limitsOf(limiter)`, the limits its answers may name; `namespace`, its default;
 * `preset(max)`, options with which another limiter of the class writes under the same key, and
 * `others`, the classes that write there with another layout (see presetPlan).
 */
const LIMITERS = {}

/** A rolling window class (lib/rolling-rate-limiter.js). */
function rolling(name) {
  return {
    options: () => rollingOptions(name),
    methods: ROLLING_METHODS,
    ids: idSlot,
    arrays: false,
    limitsOf: (l) => [l.maxInInterval],
    namespace: 'ratekeeper:',
    preset: (max) => ({ interval: 60_000, maxInInterval: max }),
    others: ['FixedWindow', 'LeakyBucket', 'Gcra'],
  }
}

/** A counting limiter (lib/counting.js) with its own option `fields` (see optionsArb). */
function counting(fields, { limitsOf, namespace, preset }) {
  return {
    options: () => optionsArb({ ...fields, ...limiterStoreFields(clientSlot) }),
    methods: COUNTING_METHODS,
    ids: idsSlot,
    arrays: true,
    limitsOf,
    namespace,
    preset,
    others: ['RateLimiter', 'FixedWindow', 'LeakyBucket', 'TokenBucket', 'Gcra'],
  }
}

const windowLimits = (l) => l.limits.map((x) => x.limit)
const oneLimit = (max) => ({ limits: [{ duration: 60_000, limit: max }] })

for (const name of ['RateLimiter', 'InMemoryRateLimiter', 'RedisRateLimiter', 'NodeRedisRateLimiter', 'IORedisRateLimiter', 'SlidingLog']) {
  LIMITERS[name] = rolling(name)
}
LIMITERS.FixedWindow = counting(
  { limits: { valid: limitsArb(false), required: true } },
  { limitsOf: windowLimits, namespace: 'ratekeeper:fixed:', preset: oneLimit },
)
LIMITERS.SlidingWindow = counting(
  { limits: { valid: limitsArb(true), required: true } },
  { limitsOf: windowLimits, namespace: 'ratekeeper:sliding:', preset: oneLimit },
)
LIMITERS.LeakyBucket = counting(
  { capacity: { valid: amountArb, required: true }, leakAmount: { valid: amountArb }, leakInterval: { valid: durationArb, required: true } },
  { limitsOf: (l) => [l.capacity], namespace: 'ratekeeper:leaky:', preset: (max) => ({ capacity: max, leakInterval: 60_000 }) },
)
LIMITERS.TokenBucket = counting(
  {
    capacity: { valid: amountArb, required: true },
    refillAmount: { valid: amountArb },
    refillInterval: { valid: durationArb, required: true },
    initial: { valid: fc.oneof({ weight: 4, arbitrary: fc.integer({ min: 0, max: 5 }) }, { weight: 1, arbitrary: fc.constantFrom(1e15, 0) }), absent: 6 },
    forgetAfter: { valid: durationArb, absent: 6 },
  },
  { limitsOf: (l) => [l.capacity], namespace: 'ratekeeper:token:', preset: (max) => ({ capacity: max, refillInterval: 60_000 }) },
)
LIMITERS.Gcra = counting(
  { limit: { valid: limitArb, required: true }, period: { valid: durationArb, required: true }, burst: { valid: limitArb, absent: 6 } },
  { limitsOf: (l) => [l.burst ?? l.limit], namespace: 'ratekeeper:gcra:', preset: (max) => ({ limit: max, period: 60_000 }) },
)
LIMITERS.SlidingTail = counting(
  { limits: { valid: limitsArb(false), required: true } },
  { limitsOf: windowLimits, namespace: 'ratekeeper:tail:', preset: oneLimit },
)

const ROLLING_NAMES = Object.keys(LIMITERS).filter((name) => LIMITERS[name].methods === ROLLING_METHODS)
const COUNTING_NAMES = Object.keys(LIMITERS).filter((name) => LIMITERS[name].methods === COUNTING_METHODS)

function methodCall(entry) {
  const { methods, ids, arrays } = entry
  return fc.constantFrom(...Object.keys(methods)).chain((m) =>
    fc.record({
      m: fc.constant(m),
      args: methods[m].property
        ? fc.constant([])
        : methods[m].wait
          ? fc.tuple(ids, waitOptionsSlot, trailingArb).filter((args) => waitEnds(args, arrays))
          : fc.tuple(ids, methods[m].opts ? callOptionsSlot(methods[m].opts) : fc.constant(ABSENT), trailingArb),
    }),
  )
}

function renderCall(target, call) {
  return call.args.length ? `await ${target}.${call.m}(${renderArgs(call.args)})` : `${target}.${call.m}`
}

/**
 * What the checks of a case's calls need to know: the limiter's `methods`, `limits` and
 * `arrays`; `redis`; `fallback`, the `store` its onStoreError answers name; whether the calls
 * are `concurrent`; and how many waits of the case share each queue (`waitQueues`).
 */
function checkContext(c, entry, limiter) {
  let limits
  try {
    limits = entry.limitsOf(limiter)
  } catch {}
  const redis = onRedis(c.options)
  const policy = fieldOf(c.options, 'onStoreError')
  const fallback = !redis ? null : policy === 'allow' ? 'none' : policy === 'memory' ? 'memory' : null
  const waitQueues = new Map()
  for (const call of c.calls) {
    if (call.m === 'wait') waitQueues.set(waitQueueOf(call.args[0]), (waitQueues.get(waitQueueOf(call.args[0])) || 0) + 1)
  }
  return { methods: entry.methods, limits, arrays: entry.arrays, redis, fallback, concurrent: c.concurrent, waitQueues }
}

const isBigWeight = (spec) => typeof spec === 'number' && spec >= 10_000

/** Makes one generated method call on `limiter` and checks its outcome. */
async function checkedMethodCall(limiter, call, ctx, k) {
  const label = renderCall('limiter', call)
  trace(label)
  const method = k.methods[call.m]
  if (method.property) {
    if (method.only && !(limiter instanceof method.only)) return
    let value
    try {
      value = limiter[call.m]
    } catch (error) {
      fail(`${label} threw ${describe(error)}`)
    }
    if (!isWhole(value)) fail(`${label} is ${describe(value)}, not a whole number >= 0`)
    if (k.redis && value !== 0) fail(`${label} is ${value} on Redis, not 0`)
    return
  }
  if (known('long-script') && k.redis && k.methods === ROLLING_METHODS && isBigWeight(fieldOf(call.args[1], 'weight'))) {
    trace('// (not made: a weight this large keeps Redis busy for seconds [tag: long-script])')
    return
  }
  if (method.wait) return checkedWaitCall(limiter, call, label, ctx, k)
  const outcome = await outcomeOf(() => limiter[call.m](...buildArgs(call.args, ctx)))
  expectAnswer(outcome, label, { redis: k.redis, check: method.check(k) })
  if (outcome.resolved) refuseUnknown(label, call.args)
  // An invalid id without options: refused as such.
  const [id, options] = call.args
  if ((isAbsent(options) || options === undefined) && idVerdict(id, k.arrays) === 'invalid' && !outcome.threw) {
    if (!outcome.rejected || outcome.error.code !== 'ERR_INVALID_ID') fail(`${label} must reject the invalid id with ERR_INVALID_ID, but it ${describeOutcome(outcome)}`)
  }
}

/**
 * What the Redis key of the first call's id already holds, written by another limiter on the same
 * namespace: one of the same class with another limit (a deploy that changed the config, or
 * rolling-rate-limiter, which logs every attempt), or one of another class (another layout).
 */
const presetArb = fc.oneof(
  { weight: 6, arbitrary: fc.constant(ABSENT) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('otherConfig'), n: fc.integer({ min: 1, max: 8 }), max: fc.integer({ min: 1, max: 10 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('otherClass'), n: fc.integer({ min: 1, max: 3 }), max: fc.constant(5), pick: fc.nat(11) }) },
)

function limiterCaseArb(ctor) {
  const entry = LIMITERS[ctor]
  return fc.record({
    ctor: fc.constant(ctor),
    options: entry.options(),
    preset: presetArb,
    calls: fc.array(methodCall(entry), { minLength: 1, maxLength: 6 }),
    concurrent: fc.boolean(),
  })
}

const LIVE_REFS = ['store', 'liveUrl', 'liveOptions', 'liveIoredis', 'liveNodeRedis']

/** The preset writer of a case, or null when the preset does not apply. */
function presetPlan(c) {
  if (isAbsent(c.preset) || !c.calls.length || !c.calls[0].args.length) return null
  const client = fieldOf(c.options, 'client')
  if (client === null || typeof client !== 'object' || client.$ !== 'ref' || !LIVE_REFS.includes(client.w)) return null
  const entry = LIMITERS[c.ctor]
  const given = fieldOf(c.options, 'namespace')
  const namespace = isAbsent(given) || given === undefined ? entry.namespace : given
  const id = c.calls[0].args[0]
  const validOne = typeof id === 'number' ? Number.isFinite(id) : isValidIdString(id)
  if (typeof namespace !== 'string' || Buffer.byteLength(namespace) > 1024 || !validOne) return null
  const { kind, n, max, pick } = c.preset
  const others = entry.others.filter((name) => name !== c.ctor)
  // (The rolling window's data is written by RateLimiter: its subclasses check their options only.)
  const writer = kind === 'otherClass' ? others[pick % others.length] : entry.methods === ROLLING_METHODS ? 'RateLimiter' : c.ctor
  const options = LIMITERS[writer].preset(max)
  const weight = Math.min(n, max)
  const code = `await new ${writer}({ ${Object.entries(options).map(([k, v]) => `${k}: ${JSON.stringify(v)}`).join(', ')}, client: store, namespace: ${render(namespace)} }).consume(${render(id)}, { weight: ${weight} }) // written before`
  const run = async () => {
    const limiter = new ratekeeper[writer]({ ...options, client: liveStore, namespace })
    const outcome = await outcomeOf(() => limiter.consume(id, { weight }))
    if (!outcome.resolved) fail(`the preset ${code} ${describeOutcome(outcome)}`)
  }
  return { code, run }
}

function renderLimiterCase(c) {
  const preset = presetPlan(c)
  return [
    ...(preset ? [preset.code] : []),
    `const limiter = new ${c.ctor}(${render(c.options)})`,
    ...c.calls.map((call) => renderCall('limiter', call)),
  ].join('\n')
}

function limiterProperty(names) {
  const cases = fc.oneof(...names.map(limiterCaseArb))
  return fc.asyncProperty(renderable(cases, renderLimiterCase), async (c) => {
    beginCase(renderLimiterCase(c))
    const ctx = await newCase()
    const preset = presetPlan(c)
    if (preset) {
      trace(preset.code)
      await preset.run()
    }
    const made = constructed(`new ${c.ctor}(...)`, () => new ratekeeper[c.ctor](build(c.options, ctx)), [c.options])
    if (made.value && storeIsSafe(c.options)) {
      const k = checkContext(c, LIMITERS[c.ctor], made.value)
      await runAll(c.calls, c.concurrent, (call) => checkedMethodCall(made.value, call, ctx, k))
    }
    await checkStrays(ctx)
  })
}

const PROPERTIES = {}

PROPERTIES['rolling-window'] = () => limiterProperty(ROLLING_NAMES)

PROPERTIES['counting-limiters'] = () => limiterProperty(COUNTING_NAMES)

// ---------------------------------------------------------------------------------------------
// Property: redback's createRateLimit / createClient(...).createRateLimit.

const redbackOptionsFields = (withClient) => {
  const fields = {
    bucket_span: { valid: fc.constantFrom(600, 60, 10, 1, 3600, 7200, 86_400, 31_536_000, 100_000) },
    bucket_interval: { valid: fc.constantFrom(5, 1, 10, 60, 3600, 7) },
    subject_expiry: { valid: fc.constantFrom(1200, 1, 60, 31_536_000) },
    namespace: { valid: validNamespace },
    clock: { valid: validClock, absent: 8 },
  }
  if (withClient) fields.client = { valid: clientSlot, raw: true }
  return fields
}

const actionSlot = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('requests', 'a', 'a:b', '{x}', '😀', '\0', 'x'.repeat(1024)) },
  { weight: 1, arbitrary: hostile },
)

const redbackInterval = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(0, 1, 5, 10, 60, 599, 600, 601, 0.5, 3600, 1e-300, -0) },
  { weight: 1, arbitrary: fc.constant(ABSENT) },
  { weight: 1, arbitrary: hostile },
)

const redbackCall = fc.record({
  m: fc.constantFrom('add', 'count', 'addCount'),
  subject: fc.oneof(
    { weight: 6, arbitrary: validId },
    { weight: 1, arbitrary: fc.array(validId, { maxLength: 4 }).map((a) => ({ $: 'arr', a })) },
    { weight: 2, arbitrary: hostileDefined },
  ),
  interval: redbackInterval,
  trailing: fc.array(
    fc.oneof(
      { weight: 2, arbitrary: fc.constant({ $: 'cb' }) },
      { weight: 3, arbitrary: optionsArb(NOW_FIELDS, { replace: false }) },
      { weight: 1, arbitrary: hostile },
    ),
    { maxLength: 2 },
  ),
  style: fc.oneof(
    { weight: 8, arbitrary: fc.constant('await') },
    { weight: 1, arbitrary: fc.constant('chain') },
    { weight: 1, arbitrary: fc.constant('forget') },
  ),
  then: fc.record({ m: fc.constantFrom('add', 'count', 'addCount'), subject: validId, interval: fc.constantFrom(0, 5, 60) }),
})

const redbackSafeRedis = fc.constantFrom(
  ...['store', 'liveUrl', 'liveOptions', 'liveIoredis', 'liveNodeRedis', 'deadUrl', 'deadStore', 'closedStore'].map((w) => ({ $: 'ref', w })),
)

const redbackCase = fc.oneof(
  fc.record({
    form: fc.constant('createRateLimit'),
    action: actionSlot,
    options: fc.oneof({ weight: 1, arbitrary: fc.constant(ABSENT) }, { weight: 8, arbitrary: optionsArb(redbackOptionsFields(true)) }),
    calls: fc.array(redbackCall, { minLength: 1, maxLength: 5 }),
  }),
  fc.record({
    form: fc.constant('createClient'),
    redisOptions: fc.oneof({ weight: 8, arbitrary: redbackSafeRedis }, { weight: 1, arbitrary: hostile }),
    clientOptions: fc.oneof(
      { weight: 3, arbitrary: fc.constant(ABSENT) },
      { weight: 3, arbitrary: optionsArb({ namespace: { valid: validNamespace } }) },
      { weight: 1, arbitrary: hostile },
    ),
    action: actionSlot,
    options: fc.oneof({ weight: 1, arbitrary: fc.constant(ABSENT) }, { weight: 8, arbitrary: optionsArb(redbackOptionsFields(false)) }),
    calls: fc.array(redbackCall, { minLength: 1, maxLength: 5 }),
  }),
)

function redbackArgs(call) {
  return call.m === 'add' ? [call.subject, ...call.trailing] : [call.subject, call.interval, ...call.trailing]
}

function renderRedbackCall(call) {
  const first = `ratelimit.${call.m}(${renderArgs(redbackArgs(call))})`
  if (call.style === 'forget') return `${first} // not awaited`
  if (call.style === 'chain') {
    const { m, subject, interval } = call.then
    return `await ${first}.${m}(${render(subject)}${m === 'add' ? '' : `, ${interval}`}) // the first call not awaited`
  }
  return `await ${first}`
}

function renderRedbackCase(c) {
  const make =
    c.form === 'createRateLimit'
      ? `const ratelimit = createRateLimit(${renderArgs([c.action, c.options])})`
      : `const ratelimit = createClient(${renderArgs([c.redisOptions, c.clientOptions])}).createRateLimit(${renderArgs([c.action, c.options])})`
  return [make, ...c.calls.map(renderRedbackCall)].join('\n')
}

const REDBACK_CHECKS = { add: isUndefined, count: isCount, addCount: isCount }

function hasRedbackMethods(promise) {
  return ['add', 'count', 'addCount'].every((m) => typeof promise[m] === 'function')
}

/** Checks a redback call's outcome, callback included. */
async function checkRedbackOutcome(outcome, label, m, callback, ctx, recordsBefore, redis) {
  if (outcome.threw && known('sync-throw') && !errorProblem(outcome.error, { redis })) return
  if (outcome.threw) fail(`${label} threw synchronously instead of returning a rejected Promise [tag: sync-throw]: ${describe(outcome.error)}`)
  if (outcome.returned) fail(`${label} returned ${describe(outcome.value)} instead of a Promise`)
  if (outcome.timeout) fail(`${label} did not settle within ${CALL_TIMEOUT_MS} ms (a hang)`)
  if (!hasRedbackMethods(outcome.promise)) fail(`${label} returned a Promise without add/count/addCount (no chaining)`)
  await tick()
  if (typeof callback === 'function') {
    if (outcome.rejected) fail(`${label} rejected although it was given a callback: ${describe(outcome.error)}`)
    const record = callback.record
    for (const other of ctx.records.slice(recordsBefore)) {
      if (other !== record && other.calls.length) fail(`${label} called a callback that was not the last function argument`)
    }
    if (!record) return
    if (record.calls.length !== 1) fail(`${label} called its callback ${record.calls.length} times, not once`)
    const [error, value] = record.calls[0]
    if (error !== null) {
      const problem = errorProblem(error, { redis })
      if (problem) fail(`${label} gave its callback a bad error: ${problem}`)
      if (outcome.value !== undefined) fail(`${label} resolved ${describe(outcome.value)} after an error`)
    } else {
      const problem = REDBACK_CHECKS[m](value)
      if (problem) fail(`${label} gave its callback a bad value (${problem}): ${describe(value)}`)
      if (!Object.is(value, outcome.value)) fail(`${label} resolved ${describe(outcome.value)} but called back with ${describe(value)}`)
    }
    return
  }
  expectAnswer(outcome, label, { redis, check: REDBACK_CHECKS[m] })
}

PROPERTIES.redback = () =>
  fc.asyncProperty(renderable(redbackCase, renderRedbackCase), async (c) => {
    beginCase(renderRedbackCase(c))
    const ctx = await newCase()
    let made
    let safe
    let redis
    if (c.form === 'createRateLimit') {
      made = constructed('createRateLimit(...)', () => createRateLimit(...buildArgs([c.action, c.options], ctx)), [c.options])
      safe = storeIsSafe(c.options)
      redis = onRedis(c.options)
    } else {
      const client = constructed('createClient(...)', () => createClient(...buildArgs([c.redisOptions, c.clientOptions], ctx)), [c.clientOptions])
      if (client.value) {
        if (typeof client.value.createRateLimit !== 'function') fail('createClient(...) has no createRateLimit')
        made = constructed('createClient(...).createRateLimit(...)', () => client.value.createRateLimit(...buildArgs([c.action, c.options], ctx)), [c.options])
      }
      safe = c.redisOptions !== null && typeof c.redisOptions === 'object' && c.redisOptions.$ === 'ref'
      redis = true
    }
    if (made && made.value && safe) {
      const rl = made.value
      if (typeof rl.key !== 'string') fail(`ratelimit.key is ${describe(rl.key)}, not a string`)
      let forgotten = false
      for (const call of c.calls) {
        const label = renderRedbackCall(call)
        trace(label)
        const recordsBefore = ctx.records.length
        const args = buildArgs(redbackArgs(call), ctx)
        const functions = args.slice(call.m === 'add' ? 1 : 2).filter((a) => typeof a === 'function')
        const callback = functions[functions.length - 1]
        if (call.style === 'await') {
          const outcome = await outcomeOf(() => rl[call.m](...args))
          await checkRedbackOutcome(outcome, label, call.m, callback, ctx, recordsBefore, redis)
          // With a callback the error goes there: a call answered only when a recording callback
          // saw none (a callback that records nothing hides whether the call failed).
          const answered = outcome.resolved && (typeof callback !== 'function' || (callback.record !== undefined && callback.record.calls[0]?.[0] === null))
          // redback's trailing arguments: the last one that is neither a function nor undefined is the options.
          const optionsAt = args.findLastIndex((a, i) => i >= (call.m === 'add' ? 1 : 2) && typeof a !== 'function' && a !== undefined)
          if (answered && optionsAt >= 0) refuseUnknown(label, [redbackArgs(call)[optionsAt]])
          continue
        }
        let first
        try {
          first = rl[call.m](...args)
        } catch (error) {
          if (!(known('sync-throw') && !errorProblem(error, { redis }))) {
            fail(`${label} threw synchronously instead of returning a rejected Promise [tag: sync-throw]: ${describe(error)}`)
          }
        }
        if (first === undefined && known('sync-throw')) continue
        if (!(first instanceof Promise) || !hasRedbackMethods(first)) fail(`${label} did not return a chainable Promise`)
        if (call.style === 'forget') {
          forgotten = true
          continue
        }
        const { m, subject, interval } = call.then
        const outcome = await outcomeOf(() => (m === 'add' ? first.add(subject) : first[m](subject, interval)))
        await checkRedbackOutcome(outcome, label, m, undefined, ctx, ctx.records.length, redis)
      }
      // Calls not awaited are answered in order with this one.
      if (forgotten) await outcomeOf(() => rl.count('flush', 0, () => {}))
    }
    await checkStrays()
  })

// ---------------------------------------------------------------------------------------------
// Property: the callback API, RateLimiter(options) called without `new`.

const callbackOptions = optionsArb({
  interval: { valid: durationArb, required: true },
  maxInInterval: { valid: maxArb, required: true },
  minDifference: { valid: minDifferenceArb },
  recordBlocked: { valid: fc.boolean() },
  namespace: { valid: validNamespace },
  clock: { valid: validClock, absent: 8 },
  redis: { valid: clientSlot, raw: true },
  client: { valid: safeClient, absent: 30, hostile: 0.3 },
})

const CALLBACK_FORMS = {
  id: (c) => [c.id],
  'id,cb': (c) => [c.id, { $: 'cb' }],
  cb: () => [{ $: 'cb' }],
  'undefined,cb': () => [undefined, { $: 'cb' }],
  none: () => [],
  'id,x': (c) => [c.id, c.x],
  'cb,x': (c) => [{ $: 'cb' }, c.x],
}

const callbackCase = fc.record({
  options: callbackOptions,
  calls: fc.array(fc.record({ form: fc.constantFrom(...Object.keys(CALLBACK_FORMS)), id: idSlot, x: hostile }), { minLength: 1, maxLength: 5 }),
  concurrent: fc.boolean(),
})

function renderCallbackCall(call) {
  const specs = CALLBACK_FORMS[call.form](call)
  return `await limiter(${specs.map(render).join(', ')})`
}

function renderCallbackCase(c) {
  return [`const limiter = RateLimiter(${render(c.options)}) // no new`, ...c.calls.map(renderCallbackCall)].join('\n')
}

PROPERTIES['callback-api'] = () =>
  fc.asyncProperty(renderable(callbackCase, renderCallbackCase), async (c) => {
    beginCase(renderCallbackCase(c))
    const ctx = await newCase()
    const made = constructed('RateLimiter(options)', () => RateLimiter(build(c.options, ctx)), [c.options])
    if (made.value && storeIsSafe(c.options, 'redis') && storeIsSafe(c.options, 'client')) {
      const limiter = made.value
      if (typeof limiter !== 'function') fail(`RateLimiter(options) returned ${describe(limiter)}, not a function`)
      if (!(limiter.limiter instanceof InMemoryRateLimiter || limiter.limiter instanceof RedisRateLimiter)) {
        fail('RateLimiter(options).limiter is not an InMemoryRateLimiter or RedisRateLimiter')
      }
      const redis = onRedis(c.options, 'redis')
      const emptyNamespace = fieldOf(c.options, 'namespace') === ''
      await runAll(c.calls, c.concurrent, async (call) => {
        const label = renderCallbackCall(call)
        trace(label)
        const args = CALLBACK_FORMS[call.form](call).map((spec) => build(spec, ctx))
        let [id, callback] = args
        if (typeof id === 'function' && callback === undefined) {
          callback = id
          id = undefined
        }
        const outcome = await outcomeOf(() => limiter(...args))
        if (outcome.threw) fail(`${label} threw synchronously: ${describe(outcome.error)}`)
        if (outcome.returned) fail(`${label} returned ${describe(outcome.value)} instead of a Promise`)
        if (outcome.timeout) fail(`${label} did not settle within ${CALL_TIMEOUT_MS} ms (a hang)`)
        await tick()
        const globalRefused = (error) =>
          id === undefined && error && error.code === 'ERR_INVALID_ID' && !(redis && emptyNamespace)
        if (callback !== undefined && typeof callback !== 'function') {
          if (!outcome.rejected || outcome.error.code !== 'ERR_INVALID_ARGUMENT' || !(outcome.error instanceof TypeError)) {
            fail(`${label} with a callback that is no function should reject with a TypeError ERR_INVALID_ARGUMENT, but ${describeOutcome(outcome)}`)
          }
          return
        }
        if (typeof callback === 'function') {
          if (outcome.rejected) fail(`${label} rejected although it was given a callback: ${describe(outcome.error)}`)
          if (outcome.value !== undefined && !isWhole(outcome.value)) fail(`${label} resolved ${describe(outcome.value)}, not a timeLeft`)
          const record = callback.record
          if (!record) return
          if (record.calls.length !== 1) fail(`${label} called its callback ${record.calls.length} times, not once`)
          const [error, timeLeft, actionsLeft] = record.calls[0]
          if (error !== null) {
            const problem = errorProblem(error, { redis })
            if (problem) fail(`${label} gave its callback a bad error: ${problem}`)
            if (globalRefused(error)) fail(`${label}: the callback API's global limit (no id) was refused: ${describe(error)}`)
            if (outcome.value !== undefined) fail(`${label} resolved ${outcome.value} after an error`)
          } else {
            if (!isWhole(timeLeft) || !isWhole(actionsLeft)) fail(`${label} called back with (null, ${describe(timeLeft)}, ${describe(actionsLeft)})`)
            if (timeLeft !== outcome.value) fail(`${label} resolved ${outcome.value} but called back with timeLeft ${timeLeft}`)
          }
          return
        }
        if (outcome.rejected && globalRefused(outcome.error)) {
          fail(`${label}: the callback API's global limit (no id) was refused: ${describe(outcome.error)}`)
        }
        expectAnswer(outcome, label, { redis, check: isCount })
      })
    }
    await checkStrays()
  })

// ---------------------------------------------------------------------------------------------
// Property: RedisStore's constructor and RedisStore.connect.

/** A Redis URL on loopback (or one that cannot parse); never the default port 6379. */
const anySafeUrl = fc.record({
  $: fc.constant('url'),
  scheme: fc.constantFrom('redis', 'redis', 'redis', 'rediss', 'redis+unix', 'unix', 'http'),
  auth: fc.constantFrom('', '', `user:${SECRET}@`, `:${SECRET}@`, 'user@', '%zz@', 'a:b:c@'),
  host: fc.constantFrom('127.0.0.1', 'localhost', '[::1]'),
  port: fc.constantFrom('live', 'live', 'dead', '0', '99999', 'abc', '-1'),
  path: fc.constantFrom('', '', '/', '/0', '/1', '/15', '/16', '/99999999999', '/abc', '/-1'),
  query: fc.constantFrom('', '', '?protocol=resp3', '?db=2', '?insecure', `?password=${SECRET}`),
})

const safeUrl = fc.oneof(
  {
    weight: 2,
    arbitrary: fc.record({
      $: fc.constant('url'),
      scheme: fc.constant('redis'),
      auth: fc.constant(''),
      host: fc.constantFrom('127.0.0.1', 'localhost'),
      port: fc.constantFrom('live', 'live', 'dead'),
      path: fc.constantFrom('', '/1', '/5'),
      query: fc.constant(''),
    }),
  },
  { weight: 3, arbitrary: anySafeUrl },
)

function urlOf(spec, live = '${LIVE_PORT}', dead = '${DEAD_PORT}') {
  if (spec.scheme === 'redis+unix' || spec.scheme === 'unix') return `${spec.scheme}:///tmp/ratekeeper-fuzz-nothing-here.sock${spec.query}`
  const port = spec.port === 'live' ? live : spec.port === 'dead' ? dead : spec.port
  return `${spec.scheme}://${spec.auth}${spec.host}:${port}${spec.path}${spec.query}`
}

const ANY_URLS = [
  'redis://example.test',
  `rediss://user:${SECRET}@example.test:6380/2`,
  `bogus://user:${SECRET}@example.test`,
  'redis://[::1',
  `redis://:${SECRET}@/`,
  `redis+unix:///tmp/x.sock?db=1&pass=${SECRET}`,
  'unix:',
  'redis://',
  'redis://a b',
  'redis://127.0.0.1:6379/0',
  'redis://host:0',
  'redis://host:65536',
  'redis://h/?protocol=resp9',
]
const anyUrl = fc.oneof(safeUrl, fc.constantFrom(...ANY_URLS), anyString)

const shortTimeout = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 1, max: 300 }) },
  { weight: 1, arbitrary: fc.constantFrom(0, -1, NaN, Infinity, 600_001, 1e9, '100', null, 0.5) },
)
const loopbackHost = fc.constantFrom('127.0.0.1', 'localhost', '::1')
const portRef = fc.constantFrom({ $: 'ref', w: 'livePort' }, { $: 'ref', w: 'deadPort' })
const badPort = fc.constantFrom(0, -1, -0, 65536, 70000, 1.5, NaN, Infinity, '6379', null, true, 6379n, 'x', { $: 'obj', e: [] })
const secretish = fc.oneof(fc.constantFrom(SECRET, '', 'p@ss:/w', 'x'.repeat(1024)), anyString)

const storeFields = (target) => ({
  ...target,
  username: { valid: fc.constantFrom('user', '', 'default', '😀') },
  password: { valid: secretish },
  db: { valid: fc.oneof({ weight: 6, arbitrary: fc.integer({ min: 0, max: 20 }) }, { weight: 1, arbitrary: fc.constantFrom(1e9, 1e9 + 1, -1, 1.5) }) },
  tls: { valid: fc.boolean(), absent: 6 },
  connectTimeoutMs: { valid: shortTimeout, absent: 1 },
  commandTimeoutMs: { valid: shortTimeout, absent: 1 },
})

/** Options for RedisStore.connect: their target is always loopback and never port 6379. */
const connectArg = fc
  .oneof(
    { weight: 3, arbitrary: optionsArb(storeFields({ url: { valid: safeUrl, required: true, hostile: 0.3 } }), { replace: false }) },
    {
      weight: 3,
      arbitrary: optionsArb(
        storeFields({ host: { valid: loopbackHost }, port: { valid: fc.oneof({ weight: 4, arbitrary: portRef }, { weight: 1, arbitrary: badPort }), absent: 0, hostile: 0.3 } }),
        { replace: false },
      ),
    },
    {
      weight: 1,
      arbitrary: optionsArb(
        storeFields({ cluster: { valid: fc.oneof(fc.array(safeUrl, { maxLength: 3 }).map((a) => ({ $: 'arr', a })), badPort), absent: 0, hostile: 0.3 } }),
        { replace: false },
      ),
    },
    { weight: 1, arbitrary: safeUrl },
    { weight: 1, arbitrary: hostile },
  )
  .filter(connectIsSafe)

/** Whether an array spec given as `cluster` holds no string that could parse as a URL. */
function urlsAreSafe(spec) {
  if (spec === null || typeof spec !== 'object') return true // not an array: rejected
  if (spec.$ === 'proxy' || spec.$ === 'revoked') return urlsAreSafe(spec.t)
  if (spec.$ === 'arr' || spec.$ === 'arrGetter') return spec.a.every((u) => typeof u !== 'string' || !u.includes(':'))
  return true // no strings with ':' in 'many', 'deep', 'sparse'; anything else is rejected
}

/** Whether RedisStore.connect(spec) can only reach loopback, never port 6379. */
function connectIsSafe(spec) {
  if (spec === undefined || spec === null) return false // the default: 127.0.0.1:6379
  if (typeof spec === 'string') return !spec.includes(':')
  if (typeof spec !== 'object') return true // a number, boolean or bigint: rejected
  if (spec.$ === 'url') return true
  if (['sym', 'fn', 'arr', 'many', 'deep', 'sparse', 'arrGetter'].includes(spec.$)) return true
  if (spec.$ === 'proxy' && spec.t.$ === 'arr') return true
  if (!['obj', 'nullProto', 'getter', 'proxy'].includes(spec.$)) return false
  const given = (v) => !isAbsent(v) && v !== undefined
  const isNumber = (v) => typeof v === 'number'
  for (const name of ['connectTimeoutMs', 'commandTimeoutMs']) {
    const v = fieldOf(spec, name)
    if (isNumber(v) && v >= 1 && v <= 600_000 && v > 1000) return false
  }
  const cluster = fieldOf(spec, 'cluster')
  if (given(cluster)) return urlsAreSafe(cluster)
  const url = fieldOf(spec, 'url')
  if (given(url)) {
    if (typeof url === 'string') return !url.includes(':')
    return true // a url spec, or no string at all (rejected)
  }
  const host = fieldOf(spec, 'host')
  if (typeof host === 'string' && !['127.0.0.1', 'localhost', '::1'].includes(host)) return false
  const port = fieldOf(spec, 'port')
  if (!given(port)) return false
  if (port !== null && typeof port === 'object' && port.$ === 'ref') return true
  if (isNumber(port)) return !(Number.isInteger(port) && port >= 1 && port <= 65535)
  return true // not a number: rejected
}

const CLIENT_TYPES = ['ioredis', 'ioredis-cluster', 'node-redis', 'node-redis-cluster', null]

/** Client-shaped objects for RedisRateLimiter.determineRedisClientType. */
const clientShape = fc.oneof(
  hostile,
  fc.record({
    $: fc.constant('obj'),
    e: fc.subarray([
      ['zremrangebyscore', { $: 'fn', v: 'noop' }],
      ['zRemRangeByScore', { $: 'fn', v: 'noop' }],
      ['ZREMRANGEBYSCORE', { $: 'fn', v: 'noop' }],
      ['isCluster', true],
      ['startupNodes', { $: 'arr', a: ['127.0.0.1:7000'] }],
      ['options', { $: 'obj', e: [['rootNodes', { $: 'arr', a: [] }]] }],
      ['_options', { $: 'getter', e: [], k: 'rootNodes' }],
    ]),
  }),
)

const storeCase = fc.oneof(
  fc.record({ form: fc.constant('detect'), arg: clientShape, use: fc.constant(false) }),
  fc.record({
    form: fc.constant('new'),
    arg: fc.oneof(
      { weight: 1, arbitrary: fc.constant(ABSENT) },
      { weight: 3, arbitrary: hostile },
      { weight: 2, arbitrary: anyUrl },
      {
        weight: 4,
        arbitrary: optionsArb(
          storeFields({
            url: { valid: anyUrl, absent: 2 },
            host: { valid: fc.oneof(loopbackHost, anyString, fc.constant('example.test')) },
            port: { valid: fc.integer({ min: 1, max: 65535 }) },
            cluster: { valid: fc.array(anyUrl, { maxLength: 3 }).map((a) => ({ $: 'arr', a })), absent: 6 },
          }),
        ),
      },
    ),
    use: fc.constant(false),
  }),
  fc.record({ form: fc.constant('connect'), arg: connectArg, use: fc.boolean() }),
)

function renderStoreCase(c) {
  const arg = renderArgs([c.arg])
  if (c.form === 'detect') return `RedisRateLimiter.determineRedisClientType(${arg})`
  if (c.form === 'new') return `const store = new RedisStore(${arg})\nawait store.close()`
  return [
    `const store = await RedisStore.connect(${arg})`,
    ...(c.use ? ['const limiter = new FixedWindow({ limits: [{ duration: 1000, limit: 1 }], client: store, namespace: "fz:store:" })', 'await limiter.consume("a")'] : []),
    'await store.close()',
    ...(c.use ? ['await limiter.consume("a") // ERR_STORE_CLOSED'] : []),
  ].join('\n')
}

function checkStore(store, label) {
  if (!(store instanceof RedisStore)) fail(`${label} gave ${describe(store)}, not a RedisStore`)
  if (store.closed !== false) fail(`${label}: a new store says closed: ${describe(store.closed)}`)
  if (typeof store.isCluster !== 'boolean') fail(`${label}: isCluster is ${describe(store.isCluster)}`)
}

async function closeStore(store, label) {
  const outcome = await outcomeOf(() => store.close())
  if (!outcome.resolved || outcome.value !== undefined) fail(`${label}: close() ${describeOutcome(outcome)}`)
  if (store.closed !== true) fail(`${label}: closed is ${describe(store.closed)} after close()`)
}

PROPERTIES['redis-store'] = () =>
  fc.asyncProperty(renderable(storeCase, renderStoreCase), async (c) => {
    beginCase(renderStoreCase(c))
    const ctx = await newCase()
    const args = buildArgs([c.arg], ctx)
    if (c.form === 'detect') {
      trace('RedisRateLimiter.determineRedisClientType(...)')
      let type
      try {
        type = RedisRateLimiter.determineRedisClientType(...args)
      } catch (error) {
        if (!isMarker(error) && !isRevokedProxyError(error)) fail(`determineRedisClientType threw ${describe(error)}`)
        type = null
      }
      if (!CLIENT_TYPES.includes(type)) fail(`determineRedisClientType gave ${describe(type)}`)
    } else if (c.form === 'new') {
      const made = constructed('new RedisStore(...)', () => new RedisStore(...args), [c.arg])
      if (made.value) {
        checkStore(made.value, 'new RedisStore(...)')
        await closeStore(made.value, 'new RedisStore(...)')
      }
    } else {
      if (!connectIsSafe(c.arg)) throw new Error('fuzz-worker: an unsafe connect target was generated')
      const label = 'RedisStore.connect(...)'
      trace(label)
      const outcome = await outcomeOf(() => RedisStore.connect(...args))
      expectAnswer(outcome, label, { redis: true, check: () => null })
      if (outcome.resolved) refuseUnknown(label, [c.arg])
      if (outcome.resolved) {
        const store = outcome.value
        checkStore(store, label)
        let limiter
        if (c.use) {
          trace('limiter.consume("a")')
          limiter = new FixedWindow({ limits: [{ duration: 1000, limit: 1 }], client: store, namespace: 'fz:store:' })
          expectAnswer(await outcomeOf(() => limiter.consume('a')), 'limiter.consume("a") on the connected store', {
            redis: true,
            check: (v) => verdictProblem(v, [1]),
          })
        }
        await closeStore(store, label)
        if (limiter) {
          const after = await outcomeOf(() => limiter.consume('a'))
          if (!after.rejected || after.error.code !== 'ERR_STORE_CLOSED') {
            fail(`consume on a closed store should reject with ERR_STORE_CLOSED, but ${describeOutcome(after)}`)
          }
        }
      }
    }
    await checkStrays()
  })

// ---------------------------------------------------------------------------------------------
// Property: the Express middleware factory rateLimit(options), and its middleware.

let middlewareCounter = 0
const middlewareNamespace = () => `fz:mw:${process.pid}:${++middlewareCounter}:`

const MIDDLEWARE_LIMITERS = {
  fixedMemory: {
    build: () => new FixedWindow({ limits: [{ duration: 60_000, limit: 1 }] }),
    render: 'new FixedWindow({ limits: [{ duration: 60000, limit: 1 }] })',
    redis: false,
  },
  fixedLive: {
    build: () => new FixedWindow({ limits: [{ duration: 60_000, limit: 1 }], client: liveStore, namespace: middlewareNamespace() }),
    render: 'new FixedWindow({ limits: [{ duration: 60000, limit: 1 }], client: store })',
    redis: true,
  },
  fixedDead: {
    build: () => new FixedWindow({ limits: [{ duration: 60_000, limit: 1 }], client: deadStore }),
    render: 'new FixedWindow({ limits: [{ duration: 60000, limit: 1 }], client: deadStore })',
    redis: true,
  },
  fixedHeavy: {
    build: () => new FixedWindow({ limits: [{ duration: 1e12, limit: 1e15 }] }),
    render: 'new FixedWindow({ limits: [{ duration: 1e12, limit: 1e15 }] })',
    redis: false,
  },
  rollingMemory: {
    build: () => new RateLimiter({ interval: 60_000, maxInInterval: 1, minDifference: 10 }),
    render: 'new RateLimiter({ interval: 60000, maxInInterval: 1, minDifference: 10 })',
    redis: false,
  },
  logLive: {
    build: () => new SlidingLog({ interval: 60_000, maxInInterval: 1, client: liveStore, namespace: middlewareNamespace() }),
    render: 'new SlidingLog({ interval: 60000, maxInInterval: 1, client: store })',
    redis: true,
  },
  slidingMemory: {
    build: () => new SlidingWindow({ limits: [{ duration: 60_000, limit: 1 }] }),
    render: 'new SlidingWindow({ limits: [{ duration: 60000, limit: 1 }] })',
    redis: false,
  },
  leakyMemory: {
    build: () => new LeakyBucket({ capacity: 1, leakInterval: 60_000 }),
    render: 'new LeakyBucket({ capacity: 1, leakInterval: 60000 })',
    redis: false,
  },
  tokenLive: {
    build: () => new TokenBucket({ capacity: 1, refillInterval: 60_000, client: liveStore, namespace: middlewareNamespace() }),
    render: 'new TokenBucket({ capacity: 1, refillInterval: 60000, client: store })',
    redis: true,
  },
  gcraDead: {
    build: () => new Gcra({ limit: 1, period: 60_000, client: deadStore }),
    render: 'new Gcra({ limit: 1, period: 60000, client: deadStore })',
    redis: true,
  },
  tailMemory: {
    build: () => new SlidingTail({ limits: [{ duration: 60_000, limit: 1 }] }),
    render: 'new SlidingTail({ limits: [{ duration: 60000, limit: 1 }] })',
    redis: false,
  },
  fakeRejects: {
    build: () => ({ consume: () => Promise.reject(userError('consume')) }),
    render: '{ consume: () => Promise.reject(marker("consume")) }',
    redis: false,
  },
  fakeThrows: {
    build: () => ({
      consume() {
        throw userError('consume')
      },
    }),
    render: '{ consume() { throw marker("consume") } }',
    redis: false,
  },
}

const middlewareOptions = optionsArb({
  limiter: { valid: fc.constantFrom(...Object.keys(MIDDLEWARE_LIMITERS)).map((w) => ({ $: 'limiter', w })), required: true },
  key: {
    valid: fc.oneof(
      { weight: 4, arbitrary: fc.record({ $: fc.constant('returns'), v: fc.oneof({ weight: 5, arbitrary: validId }, { weight: 2, arbitrary: hostile }) }) },
      { weight: 1, arbitrary: fc.constant({ $: 'fn', v: 'throws' }) },
    ),
  },
  headers: { valid: fc.boolean() },
  statusCode: { valid: fc.constantFrom(429, 503, 200, 418, 100, 999) },
  message: {
    valid: fc.oneof(
      fc.string({ maxLength: 10 }),
      fc.record({ $: fc.constant('obj'), e: fc.array(fc.tuple(fc.string({ maxLength: 4 }), fc.string({ maxLength: 4 })), { maxLength: 2 }) }),
      fc.record({ $: fc.constant('returns'), v: fc.oneof({ weight: 3, arbitrary: fc.string({ maxLength: 10 }) }, { weight: 1, arbitrary: hostile }) }),
      fc.constant({ $: 'fn', v: 'throws' }),
    ),
  },
  onError: { valid: fc.constantFrom('next', 'allow', 'block') },
  skip: { valid: fc.constantFrom(...['true', 'false', 'throws', 'noop'].map((v) => ({ $: 'fn', v }))) },
}, {
  // The middleware's other options (lib/express.js), which the property leaves at their defaults.
  alsoKnown: ['ipv6Subnet', 'weight', 'identifier', 'handler', 'skipFailedRequests', 'skipSuccessfulRequests', 'requestPropertyName', 'log', 'validate'],
})

const middlewareCase = fc.record({
  options: middlewareOptions,
  requests: fc.array(fc.oneof({ weight: 6, arbitrary: validId }, { weight: 1, arbitrary: hostile }), { minLength: 1, maxLength: 3 }),
})

function renderMiddlewareCase(c) {
  return [
    `const middleware = rateLimit(${render(c.options)})`,
    ...c.requests.map(
      (ip) => `middleware(Object.assign(new http.IncomingMessage(null), { ip: ${render(ip)} }), new http.ServerResponse(req), next)`,
    ),
  ].join('\n')
}

/** One request through the middleware, on a real (socketless) http.ServerResponse. */
async function oneRequest(middleware, ipSpec, ctx, label, redis) {
  trace(label)
  const req = new http.IncomingMessage(null)
  req.ip = build(ipSpec, ctx)
  req.headers = {}
  const res = new http.ServerResponse(req)
  const nexts = []
  let ends = 0
  const end = res.end
  res.end = function (...args) {
    const result = end.apply(this, args)
    ends++
    return result
  }
  const strayCount = strays.length
  try {
    middleware(req, res, (...args) => nexts.push(args))
  } catch (error) {
    if (!(isMarker(error) || isRevokedProxyError(error))) fail(`${label} threw ${describe(error)}`)
    return
  }
  const deadline = Date.now() + CALL_TIMEOUT_MS
  while (nexts.length + ends === 0 && strays.length === strayCount && Date.now() < deadline) await sleep(2)
  await tick()
  const stray = strays.length > strayCount
  await checkStrays()
  if (stray) return // a known unhandled rejection (RATEKEEPER_FUZZ_KNOWN): nothing more to see
  if (nexts.length + ends === 0) fail(`${label}: neither next() nor a response within ${CALL_TIMEOUT_MS} ms (a hang)`)
  if (nexts.length + ends > 1) fail(`${label}: next() called ${nexts.length} times and the response ended ${ends} times`)
  if (nexts.length) {
    const [error] = nexts[0]
    if (error !== undefined) {
      const problem = errorProblem(error, { redis })
      if (problem) fail(`${label} passed a bad error to next(): ${problem}`)
    }
  } else if (!Number.isInteger(res.statusCode) || res.statusCode < 100 || res.statusCode > 999) {
    fail(`${label} answered with the status ${describe(res.statusCode)}`)
  }
}

PROPERTIES.express = () =>
  fc.asyncProperty(renderable(middlewareCase, renderMiddlewareCase), async (c) => {
    beginCase(renderMiddlewareCase(c))
    const ctx = await newCase()
    const made = constructed('rateLimit(options)', () => rateLimit(build(c.options, ctx)), [c.options])
    if (made.value) {
      if (typeof made.value !== 'function') fail(`rateLimit(options) returned ${describe(made.value)}`)
      const limiterSpec = fieldOf(c.options, 'limiter')
      const redis = limiterSpec !== null && typeof limiterSpec === 'object' && limiterSpec.$ === 'limiter' && MIDDLEWARE_LIMITERS[limiterSpec.w].redis
      for (const [i, ip] of c.requests.entries()) {
        await oneRequest(made.value, ip, ctx, `request ${i + 1} (ip ${render(ip)})`, redis)
      }
    }
    await checkStrays()
  })

// ---------------------------------------------------------------------------------------------
// Property: the class API refuses an undefined id (ERR_INVALID_ID) in every method and counts
// nothing; only the callback API's documented "no id = one global limit" is accepted.

const ROLLING_METHOD_NAMES = ['limit', 'limitWithInfo', 'wouldLimit', 'wouldLimitWithInfo', 'clear', 'consume', 'peek', 'reward', 'reset', 'entries', 'wait']

const UNDEFINED_TARGETS = {
  RateLimiter: {
    make: (o) => new RateLimiter(o),
    options: (n) => ({ interval: 60_000, maxInInterval: n }),
    methods: ROLLING_METHOD_NAMES,
    tracked: (l) => l.window.trackedIds,
  },
  InMemoryRateLimiter: {
    make: (o) => new InMemoryRateLimiter(o),
    options: (n) => ({ interval: 60_000, maxInInterval: n }),
    methods: ROLLING_METHOD_NAMES,
    memoryOnly: true,
    tracked: (l) => l.trackedIds,
  },
  RedisRateLimiter: {
    make: (o) => new RedisRateLimiter(o),
    options: (n) => ({ interval: 60_000, maxInInterval: n }),
    methods: ROLLING_METHOD_NAMES,
    redisOnly: true,
  },
  SlidingLog: {
    make: (o) => new SlidingLog(o),
    options: (n) => ({ interval: 60_000, maxInInterval: n }),
    methods: ROLLING_METHOD_NAMES,
    tracked: (l) => l.window.trackedIds,
  },
  // (The counting limiters, from LIMITERS, below.)
  createRateLimit: {
    make: (o) => {
      const { namespace, ...rest } = o
      return createRateLimit('fuzz', { ...rest, namespace: namespace || 'fz' })
    },
    options: () => ({}),
    methods: ['add', 'count', 'addCount'],
    tracked: (l) => l.engine.trackedIds,
  },
}

for (const name of COUNTING_NAMES) {
  UNDEFINED_TARGETS[name] = {
    make: (o) => new ratekeeper[name](o),
    options: (n) => LIMITERS[name].preset(n),
    methods: ['consume', 'peek', 'reward', 'reset', 'wait'],
    tracked: (l) => l.trackedIds,
  }
}

/** Valid wait options that let the limiter see the id (no signal aborted already). */
const WAIT_FIELDS_FOR_ANY_ID = {
  weight: { valid: validWeight },
  timeoutMs: { valid: fc.oneof(validTimeoutMs, fc.constantFrom(Infinity, 1e12)) },
  signal: { valid: signalArb.filter((spec) => spec.$ === 'signal' && spec.v !== 'aborted') },
}

const OPTIONS_OF_METHOD = {
  reward: WEIGHT_FIELDS,
  wait: WAIT_FIELDS_FOR_ANY_ID,
  limit: NOW_FIELDS,
  limitWithInfo: NOW_FIELDS,
  wouldLimit: NOW_FIELDS,
  wouldLimitWithInfo: NOW_FIELDS,
  entries: NOW_FIELDS,
  clear: null,
  reset: null,
  consume: null, // per class, below
  peek: null,
  add: NOW_FIELDS,
  count: NOW_FIELDS,
  addCount: NOW_FIELDS,
}

const undefinedIdCase = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.constantFrom(...Object.keys(UNDEFINED_TARGETS)).chain((target) =>
      fc.constantFrom(...UNDEFINED_TARGETS[target].methods).chain((method) => {
        const log = ['RateLimiter', 'InMemoryRateLimiter', 'RedisRateLimiter', 'SlidingLog'].includes(target)
        const fields = method === 'consume' || method === 'peek' ? (log ? LOG_FIELDS : WEIGHT_FIELDS) : OPTIONS_OF_METHOD[method]
        return fc.record({
          kind: fc.constant('class'),
          target: fc.constant(target),
          redis: UNDEFINED_TARGETS[target].redisOnly ? fc.constant(true) : UNDEFINED_TARGETS[target].memoryOnly ? fc.constant(false) : fc.boolean(),
          namespace: fc.oneof(fc.constant(ABSENT), validNamespace),
          n: fc.integer({ min: 1, max: 3 }),
          method: fc.constant(method),
          form: fc.constantFrom('noArgs', 'undefined', 'undefinedValidOptions', 'undefinedAnyOptions'),
          options: fields ? validOptionsArb(fields) : fc.constant(ABSENT),
          anyOptions: hostile,
          interval: fc.constantFrom(0, 5, 60, 600),
        })
      }),
    ),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('callback'),
      redis: fc.boolean(),
      namespace: fc.oneof(fc.constant(ABSENT), fc.nat(1_000_000).map((n) => `fz:cb:${n}`)),
      n: fc.integer({ min: 1, max: 3 }),
      form: fc.constantFrom('none', 'cb', 'undefined,cb', 'undefined'),
    }),
  },
)

/** An options object whose fields are all valid (some left out). */
function validOptionsArb(fields) {
  const valid = Object.fromEntries(Object.entries(fields).map(([name, field]) => [name, field.valid]))
  return fc.record(valid, { requiredKeys: [] }).map((o) => ({ $: 'obj', e: Object.entries(o) }))
}

function undefinedIdArgs(c) {
  const interval = c.method === 'count' || c.method === 'addCount' ? [c.interval] : []
  switch (c.form) {
    case 'noArgs':
      return []
    case 'undefined':
      return [undefined, ...interval]
    case 'undefinedValidOptions':
      return [undefined, ...interval, isAbsent(c.options) ? ABSENT : c.options]
    default:
      return [undefined, ...interval, c.anyOptions]
  }
}

function renderUndefinedIdCase(c) {
  const ns = isAbsent(c.namespace) ? '' : `, namespace: ${render(c.namespace)}`
  if (c.kind === 'callback') {
    const args = { none: '', cb: 'cb', 'undefined,cb': 'undefined, cb', undefined: 'undefined' }[c.form]
    return `const limiter = RateLimiter({ interval: 60000, maxInInterval: ${c.n}${c.redis ? ', redis: store' : ''}${ns} })\nawait limiter(${args}) // the global limit: accepted`
  }
  const target = UNDEFINED_TARGETS[c.target]
  const parts = [JSON.stringify(target.options(c.n)).replace(/"(\w+)":/g, '$1: ').slice(1, -1)]
  if (c.redis) parts.push('client: store')
  if (ns) parts.push(ns.slice(2))
  const options = `{ ${parts.filter(Boolean).join(', ')} }`
  const make = c.target === 'createRateLimit' ? `createRateLimit("fuzz", ${options})` : `new ${c.target}(${options})`
  return `const limiter = ${make}\nawait limiter.${c.method}(${renderArgs(undefinedIdArgs(c))}) // must reject with ERR_INVALID_ID`
}

PROPERTIES['undefined-id'] = () =>
  fc.asyncProperty(renderable(undefinedIdCase, renderUndefinedIdCase), async (c) => {
    beginCase(renderUndefinedIdCase(c))
    const ctx = await newCase()
    const namespace = isAbsent(c.namespace) ? {} : { namespace: c.namespace }
    if (c.kind === 'callback') {
      const limiter = RateLimiter({ interval: 60_000, maxInInterval: c.n, ...(c.redis ? { redis: liveStore } : {}), ...namespace })
      const cb = ctx.callback()
      const args = { none: [], cb: [cb], 'undefined,cb': [undefined, cb], undefined: [undefined] }[c.form]
      const label = `limiter(${{ none: '', cb: 'cb', 'undefined,cb': 'undefined, cb', undefined: 'undefined' }[c.form]})`
      trace(label)
      const outcome = await outcomeOf(() => limiter(...args))
      await tick()
      if (!outcome.resolved || !isWhole(outcome.value)) {
        fail(`${label}, the callback API's global limit, should resolve a timeLeft, but ${describeOutcome(outcome)}`)
      }
      if (args.includes(cb) && (cb.record.calls.length !== 1 || cb.record.calls[0][0] !== null)) {
        fail(`${label} should call back once with (null, timeLeft, actionsLeft), got ${describe(cb.record.calls)}`)
      }
      await checkStrays()
      return
    }
    const target = UNDEFINED_TARGETS[c.target]
    const limiter = target.make({ ...target.options(c.n), ...(c.redis ? { client: liveStore } : {}), ...namespace })
    const label = `limiter.${c.method}(${renderArgs(undefinedIdArgs(c))})`
    trace(label)
    const args = buildArgs(undefinedIdArgs(c), ctx)
    const outcome = await outcomeOf(() => limiter[c.method](...args))
    await tick()
    // redback's methods take any trailing function as the callback: the error goes there, and
    // the promise resolves undefined.
    if (c.target === 'createRateLimit' && args.slice(1).some((arg) => typeof arg === 'function')) {
      if (!outcome.resolved || outcome.value !== undefined) fail(`${label} should hand its error to the callback, but it ${describeOutcome(outcome)}`)
      await checkStrays()
      return
    }
    if (outcome.resolved || outcome.timeout || outcome.returned) {
      fail(`${label} must reject an undefined id with ERR_INVALID_ID, but it ${describeOutcome(outcome)}`)
    }
    const error = outcome.error
    const problem = errorProblem(error, { redis: c.redis })
    if (problem) fail(`${label} failed with a bad error: ${problem}`)
    const strict = c.form === 'undefined' || c.form === 'undefinedValidOptions' || !['count', 'addCount'].includes(c.method)
    if (c.form !== 'undefinedAnyOptions' && strict && error.code !== 'ERR_INVALID_ID') {
      fail(`${label} must reject with ERR_INVALID_ID, not ${describe(error)}`)
    }
    if (outcome.threw) fail(`${label} threw synchronously instead of rejecting: ${describe(error)}`)
    if (!c.redis && target.tracked && target.tracked(limiter) !== 0) {
      fail(`${label} was rejected, yet the limiter now holds state for ${target.tracked(limiter)} id(s)`)
    }
    await checkStrays()
  })

// ---------------------------------------------------------------------------------------------
// Property: counting stays exact. A limiter of limit N admits, for a fresh id, exactly what a
// model says, whatever rejected calls (each with one invalid argument) and calls on another id
// came in between; at the end it still admits exactly the rest of N.

/**
 * A counting limiter of class `name`, built from `options(n)`, that admits `n` of weight and
 * gives nothing back within a case (its period is years); `wait`: whether waits (on the clock, a
 * few ms after the calls' T) keep the model exact.
 */
function counter(name, options, { wait }) {
  return {
    make: (n, extra) => new ratekeeper[name]({ ...options(n), ...extra }),
    render: (n) => `new ${name}(${JSON.stringify(options(n)).replace(/"(\w+)":/g, '$1: ').replace(/[{,]/g, '$& ').replace(/}/g, ' }')})`,
    methods: ['consume', 'consume', 'peek', 'reward', ...(wait ? ['wait'] : [])],
    fields: ['now', 'weight'],
    arrays: true,
    reward: true,
    wait,
  }
}

const COUNT_KINDS = {
  fixed: counter('FixedWindow', (n) => ({ limits: [{ duration: 1e12, limit: n }] }), { wait: true }),
  sliding: counter('SlidingWindow', (n) => ({ limits: [{ duration: 1e12, limit: n }] }), { wait: true }),
  log: {
    make: (n, extra) => new SlidingLog({ interval: 1e12, maxInInterval: n, ...extra }),
    render: (n) => `new SlidingLog({ interval: 1e12, maxInInterval: ${n} })`,
    methods: ['consume', 'consume', 'peek', 'limit', 'wouldLimit', 'reward', 'wait'],
    fields: ['now', 'weight', 'meta'],
    reward: true,
    wait: true,
  },
  tail: counter('SlidingTail', (n) => ({ limits: [{ duration: 1e12, limit: n }] }), { wait: true }),
  leaky: counter('LeakyBucket', (n) => ({ capacity: n, leakInterval: 1e12 }), { wait: true }),
  token: counter('TokenBucket', (n) => ({ capacity: n, refillInterval: 1e12 }), { wait: true }),
  // (No waits: a wait, on the clock, a moment after T leaves the TAT that moment later for calls at T.)
  gcra: counter('Gcra', (n) => ({ limit: n, period: 1e11 }), { wait: false }),
  limit: {
    make: (n, extra, c) => new RateLimiter({ interval: 1e12, maxInInterval: n, recordBlocked: c.recordBlocked, ...extra }),
    render: (n, c) => `new RateLimiter({ interval: 1e12, maxInInterval: ${n}, recordBlocked: ${c.recordBlocked} })`,
    methods: ['limit', 'limitWithInfo', 'wouldLimit', 'wouldLimitWithInfo', 'consume', 'peek'],
    fields: ['now'],
  },
  redback: {
    make: (n, extra) => createRateLimit('act', { bucket_span: 10_800, bucket_interval: 3600, subject_expiry: 10_800, namespace: 'fz', ...extra }),
    render: () => 'createRateLimit("act", { bucket_span: 10800, bucket_interval: 3600, subject_expiry: 10800 })',
    methods: ['add', 'add', 'addCount', 'count'],
    fields: ['now'],
    arrays: true,
  },
}

const INVALID = {
  id: fc.constantFrom(
    null, '', NaN, Infinity, -Infinity, true, false, 1n, 'x'.repeat(1025), 'é'.repeat(513), '\uD800'.repeat(342),
    { $: 'obj', e: [] }, { $: 'sym', d: 'id' }, { $: 'fn', v: 'noop' }, { $: 'boxedString' }, { $: 'toPrim', v: 'a' },
    { $: 'date' }, { $: 'proxy', t: { $: 'obj', e: [] }, traps: TRAPS }, { $: 'big', n: 1 << 20, c: 'x' },
  ),
  /** Also valid ids wrapped wrongly (the rolling window takes no array). */
  idForLog: fc.constantFrom({ $: 'arr', a: ['a'] }, { $: 'arr', a: [] }, { $: 'proxy', t: { $: 'arr', a: ['a'] }, traps: [] }),
  // (null is no options, like undefined)
  options: fc.constantFrom(5, 'x', true, 1n, { $: 'arr', a: [] }, { $: 'sym', d: 'o' }),
  now: fc.constantFrom(-1, NaN, Infinity, -Infinity, 4e12 + 1, 1e16, 1e400, -1e-300, '5', null, true, 5n, { $: 'obj', e: [] }, { $: 'sym', d: 'n' }),
  weight: fc.constantFrom(0, -1, 0.5, 1.5, NaN, Infinity, 1e15 + 2, 2 ** 53, 1e308, -0, '1', null, true, 1n),
  meta: fc.constantFrom(5, 'x'.repeat(1025), 'é'.repeat(513), null, true, { $: 'obj', e: [] }),
  unknown: fc.constantFrom('nwo', 'Now', 'weights', '', 'interval', 'when', 'metadata'),
  traps: fc.constantFrom(['get'], ['ownKeys'], ['get', 'ownKeys'], ['ownKeys', 'getOwnPropertyDescriptor'], ['get', 'has', 'ownKeys']),
  interval: fc.constantFrom(NaN, -1, 10_801, 1e400, '5', null, true, { $: 'obj', e: [] }, ABSENT),
}

const countsCase = fc
  .record({
    kind: fc.constantFrom(...Object.keys(COUNT_KINDS)),
    redis: fc.boolean(),
    n: fc.integer({ min: 1, max: 4 }),
    recordBlocked: fc.boolean(),
    f: validId,
    g: validId,
    gVariant: fc.nat(),
    steps: fc.array(
      fc.oneof(
        { weight: 4, arbitrary: fc.record({ t: fc.constant('F'), w: fc.integer({ min: 1, max: 5 }) }) },
        { weight: 2, arbitrary: fc.record({ t: fc.constant('G'), w: fc.integer({ min: 1, max: 5 }) }) },
        { weight: 1, arbitrary: fc.constant({ t: 'resetF' }) },
        { weight: 2, arbitrary: fc.record({ t: fc.constant('rewardF'), w: fc.integer({ min: 1, max: 5 }) }) },
        { weight: 2, arbitrary: fc.record({ t: fc.constant('waitF'), w: fc.integer({ min: 1, max: 5 }) }) },
        {
          weight: 5,
          arbitrary: fc.record({
            t: fc.constant('bad'),
            method: fc.nat(),
            slot: fc.constantFrom('id', 'id', 'idArray', 'options', 'now', 'weight', 'meta', 'unknown', 'getter', 'proxy', 'interval'),
            id: INVALID.id,
            idForLog: INVALID.idForLog,
            options: INVALID.options,
            now: INVALID.now,
            weight: INVALID.weight,
            meta: INVALID.meta,
            unknown: INVALID.unknown,
            traps: INVALID.traps,
            interval: INVALID.interval,
            getterOn: fc.constantFrom('now', 'weight', 'meta'),
          }),
        },
      ),
      { minLength: 1, maxLength: 12 },
    ),
  })
  .map((c) => ({ ...c, gId: neighbourOf(c.f, c.g, c.gVariant) }))

/** Another id, often one that only differs from `f` by what UTF-8 conversion could blur. */
function neighbourOf(f, g, variant) {
  const s = String(f)
  const candidates = [
    g,
    `${s}\uD800`,
    `${s}\uDFFF`,
    `${s}\uFFFD`,
    s.replace(/[\uD800-\uDFFF]/, '\uDFFF'),
    s.replace(/[\uD800-\uDFFF]/, '\uFFFD'),
    s.replace(/\uFFFD/, '\uD800'),
    `\uD800${s.slice(1)}`,
    s.normalize('NFD'),
    s.toUpperCase(),
    `${s}\0`,
    `${s} `,
  ]
    .filter((id) => (typeof id === 'number' ? Number.isFinite(id) : isValidIdString(id)))
    .filter((id) => !(known('lone-surrogates') && blurred(id) === blurred(f) && String(id) !== s))
  return candidates.length ? candidates[variant % candidates.length] : g
}

/** An id as UTF-8 conversion sees it: lone surrogates become U+FFFD. */
const blurred = (id) => String(id).toWellFormed()

/** The known defects that could explain a wrong count in case `c`. */
function countSuspects(c) {
  const tags = new Set()
  for (const step of c.steps) {
    if (step.t !== 'bad') continue
    if (step.slot === 'getter' || step.slot === 'proxy') tags.add('user-error-counted')
    if (step.slot === 'idArray' && c.kind === 'redback') tags.add('redback-partial-add')
  }
  if (blurred(c.f) === blurred(c.gId) && String(c.f) !== String(c.gId)) tags.add('lone-surrogates')
  return tags.size ? ` [tags of known defects that may explain it: ${[...tags].join(', ')}]` : ''
}

/** The spec of a call that has exactly one invalid argument, or null when `step.slot` does not apply. */
function badCall(c, step) {
  if (known('user-error-counted') && (step.slot === 'getter' || step.slot === 'proxy')) return null
  if (known('redback-partial-add') && step.slot === 'idArray' && c.kind === 'redback') return null
  const kind = COUNT_KINDS[c.kind]
  const m = kind.methods[step.method % kind.methods.length]
  const redback = c.kind === 'redback'
  const counts = m === 'count' || m === 'addCount'
  const fields = m === 'limit' || m === 'wouldLimit' || m === 'limitWithInfo' || m === 'wouldLimitWithInfo' ? ['now'] : m === 'wait' ? ['weight'] : m === 'reward' ? ['now', 'weight'] : kind.fields
  const validOptions = () => ({
    $: 'obj',
    e: [...fields.filter((f) => f !== 'meta').map((f) => [f, f === 'now' ? { $: 'T', o: 0 } : 1]), ...(m === 'wait' ? [['timeoutMs', 0]] : [])],
  })
  let id = c.f
  let options = validOptions()
  let interval = 10_800
  switch (step.slot) {
    case 'id':
      id = step.id
      break
    case 'idArray':
      if (redback && m !== 'add') return null
      id = kind.arrays
        ? { $: 'arr', a: [c.f, step.id] }
        : step.idForLog
      break
    case 'options':
      // count and addCount spread their options (`{ ...options, interval }`): a non-object reads
      // as no options there.
      if (redback && counts) return null
      options = step.options
      break
    case 'now':
      if (!fields.includes('now')) return null
      options.e = options.e.map(([k, v]) => [k, k === 'now' ? step.now : v])
      break
    case 'weight':
      if (!fields.includes('weight')) return null
      options.e = options.e.map(([k, v]) => [k, k === 'weight' ? step.weight : v])
      break
    case 'meta':
      if (!fields.includes('meta')) return null
      options.e.push(['meta', step.meta])
      break
    case 'unknown':
      if (fields.includes(step.unknown) || (redback && step.unknown === 'interval')) return null
      options.e.push([step.unknown, 1])
      break
    case 'getter':
      if (!fields.includes(step.getterOn)) return null
      options = { $: 'getter', e: options.e, k: step.getterOn }
      break
    case 'proxy':
      options = { $: 'proxy', t: options, traps: step.traps }
      break
    case 'interval':
      if (!counts) return null
      interval = step.interval
      break
    default:
      return null
  }
  const args = counts ? [id, interval, options] : [id, options]
  return { m, args }
}

/** A valid call that counts `w` for `id` (redback counts 1), at T. */
function goodCall(c, id, w) {
  switch (c.kind) {
    case 'limit':
      return { m: 'limit', args: [id, { $: 'obj', e: [['now', { $: 'T', o: 0 }]] }] }
    case 'redback':
      return { m: 'add', args: [id, { $: 'obj', e: [['now', { $: 'T', o: 0 }]] }] }
    default:
      return { m: 'consume', args: [id, { $: 'obj', e: [['now', { $: 'T', o: 0 }], ['weight', w]] }] }
  }
}

function renderCountsCase(c) {
  const lines = [`const limiter = ${COUNT_KINDS[c.kind].render(c.n, c)}${c.redis ? ' // with client: store and a namespace of its own' : ''}`]
  for (const step of c.steps) {
    if (step.t === 'F' || step.t === 'G') {
      const call = goodCall(c, step.t === 'F' ? c.f : c.gId, step.w)
      lines.push(`await limiter.${call.m}(${renderArgs(call.args)})`)
    } else if (step.t === 'resetF') {
      lines.push(c.kind === 'redback' ? '// (no reset in redback)' : `await limiter.reset(${render(c.f)})`)
    } else if (step.t === 'rewardF') {
      if (COUNT_KINDS[c.kind].reward) lines.push(`await limiter.reward(${render(c.f)}, { now: T, weight: ${step.w} })`)
    } else if (step.t === 'waitF') {
      if (COUNT_KINDS[c.kind].wait) lines.push(`await limiter.wait(${render(c.f)}, { weight: ${step.w}, timeoutMs: 60000 }) // on the clock`)
    } else {
      const call = badCall(c, step)
      if (call) lines.push(`await limiter.${call.m}(${renderArgs(call.args)}) // must reject`)
    }
  }
  const ids = String(c.f) === String(c.gId) ? render(c.f) : `${render(c.f)} and ${render(c.gId)} must each`
  lines.push(`// then ${ids} must be admitted exactly what remains of ${c.n}`)
  return lines.join('\n')
}

let countsCaseNumber = 0

PROPERTIES.counts = () =>
  fc.asyncProperty(renderable(countsCase, renderCountsCase), async (c) => {
    beginCase(renderCountsCase(c))
    const ctx = await newCase()
    const kind = COUNT_KINDS[c.kind]
    const redback = c.kind === 'redback'
    const namespace = `fz:count:${process.pid}:${++countsCaseNumber}:`
    const extra = c.redis ? { client: liveStore, namespace } : {}
    const limiter = kind.make(c.n, extra, c)
    const used = new Map()
    const key = (id) => String(id)
    const usedOf = (id) => used.get(key(id)) || 0
    const valid = async (id, w) => {
      const call = goodCall(c, id, w)
      const label = `limiter.${call.m}(${renderArgs(call.args)})`
      trace(label)
      const outcome = await outcomeOf(() => limiter[call.m](...buildArgs(call.args, ctx)))
      if (!outcome.resolved) fail(`${label}, a valid call, ${describeOutcome(outcome)}`)
      const before = usedOf(id)
      if (redback) {
        used.set(key(id), before + 1)
        return
      }
      const weight = c.kind === 'limit' ? 1 : w
      const expected = before + weight <= c.n
      const allowed = c.kind === 'limit' ? outcome.value === false : outcome.value.allowed
      if (allowed !== expected) {
        fail(`${label} was ${allowed ? 'allowed' : 'refused'}, but ${before} of ${c.n} had been used for ${render(id)}: a wrong count (answer ${describe(outcome.value)})${countSuspects(c)}`)
      }
      if (allowed) used.set(key(id), before + weight)
      if (c.kind !== 'limit' && outcome.value.remaining !== c.n - usedOf(id)) {
        fail(`${label} says remaining ${outcome.value.remaining}, but ${usedOf(id)} of ${c.n} are used for ${render(id)}${countSuspects(c)}`)
      }
    }
    /** reward(f): gives back what was used, down to nothing; answers what is left. */
    const reward = async (id, w) => {
      const label = `limiter.reward(${render(id)}, { now: T, weight: ${w} })`
      trace(label)
      const outcome = await outcomeOf(() => limiter.reward(build(id, ctx), { now: ctx.T, weight: w }))
      if (!outcome.resolved) fail(`${label}, a valid call, ${describeOutcome(outcome)}`)
      used.set(key(id), Math.max(0, usedOf(id) - w))
      if (outcome.value.remaining !== c.n - usedOf(id)) {
        fail(`${label} says remaining ${outcome.value.remaining}, but ${usedOf(id)} of ${c.n} are used for ${render(id)} after it: a wrong count${countSuspects(c)}`)
      }
    }
    /**
     * wait(f): allowed at once, or never (a RangeError), or ERR_WAIT_TIMEOUT at once (what is
     * used comes back in years). (A timeoutMs of 0 could end a wait before Redis answers, and
     * the action it charged would be given back at a moment the model cannot know.)
     */
    const waitNow = async (id, w) => {
      const label = `limiter.wait(${render(id)}, { weight: ${w}, timeoutMs: 60000 })`
      trace(label)
      const outcome = await outcomeOf(() => limiter.wait(build(id, ctx), { weight: w, timeoutMs: 60_000 }))
      const before = usedOf(id)
      const expected = w > c.n ? 'ERR_INVALID_ARGUMENT' : before + w <= c.n ? 'allowed' : 'ERR_WAIT_TIMEOUT'
      const got = outcome.resolved ? (outcome.value.allowed ? 'allowed' : 'refused') : outcome.rejected ? outcome.error?.code : 'no answer'
      if (got !== expected) {
        fail(`${label}, with ${before} of ${c.n} used for ${render(id)}, should end ${expected}, but it ${describeOutcome(outcome)}: a wrong count${countSuspects(c)}`)
      }
      if (got !== 'allowed') return
      used.set(key(id), before + w)
      if (outcome.value.remaining !== c.n - usedOf(id)) {
        fail(`${label} says remaining ${outcome.value.remaining}, but ${usedOf(id)} of ${c.n} are used for ${render(id)}${countSuspects(c)}`)
      }
    }
    for (const step of c.steps) {
      if (step.t === 'F') await valid(c.f, step.w)
      else if (step.t === 'G') await valid(c.gId, step.w)
      else if (step.t === 'rewardF') {
        if (kind.reward) await reward(c.f, step.w)
      } else if (step.t === 'waitF') {
        if (kind.wait) await waitNow(c.f, step.w)
      }
      else if (step.t === 'resetF') {
        if (redback) continue
        trace(`limiter.reset(${render(c.f)})`)
        const outcome = await outcomeOf(() => limiter.reset(build(c.f, ctx)))
        if (!outcome.resolved) fail(`limiter.reset(${render(c.f)}) ${describeOutcome(outcome)}`)
        used.set(key(c.f), 0)
      } else {
        const call = badCall(c, step)
        if (!call) continue
        const label = `limiter.${call.m}(${renderArgs(call.args)})`
        trace(label)
        const outcome = await outcomeOf(() => limiter[call.m](...buildArgs(call.args, ctx)))
        if (outcome.resolved || outcome.returned) fail(`${label} has an invalid argument, yet it ${describeOutcome(outcome)}`)
        if (outcome.timeout) fail(`${label} did not settle within ${CALL_TIMEOUT_MS} ms (a hang)`)
        const problem = errorProblem(outcome.error, { redis: c.redis })
        if (problem) fail(`${label} failed with a bad error: ${problem}`)
      }
    }
    // What is left for each id: exactly N minus what the model used.
    for (const id of key(c.f) === key(c.gId) ? [c.f] : [c.f, c.gId]) {
      if (redback) {
        const label = `limiter.count(${render(id)}, 10800, { now: T })`
        trace(label)
        const outcome = await outcomeOf(() => limiter.count(id, 10_800, { now: ctx.T }))
        if (!outcome.resolved || outcome.value !== usedOf(id)) {
          fail(`${label} should be ${usedOf(id)} (the valid adds), but it ${describeOutcome(outcome)}: a wrong count${countSuspects(c)}`)
        }
        continue
      }
      const left = c.n - usedOf(id)
      for (let i = 0; i < left; i++) await valid(id, 1)
      await valid(id, 1)
    }
    await checkStrays()
  })

// ---------------------------------------------------------------------------------------------
// Property: redback's circle counts every add, whatever its size (bucket_span / bucket_interval).

const circleCase = fc.record({
  interval: fc.constantFrom(1, 5, 60, 3600),
  buckets: fc.integer({ min: 1, max: 8 }),
  expiryLaps: fc.integer({ min: 1, max: 3 }),
  redis: fc.boolean(),
  offsets: fc.array(fc.double({ min: 0, max: 0.999, noNaN: true }), { minLength: 1, maxLength: 6 }),
})

function renderCircleCase(c) {
  const span = c.interval * c.buckets
  return [
    `const ratelimit = createRateLimit("act", { bucket_span: ${span}, bucket_interval: ${c.interval}, subject_expiry: ${span * c.expiryLaps}${c.redis ? ', client: store' : ''} })`,
    `// B = the start of a bucket; adds at B + ${c.offsets.map((o) => Math.floor(o * c.interval * 1000)).join(', B + ')} (one bucket)`,
    ...c.offsets.map((o) => `await ratelimit.add("s", { now: B + ${Math.floor(o * c.interval * 1000)} })`),
    `await ratelimit.count("s", ${span}, { now: B + ${Math.floor(Math.max(...c.offsets) * c.interval * 1000)} }) // must be ${c.offsets.length}`,
  ].join('\n')
}

let circleCaseNumber = 0

PROPERTIES['redback-circle'] = () =>
  fc.asyncProperty(renderable(circleCase, renderCircleCase), async (c) => {
    beginCase(renderCircleCase(c))
    const ctx = await newCase()
    const span = c.interval * c.buckets
    const options = { bucket_span: span, bucket_interval: c.interval, subject_expiry: span * c.expiryLaps }
    if (c.redis) Object.assign(options, { client: liveStore, namespace: `fz:circle:${process.pid}:${++circleCaseNumber}` })
    if (c.buckets < 3) {
      // An add empties the two buckets ahead: a circle of 1 or 2 would empty the current one.
      const outcome = await outcomeOf(() => createRateLimit('act', options))
      if (!outcome.threw || outcome.error?.code !== 'ERR_INVALID_OPTION' || outcome.error?.name !== 'RangeError') {
        fail(`a circle of ${c.buckets} bucket(s) ${describeOutcome(outcome)}, not a RangeError ERR_INVALID_OPTION`)
      }
      return
    }
    const ratelimit = createRateLimit('act', options)
    const bucketMs = c.interval * 1000
    const start = Math.floor(ctx.T / bucketMs) * bucketMs
    const times = c.offsets.map((o) => start + Math.floor(o * bucketMs))
    for (const [i, now] of times.entries()) {
      trace(`ratelimit.add("s", { now: ${now} })`)
      const outcome = await outcomeOf(() => ratelimit.add('s', { now }))
      if (!outcome.resolved) fail(`add #${i + 1} ${describeOutcome(outcome)}`)
    }
    const last = Math.max(...times)
    for (const interval of [span, 0]) {
      trace(`ratelimit.count("s", ${interval}, { now: ${last} })`)
      const outcome = await outcomeOf(() => ratelimit.count('s', interval, { now: last }))
      if (!outcome.resolved || outcome.value !== times.length) {
        fail(`count("s", ${interval}) after ${times.length} adds in one bucket of a circle of ${c.buckets} bucket(s) ${describeOutcome(outcome)}, not ${times.length}: a wrong count`)
      }
    }
    await checkStrays()
  })

// ---------------------------------------------------------------------------------------------
// Self-tests of the parent's reporting: a worker that dies as a native crash would, and one whose
// event loop blocks.

PROPERTIES['self-test-crash'] = () =>
  fc.asyncProperty(fc.nat(), async (n) => {
    beginCase(`// self-test: the worker dies at case #3 (n = ${n})`)
    trace('crash()')
    if (caseNumber === 3) process.kill(process.pid, 'SIGKILL')
  })

PROPERTIES['self-test-hang'] = () =>
  fc.asyncProperty(fc.nat(), async (n) => {
    beginCase(`// self-test: the event loop blocks at case #2 (n = ${n})`)
    trace('block()')
    if (caseNumber === 2) {
      await sleep(600) // a heartbeat or two first
      for (;;);
    }
  })

// ---------------------------------------------------------------------------------------------

function failureReport(details) {
  const error = details.errorInstance
  const message = error instanceof Violation ? error.message : error && error.stack ? error.stack : String(error)
  return `${fc.defaultReportMessage(details)}\n\nWhat went wrong: ${message}\n\nThe names in the counterexample:\n${PREAMBLE}`
}

async function main() {
  const send = (message) => (process.send ? process.send(message) : console.log(JSON.stringify(message)))
  const beat = setInterval(() => send({ type: 'beat', cases: caseNumber + 1 }), 500)
  await openStores()
  send({ type: 'beat', cases: 0 }) // started: from now on, silence means a blocked event loop
  const make = PROPERTIES[config.property]
  if (!make) throw new Error(`fuzz-worker: no property ${config.property}`)
  const property = make()
  catchStrays()
  const parameters = { seed: config.seed, numRuns: config.numRuns }
  if (config.path) parameters.path = config.path
  const details = await fc.check(property, parameters)
  clearInterval(beat)
  const result = {
    type: 'result',
    failed: details.failed,
    numRuns: details.numRuns,
    cases: caseNumber + 1,
    seed: details.seed,
    path: details.counterexamplePath,
    report: details.failed ? failureReport(details) : '',
    stats: waitStats.resolved + waitStats.timedOut + waitStats.aborted + waitStats.refused ? { ...stats, waits: waitStats } : stats,
  }
  if (process.send) process.send(result, () => process.exit(0))
  else {
    console.log(result.failed ? result.report : `ok: ${result.numRuns} runs ${JSON.stringify(stats)}`)
    process.exit(result.failed ? 1 : 0)
  }
}

main().catch((error) => {
  console.error(error)
  process.exit(70)
})
