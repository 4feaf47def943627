-- The expiring counter (src/expiring_counter.rs) on rate-limiter-flexible's own Redis layout, for
-- one or many calls at once. (After lua/prelude.lua, which gives it each_call(), answer_of() and
-- corrupt().)
--
-- One string per key: the points counted, a whole number, with the time left as the key's TTL (no
-- TTL: it never expires). rate-limiter-flexible's RateLimiterRedis reads and writes the same keys
-- the same way, so that both can count together.
--
-- ARGV[1]        the batch's shape (see each_call in lua/prelude.lua)
-- then per call: its mode, its points and its duration in milliseconds (0: the key never expires)
--   "add"    adds the points; a key that does not exist starts holding them, with the duration
--            as its TTL; one without a TTL is given the duration (as rate-limiter-flexible does)
--   "set"    sets the key to the points with the duration as its TTL (0: none)
--   "get"    reads the key
--   "delete" deletes the key
-- KEYS           per call, its key
--
-- Reply: per call, { points, ms left (-1: never expires), 1 when this call started the key else 0 }
-- for "add" and "set", the same or {} (no key) for "get", 1 or 0 (whether a key was deleted) for
-- "delete"; or the error message (a string) of a call that failed alone.

-- The count a key holds: its string as a whole number (what INCRBY keeps), or the call's failure.
local function count_of(key, value)
  local points = tonumber(value)
  if not points or not string.match(value, '^-?%d+$') then
    corrupt(key, 'holds ' .. value .. ', not a whole number of points')
  end
  return points
end

local function call(key, mode, points, duration)
  if mode == 'add' then
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
  elseif mode == 'set' then
    if duration ~= '0' then
      redis.call('SET', key, points, 'PX', duration)
      return { tonumber(points), tonumber(duration), 1 }
    end
    redis.call('SET', key, points)
    return { tonumber(points), -1, 1 }
  elseif mode == 'get' then
    local value = redis.call('GET', key)
    if not value then
      return {}
    end
    return { count_of(key, value), redis.call('PTTL', key), 0 }
  end
  return redis.call('DEL', key)
end

local answers = {}
for i, arg in each_call(1, 3) do
  answers[i] = answer_of(pcall(call, KEYS[i], ARGV[arg], ARGV[arg + 1], ARGV[arg + 2]))
end
return answers
