'use strict'

/**
 * `blockCache`: once Redis has refused an id until some instant, later calls for that id before
 * it are answered in this process, with the answer Redis would give, and no round trip. Against
 * a hot-key attack (a few ids sending everything, all over their limit) it spares Redis and the
 * network almost all of the traffic.
 *
 * What it answers, exactly as the store would:
 * - calls with one string id, of weight 1, with no `now` or a whole-millisecond one, in the
 *   same family of modes as the refusal it learned from (e.g. `consume` and `peek`);
 * - until the instant the refusal named: a refusal with nothing left (`remaining` 0) stays one
 *   until then, with nothing left, since no call of any process can be allowed meanwhile, and
 *   its wait and reset count down with the clock.
 * It learns the instant as the time the call was sent plus the wait Redis answered, so an entry
 * never outlives the refusal (with the Redis server's clock, its waits can be shorter than
 * Redis's by the round trip of the call it learned from, and by the round trip the direct lane
 * learned its estimate of that clock from when the call carried it; never longer). `reset` and `reward`
 * through this limiter forget the ids they name; through another process they cannot be seen,
 * so an id another process rewarded stays refused here until the instant learned.
 *
 * The rolling window's `recordBlocked: true` records every refused attempt in Redis, which
 * extends the block: answering in process would record nothing, so that combination is refused
 * (pass `recordBlocked: false`). Of rolling-rate-limiter's `limit` answers only the refusals by
 * count alone are learned: one by `minDifference` ends while the count keeps changing.
 */

const { rangeError, typeError, shown } = require('./errors.js')

/** Ids remembered at most, by default (the oldest learned is forgotten first). */
const DEFAULT_MAX_IDS = 10_000

/**
 * Reads the `blockCache` option (`true`, or `{ maxIds }`) of a limiter on Redis (`onRedis`);
 * `null` when off.
 */
function blockCacheOption(value, onRedis, name) {
  if (value === undefined || value === false) return null
  let maxIds = DEFAULT_MAX_IDS
  if (value !== true) {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      throw typeError('ERR_INVALID_OPTION', `\`blockCache\` must be true, false or { maxIds }, got ${value === null ? 'null' : typeof value}`)
    }
    for (const key of Object.keys(value)) {
      if (key !== 'maxIds') throw typeError('ERR_UNKNOWN_OPTION', `unknown option \`${key}\` in ${name}'s blockCache; the options are \`maxIds\``)
    }
    if (value.maxIds !== undefined) {
      maxIds = value.maxIds
      if (typeof maxIds !== 'number' || !Number.isInteger(maxIds) || maxIds < 1 || maxIds > 1e7) {
        throw rangeError('ERR_INVALID_OPTION', `\`blockCache.maxIds\` must be a whole number from 1 to 1e7, got ${shown(maxIds)}`)
      }
    }
  }
  if (!onRedis) throw typeError('ERR_INVALID_OPTION', '`blockCache` applies to limiters on Redis (`client`): in memory every answer is local already')
  return { maxIds }
}

/**
 * Wraps `run(mode, id, options, decode)` (see lib/engine.js) with a block cache.
 *
 * `modes[mode]` describes the modes it may answer: `{ family, learn(values, i) }`, where calls of
 * one family answer alike when refused, and `learn` says whether a refusal (the engine's five
 * numbers at `values[i]`) is one that lasts unchanged until its wait is over. `forgetting` lists
 * the modes whose ids are forgotten (reset, reward). The engine's numbers are
 * `[flags, timeLeft, remaining, limit, resetAfter]`.
 */
function withBlockCache(run, { maxIds }, modes, forgetting) {
  /** id -> { until, resetAt, values, family }, oldest learned first. */
  const entries = new Map()
  const answer = new Float64Array(5)

  /** `options`' instant, when the cache may answer a call with them: an integer, or NaN. */
  const instantOf = (options) => {
    if (options === undefined || options === null) return Date.now()
    if (typeof options !== 'object') return NaN
    let now = Date.now()
    try {
      for (const name in options) {
        const value = options[name]
        if (value === undefined) continue
        if (name === 'now' && Number.isInteger(value) && value >= 0) now = value
        else if (!(name === 'weight' && value === 1)) return NaN
      }
    } catch {
      return NaN
    }
    return now
  }

  const forget = (ids) => {
    try {
      if (typeof ids === 'string') entries.delete(ids)
      else if (Array.isArray(ids)) for (const id of ids) if (typeof id === 'string') entries.delete(id)
    } catch {
      // A revoked Proxy or a throwing getter: the call itself reports it.
    }
  }

  return (mode, id, options, decode) => {
    if (forgetting.includes(mode)) {
      forget(id)
      return run(mode, id, options, decode)
    }
    const kind = modes[mode]
    if (kind === undefined || typeof id !== 'string') return run(mode, id, options, decode)
    const now = instantOf(options)
    if (Number.isNaN(now)) return run(mode, id, options, decode)
    const entry = entries.get(id)
    if (entry !== undefined) {
      if (now < entry.until && entry.family === kind.family) {
        const values = entry.values
        // (Decoded at once: one scratch array serves every answer.)
        answer[0] = values[0]
        answer[1] = entry.until - now
        answer[2] = values[2]
        answer[3] = values[3]
        answer[4] = Math.max(0, entry.resetAt - now)
        return Promise.resolve(decode(answer, 0))
      }
      if (now >= entry.until) entries.delete(id)
    }
    // Learn from what Redis answers (the instant is when the call left, so the entry ends no
    // later than the refusal).
    return run(mode, id, options, (values, i) => {
      const timeLeft = values[i + 1]
      if (kind.learn(values, i) && timeLeft > 0 && Number.isFinite(timeLeft)) {
        entries.delete(id)
        if (entries.size >= maxIds) entries.delete(entries.keys().next().value)
        entries.set(id, {
          until: now + timeLeft,
          resetAt: now + values[i + 4],
          values: [values[i], 0, values[i + 2], values[i + 3], 0],
          family: kind.family,
        })
      }
      return decode(values, i)
    })
  }
}

module.exports = { blockCacheOption, withBlockCache }
