'use strict'

// The smoke suite (__test__/smoke/smoke.mjs) under every supported runtime: the Node running
// these tests (20), Node 22 and 24, Bun and Deno, as `.ci/runtimes` installs them from the npm
// registry into RATEKEEPER_RUNTIMES (default `$TMPDIR/ratekeeper-runtimes`). A runtime not
// installed there is skipped, except under CI, where `.ci/run` installs them first.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFile } = require('node:child_process')
const { useRedisServer } = require('./helpers/redis-server.js')

const redis = useRedisServer()
const root = path.join(__dirname, '..')
const runtimes = process.env.RATEKEEPER_RUNTIMES || path.join(process.env.TMPDIR || os.tmpdir(), 'ratekeeper-runtimes')
const SMOKE = path.join('__test__', 'smoke', 'smoke.mjs')

/** name: [binary, arguments before the script, the version it must report]. */
const RUNTIMES = {
  [`Node ${process.versions.node}`]: [process.execPath, [], /^v20\./],
  'Node 22': [path.join(runtimes, 'node22', 'bin', 'node22'), [], /^v22\./],
  'Node 24': [path.join(runtimes, 'node24', 'bin', 'node24'), [], /^v24\./],
  'Bun 1': [path.join(runtimes, 'bun', 'bin', 'bun'), [], /^1\./],
  'Deno 2': [path.join(runtimes, 'deno', 'bin', 'deno'), ['run', '--allow-all'], /^deno 2\./],
}

function spawnRuntime(binary, args, env) {
  return new Promise((resolve) => {
    execFile(binary, args, { cwd: root, env, encoding: 'utf8', timeout: 120_000 }, (error, stdout, stderr) => resolve({ code: error ? error.code ?? 1 : 0, stdout, stderr }))
  })
}

describe('the smoke suite under each runtime', () => {
  for (const [name, [binary, args, version]] of Object.entries(RUNTIMES)) {
    const missing = !fs.existsSync(binary) && !process.env.CI
    it(name, { skip: missing && `not installed: run .ci/runtimes` }, async () => {
      const reported = await spawnRuntime(binary, ['--version'], process.env)
      assert.match(reported.stdout, version)
      const env = { ...process.env, REDIS_URL: redis.server.url, DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1' }
      const { code, stdout, stderr } = await spawnRuntime(binary, [...args, SMOKE], env)
      assert.equal(code, 0, stdout + stderr)
      assert.match(stdout, /^smoke: 37 passed, 0 failed$/m)
    })
  }
})
