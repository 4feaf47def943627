-- The leaky bucket as a meter (src/leaky_bucket.rs) on Redis, for one or many calls at once.
-- (lua/prelude.lua, which gives it now_of(), bucket_pair() and each_counting_call(), goes after a
-- lone consume's path, which has lua/lone.lua.)
--
-- The seed's bucket, `level` (the weight in the bucket) and `ts` (microseconds: the instant of its
-- last leak, or of its start), as one string per identifier at namespace + id, "<level>:<ts>" (one
-- SET ... PX writes it with its TTL; an earlier version's hash of fields `level` and `ts`, the
-- seed's layout, is read too: see bucket_pair in lua/prelude.lua). Leaks happen at ts + k *
-- interval; a drain moves ts by whole intervals only, so the phase is kept. A bucket that drains
-- to empty is forgotten: the next allowed call starts one at its own now. A late call (now before
-- ts) drains nothing. A call is allowed when every identifier's bucket, drained to now, has room
-- for its weight; only allowed calls fill the buckets.
--
-- Every number stays a whole number below 2^53, exact in a double: levels and weights are at most
-- 1e15 (foreign levels below 2^53), instants below 2^53; leaks = floor(elapsed / interval) is
-- exact for such integers, leaks * interval <= elapsed, and leaks * leak_amount < level when the
-- bucket does not empty.
--
-- ARGV[1]      the capacity
-- ARGV[2]      the leak amount
-- ARGV[3]      the leak interval (microseconds)
-- ARGV[4]      "consume" to fill the buckets for an allowed call, "peek" to only look, "reward" to
--              take the weight out of each bucket drained to now (never below 0; an identifier
--              without a bucket gets none; an emptied bucket is deleted)
-- ARGV[5]      the TTL of a bucket, in milliseconds (the time a full bucket takes to drain, plus a
--              second), set on every write
-- ARGV[6]        the batch's shape (see each_call in lua/prelude.lua)
-- then per call: its number of identifiers N, its now (microseconds; "" for the server's clock)
--              and its weight
-- KEYS         per call, the buckets of its N identifiers
--
-- Reply: per call (see each_counting_call in lua/prelude.lua), { level, ts, level,
-- ts, ... }: each identifier's bucket drained to now (before this call; after it for "reward"),
-- level 0 and ts = now for an empty one; or the error message (a string) of a call that failed
-- alone. src/leaky_bucket.rs judges from them as this script decided.

-- ARGV[1] to ARGV[5] configure the script (see src/store/script.rs).
local configuration_args = 5
local capacity = tonumber(ARGV[1])
local leak_amount = tonumber(ARGV[2])
local interval = tonumber(ARGV[3])
local mode = ARGV[4]
-- (As a string: a number given to SET ... PX costs Redis a conversion.)
local ttl = ARGV[5]

-- The bucket (level, ts) at now: the leaks due since ts taken out (Bucket::at in Rust).
local function drained(level, ts, now)
  if level == 0 then
    return 0, now
  end
  local elapsed = now - ts
  if elapsed < interval then
    return level, ts
  end
  local leaks = math.floor(elapsed / interval)
  if leaks >= math.ceil(level / leak_amount) then
    return 0, now
  end
  return level - leaks * leak_amount, ts + leaks * interval
end

-- Stores a bucket, the string "<level>:<ts>" (see bucket_pair in lua/prelude.lua), with the TTL.
-- (Whole numbers go to Redis as strings: a number passed to redis.call costs Redis a %.17g.)
local function write(key, level, ts)
  redis.call('SET', key, string.format('%d:%d', level, ts), 'PX', ttl)
end

-- (lua/lone.lua goes here)

-- A lone consume (see lua/lone.lua): the steps of judge() below, for one bucket.
local function lone_consume()
  if not (mode == 'consume' and ARGV[6] == '+' and ARGV[7] == '1') then
    return nil
  end
  local key = KEYS[1]
  local now, server_now = lone_now(ARGV[8])
  local healthy, level, ts = lone_pair(key)
  if healthy then
    level, ts = drained(level or 0, ts or now, now)
    local weight = tonumber(ARGV[9])
    local refused = weight > capacity or level + weight > capacity
    if refused or pcall(write, key, level + weight, level == 0 and now or ts) then
      return { { level, ts }, server_now }
    end
  end
end

-- (a Function's configured part ends here)
local lone_answer = lone_consume()
if lone_answer then
  return lone_answer
end

-- (lua/prelude.lua goes here)

local function judge(first_key, id_count, now, weight)
  local answer, allowed, found = {}, weight <= capacity, {}
  for i = 0, id_count - 1 do
    local key = KEYS[first_key + i]
    local level, ts = bucket_pair(key, 'level', 'ts')
    found[i] = level ~= nil
    level, ts = drained(level or 0, ts or now, now)
    answer[2 * i + 1], answer[2 * i + 2] = level, ts
    if level + weight > capacity then
      allowed = false
    end
  end
  if mode == 'reward' then
    for i = 0, id_count - 1 do
      if found[i] then
        local key, level = KEYS[first_key + i], math.max(0, answer[2 * i + 1] - weight)
        answer[2 * i + 1] = level
        if level == 0 then
          answer[2 * i + 2] = now
          redis.call('DEL', key)
        else
          write(key, level, answer[2 * i + 2])
        end
      end
    end
  elseif mode == 'consume' and allowed then
    for i = 0, id_count - 1 do
      local level, ts = answer[2 * i + 1], answer[2 * i + 2]
      if level == 0 then
        ts = now
      end
      write(KEYS[first_key + i], level + weight, ts)
    end
  end
  return answer
end

return each_counting_call(configuration_args + 1, judge)
