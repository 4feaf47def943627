'use strict'

const { spawn } = require('node:child_process')
const path = require('node:path')

/**
 * Runs `code` in a fresh node, in the package's folder; resolves its exit code and what it
 * printed, or `code: 'hung'` if it is still running after 30 s (it is then killed).
 */
function runScript(code) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['-e', code], { cwd: path.join(__dirname, '..', '..'), stdio: ['ignore', 'pipe', 'inherit'] })
    let output = ''
    child.stdout.on('data', (chunk) => (output += chunk))
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      resolve({ code: 'hung', output })
    }, 30_000)
    child.on('exit', (code) => {
      clearTimeout(timer)
      resolve({ code, output })
    })
  })
}

module.exports = { runScript }
