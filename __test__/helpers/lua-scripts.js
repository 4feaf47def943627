'use strict'

// The scripts of lua/ as ratekeeper sends them (src/binding/mod.rs, `with_prelude`; and
// src/store/script.rs, the configured part of a Function), for the tests and benchmarks that
// send or hash them themselves. `read(file)` reads a file of lua/: the working tree's by default,
// or another revision's.

const fs = require('node:fs')
const path = require('node:path')

const LUA = path.join(__dirname, '..', '..', 'lua')
const LONE_HERE = '-- (lua/lone.lua goes here)\n'
const PRELUDE_HERE = '-- (lua/prelude.lua goes here)\n'
/** The lines that end a script's configured part (`CONFIGURED_HERE` in src/store/script.rs). */
const CONFIGURED_HERE = "-- (a Function's configured part ends here)\n"

const readLua = (file) => fs.readFileSync(path.join(LUA, file), 'utf8')

/** The names of the limiters' scripts (every file of lua/ but the shared ones), without `.lua`. */
function scriptNames() {
  return fs
    .readdirSync(LUA)
    .filter((file) => file.endsWith('.lua') && !['prelude.lua', 'lone.lua'].includes(file))
    .map((file) => file.slice(0, -'.lua'.length))
}

/** lua/`name`.lua with lua/lone.lua in place of its line `-- (lua/lone.lua goes here)`. */
function withLone(name, read = readLua) {
  return read(`${name}.lua`).replace(LONE_HERE, () => read('lone.lua'))
}

/**
 * The script `name` as ratekeeper sends it as EVALSHA: lua/lone.lua in its place, and
 * lua/prelude.lua in place of the line `-- (lua/prelude.lua goes here)`, or in front.
 */
function evalScript(name, read = readLua) {
  const script = withLone(name, read)
  const at = script.indexOf(PRELUDE_HERE)
  const prelude = read('prelude.lua')
  return at === -1 ? prelude + script : script.slice(0, at) + prelude + script.slice(at + PRELUDE_HERE.length)
}

/** The configured part of the script `name` (what its Function builds once), or null without one. */
function configuredPart(name, read = readLua) {
  const script = withLone(name, read)
  const end = script.indexOf(CONFIGURED_HERE)
  return end === -1 ? null : script.slice(0, end)
}

module.exports = { scriptNames, evalScript, configuredPart }
