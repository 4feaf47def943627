'use strict'

// index.d.ts, express-rate-limit.d.ts and binding.d.ts compile under `tsc --strict --noEmit` and
// describe the API as the TypeScript files of __test__/types/ use it (including the calls they
// must reject, each a `// @ts-expect-error` line that fails the build if it compiles):
// - under `module: commonjs`, the files that import the package by path (.ts);
// - under `module: nodenext`, those again (CommonJS .ts files) and the ones that import it by its
//   name through package.json's `exports`, as an ES module (.mts) and as CommonJS (.cts).

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const { spawnSync } = require('node:child_process')
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
