'use strict'

// The package as a new user meets it: `npm pack` of the root package and of the linux-x64-gnu
// platform package (npm/linux-x64-gnu, with the binary this checkout built), both tarballs
// installed into a fresh Express app with no Rust toolchain on the PATH, which answers 200, 200,
// then 429 with Retry-After. Without a binary for the platform, loading it throws one clear error.

const { describe, it, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync, spawn } = require('node:child_process')
const { once } = require('node:events')

const root = path.join(__dirname, '..')
const PLATFORM = 'linux-x64-gnu'
const BINARY = `ratekeeper.${PLATFORM}.node`
const supported = process.platform === 'linux' && process.arch === 'x64' && fs.existsSync(path.join(root, BINARY))

/**
 * The environment of a new user's shell: no Rust on the PATH, and none of the npm_* variables
 * `npm test` sets (npm_config_local_prefix would point every npm below at this checkout).
 */
const userEnv = () => ({
  ...Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^npm_/i.test(name) && name !== 'NAPI_RS_NATIVE_LIBRARY_PATH')),
  PATH: pathWithoutRust(),
  npm_config_update_notifier: 'false',
})

/** PATH without any directory holding cargo or rustc. */
const pathWithoutRust = () =>
  process.env.PATH.split(path.delimiter)
    .filter((dir) => !['cargo', 'rustc'].some((tool) => fs.existsSync(path.join(dir, tool))))
    .concat(path.dirname(process.execPath))
    .join(path.delimiter)

function run(command, args, options) {
  const result = spawnSync(command, args, { encoding: 'utf8', ...options })
  assert.equal(result.status, 0, `${command} ${args.join(' ')}\n${result.stdout}\n${result.stderr}`)
  return result.stdout
}

/** `npm pack` of `dir` into `destination` (scripts off: `prepare` would build): the tarball and its files. */
function pack(dir, destination) {
  const [{ filename, files }] = JSON.parse(run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', destination], { cwd: dir, env: userEnv() }))
  return { tarball: path.join(destination, filename), files: files.map((file) => file.path).sort() }
}

const APP = `
import express from 'express'
import { TokenBucket, rateLimit } from 'ratekeeper'

const app = express()
app.use(rateLimit({ limiter: new TokenBucket({ capacity: 2, refillInterval: 3_600_000 }), headers: false }))
app.get('/', (req, res) => res.send('ok'))
const server = app.listen(0, '127.0.0.1', () => console.log(server.address().port))
`

describe('the packed package', { skip: !supported && `no ${BINARY} built here` }, () => {
  const env = userEnv()
  let dir, rootPack, platformPack
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ratekeeper-pack-'))
    rootPack = pack(root, dir)
    const platformDir = path.join(dir, PLATFORM)
    fs.cpSync(path.join(root, 'npm', PLATFORM), platformDir, { recursive: true })
    fs.copyFileSync(path.join(root, BINARY), path.join(platformDir, BINARY))
    platformPack = pack(platformDir, dir)
  })
  after(() => fs.rmSync(dir, { recursive: true, force: true }))

  it('holds the JavaScript, the declarations and the Lua scripts: no tests, benchmarks, sources, profiles or binaries', () => {
    const { files } = require('../package.json')
    for (const file of rootPack.files) {
      assert.ok(files.some((entry) => file === entry || (entry.endsWith('/') && file.startsWith(entry)) || file === 'package.json' || file === 'README.md' || file === 'LICENSE'), file)
      assert.doesNotMatch(file, /__test__|benchmark|^src\/|^target\/|\.node$|\.log$|profile|\.heapsnapshot$|\.tgz$/, file)
    }
    for (const file of ['index.js', 'index.mjs', 'index.d.ts', 'express-rate-limit.mjs', 'binding.js', 'lib/native.js', 'lua/prelude.lua']) assert.ok(rootPack.files.includes(file), file)
    assert.deepEqual(platformPack.files, ['README.md', BINARY, 'package.json'].sort())
  })

  it('installs without Rust into a fresh Express app, which answers 200, 200, then 429 with Retry-After', async (t) => {
    const app = path.join(dir, 'app')
    fs.mkdirSync(app)
    fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }))
    fs.writeFileSync(path.join(app, 'app.js'), APP)
    assert.notEqual(spawnSync('sh', ['-c', 'command -v cargo || command -v rustc'], { env }).status, 0, 'Rust is still on the PATH')
    run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', 'express@5', rootPack.tarball, platformPack.tarball], { cwd: app, env })
    assert.ok(!fs.existsSync(path.join(app, 'node_modules', 'ratekeeper', BINARY)), 'the binary comes from the platform package')

    const server = spawn(process.execPath, ['app.js'], { cwd: app, env, stdio: ['ignore', 'pipe', 'inherit'] })
    t.after(() => server.kill())
    const [port] = await once(server.stdout, 'data')
    const statuses = []
    for (let i = 0; i < 3; i++) {
      const response = await fetch(`http://127.0.0.1:${Number(port)}/`)
      statuses.push([response.status, response.headers.get('retry-after')])
      await response.arrayBuffer()
    }
    assert.deepEqual(statuses, [[200, null], [200, null], [429, '3600']])
  })

  it('without a binary for the platform, require and import throw one clear error naming it', () => {
    const app = path.join(dir, 'app')
    fs.rmSync(path.join(app, 'node_modules', `ratekeeper-${PLATFORM}`), { recursive: true, force: true })
    const script = `
      const report = (e) => ({ code: e.code, platform: e.platform, message: e.message })
      let required
      try { require('ratekeeper') } catch (e) { required = report(e) }
      import('ratekeeper').then(() => ({}), report).then((imported) => console.log(JSON.stringify({ required, imported })))`
    const { required, imported } = JSON.parse(run(process.execPath, ['-e', script], { cwd: app, env }))
    assert.deepEqual(imported, required)
    assert.equal(required.code, 'ERR_NATIVE_BINDING_NOT_FOUND')
    assert.equal(required.platform, PLATFORM)
    assert.match(required.message, new RegExp(`no native binary for ${PLATFORM}.*ratekeeper-${PLATFORM}.*build from source.*Rust.*npm run build`))
  })
})
