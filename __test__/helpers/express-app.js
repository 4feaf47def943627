'use strict'

// For the middleware's tests: Express apps on free loopback ports, and limiters on a clock the
// test sets (the middleware passes no time to the limiter; these do).

/** Serves `app` on a free port; resolves its base URL and a close function (which drops open connections). */
function serve(app) {
  return new Promise((resolve) => {
    const server = app.listen(0, '127.0.0.1', () => {
      resolve({ url: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => server.close(r).closeAllConnections()) })
    })
  })
}

/** Runs `test(url)` against `app` served on a free port, and closes it. */
async function withApp(app, test) {
  const { url, close } = await serve(app)
  try {
    return await test(url)
  } finally {
    await close()
  }
}

/** `limiter` with its `consume`, `peek` and `reward` made at `clock.now` (ms). */
function clocked(limiter, clock) {
  return new Proxy(limiter, {
    get(target, name) {
      const value = Reflect.get(target, name)
      if (name !== 'consume' && name !== 'peek' && name !== 'reward') return value
      return (ids, options) => value.call(target, ids, { ...options, now: clock.now })
    },
  })
}

/** `limiter` with each `reward` call's promise collected into `rewards`: `{ limiter, rewards }`. */
function spyingRewards(limiter) {
  const rewards = []
  const spy = new Proxy(limiter, {
    get(target, name) {
      const value = Reflect.get(target, name)
      if (name !== 'reward') return value
      return (...args) => {
        const promise = value.apply(target, args)
        rewards.push(promise)
        return promise
      }
    },
  })
  return { limiter: spy, rewards }
}

module.exports = { serve, withApp, clocked, spyingRewards }
