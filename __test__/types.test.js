'use strict'

// index.d.ts, express-rate-limit.d.ts and binding.d.ts compile under `tsc --strict --noEmit` and
// describe the API as the TypeScript files of __test__/types/ use it (including the calls they
// must reject, each a `// @ts-expect-error` line that fails the build if it compiles):
// - under `module: commonjs`, the files that import the package by path (.ts);
// - under `module: nodenext`, those again (CommonJS .ts files) and the ones that import it by its
//   name through package.json's `exports`, as an ES module (.mts) and as CommonJS (.cts).
// flexible.d.ts also takes code written against rate-limiter-flexible's own declarations:
// flexible-from-rlf.cts compiles as it is, and again with 'rate-limiter-flexible' for
// 'ratekeeper/flexible' against that package's types.d.ts, in both module modes.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const { spawn, spawnSync } = require('node:child_process')
const os = require('node:os')
const path = require('node:path')

const dir = path.join(__dirname, 'types')
const files = (...extensions) => fs.readdirSync(dir).filter((file) => extensions.some((ext) => file.endsWith(ext))).map((file) => path.join(dir, file))

function tsc(flags, inputs) {
  const result = spawnSync(process.execPath, [require.resolve('typescript/bin/tsc'), '--noEmit', '--strict', '--target', 'es2022', ...flags, ...inputs], { encoding: 'utf8' })
  assert.equal(result.status, 0, result.stdout + result.stderr)
}

describe('the type declarations compile and match the documented usage', () => {
  it('module: commonjs', () => {
    const inputs = files('.ts')
    assert.ok(inputs.length >= 3, inputs.join())
    tsc(['--module', 'commonjs', '--esModuleInterop'], inputs)
  })

  it('module: nodenext, as ES modules and as CommonJS, importing the package by its name', () => {
    const inputs = files('.ts', '.mts', '.cts', '.cjs', '.mjs')
    assert.ok(inputs.some((file) => file.endsWith('.mts')) && inputs.some((file) => file.endsWith('.cts')), inputs.join())
    tsc(['--module', 'nodenext', '--allowJs', '--checkJs'], inputs)
  })
})

describe('code written against rate-limiter-flexible\'s declarations compiles against ratekeeper/flexible', () => {
  const fixture = fs.readFileSync(path.join(dir, 'flexible-from-rlf.cts'), 'utf8')
  const specifier = "from 'ratekeeper/flexible'"

  // The fixture as .ts (CommonJS: no "type" in the package.json beside it), .cts and .mts, in a
  // directory of its own whose node_modules/ holds ratekeeper (this repository) and
  // rate-limiter-flexible: 'ours' imports ratekeeper/flexible, 'rlf' rate-limiter-flexible.
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ratekeeper-types-'))
  fs.writeFileSync(path.join(tmp, 'package.json'), '{ "private": true }\n')
  fs.mkdirSync(path.join(tmp, 'node_modules'))
  fs.symlinkSync(path.join(__dirname, '..'), path.join(tmp, 'node_modules', 'ratekeeper'), 'dir')
  fs.symlinkSync(path.dirname(require.resolve('rate-limiter-flexible/package.json')), path.join(tmp, 'node_modules', 'rate-limiter-flexible'), 'dir')
  const copies = {}
  for (const [name, source] of [
    ['ours', fixture],
    ['rlf', fixture.replace(specifier, "from 'rate-limiter-flexible'")],
  ]) {
    fs.mkdirSync(path.join(tmp, name))
    copies[name] = ['ts', 'cts', 'mts'].map((ext) => path.join(tmp, name, `flexible-from-rlf.${ext}`))
    for (const file of copies[name]) fs.writeFileSync(file, source)
  }
  process.on('exit', () => fs.rmSync(tmp, { recursive: true, force: true }))

  // tsc in the directory (no @types/ there: the fixture needs none), the runs side by side.
  function tscIn(flags, inputs) {
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [require.resolve('typescript/bin/tsc'), '--noEmit', '--strict', '--target', 'es2022', ...flags, ...inputs], { cwd: tmp })
      let output = ''
      child.stdout.on('data', (data) => (output += data))
      child.stderr.on('data', (data) => (output += data))
      child.on('error', reject)
      child.on('close', (status) => resolve({ status, output }))
    })
  }
  const runs = {}
  for (const name of ['ours', 'rlf']) {
    runs[name] = {
      commonjs: tscIn(['--module', 'commonjs'], copies[name].slice(0, 1)),
      nodenext: tscIn(['--module', 'nodenext'], copies[name]),
    }
  }

  it('the fixture imports ratekeeper/flexible once, and nothing else', () => {
    assert.equal(fixture.split(specifier).length, 2)
    assert.equal([...fixture.matchAll(/\bfrom '|require\(/g)].length, 1)
  })

  for (const mode of ['commonjs', 'nodenext']) {
    it(`against rate-limiter-flexible's own types.d.ts (the code is rate-limiter-flexible's), module: ${mode}`, async () => {
      const { status, output } = await runs.rlf[mode]
      assert.equal(status, 0, output)
    })

    it(`against ratekeeper/flexible (flexible.d.ts), module: ${mode}`, async () => {
      const { status, output } = await runs.ours[mode]
      assert.equal(status, 0, output)
    })
  }
})
