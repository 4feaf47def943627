'use strict'

// The package's two module systems and its public surface: `import` and `require` of
// 'ratekeeper' and 'ratekeeper/express-rate-limit' (through package.json's `exports`, as an app
// meets them) give the very same objects, every documented export is importable by name from
// ESM, and the root exports what index.d.ts documents and nothing else.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')

const root = path.join(__dirname, '..')

/** The values index.d.ts declares in its namespace (functions, classes, constants, native classes). */
function documentedValues() {
  const declarations = fs.readFileSync(path.join(root, 'index.d.ts'), 'utf8')
  const native = fs.readFileSync(path.join(root, 'binding.d.ts'), 'utf8')
  const names = [...declarations.matchAll(/^export (?:const|function|class) (\w+)/gm)].map((m) => m[1])
  for (const [, name, target] of declarations.matchAll(/^export import (\w+) = binding\.(\w+)/gm)) {
    if (new RegExp(`^export declare (?:class|function|const) ${target}\\b`, 'm').test(native)) names.push(name)
  }
  return [...new Set(names)].sort()
}

describe('ESM and CommonJS', () => {
  it('import gives the very objects require gives, by name and as the default', async () => {
    const cjs = require('ratekeeper')
    const esm = await import('ratekeeper')
    assert.equal(esm.default, cjs)
    assert.equal(esm.default, cjs.RateLimiter)
    const named = Object.keys(esm).filter((name) => name !== 'default').sort()
    assert.deepEqual(named, Object.keys(cjs).filter((name) => name !== 'default').sort())
    for (const name of named) assert.equal(esm[name], cjs[name], name)
  })

  it('one class of each limiter: instanceof holds across import and require, and state is shared', async () => {
    const cjs = require('ratekeeper')
    const { FixedWindow, RateLimiter } = await import('ratekeeper')
    const limiter = new FixedWindow({ limits: [{ duration: 1000, limit: 2 }] })
    assert.ok(limiter instanceof cjs.FixedWindow)
    assert.ok(new cjs.RateLimiter({ interval: 1000, maxInInterval: 1 }) instanceof RateLimiter)
    // The callback API, called through the ESM default export, answers in the CommonJS module's state.
    const callback = (await import('ratekeeper')).default({ interval: 1000, maxInInterval: 1 })
    assert.ok(callback.limiter instanceof cjs.InMemoryRateLimiter)
    assert.equal((await limiter.consume('a', { now: 5 })).remaining, 1)
    assert.equal((await limiter.consume('a', { now: 6 })).remaining, 0)
    assert.deepEqual(await limiter.consume('a', { now: 7 }), { allowed: false, timeLeft: 993, remaining: 0, limit: 2, resetAfter: 993 })
  })

  it('ratekeeper/express-rate-limit: the same Store from import and require', async () => {
    const esm = await import('ratekeeper/express-rate-limit')
    const cjs = require('ratekeeper/express-rate-limit')
    assert.equal(esm.Store, cjs.Store)
    assert.equal(esm.default, cjs)
  })

  it('every entry of the exports map exists and is in the published files', () => {
    const { exports, files } = require('../package.json')
    for (const [subpath, conditions] of Object.entries(exports)) {
      if (subpath.includes('*')) {
        // A pattern (`./flexible/lib/*`): files of a published directory.
        const directory = path.dirname(conditions)
        assert.ok(fs.existsSync(path.join(root, directory)), subpath)
        assert.ok(files.some((file) => directory.slice(2).startsWith(file.replace(/\/$/, ''))), `${conditions} is published`)
        continue
      }
      const targets = typeof conditions === 'string' ? [conditions] : Object.values(conditions)
      assert.ok(subpath === './package.json' || Object.keys(conditions).join() === 'types,import,require,default', subpath)
      for (const target of targets) {
        assert.ok(fs.existsSync(path.join(root, target)), target)
        assert.ok(target === './package.json' || files.includes(target.slice(2)), `${target} is published`)
      }
    }
  })
})

describe('the public surface', () => {
  it('the root exports exactly the values index.d.ts documents', () => {
    const exported = Object.keys(require('ratekeeper')).filter((name) => name !== 'default').sort()
    assert.deepEqual(exported, documentedValues())
  })

  it('the native engines stay internal', async () => {
    const esm = await import('ratekeeper')
    for (const name of ['FixedWindowEngine', 'SlidingWindowEngine', 'BucketCircleEngine', 'RollingWindow', 'setAnswerHandler', 'RateLimit']) {
      assert.equal(require('ratekeeper')[name], undefined, name)
      assert.equal(esm[name], undefined, name)
    }
    assert.throws(() => require('ratekeeper/binding.js'), { code: 'ERR_PACKAGE_PATH_NOT_EXPORTED' })
    assert.throws(() => require('ratekeeper/lib/engine.js'), { code: 'ERR_PACKAGE_PATH_NOT_EXPORTED' })
  })

  it('no limiter class carries its engine, and a subclass of one still finds it', async () => {
    const ratekeeper = require('ratekeeper')
    for (const name of ['FixedWindow', 'SlidingWindow', 'SlidingTail', 'LeakyBucket', 'TokenBucket', 'Gcra']) {
      assert.deepEqual(Object.getOwnPropertyNames(ratekeeper[name]).sort(), ['length', 'name', 'prototype'], name)
    }
    class PerUser extends ratekeeper.FixedWindow {}
    const limiter = new PerUser({ limits: [{ duration: 1000, limit: 2 }] })
    assert.equal((await limiter.consume('u', { now: 0 })).remaining, 1)
    // The shared base class is no limiter of its own.
    const Base = Object.getPrototypeOf(ratekeeper.FixedWindow)
    assert.throws(() => new Base({ limits: [] }), { name: 'TypeError', code: 'ERR_INVALID_ARGUMENT' })
  })
})
