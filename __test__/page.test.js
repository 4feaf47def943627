// The page `npm start` serves at `/`, in a real browser: headless Chromium (Debian's `chromium`,
// which .ci/run installs) loads it, runs a burst, and the plotted counts are checked against the
// limits; a steady run is saved as a screenshot (examples/screenshot.png for the README with
// RATEKEEPER_UPDATE_SCREENSHOT=1). The same routes on
// Redis (REDIS_URL) are checked over HTTP.

const { describe, it, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const puppeteer = require('puppeteer-core')

const { startRedis } = require('./helpers/redis-server.js')

const CHROMIUM = '/usr/bin/chromium'
const EXAMPLE = path.join(__dirname, '..', 'examples', 'express.js')
// The README's screenshot is written where it is committed only on request
// (RATEKEEPER_UPDATE_SCREENSHOT=1), so that a test run leaves the tree as it was.
const SCREENSHOT = process.env.RATEKEEPER_UPDATE_SCREENSHOT === '1'
  ? path.join(__dirname, '..', 'examples', 'screenshot.png')
  : path.join(os.tmpdir(), `ratekeeper-screenshot-${process.pid}.png`)
const ALGORITHMS = ['rolling-window', 'fixed-window', 'sliding-window', 'sliding-tail', 'token-bucket', 'gcra']
// The example's limit: 10 per 10 s; the buckets hold 10 and get one back per second.
const LIMIT = 10
const WINDOW = 10_000
const REFILL = 1000
const BURST = 30
// A burst is judged only if it fits in one clock window (the fixed window and the sliding tail
// start again at its boundaries) and takes less than a refill (else a bucket admits one more).
const ATTEMPTS = 3

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** Runs `npm start`'s script on a free port; resolves its URL and a stop function. */
async function startExample(env = {}) {
  const child = spawn(process.execPath, [EXAMPLE], {
    env: { ...process.env, PORT: '0', REDIS_URL: '', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const stop = () => {
    if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve()
    return new Promise((resolve) => {
      child.once('exit', resolve)
      child.kill()
    })
  }
  let output = ''
  const url = await new Promise((resolve, reject) => {
    child.stdout.on('data', (chunk) => {
      output += chunk
      const match = output.match(/listening on (http:\/\/127\.0\.0\.1:\d+\/)/)
      if (match) resolve(match[1])
    })
    child.once('exit', (code) => reject(new Error(`the example exited with ${code}: ${output}`)))
  })
  return { url, stop, output: () => output }
}

/** Headless Chromium with a fresh profile and no background connections (there is no network). */
async function launchChromium() {
  assert.ok(fs.existsSync(CHROMIUM), `${CHROMIUM} is missing: install Debian's chromium package (.ci/run does)`)
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'ratekeeper-chromium-'))
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      `--user-data-dir=${profile}`,
    ],
  })
  return {
    browser,
    async close() {
      await browser.close()
      fs.rmSync(profile, { recursive: true, force: true })
    },
  }
}

/** Waits until the clock is early enough in a window for a short burst to stay inside it. */
async function awayFromBoundary() {
  const phase = Date.now() % WINDOW
  if (phase > WINDOW - 3000) await sleep(WINDOW - phase + 50)
}

/** Why a burst from `first` to `last` (epoch ms) cannot be judged, or null. */
function burstTiming(first, last) {
  if (Math.floor(first / WINDOW) !== Math.floor(last / WINDOW)) return `crossed a window boundary (${first} to ${last})`
  return null
}

/**
 * How many of a burst lasting `span` ms each algorithm allows: the windows exactly LIMIT; the
 * buckets LIMIT, plus a token per REFILL the burst lasted (on a loaded machine it may take
 * longer than one).
 */
function allowedRange(algorithm, span) {
  const refills = algorithm === 'token-bucket' || algorithm === 'gcra' ? Math.floor(span / REFILL) : 0
  return [LIMIT, LIMIT + refills]
}

function assertAllowed(algorithm, allowed, span) {
  const [least, most] = allowedRange(algorithm, span)
  assert.ok(allowed >= least && allowed <= most, `${algorithm}: ${allowed} allowed in a burst of ${span} ms, expected ${least} to ${most}`)
}

/** Each algorithm's counts as the page shows them: its data attributes and its chart's bars. */
function readCounts(page) {
  return page.$$eval('section[data-algorithm]', (sections) =>
    sections.map((section) => {
      const sum = (selector, attribute) =>
        [...section.querySelectorAll(selector)].reduce((total, bar) => total + Number(bar.getAttribute(attribute)), 0)
      return {
        algorithm: section.dataset.algorithm,
        sent: Number(section.dataset.sent),
        allowed: Number(section.dataset.allowed),
        refused: Number(section.dataset.refused),
        errors: Number(section.dataset.errors),
        firstSent: Number(section.dataset.firstSent),
        lastReceived: Number(section.dataset.lastReceived),
        plottedAllowed: sum('svg rect.allowed', 'data-allowed'),
        plottedRefused: sum('svg rect.refused', 'data-refused'),
        headers: section.querySelector('pre.headers').textContent,
      }
    }),
  )
}

