'use strict'

// index.d.ts and binding.d.ts compile under `tsc --strict` and describe the API as used in
// __test__/types/usage.ts (including the calls they must reject).

const { it } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const path = require('node:path')

it('the type declarations compile and match the documented usage', () => {
  const tsc = require.resolve('typescript/bin/tsc')
  const result = spawnSync(
    process.execPath,
    [tsc, '--noEmit', '--strict', '--esModuleInterop', '--module', 'commonjs', '--target', 'es2022', path.join(__dirname, 'types', 'usage.ts')],
    { encoding: 'utf8' },
  )
  assert.equal(result.status, 0, result.stdout + result.stderr)
})
