'use strict'

// The page of `npm start`: fires the same requests at every algorithm's route and plots which
// were allowed and which refused. The plotted counts are in the DOM for the tests: each
// algorithm's <section> carries data-sent, data-allowed, data-refused, data-errors (and its
// chart's bars data-allowed / data-refused per time slot); <body data-state> is 'ready',
// 'running' or 'done', with data-started / data-finished (epoch ms) for the last run.

const SVG = 'http://www.w3.org/2000/svg'
const WIDTH = 360
const HEIGHT = 100
const PAD = { left: 26, right: 6, top: 6, bottom: 16 }
const SLOTS = [100, 250, 500, 1000, 2000, 5000, 10_000, 30_000]
const MAX_SLOTS = 20
// The most requests a run sends to each route.
const MAX_REQUESTS = 5000
const TICKS = [100, 200, 500, 1000, 2000, 5000, 10_000, 20_000, 30_000, 60_000]
// The headers a limiter may answer with, whichever format the middleware is set to.
const LIMIT_HEADER = /^(x-)?rate-?limit|^retry-after$/i

// One id per page load: the routes key by it, so two pages never share counts.
const session = Array.from(crypto.getRandomValues(new Uint8Array(8)), (b) => b.toString(16).padStart(2, '0')).join('')

const $ = (id) => document.getElementById(id)
let algorithms = []
let windowMs = 0
/** The current run: its timers, and per algorithm what came back. */
let run = null

/** `{ limits: [{ duration: 10000 }] }` as JavaScript source: `{ limits: [{ duration: 10000 }] }`. */
function literal(value) {
  if (Array.isArray(value)) return `[${value.map(literal).join(', ')}]`
  if (value && typeof value === 'object') {
    return `{ ${Object.entries(value).map(([key, v]) => `${key}: ${literal(v)}`).join(', ')} }`
  }
  return JSON.stringify(value)
}

function element(tag, properties = {}, children = []) {
  const node = Object.assign(document.createElement(tag), properties)
  node.append(...children)
  return node
}

function svgElement(tag, attributes = {}) {
  const node = document.createElementNS(SVG, tag)
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value))
  return node
}

function card(algorithm) {
  const section = element('section', { id: algorithm.name })
  section.dataset.algorithm = algorithm.name
  algorithm.svg = svgElement('svg', { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: 'img', 'aria-label': `${algorithm.title}: requests over time` })
  algorithm.totals = element('p', { className: 'totals' })
  algorithm.headers = element('pre', { className: 'headers', textContent: 'no response yet' })
  section.append(
    element('h2', { textContent: algorithm.title }),
    element('code', { textContent: `new ${algorithm.className}(${literal(algorithm.options)})` }),
    element('p', { className: 'note', textContent: algorithm.note }),
    algorithm.svg,
    algorithm.totals,
    algorithm.headers,
  )
  algorithm.section = section
  return section
}

/** The send times (ms from the start) of a pattern: `rate` per second on average over `duration` ms. */
function schedule(pattern, rate, burst, duration) {
  const times = []
  if (pattern === 'steady') {
    for (let i = 0; (i * 1000) / rate < duration; i++) times.push((i * 1000) / rate)
  } else if (pattern === 'burst') {
    for (let k = 0; (k * burst * 1000) / rate < duration; k++) for (let i = 0; i < burst; i++) times.push((k * burst * 1000) / rate)
  } else {
    // The rate grows from 0 to twice `rate`: n(t) = n * (t / duration)^2 requests by t.
    const n = Math.round((rate * duration) / 1000)
    for (let i = 1; i <= n; i++) times.push(duration * Math.sqrt((i - 0.5) / n))
  }
  return times
}

function fresh() {
  return { sent: 0, allowed: 0, refused: 0, errors: 0, points: [], firstSent: 0, lastReceived: 0, last: null }
}

function showTotals() {
  for (const algorithm of algorithms) {
    const result = run ? run.results.get(algorithm.name) : fresh()
    const { dataset } = algorithm.section
    dataset.sent = result.sent
    dataset.allowed = result.allowed
    dataset.refused = result.refused
    dataset.errors = result.errors
    dataset.firstSent = result.firstSent
    dataset.lastReceived = result.lastReceived
    algorithm.totals.replaceChildren(
      element('b', { className: 'allowed', textContent: `${result.allowed} allowed` }), ', ',
      element('b', { className: 'refused', textContent: `${result.refused} refused` }),
      result.errors ? `, ${result.errors} failed` : '',
      ` of ${result.sent} sent`,
    )
    algorithm.headers.textContent = result.last ?? 'no response yet'
  }
}

/** Slot width: the first that gives at most MAX_SLOTS slots over the span. */
function slotFor(span) {
  return SLOTS.find((slot) => span / slot <= MAX_SLOTS) ?? SLOTS[SLOTS.length - 1]
}