/** Sets the page's controls and runs; resolves the counts once every response is in. */
async function runOnPage(page, { rate, pattern, burst, duration }) {
  await page.$eval('#rate', (input, value) => { input.value = value }, String(rate))
  await page.select('#pattern', pattern)
  await page.$eval('#burst', (input, value) => { input.value = value }, String(burst))
  await page.$eval('#duration', (input, value) => { input.value = value }, String(duration))
  await page.$eval('#fresh', (input) => { input.checked = true })
  const previous = await page.evaluate(() => document.body.dataset.started ?? '')
  await page.click('#run')
  await page.waitForFunction(
    (previous) => document.body.dataset.state === 'done' && (document.body.dataset.started ?? '') !== previous,
    { timeout: duration * 1000 + 30_000 },
    previous,
  )
  return readCounts(page)
}

describe('the page (npm start) in headless Chromium', { timeout: 180_000 }, () => {
  let example
  let chromium
  let page
  const consoleErrors = []

  before(async () => {
    example = await startExample()
    chromium = await launchChromium()
    page = await chromium.browser.newPage()
    await page.setViewport({ width: 1200, height: 800 })
    page.on('console', (message) => {
      if (message.type() !== 'error') return
      // Chromium logs every 4xx response; the routes' 429s are the point of the page.
      const refused = /status of 429/.test(message.text()) && (message.location().url ?? '').startsWith(`${example.url}api/`)
      if (!refused) consoleErrors.push(`${message.text()} (${message.location().url})`)
    })
    page.on('pageerror', (error) => consoleErrors.push(`page error: ${error.message}`))
    page.on('requestfailed', (request) => consoleErrors.push(`request failed: ${request.url()} ${request.failure()?.errorText}`))
    await page.goto(example.url)
    await page.waitForFunction(() => document.body.dataset.state !== 'loading')
    assert.equal(await page.evaluate(() => document.body.dataset.state), 'ready')
  })

  after(async () => {
    if (chromium) await chromium.close()
    if (example) await example.stop()
  })

  it('shows every algorithm, each with a chart and the class behind it', async () => {
    const cards = await page.$$eval('section[data-algorithm]', (sections) =>
      sections.map((section) => ({
        algorithm: section.dataset.algorithm,
        code: section.querySelector('code').textContent,
        charts: section.querySelectorAll('svg').length,
      })),
    )
    assert.deepEqual(cards.map((card) => card.algorithm), ALGORITHMS)
    for (const card of cards) assert.equal(card.charts, 1, card.algorithm)
    assert.deepEqual(
      cards.map((card) => card.code.match(/^new (\w+)\(/)[1]),
      ['RateLimiter', 'FixedWindow', 'SlidingWindow', 'SlidingTail', 'TokenBucket', 'Gcra'],
    )
  })

  it(`cuts a burst of ${BURST} to the limit in every algorithm: ${LIMIT} allowed (the buckets: and what refilled meanwhile), the rest refused`, async () => {
    let counts
    let span
    const missed = []
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      await awayFromBoundary()
      // One burst of 30 at once (the next would come 10 s later, after the run's 1 s).
      counts = await runOnPage(page, { rate: 3, pattern: 'burst', burst: BURST, duration: 1 })
      const first = Math.min(...counts.map((c) => c.firstSent))
      const last = Math.max(...counts.map((c) => c.lastReceived))
      span = last - first
      const why = burstTiming(first, last)
      if (!why) break
      missed.push(why)
      counts = undefined
    }
    assert.ok(counts, `no burst could be judged: ${missed.join('; ')}`)
    for (const count of counts) {
      const { algorithm } = count
      assert.equal(count.sent, BURST, algorithm)
      assert.equal(count.errors, 0, algorithm)
      assertAllowed(algorithm, count.allowed, span)
      assert.equal(count.refused, BURST - count.allowed, algorithm)
      // What the chart draws is what the totals say.
      assert.equal(count.plottedAllowed, count.allowed, algorithm)
      assert.equal(count.plottedRefused, count.refused, algorithm)
      // The last response's status and limit headers, whatever their format.
      assert.match(count.headers, /^(200 OK|429 Too Many Requests)\n/, algorithm)
      assert.match(count.headers, /^(x-)?rate-?limit[\w-]*: \S/im, algorithm)
    }
    assert.deepEqual(consoleErrors, [])
  })

  it('runs a steady 3 per second for 15 s within each algorithm\'s bound, and saves the screenshot', async () => {
    const counts = await runOnPage(page, { rate: 3, pattern: 'steady', burst: 10, duration: 15 })
    for (const count of counts) {
      const { algorithm, allowed, firstSent, lastReceived } = count
      assert.equal(count.sent, 45, algorithm)
      assert.equal(count.errors, 0, algorithm)
      assert.equal(allowed + count.refused, 45, algorithm)
      assert.equal(count.plottedAllowed, allowed, algorithm)
      assert.equal(count.plottedRefused, count.refused, algorithm)
      // The first 10 requests (3.3 s) are always allowed, and 3 per second is over every limit.
      assert.ok(allowed >= LIMIT && allowed < 45, `${algorithm}: ${allowed}`)
      const span = lastReceived - firstSent
      const windows = Math.floor(lastReceived / WINDOW) - Math.floor(firstSent / WINDOW) + 1
      const bound = {
        'rolling-window': LIMIT * Math.ceil(span / WINDOW),
        'sliding-window': LIMIT * Math.ceil(span / WINDOW),
        'fixed-window': LIMIT * windows,
        'sliding-tail': 2 * LIMIT * Math.ceil(span / WINDOW),
        'token-bucket': LIMIT + Math.floor(span / REFILL),
        gcra: LIMIT + Math.floor(span / REFILL),
      }[algorithm]
      assert.ok(allowed <= bound, `${algorithm}: ${allowed} allowed, bound ${bound}`)
    }
    await page.screenshot({ path: SCREENSHOT })
    const png = fs.readFileSync(SCREENSHOT)
    if (process.env.RATEKEEPER_UPDATE_SCREENSHOT !== '1') fs.rmSync(SCREENSHOT)
    assert.equal(png.subarray(1, 4).toString(), 'PNG')
    // The IHDR chunk: width and height.
    assert.deepEqual([png.readUInt32BE(16), png.readUInt32BE(20)], [1200, 800])
    assert.deepEqual(consoleErrors, [])
  })
})

