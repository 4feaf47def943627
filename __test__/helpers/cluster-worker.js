'use strict'

// A worker of __test__/helpers/cluster-primary.js (a cluster worker, or a child process under
// its fake PM2): makes RateLimiterCluster limiters of ratekeeper/flexible or of
// rate-limiter-flexible (CLUSTER_WORKER_LIB `ours` or `rlf`), says `ready`, then runs each phase
// of its scenario the primary tells it to and sends back what every call answered.
//
// The primary requires this file too, for the scenarios' plans (which workers run each phase).

/** A call's outcome: `{ resolved }`, `{ rejected }` (a RateLimiterRes, as JSON) or `{ failed }` (an Error). */
async function outcome(promise) {
  try {
    const value = await promise
    return { resolved: value !== null && typeof value === 'object' ? value.toJSON() : value }
  } catch (error) {
    if (error instanceof Error) return { failed: { name: error.name, message: error.message, code: error.code } }
    return { rejected: error.toJSON() }
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** Runs `[method, ...args]` steps on `limiter` one after the other: their outcomes, each with its step. */
async function steps(limiter, list) {
  const results = []
  for (const [method, ...args] of list) results.push({ step: [method, ...args], ...(await outcome(limiter[method](...args))) })
  return results
}

/** A limiter, once the master has answered its init (a first call is answered after it). */
async function ready(lib, options) {
  const limiter = new lib.RateLimiterCluster(options)
  await limiter.get('warm-up')
  return limiter
}

const scenarios = {
  // Both workers at once: 10 consumes each on two keys, all sent together.
  shared: {
    setup: (lib) => ready(lib, { keyPrefix: 'shared', points: 5, duration: 60 }),
    phases: [
      {
        workers: [0, 1],
        run: async (limiter) => {
          const calls = []
          for (let i = 0; i < 10; i++) for (const key of ['a', 'b']) calls.push(outcome(limiter.consume(key)).then((result) => ({ key, ...result })))
          return Promise.all(calls)
        },
      },
    ],
  },

  // One worker's sequence of every call, then the other one's calls on the keys it left.
  sequence: {
    setup: (lib) => ready(lib, { keyPrefix: 'seq', points: 3, duration: 60, blockDuration: 120 }),
    phases: [
      {
        workers: [0],
        run: (limiter) =>
          steps(limiter, [
            ['get', 'nobody'],
            ['consume', 'k'],
            ['consume', 'k', 2],
            ['consume', 'k'],
            ['get', 'k'],
            ['penalty', 'p', 2],
            ['reward', 'p'],
            ['get', 'p'],
            ['block', 'b', 30],
            ['consume', 'c', 1, { customDuration: 10 }],
            ['delete', 'k'],
            ['delete', 'k'],
            ['get', 'k'],
            ['consume', 'k'],
            ['block', 'forever', 0],
            ['get', 'forever'],
          ]),
      },
      {
        workers: [1],
        run: (limiter) =>
          steps(limiter, [
            ['get', 'p'],
            ['get', 'b'],
            ['get', 'c'],
            ['consume', 'k'],
            ['consume', 'b'],
            ['get', 'nobody'],
          ]),
      },
    ],
  },

  // No master answers.
  timeout: {
    setup: (lib) => new lib.RateLimiterCluster({ keyPrefix: 't', points: 1, duration: 1, timeoutMs: 300 }),
    phases: [{ workers: [0], run: (limiter) => steps(limiter, [['consume', 'k'], ['get', 'k']]) }],
  },

  // The master starts after the workers' limiters (the primary makes it before phase 1).
  late: {
    setup: (lib) => new lib.RateLimiterCluster({ keyPrefix: 'late', points: 5, duration: 60, timeoutMs: 400 }),
    phases: [
      { workers: [0], run: (limiter) => steps(limiter, [['consume', 'k']]) },
      {
        workers: [0],
        run: async (limiter) => {
          // Over a second since the limiter's init (ratekeeper's worker asks again at most once a second).
          await sleep(700)
          return steps(limiter, [['consume', 'k'], ['get', 'k']])
        },
      },
    ],
  },

  // What RateLimiterCluster of ratekeeper adds: set, and a bad argument rejected with its Error.
  extras: {
    setup: (lib) => ready(lib, { keyPrefix: 'extras', points: 5, duration: 60, timeoutMs: 500 }),
    phases: [
      {
        workers: [0],
        run: (limiter) =>
          steps(limiter, [
            ['consume', 'k', 1.5],
            ['set', 's', 4, 30],
            ['get', 's'],
            ['consume', 's'],
            ['consume', 's'],
            ['set', 'forever', 2, 0],
            ['get', 'forever'],
          ]),
      },
    ],
  },

  // Two workers, one keyPrefix, other options: the master keeps the first ones.
  mismatch: {
    setup: () => null,
    phases: [
      {
        workers: [0],
        run: async (_, lib) => {
          await ready(lib, { keyPrefix: 'mm', points: 5, duration: 60 })
          return []
        },
      },
      {
        workers: [1],
        run: async (_, lib) => {
          const warnings = []
          process.on('warning', (warning) => warnings.push({ code: warning.code, message: warning.message }))
          const limiter = await ready(lib, { keyPrefix: 'mm', points: 2, duration: 60 })
          const results = await steps(limiter, [['consume', 'k'], ['consume', 'k'], ['consume', 'k']])
          await sleep(10)
          return { warnings, results }
        },
      },
    ],
  },
}

async function runWorker() {
  const lib = process.env.CLUSTER_WORKER_LIB === 'rlf' ? require('rate-limiter-flexible') : require('../../flexible.js')
  const scenario = scenarios[process.env.CLUSTER_SCENARIO]
  // Never outlive the primary.
  process.on('disconnect', () => process.exit(0))
  let state
  try {
    state = await scenario.setup(lib)
  } catch (error) {
    process.send({ test: 'ready', error: { name: error.name, message: error.message, code: error.code } })
    return
  }
  process.on('message', async (msg) => {
    if (msg === null || typeof msg !== 'object' || msg.test !== 'go') return
    const results = await scenario.phases[msg.phase].run(state, lib)
    process.send({ test: 'done', phase: msg.phase, results })
  })
  process.send({ test: 'ready' })
}

if (require.main === module) runWorker()

module.exports = { scenarios }