/** Per algorithm, its requests counted in time slots of `slot` ms. */
function binsOf(algorithm, slot, slots) {
  const bins = Array.from({ length: slots }, () => ({ allowed: 0, refused: 0 }))
  for (const point of run ? run.results.get(algorithm.name).points : []) {
    bins[Math.min(slots - 1, Math.floor(point.t / slot))][point.allowed ? 'allowed' : 'refused']++
  }
  return bins
}

function draw() {
  const points = run ? [...run.results.values()].flatMap((result) => result.points) : []
  const span = Math.max(run ? run.span : 10_000, ...points.map((point) => point.t + 1))
  const slot = slotFor(span)
  const slots = Math.ceil(span / slot)
  const bins = new Map(algorithms.map((algorithm) => [algorithm.name, binsOf(algorithm, slot, slots)]))
  // One scale for every chart, so that they compare.
  const top = niceCeiling(Math.max(1, ...[...bins.values()].flat().map((bin) => bin.allowed + bin.refused)))
  for (const algorithm of algorithms) drawChart(algorithm, bins.get(algorithm.name), slot, top)
  showTotals()
}

/** Stacked bars per time slot: allowed (green) under refused (red). */
function drawChart(algorithm, bins, slot, top) {
  const span = bins.length * slot
  const plotWidth = WIDTH - PAD.left - PAD.right
  const plotHeight = HEIGHT - PAD.top - PAD.bottom
  const x = (t) => PAD.left + (t / span) * plotWidth
  const y = (count) => PAD.top + plotHeight - (count / top) * plotHeight
  const svg = algorithm.svg
  svg.replaceChildren(
    svgElement('line', { class: 'axis', x1: PAD.left, y1: y(0), x2: WIDTH - PAD.right, y2: y(0) }),
    svgElement('line', { class: 'axis', x1: PAD.left, y1: y(top), x2: WIDTH - PAD.right, y2: y(top) }),
    label(PAD.left - 3, y(top) + 3, String(top), 'end'),
    label(PAD.left - 3, y(0) + 3, '0', 'end'),
  )
  const tick = TICKS.find((t) => span / t <= 6) ?? TICKS[TICKS.length - 1]
  for (let t = 0; t <= span; t += tick) {
    const anchor = t === 0 ? 'start' : x(t) > WIDTH - PAD.right - 12 ? 'end' : 'middle'
    svg.append(label(x(t), HEIGHT - 4, `${t / 1000} s`, anchor))
  }
  const width = Math.max(1, plotWidth / bins.length - 1)
  bins.forEach(({ allowed, refused }, i) => {
    if (!allowed && !refused) return
    const left = x(i * slot) + 0.5
    svg.append(
      svgElement('rect', { class: 'allowed', 'data-allowed': allowed, x: left, width, y: y(allowed), height: y(0) - y(allowed) }),
      svgElement('rect', { class: 'refused', 'data-refused': refused, x: left, width, y: y(allowed + refused), height: y(allowed) - y(allowed + refused) }),
    )
  })
  // Over the bars: where the clock's windows begin.
  if (algorithm.aligned && run) {
    for (let boundary = Math.ceil(run.started / windowMs) * windowMs; boundary - run.started <= span; boundary += windowMs) {
      const bx = x(boundary - run.started)
      svg.append(svgElement('line', { class: 'boundary', x1: bx, y1: PAD.top, x2: bx, y2: y(0) }))
    }
  }
}

function label(x, y, text, anchor) {
  const node = svgElement('text', { x, y, 'text-anchor': anchor })
  node.textContent = text
  return node
}

function niceCeiling(n) {
  for (const step of [1, 2, 5, 10, 20, 50, 100, 200, 500]) if (n <= step * 5) return Math.ceil(n / step) * step
  return n
}

let drawPending = false
function redraw() {
  if (drawPending) return
  drawPending = true
  requestAnimationFrame(() => {
    drawPending = false
    draw()
  })
}

function setStatus(text) {
  $('status').textContent = text
}

function url(path) {
  return `${path}?session=${session}`
}

/** A response's status and rate-limit headers, one a line. */
function limitHeaders(response) {
  const lines = [`${response.status} ${response.statusText}`]
  for (const [name, value] of response.headers) if (LIMIT_HEADER.test(name)) lines.push(`${name}: ${value}`)
  return lines.join('\n')
}

