-- The token bucket (src/token_bucket.rs) on Redis, for one or many calls at once.
-- (lua/prelude.lua, which gives it now_of(), each_counting_call() and bucket_pair(), goes after a
-- lone consume's path, which has lua/lone.lua.)
--
-- One string per identifier, at namespace + id: "<tokens>:<ts>", `tokens` the bucket's level in
-- scaled units (1/unit of a token, unit = the refill interval in microseconds / gcd(refillAmount,
-- that interval)), and `ts` the instant (microseconds) that level is as of (an earlier version's
-- hash of fields `tokens` and `ts` is read too: see bucket_pair in lua/prelude.lua). The level
-- refills by `rate` units each microsecond up to `full`. A bucket starts at an identifier's first
-- consume, allowed or refused, holding `fresh` (the `initial` tokens) as of that call; it is
-- forgotten once it has been full for `forget` microseconds (0 when fresh == full: a full bucket
-- is then the same as none), the instant it became full following from `tokens` and `ts` (not from
-- the key's expiry), and a forgotten bucket is the same as none. A call reads every identifier's
-- bucket, refilled up to its now, and takes the weight from all of them only when all hold it. A
-- refused consume of a weight that can pass (weight <= capacity), when fresh < full, starts the
-- bucket of each of its identifiers that has none (or a forgotten one), charging nothing, and
-- leaves the others as they are; otherwise refusals write nothing.
--
-- ARGV[1]   capacity, in tokens
-- ARGV[2]   unit: scaled units per token
-- ARGV[3]   rate: scaled units credited per microsecond
-- ARGV[4]   full: capacity * unit (at most 2^53)
-- ARGV[5]   fresh: initial * unit, the level a bucket starts with
-- ARGV[6]   forget: how long a full bucket is kept, in microseconds (forgetAfter; 0 when
--           fresh == full), at most 10^15
-- ARGV[7]   "consume" to take an allowed weight, "peek" to only look, "reward" to give the weight
--           back (up to full; an identifier without a bucket gets none)
-- ARGV[8]   the engine's TTL in milliseconds (the longest a bucket matters, plus a second):
--           unused, as each write sets its own TTL: the time until its bucket is forgotten
--           (until full, plus `forget`), plus a second
-- ARGV[9]        the batch's shape (see each_call in lua/prelude.lua)
-- then per call: its number of identifiers N, its now (microseconds; "" for the server's clock)
--           and its weight
-- KEYS      per call, the buckets of its N identifiers
--
-- Reply: per call (see each_counting_call in lua/prelude.lua), { level_1, ahead_1,
-- ..., level_N, ahead_N }: each bucket at now (scaled units) before this call (after it for
-- "reward"), a bucket without state holding `fresh` as of now, and how many microseconds the
-- bucket's instant is ahead of now (a late call, from a host whose clock is behind, gets no refill:
-- the bucket refills from its instant on); or the error message (a string) of a call that failed
-- alone. src/token_bucket.rs judges from them as this script decided.
--
-- Exactness. Lua numbers are doubles, exact for whole numbers up to 2^53; a sum, difference or
-- product of whole numbers is exact when its true value is at most 2^53 (the true value is
-- representable, and IEEE arithmetic rounds to it). Every value formed here is: levels and
-- weight * unit are at most full <= 2^53 (weight * unit only for weight <= capacity), instants are
-- at most 4 * 10^15 < 2^53 (stored ones below 2^53), the time to full at most full, and
-- rate * elapsed is only added to a level below the time to full, where it is below
-- full - level. It is compared with full - level first, which is exact as a comparison: below
-- 2^53 the product is exact, and at or above it, it rounds to 2^53 or more, above full - level
-- either way. The time to full plus `forget` may pass 2^53: it is never formed (their difference
-- is compared), and a TTL is summed in milliseconds, each term rounded up.
--
-- floor(a / b) is exact for whole 0 <= a <= 2^53 and b >= 1. Let q = floor(a / b), so that
-- q <= a / b <= q + 1 - 1 / b. q (at most a) is a double, so the rounded quotient is at least q;
-- it could only round up to q + 1 from within half a spacing of the doubles below q + 1. Those
-- lie in the binade [2^e, 2^(e+1)) that holds a / b, whose spacing is 2^(e-52) <= 2^-52 * a / b:
-- half of it is at most 2^-53 * a / b <= 1 / b (as a <= 2^53), with equality only when
-- a / b = 2^e, which is exact. So a / b, which is at least 1 / b below q + 1, rounds below it, and
-- math.floor gives q. Then ceil(a / b) = q + (q * b < a and 1 or 0), with q * b <= a exact.

-- ARGV[1] to ARGV[8] configure the script (see src/store/script.rs).
local configuration_args = 8
local capacity = tonumber(ARGV[1])
local unit = tonumber(ARGV[2])
local rate = tonumber(ARGV[3])
local full = tonumber(ARGV[4])
local fresh = tonumber(ARGV[5])
local forget = tonumber(ARGV[6])
local mode = ARGV[7]

-- ceil(a / b) for whole 0 <= a <= 2^53, b >= 1 (exact: see above).
local function ceil_div(a, b)
  local q = math.floor(a / b)
  if q * b < a then
    return q + 1
  end
  return q
end

local forget_ms = ceil_div(forget, 1000)

-- Microseconds until a bucket at `level` is full (0 when it is; a level above full, another
-- configuration's, is full).
local function to_full(level)
  if level >= full then
    return 0
  end
  return ceil_div(full - level, rate)
end

-- The level at now of a bucket that held `level` at `last`, or nil when it has been full for
-- `forget` by now (and so is forgotten). A late call (now before last) gets no refill. (Whole
-- microseconds: elapsed * rate < full - level says elapsed < to_full(level), without its
-- divisions; this runs at every call, and each function call and division costs Redis.)
local function refilled(level, last, now)
  local elapsed = now - last
  if elapsed < 0 then
    elapsed = 0
  end
  if level < full and elapsed * rate < full - level then
    return level + rate * elapsed
  end
  if elapsed - to_full(level) < forget then
    return full
  end
  return nil
end

-- Stores a bucket: `level` as of `since` (the string "<tokens>:<ts>", see bucket_pair in
-- lua/prelude.lua), until it is forgotten (from now: the lead of `since`, the time to full,
-- `forget`) and a second, in milliseconds rounded up term by term. (Whole numbers go to Redis as
-- strings: a number passed to redis.call costs Redis a %.17g.)
local function store(key, level, since, now)
  local ttl = forget_ms + 1000
  if since > now then
    ttl = ttl + ceil_div(since - now, 1000)
  end
  if level < full then
    ttl = ttl + ceil_div(to_full(level), 1000)
  end
  redis.call('SET', key, string.format('%d:%d', level, since), 'PX', string.format('%d', ttl))
end

-- (lua/lone.lua goes here)

-- A lone consume (see lua/lone.lua): the steps of judge() below, for one bucket.
local function lone_consume()
  if mode ~= 'consume' or ARGV[9] ~= '+' or ARGV[10] ~= '1' then
    return nil
  end
  local key = KEYS[1]
  local now, server_now = lone_now(ARGV[11])
  local healthy, level, last = lone_pair(key)
  if healthy then
    local now_level = level and refilled(level, last, now)
    local since = now_level and last > now and last or now
    local held = now_level or fresh
    local weight = tonumber(ARGV[12])
    local need = weight <= capacity and weight * unit or nil
    local written = true
    if need and held >= need then
      written = pcall(store, key, held - need, since, now)
    elseif need and fresh < full and not now_level then
      written = pcall(store, key, fresh, now, now)
    end
    if written then
      return { { held, since - now }, server_now }
    end
  end
end

-- (a Function's configured part ends here)
local lone_answer = lone_consume()
if lone_answer then
  return lone_answer
end

-- (lua/prelude.lua goes here)

-- Gives `weight` back to each kept bucket, up to full. A bucket it fills is dropped when
-- fresh == full (the same as none), else kept full as of its instant; one full already is left as
-- it is. A stored bucket forgotten by now is dropped too: it is the same as none.
local function reward(first_key, id_count, now, weight, levels, since, kept, stored)
  local drops = {}
  for i = 0, id_count - 1 do
    local key = KEYS[first_key + i]
    if kept[i] and levels[i] < full then
      -- weight < capacity keeps weight * unit below full, exact.
      if weight < capacity and weight * unit < full - levels[i] then
        levels[i] = levels[i] + weight * unit
      else
        levels[i] = full
      end
      if levels[i] < full or forget > 0 then
        store(key, levels[i], since[i], now)
      else
        levels[i], since[i] = fresh, now
        drops[#drops + 1] = key
      end
    elseif not kept[i] and stored[i] then
      drops[#drops + 1] = key
    end
  end
  if #drops > 0 then
    redis.call('DEL', unpack(drops))
  end
end

local function judge(first_key, id_count, now, weight)
  local levels, since, kept, stored = {}, {}, {}, {}
  -- A weight above the capacity never passes (and weight * unit might pass 2^53).
  local need = weight <= capacity and weight * unit or nil
  local allowed = need ~= nil
  for i = 0, id_count - 1 do
    local key = KEYS[first_key + i]
    local level, last = bucket_pair(key, 'tokens', 'ts')
    stored[i] = level ~= nil
    local now_level = level and refilled(level, last, now)
    if now_level then
      levels[i], since[i], kept[i] = now_level, math.max(last, now), true
    else
      levels[i], since[i], kept[i] = fresh, now, false
    end
    if need and levels[i] < need then
      allowed = false
    end
  end
  if mode == 'reward' then
    reward(first_key, id_count, now, weight, levels, since, kept, stored)
  elseif mode == 'consume' and allowed then
    for i = 0, id_count - 1 do
      store(KEYS[first_key + i], levels[i] - need, since[i], now)
    end
  elseif mode == 'consume' and need and fresh < full then
    -- Refused, but it can pass later: start the buckets that have none.
    for i = 0, id_count - 1 do
      if not kept[i] then
        store(KEYS[first_key + i], fresh, now, now)
      end
    end
  end
  local answer = {}
  for i = 0, id_count - 1 do
    answer[#answer + 1] = levels[i]
    answer[#answer + 1] = since[i] - now
  end
  return answer
end

return each_counting_call(configuration_args + 1, judge)
