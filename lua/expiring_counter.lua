-- The expiring counter (src/expiring_counter.rs) on rate-limiter-flexible's own Redis layout, for
-- one or many calls at once. (After lua/prelude.lua, which gives it each_call(), answer_of() and
-- corrupt().)
--
-- One string per key: the points counted, a whole number, with the time left as the key's TTL (no
-- TTL: it never expires). rate-limiter-flexible's RateLimiterRedis reads and writes the same keys
-- the same way, so that both can count together.
--
-- ARGV[1]        the batch's shape (see each_call in lua/prelude.lua)
-- then per call: its mode, its points and its duration in milliseconds (0: the key never expires),
-- or for "union" its limits and durations
--   "add"    adds the points; a key that does not exist starts holding them, with the duration
--            as its TTL; one without a TTL is given the duration (as rate-limiter-flexible does)
--   "set"    sets the key to the points with the duration as its TTL (0: none)
--   "over"   adds the points as "add" does; then, when the key was there already and now holds
--            more than a limit, starts its TTL again: the duration times a growth to the power of
--            how far the count is past the limit + 1, at most 1e12 ms (@fastify/rate-limit's
--            continueExceeding: growth 1; its exponentialBackoff: 2). Its duration argument is
--            "duration limit growth", space separated
--   "get"    reads the key
--   "delete" deletes the key
--   "union"  adds the points to each of its N keys as "add" does, or to none when one of them
--            would go over its limit: its third argument is "limit duration" per key, space
--            separated (rate-limiter-flexible's RateLimiterUnion, atomic)
-- KEYS           per call, its key (a "union" its N keys)
--
-- Reply: per call, { points, ms left (-1: never expires), 1 when this call started the key else 0 }
-- for "add", "over" and "set", the same or {} (no key) for "get", 1 or 0 (whether a key was deleted) for
-- "delete", and for "union" per key { points, ms left (-2: no key), started, 1 when refused };
-- or the error message (a string) of a call that failed alone.

-- The count a key holds: its string as a whole number (what INCRBY keeps), or the call's failure.
local function count_of(key, value)
  local points = tonumber(value)
  if not points or not string.match(value, '^-?%d+$') then
    corrupt(key, 'holds ' .. value .. ', not a whole number of points')
  end
  return points
end

-- Adds `points` to the count at `key`, which starts with them (for `duration` ms) when absent.
local function add(key, points, duration)
  local fresh = 0
  if duration ~= '0' then
    -- Started here when absent: then its TTL is the duration.
    if redis.call('SET', key, 0, 'PX', duration, 'NX') then
      fresh = 1
    end
  elseif redis.call('EXISTS', key) == 0 then
    fresh = 1
  end
  local count = redis.call('INCRBY', key, points)
  if fresh == 1 then
    -- Its TTL is the duration just set (none for 0): no PTTL to ask.
    return { count, duration ~= '0' and tonumber(duration) or -1, fresh }
  end
  local left = redis.call('PTTL', key)
  if left == -1 and duration ~= '0' then
    redis.call('PEXPIRE', key, duration)
    left = tonumber(duration)
  end
  return { count, left, fresh }
end

-- The longest TTL "over" gives, in ms (as the engine's longest duration).
local LONGEST_MS = 1e12

-- "add", then past `limit` the TTL starts again, `growth` times longer for each hit further past.
local function add_over(key, points, spec)
  local duration, limit, growth = string.match(spec, '^(%d+) (%S+) (%S+)$')
  local answer = add(key, points, duration)
  if answer[3] == 1 or answer[1] <= tonumber(limit) or duration == '0' then
    return answer
  end
  local window = math.min(tonumber(duration) * tonumber(growth) ^ (answer[1] - tonumber(limit) - 1), LONGEST_MS)
  window = math.max(math.floor(window), 1)
  -- (As a string: a Lua number this large would be written as 1e+12, which PEXPIRE refuses.)
  redis.call('PEXPIRE', key, string.format('%d', window))
  answer[2] = window
  return answer
end

-- Sets the count at `key` to `points` for `duration` ms (0: for good).
local function set(key, points, duration)
  if duration ~= '0' then
    redis.call('SET', key, points, 'PX', duration)
    return { tonumber(points), tonumber(duration), 1 }
  end
  redis.call('SET', key, points)
  return { tonumber(points), -1, 1 }
end

-- A union of the keys from KEYS[first_key] on, one per "limit duration" of `limits`: `points`
-- are added to every key, or to none when one would go over its limit (then each key's answer
-- tells what it holds, and whether it is one that refused).
local function union(first_key, points, limits)
  -- Per key: its value (false: none) and its count once the points of the union's entries so far
  -- are added (a key given twice takes them twice).
  local keys, values, after, refused = {}, {}, {}, {}
  local any_refused = false
  for limit, duration in string.gmatch(limits, '(%S+) (%S+)') do
    local i = #keys + 1
    local key = KEYS[first_key + i - 1]
    keys[i] = { key, duration }
    if values[key] == nil then
      values[key] = redis.call('GET', key)
    end
    local value = values[key]
    after[key] = (after[key] or (value and count_of(key, value) or 0)) + tonumber(points)
    refused[i] = after[key] > tonumber(limit)
    any_refused = any_refused or refused[i]
  end
  local answers = {}
  for i, entry in ipairs(keys) do
    local key, value = entry[1], values[entry[1]]
    if any_refused then
      -- Nothing written: what the key holds.
      answers[i] = { value and count_of(key, value) or 0, value and redis.call('PTTL', key) or -2, 0, refused[i] and 1 or 0 }
    elseif not value and after[key] == tonumber(points) then
      -- Absent (and not given twice): it starts with the points.
      answers[i] = set(key, points, entry[2])
      answers[i][4] = 0
    else
      answers[i] = add(key, points, entry[2])
      answers[i][4] = 0
    end
  end
  return answers
end

local function call(key, mode, points, duration)
  if mode == 'add' then
    return add(key, points, duration)
  elseif mode == 'over' then
    return add_over(key, points, duration)
  elseif mode == 'set' then
    return set(key, points, duration)
  elseif mode == 'get' then
    local value = redis.call('GET', key)
    if not value then
      return {}
    end
    return { count_of(key, value), redis.call('PTTL', key), 0 }
  end
  return redis.call('DEL', key)
end

local answers, next_key = {}, 1
for i, arg in each_call(1, 3) do
  local mode = ARGV[arg]
  if mode == 'union' then
    local _, key_count = string.gsub(ARGV[arg + 2], '%S+ %S+', '')
    answers[i] = answer_of(pcall(union, next_key, ARGV[arg + 1], ARGV[arg + 2]))
    next_key = next_key + key_count
  else
    answers[i] = answer_of(pcall(call, KEYS[next_key], mode, ARGV[arg + 1], ARGV[arg + 2]))
    next_key = next_key + 1
  end
end
return answers
