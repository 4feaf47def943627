'use strict'

// The calls waiting for Redis in lib/engine.js: each gets a ticket naming a slot and the slot's
// generation; answers come back in batches (src/binding/dispatch.rs) in any order, and settle the
// call whose ticket they carry, never another one that took the slot since.
//
// A fake engine stands in for the native one here: it records the tickets it is given and
// answers as the test says. The same paths run on a real Redis in every store test.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const v8 = require('node:v8')
const vm = require('node:vm')

const { run, settleAnswers } = require('../lib/engine.js')
const { decodeVerdict } = require('../lib/verdict.js')

const SLOTS = 2 ** 24
const CONSUME = 0
const NO_FAILURES = []

/** An engine whose `run` records each ticket, then does what `next` says (wait, by default). */
function fakeEngine() {
  const engine = {
    tickets: [],
    next: 'wait',
    run(mode, id, options, ticket, out) {
      engine.tickets.push(ticket)
      if (engine.next === 'throw') throw new RangeError('bad argument')
      if (engine.next === 'answer') {
        out.set([1, 0, 7, 10, 500])
        return true
      }
      return false
    },
  }
  return engine
}

/** `answers` for `settleAnswers`: one record of ticket and five values per [ticket, remaining]. */
const answersFor = (pairs) => Float64Array.from(pairs.flatMap(([ticket, remaining]) => [ticket, 1, 0, remaining, 10, 60_000]))

/** Whether `promise` has settled by the time queued microtasks have run. */
async function settled(promise) {
  let done = false
  promise.then(
    () => (done = true),
    () => (done = true),
  )
  await new Promise((resolve) => setImmediate(resolve))
  return done
}

describe('the calls waiting for Redis', () => {
  it('settles each call with the answer of its own ticket, in whatever order the answers come', async () => {
    const engine = fakeEngine()
    const calls = [0, 1, 2].map((i) => run(engine, CONSUME, `id-${i}`, undefined, decodeVerdict))
    const [a, b, c] = engine.tickets
    assert.equal(new Set(engine.tickets).size, 3)
    settleAnswers(answersFor([[c, 3], [a, 1]]), NO_FAILURES)
    settleAnswers(new Float64Array(0), [[b, Object.assign(new Error('down'), { code: 'ERR_STORE_UNAVAILABLE' })]])
    assert.deepEqual(await calls[0], { allowed: true, timeLeft: 0, remaining: 1, limit: 10, resetAfter: 60_000 })
    await assert.rejects(calls[1], { code: 'ERR_STORE_UNAVAILABLE', message: 'down' })
    assert.equal((await calls[2]).remaining, 3)
  })

  it('gives a settled call’s slot to the next call under a new ticket, and drops a late answer for the old one', async () => {
    const engine = fakeEngine()
    const first = run(engine, CONSUME, 'a', undefined, decodeVerdict)
    settleAnswers(answersFor([[engine.tickets[0], 4]]), NO_FAILURES)
    assert.equal((await first).remaining, 4)

    const second = run(engine, CONSUME, 'a', undefined, decodeVerdict)
    const [old, current] = engine.tickets
    assert.equal(current % SLOTS, old % SLOTS, 'the freed slot is taken again')
    assert.notEqual(current, old, 'under another generation')
    // The first call's answer again (a bug upstream) and a failure for it: the second call waits on.
    settleAnswers(answersFor([[old, 99]]), [[old, new Error('stale')]])
    assert.equal(await settled(second), false)
    settleAnswers(answersFor([[current, 5]]), NO_FAILURES)
    assert.equal((await second).remaining, 5)
    // Its answer once more: nothing waits under that ticket any more, and nothing throws.
    settleAnswers(answersFor([[current, 6]]), NO_FAILURES)
  })

  it('frees the slot of a call that throws or answers at once, and ignores anything sent for it later', async () => {
    const engine = fakeEngine()
    engine.next = 'throw'
    await assert.rejects(run(engine, CONSUME, 'a', undefined, decodeVerdict), { name: 'RangeError', message: 'bad argument' })
    engine.next = 'answer'
    assert.deepEqual(await run(engine, CONSUME, 'a', undefined, decodeVerdict), { allowed: true, timeLeft: 0, remaining: 7, limit: 10, resetAfter: 500 })
    engine.next = 'wait'
    const waiting = run(engine, CONSUME, 'a', undefined, decodeVerdict)
    const [thrown, answered, current] = engine.tickets
    assert.equal(new Set([thrown, answered, current].map((ticket) => ticket % SLOTS)).size, 1, 'one slot, taken three times')
    assert.equal(new Set([thrown, answered, current]).size, 3)
    settleAnswers(answersFor([[answered, 1]]), [[thrown, new Error('late failure of a call that threw')]])
    assert.equal(await settled(waiting), false)
    settleAnswers(answersFor([[current, 2]]), NO_FAILURES)
    assert.equal((await waiting).remaining, 2)
  })

  it('lets go of what a call held once it is settled', async () => {
    v8.setFlagsFromString('--expose-gc')
    const gc = vm.runInNewContext('gc')
    const engine = fakeEngine()
    let decode = (values, i) => values[i + 2]
    const held = new WeakRef(decode)
    const call = run(engine, CONSUME, 'a', undefined, decode)
    decode = undefined
    settleAnswers(answersFor([[engine.tickets[0], 3]]), NO_FAILURES)
    assert.equal(await call, 3)
    // (A WeakRef keeps its target until the job that made it ends.)
    await new Promise((resolve) => setImmediate(resolve))
    gc()
    assert.equal(held.deref(), undefined, 'the free slot still holds the call')
  })

  it('keeps 10,000 calls waiting at once apart, and reuses their slots once they are answered', async () => {
    const engine = fakeEngine()
    const calls = Array.from({ length: 10_000 }, (_, i) => run(engine, CONSUME, `id-${i}`, undefined, decodeVerdict))
    const tickets = [...engine.tickets]
    assert.equal(new Set(tickets).size, 10_000)
    // Answered in an order unlike the calls', each with its own index as `remaining`.
    const order = tickets.map((ticket, i) => [ticket, i]).sort(([, i], [, j]) => ((i * 7919) % 10_000) - ((j * 7919) % 10_000))
    settleAnswers(answersFor(order), NO_FAILURES)
    const answers = await Promise.all(calls)
    assert.deepEqual(
      answers.map((answer) => answer.remaining),
      tickets.map((_, i) => i),
    )
    const slots = new Set(tickets.map((ticket) => ticket % SLOTS))
    const again = Array.from({ length: 100 }, () => run(engine, CONSUME, 'b', undefined, decodeVerdict))
    assert.ok(
      engine.tickets.slice(10_000).every((ticket) => slots.has(ticket % SLOTS) && !tickets.includes(ticket)),
      'the next calls take freed slots under new tickets',
    )
    settleAnswers(answersFor(engine.tickets.slice(10_000).map((ticket) => [ticket, 0])), NO_FAILURES)
    await Promise.all(again)
  })
})
