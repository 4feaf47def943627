'use strict'

// Writes what a full `npm run bench` measured: benchmark/RESULTS.md (machine, versions, every
// scenario at every load) and benchmark/results.svg (the ratios as bars, for the README). The
// section of RESULTS.md between the `history` markers is written by hand (what each change
// bought) and kept from one run to the next.

const fs = require('node:fs')
const path = require('node:path')

const HISTORY = /<!-- history:start -->[\s\S]*<!-- history:end -->/

const format = (n) => (Number.isNaN(n) ? '-' : Math.round(n).toLocaleString('en-US'))
const mib = (bytes) => `${(bytes / 2 ** 20).toFixed(1)} MiB`

/** The installed version of a package (ours from package.json). */
function version(name) {
  if (name === 'ratekeeper') return require('../package.json').version
  // Found from the package's entry point: some packages' `exports` hide their package.json.
  for (let dir = path.dirname(require.resolve(name)); dir !== path.dirname(dir); dir = path.dirname(dir)) {
    const file = path.join(dir, 'package.json')
    if (fs.existsSync(file)) {
      const manifest = JSON.parse(fs.readFileSync(file, 'utf8'))
      if (manifest.name === name) return manifest.version
    }
  }
  return 'unknown'
}

function markdown({ rows, memory, http, rounds, machine, node, redis }) {
  const lines = [
    '# Benchmark results',
    '',
    `Written by \`npm run bench\` (${rounds} rounds per line) on ${new Date().toISOString().slice(0, 10)}.`,
    '',
    `- Machine: ${machine}`,
    `- Node ${node}, redis-server ${redis} (started by the benchmark, on the same machine)`,
    `- ratekeeper ${version('ratekeeper')}, rolling-rate-limiter ${version('rolling-rate-limiter')}, rate-limiter-flexible ${version('rate-limiter-flexible')}, redis-gcra ${version('redis-gcra')}, limiter ${version('limiter')}, sliding-window-rate-limiter ${version('sliding-window-rate-limiter')}, @upstash/ratelimit ${version('@upstash/ratelimit')}, ioredis ${version('ioredis')}`,
    '',
    'Each line: both libraries on the same calls (limit 100 per minute; with 10 ids most calls are',
    'refused, with 10,000 almost none), each call awaited as an app awaits it, rounds alternating',
    'who goes first. Each turn runs in a process of its own: after 250 ms of untimed warm-up runs,',
    'the workload runs on fresh limiters (and an emptied Redis) until 250 ms are timed. One caller on Redis',
    'runs in turns instead: both processes at once, taking turns run by run (2,000 calls each, on an emptied',
    'Redis) until each has 1.5 s timed, so that a slow spell of the machine weighs on both. The ratio is the median of the',
    'per-round throughput ratios; throughputs and latencies (a sample of one call in 8, including',
    'the wait behind the other callers) are medians over the rounds. The `...Sync` lines time',
    "ratekeeper's synchronous method in a loop against the peer's Promise API at the given number",
    "of callers (`limiter`, which has no Promise API, against its synchronous `tryRemoveTokens`",
    'in a loop). Redis CPU is read from `INFO cpu` around each timed run.',
    '',
    '![ratios](results.svg)',
    '',
    '| scenario | peer | callers x ids | ratekeeper ops/s | peer ops/s | ratio | rounds | ratekeeper p50 / p99 | peer p50 / p99 | Redis CPU per decision (ours / peer) |',
    '|---|---|---|---:|---:|---:|---|---:|---:|---:|',
  ]
  for (const r of rows) {
    const cpu = r.ours.redisCpuMicros === undefined ? '' : `${r.ours.redisCpuMicros.toFixed(1)} / ${r.theirs.redisCpuMicros.toFixed(1)} µs`
    lines.push(
      `| ${r.name} | ${r.peer} | ${r.concurrency} x ${format(r.ids)} | ${format(r.ours.opsPerSecond)} | ${format(r.theirs.opsPerSecond)} | **${r.ratio.toFixed(2)}x** | ${r.ratios.map((x) => x.toFixed(2)).join(', ')} | ${format(r.ours.p50)} / ${format(r.ours.p99)} µs | ${format(r.theirs.p50)} / ${format(r.theirs.p99)} µs | ${cpu} |`,
    )
  }
  if (memory) {
    lines.push(
      '',
      '## Memory',
      '',
      `${format(memory.ids)} distinct ids hit once each, in memory, fixed window of 100 per minute (RSS growth after GC, each library in its own child process):`,
      '',
      '| | bytes per id | once the ids are stale |',
      '|---|---:|---:|',
      `| ratekeeper \`FixedWindow\` | ${memory.ours.bytesPerId.toFixed(0)} | ${memory.ours.staleBytesPerId.toFixed(0)} (${memory.ours.trackedAfter} id${memory.ours.trackedAfter === 1 ? '' : 's'} tracked) |`,
      `| rate-limiter-flexible \`RateLimiterMemory\` | ${memory.theirs.bytesPerId.toFixed(0)} | (one timer per id deletes it) |`,
      '',
      'Rolling windows, 10,000 ids x 10 actions (`maxInInterval` 100):',
      '',
      '| store | ratekeeper | rolling-rate-limiter |',
      '|---|---:|---:|',
      `| in memory (process RSS growth) | ${mib(memory.rolling.memory.ours)} | ${mib(memory.rolling.memory.theirs)} |`,
      `| Redis (used_memory growth) | ${mib(memory.rolling.redis.ours)} | ${mib(memory.rolling.redis.theirs)} |`,
    )
  }
  if (http) lines.push('', '## HTTP', '', ...http)
  return lines.join('\n')
}