describe('the page\'s routes on Redis (REDIS_URL)', { timeout: 60_000 }, () => {
  let redis
  let example

  before(async () => {
    redis = await startRedis()
    example = await startExample({ REDIS_URL: redis.url })
  })

  after(async () => {
    if (example) await example.stop()
    if (redis) await redis.stop()
  })

  it('says so, keys by the session, cuts a burst to the limit on Redis, and resets', async () => {
    assert.match(example.output(), /\(Redis store\)/)
    const config = await (await fetch(`${example.url}api/algorithms`)).json()
    assert.equal(config.store, 'redis')
    assert.deepEqual(config.algorithms.map((a) => a.name), ALGORITHMS)
    assert.equal((await fetch(`${example.url}api/gcra`)).status, 400)
    assert.equal((await fetch(`${example.url}api/gcra?session=no%20spaces`)).status, 400)

    let session
    let statuses
    let span
    const missed = []
    for (let attempt = 0; attempt < ATTEMPTS && !statuses; attempt++) {
      await awayFromBoundary()
      session = `test-${attempt}`
      const first = Date.now()
      const answers = await Promise.all(
        ALGORITHMS.map((name) =>
          Promise.all(Array.from({ length: BURST }, () => fetch(`${example.url}api/${name}?session=${session}`).then((r) => r.status))),
        ),
      )
      span = Date.now() - first
      const why = burstTiming(first, Date.now())
      if (why) missed.push(why)
      else statuses = answers
    }
    assert.ok(statuses, `no burst could be judged: ${missed.join('; ')}`)
    statuses.forEach((answers, i) => {
      const count = (status) => answers.filter((s) => s === status).length
      assertAllowed(ALGORITHMS[i], count(200), span)
      assert.equal(count(429), BURST - count(200), ALGORITHMS[i])
    })
    // The counts are on Redis, one key per algorithm under its own prefix.
    const keys = (await redis.cli('--scan', '--pattern', `example:*${session}`)).split('\n').filter(Boolean).sort()
    assert.deepEqual(keys, ALGORITHMS.map((name) => `example:${name}:${session}`).sort())
    // Another session has its own counts.
    assert.equal((await fetch(`${example.url}api/fixed-window?session=other`)).status, 200)

    assert.equal((await fetch(`${example.url}api/reset?session=${session}`, { method: 'POST' })).status, 204)
    assert.equal(await redis.cli('--scan', '--pattern', `example:*${session}`), '')
    for (const name of ALGORITHMS) assert.equal((await fetch(`${example.url}api/${name}?session=${session}`)).status, 200, name)
  })
})
