'use strict'

// benchmark/results.js: what a full `npm run bench` writes (RESULTS.md, results.svg, the
// README's summary), from made-up rows.

const { it } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const { writeResults, chart } = require('../benchmark/results.js')

const side = (opsPerSecond, redisCpuMicros) => ({ opsPerSecond, p50: 10, p99: 20, redisCpuMicros })
const rows = [
  { name: 'fixed window, Redis', peer: 'peer A', concurrency: 1, ids: 10, ratio: 2, ratios: [2, 2], ours: side(200, 3), theirs: side(100, 6) },
  { name: 'fixed window, Redis', peer: 'peer A', concurrency: 256, ids: 10_000, ratio: 4, ratios: [4, 4], ours: side(400, 2), theirs: side(100, 8) },
  { name: 'fixed window, in memory', peer: 'peer B', concurrency: 1, ids: 10, ratio: 0.5, ratios: [0.5, 0.5], ours: side(50), theirs: side(100) },
  { name: 'fixed window, in memory', peer: 'peer B', concurrency: 256, ids: 10_000, ratio: 1, ratios: [1, 1], ours: side(100), theirs: side(100) },
  { name: 'hot keys', peer: 'peer C', concurrency: 256, ids: 10_000, ratio: 16, ratios: [16, 16], ours: side(1600, 0), theirs: side(100, 4) },
]
const memory = { ids: 1000, ours: { bytesPerId: 100, staleBytesPerId: 5, trackedAfter: 1 }, theirs: { bytesPerId: 500 }, rolling: { memory: { ours: 2 ** 20, theirs: 2 ** 21 }, redis: { ours: 2 ** 20, theirs: 2 ** 20 } } }

it('draws one bar per line on a log scale: right of 1x when faster, left when slower, 2x as far as 2x', () => {
  const svg = chart(rows)
  const bars = [...svg.matchAll(/<rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)" height="14" fill="(#[0-9a-f]+)"\/>/g)].map((m) => ({ x: Number(m[1]), width: Number(m[2]), fill: m[3] }))
  assert.equal(bars.length, 5)
  const one = bars[3].x // the 1x bar starts (and ends) at the 1x line
  assert.ok(bars[0].x === one && bars[1].x === one && bars[2].x < one)
  assert.ok(Math.abs(bars[1].width - 2 * bars[0].width) < 0.2, `${bars[1].width} vs ${bars[0].width}`)
  assert.ok(Math.abs(bars[2].width - bars[0].width) < 0.2)
  assert.deepEqual(bars.map((b) => b.fill), ['#2b8a3e', '#2b8a3e', '#c92a2a', '#2b8a3e', '#2b8a3e'])
  assert.match(svg, /^<svg [^>]*>[\s\S]*<\/svg>\n$/)
})

it('writes RESULTS.md, keeping its hand-written history, and the README summary between its markers', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ratekeeper-results-'))
  try {
    const readme = path.join(dir, 'README.md')
    fs.writeFileSync(readme, 'before\n<!-- bench:start -->\nold\n<!-- bench:end -->\nafter\n')
    fs.writeFileSync(path.join(dir, 'RESULTS.md'), 'old\n<!-- history:start -->\nthe fast path bought 3x\n<!-- history:end -->\n')
    writeResults({ rows, memory, http: ['| http |'], rounds: 2, machine: 'test machine', node: 'v20', redis: '7.0' }, { dir, readme })
    const results = fs.readFileSync(path.join(dir, 'RESULTS.md'), 'utf8')
    assert.match(results, /the fast path bought 3x/)
    assert.match(results, /\| fixed window, Redis \| peer A \| 256 x 10,000 \| 400 \| 100 \| \*\*4\.00x\*\* \| 4\.00, 4\.00 \| 10 \/ 20 µs \| 10 \/ 20 µs \| 2\.0 \/ 8\.0 µs \|/)
    assert.match(results, /\| ratekeeper `FixedWindow` \| 100 \| 5 \(1 id tracked\) \|/)
    const summary = fs.readFileSync(readme, 'utf8')
    assert.match(summary, /^before\n<!-- bench:start -->\n\| scenario \| peer \| 1 x 10 \| 256 x 10,000 \|/)
    assert.match(summary, /\| fixed window, Redis \| peer A \| 2\.0x \| 4\.0x \| 2\.0 \/ 8\.0 µs \|/)
    assert.match(summary, /\| fixed window, in memory \| peer B \| 0\.5x \| 1\.0x \|  \|/)
    // A scenario measured at one load only: its ratio under that load's column.
    assert.match(summary, /\| hot keys \| peer C \|  \| 16\.0x \| 0\.0 \/ 4\.0 µs \|/)
    assert.match(summary, /ratekeeper 100 bytes per id, 5 once they are stale; rate-limiter-flexible's `RateLimiterMemory` 500\.\n<!-- bench:end -->\nafter\n$/)
    assert.ok(fs.readFileSync(path.join(dir, 'results.svg'), 'utf8').startsWith('<svg'))
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})
