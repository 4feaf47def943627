'use strict'

// Scripts as Redis Functions (src/store/script.rs): on Redis 7 and later (and Valkey) every
// limiter's calls go as FCALL of a library the store loads itself, and answer exactly as the same
// calls sent as EVALSHA (`functions: false`, and Redis 6.2). A user not allowed FCALL or FUNCTION
// LOAD gets EVALSHA, with no call failing.

const { describe, it, before, after } = require('node:test')
const assert = require('node:assert/strict')

const { FixedWindow, RedisStore } = require('..')
const { LIMITERS, ONE_ID } = require('./helpers/limiters.js')
const { commandsRun } = require('./helpers/command-stats.js')
const { startRedis, serverSupports } = require('./helpers/redis-server.js')
const { random } = require('./helpers/random.js')

const T0 = 1_700_000_000_000
const NO_FUNCTIONS = serverSupports.version < 7 && 'Functions are Redis 7 and later'

/** A call's outcome, comparable: its answer, or the code of its error. */
const settle = (promise) => promise.then((value) => ({ value }), (error) => ({ error: error.code ?? String(error) }))

/** The names of ratekeeper's Function libraries on `server`. */
async function libraries(server) {
  const list = await server.cli('FUNCTION', 'LIST', 'LIBRARYNAME', 'ratekeeper_*')
  return [...list.matchAll(/^library_name\n(ratekeeper_[a-z_]+_[0-9a-f]{12})$/gm)].map((m) => m[1]).sort()
}

/** 40 calls of `name` (lone, then four at once) on `store`, the same for the same seed. */
async function calls(name, store, namespace) {
  const limiter = LIMITERS[name]({ client: store, namespace })
  const rand = random(7)
  const ids = ONE_ID.has(name) ? ['a'] : ['a', 'b', 'c']
  const pick = () => ids[Math.floor(rand() * ids.length)]
  const answers = []
  let now = T0
  for (let i = 0; i < 20; i++) {
    now += Math.floor(rand() * 120)
    const weight = 1 + Math.floor(rand() * 2)
    answers.push(await settle(rand() < 0.8 ? limiter.consume(pick(), { now, weight }) : limiter.peek(pick(), { now, weight })))
  }
  for (let i = 0; i < 5; i++) {
    now += Math.floor(rand() * 120)
    const at = now
    answers.push(...(await Promise.all([0, 1, 2, 3].map(() => settle(limiter.consume(pick(), { now: at }))))))
  }
  return answers
}

describe('scripts as Redis Functions', { skip: NO_FUNCTIONS }, () => {
  let server
  before(async () => {
    server = await startRedis()
  })
  after(() => server?.stop())

  it('runs every limiter as FCALL of its library, and with `functions: false` as EVALSHA: the same answers', async () => {
    const store = new RedisStore(server.url)
    const evalOnly = new RedisStore({ url: server.url, functions: false })
    try {
      for (const name of Object.keys(LIMITERS)) {
        const asFunctions = {}
        const byFunction = await commandsRun(server, ['fcall', 'evalsha'], async () => {
          asFunctions.answers = await calls(name, store, `fn-${name}:`)
        })
        let byEval
        const asScripts = await commandsRun(server, ['fcall', 'evalsha'], async () => {
          byEval = await calls(name, evalOnly, `ev-${name}:`)
        })
        assert.deepEqual(asFunctions.answers, byEval, name)
        assert.ok(byFunction.fcall >= 25 && !byFunction.evalsha, `${name}: ${JSON.stringify(byFunction)}`)
        assert.ok(asScripts.evalsha >= 25 && !asScripts.fcall, `${name}: ${JSON.stringify(asScripts)}`)
        assert.ok(byEval.every((answer) => answer.value), `${name}: no call failed`)
      }
      // One library per script the limiters use, loaded once (a library already there is kept).
      const loaded = await libraries(server)
      assert.ok(loaded.length >= 5, loaded.join(', '))
      assert.equal(store.stats().scriptLoads, loaded.length)
    } finally {
      await Promise.all([store.close(), evalOnly.close()])
    }
  })

  it('keeps a configuration per limiter: limiters that share a script answer by their own', async () => {
    const store = new RedisStore(server.url)
    try {
      // Twenty limits of one script, called in turn, more than the 16 configurations a Function
      // keeps built: each counts to its own limit.
      const limiters = Array.from({ length: 20 }, (_, i) => new FixedWindow({ client: store, namespace: `cfg${i}:`, limits: [{ duration: 60_000, limit: i + 1 }] }))
      for (let round = 0; round < 3; round++) {
        for (const [i, limiter] of limiters.entries()) {
          const answer = await limiter.consume('u', { now: T0 })
          assert.deepEqual([answer.allowed, answer.remaining], [round <= i, Math.max(0, i - round)], `limit ${i + 1}, call ${round + 1}`)
        }
      }
    } finally {
      await store.close()
    }
  })

  for (const [user, rule, loads] of [
    ['nofcall', '-fcall', 'FUNCTION LOAD allowed'],
    ['noload', '-function', 'no FUNCTION LOAD'],
  ]) {
    it(`a user without ${rule.slice(1).toUpperCase()} gets EVALSHA, and no call fails (${loads})`, async () => {
      await server.cli('FUNCTION', 'FLUSH')
      await server.cli('ACL', 'SETUSER', user, 'on', '>pw', '~*', '&*', '+@all', rule)
      const store = new RedisStore({ port: server.port, username: user, password: 'pw' })
      try {
        const limiter = new FixedWindow({ client: store, namespace: `${user}:`, limits: [{ duration: 60_000, limit: 3 }] })
        const seen = await commandsRun(server, ['fcall', 'evalsha'], async () => {
          const remaining = []
          for (let i = 0; i < 4; i++) remaining.push((await limiter.consume('x', { now: T0 })).remaining)
          remaining.push(...(await Promise.all([0, 1].map(async () => (await limiter.consume('y', { now: T0 })).remaining))))
          assert.deepEqual(remaining, [2, 1, 0, 0, 2, 1])
        })
        // EVALSHA from the first call on: FCALL refused (NOPERM), or not found and FUNCTION LOAD
        // refused (one FCALL run, failed).
        assert.ok(seen.evalsha >= 5, JSON.stringify(seen))
        assert.equal(seen.fcall ?? 0, rule === '-function' ? 1 : 0, JSON.stringify(seen))
        assert.deepEqual(store.stats().failures, { ERR_STORE_UNAVAILABLE: 0, ERR_STORE_ERROR: 0, ERR_STORE_CLOSED: 0 })
        if (rule === '-function') assert.deepEqual(await libraries(server), [])
      } finally {
        await store.close()
      }
    })
  }
})

it('the `functions` option takes a boolean', () => {
  for (const functions of ['yes', 1, {}]) {
    assert.throws(() => new RedisStore({ port: 6390, functions }), (error) => {
      assert.equal(error.code, 'ERR_INVALID_OPTION', String(functions))
      assert.match(error.message, /`functions`/)
      return error instanceof TypeError
    })
  }
})