/** A horizontal bar per scenario and load, on a log scale of the ratio, with the 1x line. */
function chart(rows) {
  const barHeight = 14
  const gap = 4
  const groupGap = 14
  const left = 330
  const width = 760
  const plot = width - left - 60
  const ticks = [0.25, 0.5, 1, 2, 4, 8, 16]
  const x = (ratio) => left + (Math.log2(Math.min(Math.max(ratio, ticks[0]), ticks.at(-1))) - Math.log2(ticks[0])) / (Math.log2(ticks.at(-1)) - Math.log2(ticks[0])) * plot
  const parts = []
  let y = 40
  let previous
  for (const r of rows) {
    if (r.name !== previous) {
      if (previous !== undefined) y += groupGap
      parts.push(`<text x="8" y="${y + 11}" font-weight="bold">${escape(r.name)}</text>`)
      y += barHeight + gap
      previous = r.name
    }
    const fill = r.ratio >= 1 ? '#2b8a3e' : '#c92a2a'
    const from = x(1)
    const to = x(r.ratio)
    parts.push(
      `<text x="24" y="${y + 11}">${r.concurrency} caller${r.concurrency === 1 ? "" : "s"}, ${format(r.ids)} ids</text>`,
      `<rect x="${Math.min(from, to).toFixed(1)}" y="${y}" width="${Math.max(1, Math.abs(to - from)).toFixed(1)}" height="${barHeight}" fill="${fill}"/>`,
      `<text x="${(Math.max(from, to) + 4).toFixed(1)}" y="${y + 11}">${r.ratio.toFixed(2)}x</text>`,
    )
    y += barHeight + gap
  }
  const height = y + 30
  const axis = ticks.map((t) => `<line x1="${x(t).toFixed(1)}" y1="30" x2="${x(t).toFixed(1)}" y2="${y}" stroke="${t === 1 ? '#000' : '#ddd'}"/><text x="${x(t).toFixed(1)}" y="${y + 16}" text-anchor="middle">${t}x</text>`)
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">`,
    '<rect width="100%" height="100%" fill="#fff"/>',
    `<text x="8" y="18" font-size="13" font-weight="bold">ratekeeper's throughput over its peer's, same run (log scale; right of 1x is faster)</text>`,
    ...axis,
    ...parts,
    '</svg>',
    '',
  ].join('\n')
}

function escape(text) {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
}

/**
 * The README's summary: one line per scenario with its ratio at every load (and, on Redis, the
 * Redis CPU per decision at the heaviest), then the memory per id.
 */
function summary({ rows, memory }) {
  const loadOf = (r) => `${r.concurrency} x ${format(r.ids)}`
  const loads = [...new Set(rows.map(loadOf))]
  const scenarios = [...new Set(rows.map((r) => r.name))]
  const lines = [
    `| scenario | peer | ${loads.join(' | ')} | Redis CPU per decision at the heaviest load (ours / peer) |`,
    `|---|---|${loads.map(() => '---:').join('|')}|---:|`,
  ]
  for (const name of scenarios) {
    const of = rows.filter((r) => r.name === name)
    const heaviest = of.at(-1)
    const cpu = heaviest.ours.redisCpuMicros === undefined ? '' : `${heaviest.ours.redisCpuMicros.toFixed(1)} / ${heaviest.theirs.redisCpuMicros.toFixed(1)} µs`
    const ratios = loads.map((load) => {
      const row = of.find((r) => loadOf(r) === load)
      return row ? `${row.ratio.toFixed(1)}x` : ''
    })
    lines.push(`| ${name} | ${of[0].peer} | ${ratios.join(' | ')} | ${cpu} |`)
  }
  if (memory) {
    lines.push(
      '',
      `Memory, ${format(memory.ids)} distinct ids hit once in memory (fixed window, RSS after GC): ratekeeper ${memory.ours.bytesPerId.toFixed(0)} bytes per id, ${memory.ours.staleBytesPerId.toFixed(0)} once they are stale; rate-limiter-flexible's \`RateLimiterMemory\` ${memory.theirs.bytesPerId.toFixed(0)}.`,
    )
  }
  return lines.join('\n')
}

/**
 * Writes `dir`/RESULTS.md (keeping its hand-written history), `dir`/results.svg, and the summary
 * between the `bench` markers of `readme`.
 */
function writeResults(results, { dir = __dirname, readme = path.join(__dirname, '..', 'README.md') } = {}) {
  const file = path.join(dir, 'RESULTS.md')
  const previous = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : ''
  const history = previous.match(HISTORY)?.[0] ?? '<!-- history:start -->\n<!-- history:end -->'
  fs.writeFileSync(file, `${markdown(results)}\n\n## What each change bought\n\n${history}\n`)
  fs.writeFileSync(path.join(dir, 'results.svg'), chart(results.rows))
  const text = fs.readFileSync(readme, 'utf8')
  const block = /<!-- bench:start -->[\s\S]*<!-- bench:end -->/
  if (block.test(text)) fs.writeFileSync(readme, text.replace(block, `<!-- bench:start -->\n${summary(results)}\n<!-- bench:end -->`))
}

module.exports = { writeResults, chart, summary, version }
