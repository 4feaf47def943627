'use strict'

/**
 * The middleware's rate-limit headers: the IETF drafts as express-rate-limit 8 writes them
 * (draft-6, draft-7, draft-8), the common `X-RateLimit-*` ('legacy') and the seed's
 * `X-Rate-Limit-*`; and the policy's window, read from the limiter.
 */

const { typeError, shown } = require('./errors.js')

const MODES = ['draft-6', 'draft-7', 'draft-8', 'legacy', 'x-rate-limit']

/**
 * The `headers` option as a list of modes: one mode, an array of them, `false` (none) or
 * `true` ('draft-6', the headers `true` meant before the modes). draft-8 writes `RateLimit`
 * and `RateLimit-Policy` in another format than draft-6 and draft-7: it goes alone.
 */
function headerModes(value) {
  if (value === false) return []
  if (value === true) return ['draft-6']
  const modes = Array.isArray(value) ? value : [value]
  for (const mode of modes) {
    if (!MODES.includes(mode)) {
      throw typeError('ERR_INVALID_OPTION', `\`headers\` must be false or one of ${MODES.map((m) => `'${m}'`).join(', ')} (or an array of them), got ${shown(mode)}`)
    }
  }
  if (modes.includes('draft-8') && (modes.includes('draft-6') || modes.includes('draft-7'))) {
    throw typeError('ERR_INVALID_OPTION', "`headers`: 'draft-8' writes `RateLimit` and `RateLimit-Policy` in another format than 'draft-6' and 'draft-7': choose one")
  }
  return [...new Set(modes)]
}

const positive = (value) => typeof value === 'number' && value > 0 && Number.isFinite(value)

/**
 * How to find the window (ms) of a policy answered by `limiter`: a function of the answer, giving
 * `undefined` for a limiter of unknown kind.
 *
 * - the window limiters (`limits`): the duration of the limit that decided (the answer's
 *   `limit`; of several limits with that value, the longest duration);
 * - the rolling windows (`RateLimiter`, `SlidingLog`): `interval` (which they expose in µs);
 * - the token bucket: `refillInterval * capacity / refillAmount`, the time to refill from empty;
 * - the leaky bucket: `leakInterval * capacity / leakAmount`, the time to drain when full;
 * - GCRA: `period * burst / limit`, the time a full burst takes to come back.
 */
function policyWindow(limiter) {
  if (Array.isArray(limiter.limits)) {
    const durations = new Map()
    for (const { limit, duration } of limiter.limits) {
      if (positive(duration)) durations.set(limit, Math.max(duration, durations.get(limit) ?? 0))
    }
    return (answer) => durations.get(answer.limit)
  }
  const fixed = bucketWindow(limiter)
  return () => fixed
}

function bucketWindow(limiter) {
  const { capacity, refillInterval, refillAmount, leakInterval, leakAmount, period, burst, limit, interval, maxInInterval } = limiter
  if (positive(refillInterval) && positive(capacity) && positive(refillAmount)) return (refillInterval * capacity) / refillAmount
  if (positive(leakInterval) && positive(capacity) && positive(leakAmount)) return (leakInterval * capacity) / leakAmount
  if (positive(period) && positive(burst) && positive(limit)) return (period * burst) / limit
  // rolling-rate-limiter's classes expose `interval` in microseconds.
  if (positive(interval) && positive(maxInInterval)) return interval / 1000
  return undefined
}

/** express-rate-limit's default policy name for draft-8: `100-in-1min`, `5-in-2hrs`, `10-in-1day`. */
function policyName(limit, windowMs) {
  if (windowMs === undefined) return String(limit)
  const seconds = windowMs / 1000
  const minutes = seconds / 60
  const hours = minutes / 60
  const days = hours / 24
  let duration
  if (seconds < 60) duration = `${seconds}sec`
  else if (minutes < 60) duration = `${minutes}min`
  else if (hours < 24) duration = `${hours}hr${hours > 1 ? 's' : ''}`
  else duration = `${days}day${days > 1 ? 's' : ''}`
  return `${limit}-in-${duration}`
}

/** draft-8's partition key, as express-rate-limit makes it: base64 of the first 12 hex digits of the key's SHA-256. */
function partitionKey(key) {
  // node:crypto is loaded here, on draft-8's first header: loading it costs a few ms at startup.
  const hex = require('node:crypto').createHash('sha256').update(String(key)).digest('hex').slice(0, 12)
  return Buffer.from(hex).toString('base64')
}

/** A structured-field string's content: `\` and `"` escaped. */
const sfString = (text) => text.replace(/[\\"]/g, '\\$&')

/**
 * Writes the headers of `modes` for one answer. `state`: `{ limit, remaining, resetAfter, windowMs,
 * key, name() }` (`remaining` already 0 for a refusal; `name` gives draft-8's policy name).
 */
function writeHeaders(res, modes, state) {
  const { limit, remaining, resetAfter, windowMs } = state
  const reset = Math.ceil(resetAfter / 1000)
  const window = windowMs === undefined ? undefined : Math.ceil(windowMs / 1000)
  for (const mode of modes) {
    switch (mode) {
      case 'draft-6':
        res.setHeader('RateLimit-Policy', window === undefined ? `${limit}` : `${limit};w=${window}`)
        res.setHeader('RateLimit-Limit', String(limit))
        res.setHeader('RateLimit-Remaining', String(remaining))
        res.setHeader('RateLimit-Reset', String(reset))
        break
      case 'draft-7':
        res.setHeader('RateLimit-Policy', window === undefined ? `${limit}` : `${limit};w=${window}`)
        res.setHeader('RateLimit', `limit=${limit}, remaining=${remaining}, reset=${reset}`)
        break
      case 'draft-8': {
        const name = sfString(state.name())
        const w = window === undefined ? '' : `; w=${window}`
        res.appendHeader('RateLimit', `"${name}"; r=${remaining}; t=${reset}`)
        res.appendHeader('RateLimit-Policy', `"${name}"; q=${limit}${w}; pk=:${partitionKey(state.key)}:`)
        break
      }
      case 'legacy': {
        // As express-rate-limit: a Date header of the same instant, for the epoch-seconds reset.
        const now = Date.now()
        res.setHeader('X-RateLimit-Limit', String(limit))
        res.setHeader('X-RateLimit-Remaining', String(remaining))
        res.setHeader('Date', new Date(now).toUTCString())
        res.setHeader('X-RateLimit-Reset', String(Math.ceil((now + resetAfter) / 1000)))
        break
      }
      case 'x-rate-limit':
        res.setHeader('X-Rate-Limit-Limit', String(limit))
        res.setHeader('X-Rate-Limit-Remaining', String(remaining))
        break
    }
  }
}

module.exports = { headerModes, policyWindow, policyName, writeHeaders }
