'use strict'

// The floor of an in-memory consume through rate-limiter-flexible's API (issue 25): what
// `RateLimiterMemory.consume` must do whatever the store behind it, beside rate-limiter-flexible's
// own consume and ratekeeper/flexible's. Each part runs in a process of its own, its calls
// awaited as an app awaits them (`.then(onAllowed, onRefused)`, as `npm run bench` does), after
// an untimed warm-up; rounds interleave the parts, and each figure is the median over the rounds,
// in ns per call:
//
// - rate-limiter-flexible's and ratekeeper/flexible's `RateLimiterMemory.consume`, every call
//   allowed (points 1e9) and every call refused (points 0: each call still counts, as both do);
// - two parts of any such consume on a native store: a Promise resolved and its `.then` (an allowed
//   call's answer; a refusal rejects, which costs more), and ratekeeper's native call for the
//   count (the expiring counter's fast path: one N-API call, `Date.now()` included). (The key and
//   the RateLimiterRes are left out: alone in a loop, V8 optimizes them away.)
//
// The loop alone (an await per call) is timed too and taken from each part. An allowed consume
// through this API on a native store costs at least the await, the Promise and the native call;
// 2x rate-limiter-flexible's throughput needs the whole consume under half of its.
//
//   node benchmark/memory-floor.js [--rounds 7] [--calls 300000]

const { execFileSync } = require('node:child_process')

const args = Object.fromEntries(process.argv.slice(2).map((v, i, a) => (i % 2 ? null : [v.replace(/^--/, ''), a[i + 1]])).filter(Boolean))
const ROUNDS = Number(args.rounds ?? 7)
const CALLS = Number(args.calls ?? 300_000)
const WARM_UP = 100_000

/** Each part: (ids) => the call to time, `(i) => Promise | value`. */
const PARTS = {
  // What the timing loop itself costs a call (an await): taken from each part below.
  'the loop alone (an await)': () => (i) => i,
  "rate-limiter-flexible's consume, allowed": (keys) => consumeOf(require('rate-limiter-flexible').RateLimiterMemory, 1e9, keys),
  "ratekeeper/flexible's consume, allowed": (keys) => consumeOf(require('../flexible.js').RateLimiterMemory, 1e9, keys),
  "rate-limiter-flexible's consume, refused": (keys) => consumeOf(require('rate-limiter-flexible').RateLimiterMemory, 0, keys),
  "ratekeeper/flexible's consume, refused": (keys) => consumeOf(require('../flexible.js').RateLimiterMemory, 0, keys),
  'a resolved Promise and its .then': () => {
    const noop = () => {}
    return (i) => Promise.resolve(i).then(noop, noop)
  },
  "ratekeeper's native call (the count, Date.now() included)": (keys) => {
    const { ExpiringCounterEngine } = require('../lib/native.js')
    const engine = new ExpiringCounterEngine({ durationMs: 60_000 }, null)
    const fast = engine.fastPath(new Float64Array(5))
    const rlKeys = keys.map((key) => `rlflx:${key}`)
    return (i) => fast(0, rlKeys[i], 1, Date.now())
  },
}

function consumeOf(RateLimiterMemory, points, keys) {
  const limiter = new RateLimiterMemory({ points, duration: 60 })
  const onAllowed = () => {}
  const onRefused = () => {}
  return (i) => limiter.consume(keys[i]).then(onAllowed, onRefused)
}

/** In a child: times `CALLS` calls of one part over `ids` ids; prints ns per call. */
async function child(part, ids) {
  const names = Array.from({ length: ids }, (_, i) => `user-${i}`)
  const keys = Array.from({ length: CALLS }, (_, i) => names[(i * 7919) % ids])
  const call = PARTS[part](keys)
  for (let i = 0; i < WARM_UP; i++) await call(i % CALLS)
  const started = process.hrtime.bigint()
  for (let i = 0; i < CALLS; i++) await call(i)
  process.stdout.write(String(Number(process.hrtime.bigint() - started) / CALLS))
}

function main() {
  const median = (values) => [...values].sort((a, b) => a - b)[values.length >> 1]
  console.log(`RateLimiterMemory.consume and its floor: ${ROUNDS} rounds of ${CALLS} awaited calls, ns per call (median)\n`)
  for (const ids of [10, 10_000]) {
    const times = Object.fromEntries(Object.keys(PARTS).map((part) => [part, []]))
    for (let round = 0; round < ROUNDS; round++) {
      const order = Object.keys(PARTS)
      if (round % 2) order.reverse()
      for (const part of order) {
        const out = execFileSync(process.execPath, [__filename, '--child', part, '--ids', String(ids), '--calls', String(CALLS)], { encoding: 'utf8' })
        times[part].push(Number(out))
      }
    }
    const loop = median(times['the loop alone (an await)'])
    // Each part's own cost: the loop's taken out (the consumes keep theirs, as an app's await).
    const at = (part) => median(times[part]) - (part.includes('consume') ? 0 : loop)
    console.log(`over ${ids.toLocaleString('en-US')} ids (the loop alone: ${loop.toFixed(0)}, taken from each part):`)
    for (const part of Object.keys(PARTS).slice(1)) console.log(`  ${part}: ${at(part).toFixed(0)}`)
    const floor = loop + at('a resolved Promise and its .then') + at("ratekeeper's native call (the count, Date.now() included)")
    const allowed = at("rate-limiter-flexible's consume, allowed")
    const refused = at("rate-limiter-flexible's consume, refused")
    console.log(`  the floor of an allowed consume (the await, the Promise and the native call): ${floor.toFixed(0)}`)
    console.log(`  half of rate-limiter-flexible's consume: allowed ${(allowed / 2).toFixed(0)}, refused ${(refused / 2).toFixed(0)}`)
    console.log(`  ratekeeper/flexible over rate-limiter-flexible: allowed ${(allowed / at("ratekeeper/flexible's consume, allowed")).toFixed(2)}x, refused ${(refused / at("ratekeeper/flexible's consume, refused")).toFixed(2)}x; at the floor, allowed ${(allowed / floor).toFixed(2)}x\n`)
  }
}

if (args.child !== undefined) child(args.child, Number(args.ids)).then(() => process.exit(0))
else main()