/** Sends one request to every algorithm at once; it is plotted at `t`, when it was due. */
function fire(current, t) {
  for (const algorithm of algorithms) {
    const result = current.results.get(algorithm.name)
    result.sent++
    if (!result.firstSent) result.firstSent = Date.now()
    current.pending++
    fetch(url(algorithm.route), { cache: 'no-store' })
      .then((response) => {
        if (response.status === 200 || response.status === 429) {
          const allowed = response.status === 200
          result[allowed ? 'allowed' : 'refused']++
          result.points.push({ t, allowed })
        } else {
          result.errors++
        }
        result.last = limitHeaders(response)
        return response.arrayBuffer()
      })
      .catch((error) => {
        result.errors++
        result.last = `failed: ${error.message}`
      })
      .finally(() => {
        result.lastReceived = Date.now()
        current.pending--
        settle(current)
        redraw()
      })
  }
}

/** Ends the run once nothing is left to send or to receive. */
function settle(current) {
  if (current !== run || current.timers.size || current.pending) return
  document.body.dataset.finished = Date.now()
  const total = [...current.results.values()].reduce((sum, r) => sum + r.sent, 0)
  setStatus(`${current.stopped ? 'Stopped' : 'Done'}: ${total} requests in ${((Date.now() - current.started) / 1000).toFixed(1)} s.`)
  $('run').disabled = false
  $('stop').disabled = true
  $('reset').disabled = false
  document.body.dataset.state = 'done'
  redraw()
}

async function resetLimits() {
  const response = await fetch(url('/api/reset'), { method: 'POST' })
  // (Read to the end: Chromium reports a response left unread as an aborted request.)
  await response.arrayBuffer()
  if (!response.ok) throw new Error(`reset answered ${response.status}`)
}

async function start(event) {
  event.preventDefault()
  const rate = Number($('rate').value)
  const duration = Number($('duration').value) * 1000
  const burst = Number($('burst').value)
  if (!(rate > 0 && duration > 0 && Number.isInteger(burst) && burst > 0)) {
    return setStatus('The rate and the duration must be above 0, the burst a whole number from 1.')
  }
  if ((rate * duration) / 1000 > MAX_REQUESTS || burst > MAX_REQUESTS) {
    return setStatus(`That is over ${MAX_REQUESTS} requests per route: fewer, please.`)
  }
  const times = schedule($('pattern').value, rate, burst, duration)
  $('run').disabled = true
  $('reset').disabled = true
  document.body.dataset.state = 'running'
  try {
    if ($('fresh').checked) await resetLimits()
  } catch (error) {
    setStatus(`Could not reset: ${error.message}`)
    $('run').disabled = false
    $('reset').disabled = false
    document.body.dataset.state = 'done'
    return
  }
  const current = {
    started: Date.now(),
    span: duration,
    timers: new Set(),
    pending: 0,
    stopped: false,
    results: new Map(algorithms.map((algorithm) => [algorithm.name, fresh()])),
  }
  run = current
  document.body.dataset.started = current.started
  delete document.body.dataset.finished
  $('stop').disabled = false
  setStatus(`Sending ${times.length} requests to each route…`)
  // Requests due at the same instant (a burst) leave from one timer, together.
  const due = new Map()
  for (const t of times) due.set(t, (due.get(t) ?? 0) + 1)
  for (const [t, count] of due) {
    const timer = setTimeout(() => {
      current.timers.delete(timer)
      for (let i = 0; i < count; i++) fire(current, t)
      settle(current)
    }, t)
    current.timers.add(timer)
  }
  redraw()
}

function stop() {
  if (!run) return
  run.stopped = true
  for (const timer of run.timers) clearTimeout(timer)
  run.timers.clear()
  settle(run)
}

async function reset() {
  try {
    await resetLimits()
    run = null
    setStatus('The limits are reset.')
    redraw()
  } catch (error) {
    setStatus(`Could not reset: ${error.message}`)
  }
}

async function load() {
  const response = await fetch('/api/algorithms')
  const config = await response.json()
  algorithms = config.algorithms
  windowMs = config.window
  $('window').textContent = `${windowMs / 1000} s`
  $('summary').textContent =
    `Each route below is limited by one of ratekeeper's algorithms, all to ${config.limit} per ${windowMs / 1000} s ` +
    `(the buckets: ${config.limit} at once, refilled at that rate), ` +
    `keyed by this page's id (${session}), on the ${config.store === 'redis' ? 'Redis' : 'in-memory'} store. ` +
    'Pick a rate and a pattern and run: every request goes to all of them at once.'
  $('algorithms').replaceChildren(...algorithms.map(card))
  $('controls').addEventListener('submit', start)
  $('stop').addEventListener('click', stop)
  $('reset').addEventListener('click', reset)
  $('run').disabled = false
  $('reset').disabled = false
  draw()
  document.body.dataset.state = 'ready'
}

load().catch((error) => {
  setStatus(`Could not load the algorithms: ${error.message}`)
  document.body.dataset.state = 'failed'
})
