-- The precision sliding window (src/sliding_window.rs) on Redis, for one or many calls at once.
-- (lua/prelude.lua, which gives it now_of(), each_counting_call(), whole() and corrupt(), goes
-- after a lone consume's path, which has lua/lone.lua and its keep_alive().)
--
-- The layout is the seed's (over_limit_sliding_window): one hash per identifier, at
-- namespace + id, holds every limit's buckets: field `<duration>:<precision>:<bucket>` the
-- weight counted in that bucket (bucket = floor(now / precision)), and `<duration>:<precision>:o`
-- the oldest bucket that may still have a field. Buckets that left the window are deleted when
-- the identifier is next counted. A call judges every limit of every identifier first and counts
-- only when all admit it: only allowed actions are counted.
--
-- ARGV[1]                  L, the number of limits
-- ARGV[4j-2 .. 4j+1]       limit j's duration and precision (microseconds), buckets per window
--                          and limit (j = 1..L)
-- ARGV[4L+2]               "consume" to count an allowed call, "peek" to only look, "reward" to
--                          give the weight back to every limit, newest live bucket first (never
--                          below 0; an identifier without a hash gets none)
-- ARGV[4L+3]               the TTL of a hash, in milliseconds (the longest duration, plus a
--                          second), set when a call counts in a bucket that had no field yet: a
--                          bucket matters for a duration after it began, and the TTL set at its
--                          first count outlives that (never shortened: see keep_alive in
--                          lua/lone.lua)
-- ARGV[4L+4]               the batch's shape (see each_call in lua/prelude.lua)
-- then per call:           its number of identifiers N, its now (microseconds; "" for the
--                          server's clock) and its weight
-- KEYS                     per call, the hashes of its N identifiers
--
-- Reply: per call (see each_counting_call in lua/prelude.lua), { counts... }: for
-- each identifier and limit (identifier-major), the counts of the limit's live buckets, oldest
-- first, before this call (after it for "reward"); or the error message (a string) of a call that
-- failed alone. src/sliding_window.rs judges from them as this script decided.

-- ARGV[1] to ARGV[4L+3] configure the script (see src/store/script.rs).
local configuration_args = 4 * tonumber(ARGV[1]) + 3

-- (lua/lone.lua goes here)

-- The one limit of a lone consume: its fields' prefix, precision, buckets and limit, made once
-- per configuration (a Function keeps them: see src/store/script.rs), not at every call.
local lone_prefix, lone_precision, lone_bucket_count, lone_limit
if ARGV[1] == '1' then
  lone_prefix = ARGV[2] .. ':' .. ARGV[3] .. ':'
  lone_precision, lone_bucket_count, lone_limit = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
end

-- A lone consume under one limit (see lua/lone.lua): the steps of read_hash() and judge() below,
-- for one identifier.
local function lone_consume()
  if not (ARGV[1] == '1' and ARGV[6] == 'consume' and ARGV[8] == '+' and ARGV[9] == '1') then
    return nil
  end
  local key, prefix = KEYS[1], lone_prefix
  local bucket_count, limit, weight = lone_bucket_count, lone_limit, tonumber(ARGV[11])
  local now, server_now = lone_now(ARGV[10])
  local current = math.floor(now / lone_precision)
  local window_first = current - bucket_count + 1
  local first_live = math.max(window_first, 0)
  local answer, total, counted_now, oldest = {}, 0, false, nil
  for k = 1, bucket_count do
    answer[k] = 0
  end
  local flat = redis.pcall('HGETALL', key)
  local healthy = not flat.err
  for f = 1, #flat, 2 do
    local field_prefix, bucket = string.match(flat[f], '^(%d+:%d+:)([^:]+)$')
    if bucket == 'o' then
      bucket = false
    else
      bucket = bucket and tonumber(bucket)
      if not bucket or bucket % 1 ~= 0 then
        healthy = false
      end
    end
    if field_prefix == prefix and healthy then
      if not bucket then
        oldest = lone_whole(flat[f + 1])
        healthy = oldest ~= nil
      elseif bucket >= window_first and bucket <= current then
        local count = lone_whole(flat[f + 1])
        if count then
          local at = bucket - window_first + 1
          total = total - answer[at] + count
          answer[at] = count
          counted_now = counted_now or bucket == current
        else
          healthy = false
        end
      end
    end
  end
  if healthy then
    if total + weight > limit then
      return { answer, server_now }
    end
    local current_field, written = prefix .. current, nil
    if oldest == first_live then
      written = redis.pcall('HSET', key, current_field, string.format('%d', answer[bucket_count] + weight))
    else
      written = redis.pcall('HSET', key, prefix .. 'o', string.format('%d', first_live), current_field, string.format('%d', answer[bucket_count] + weight))
    end
    -- (HSET answers a number; a failure, { err = ... }.)
    if type(written) == 'number' then
      -- Buckets that left the window since the oldest one written (at most a window's).
      local last_gone = oldest and math.min(first_live, oldest + bucket_count) - 1
      if oldest and last_gone >= oldest then
        local gone = {}
        for b = oldest, last_gone do
          gone[#gone + 1] = prefix .. b
        end
        redis.call('HDEL', key, unpack(gone))
      end
      if not counted_now then
        keep_alive(key, ARGV[7], #flat == 0)
      end
      return { answer, server_now }
    end
  end
end

-- (a Function's configured part ends here)
local lone_answer = lone_consume()
if lone_answer then
  return lone_answer
end

-- (lua/prelude.lua goes here)

local limit_count = tonumber(ARGV[1])
local prefixes, precisions, buckets, limits = {}, {}, {}, {}
for j = 1, limit_count do
  prefixes[j] = ARGV[4 * j - 2] .. ':' .. ARGV[4 * j - 1] .. ':'
  precisions[j] = tonumber(ARGV[4 * j - 1])
  buckets[j] = tonumber(ARGV[4 * j])
  limits[j] = tonumber(ARGV[4 * j + 1])
end
local mode = ARGV[4 * limit_count + 2]
local consume = mode == 'consume'
-- (As a string: a number given to PEXPIRE costs Redis a conversion.)
local ttl = ARGV[4 * limit_count + 3]


-- An identifier's fields as read_hash() reads them, per field: its limit's prefix
-- (`<duration>:<precision>:`), its name, its bucket (false for the oldest bucket's field) and its
-- value. Scratch, reused by every call of the batch (each table a script builds costs Redis CPU).
local read_prefixes, read_names, read_buckets, read_values, read_count = {}, {}, {}, {}, 0

-- Reads the hash at `key` in one HGETALL (one redis.call costs Redis more than the Lua around
-- it), for every limit at once. Its fields are limits' buckets and oldest buckets, also of other
-- limiters that share the namespace; anything else is data this limiter did not write. Only the
-- fields the hash holds are looked at: naming each live bucket of a window costs Redis a string
-- per bucket per call, most of them for buckets a new id does not have. Returns how many fields
-- the hash holds (0 when the key holds nothing).
local function read_hash(key)
  local flat = redis.call('HGETALL', key)
  read_count = 0
  for f = 1, #flat, 2 do
    local name = flat[f]
    local prefix, bucket = string.match(name, '^(%d+:%d+:)([^:]+)$')
    if bucket == 'o' then
      bucket = false
    else
      -- A bucket is a whole number (written as Lua writes numbers: "1.7e+15" for a tiny
      -- precision); "5.5", "nan" or "inf" are not this limiter's.
      bucket = bucket and tonumber(bucket)
      if not bucket or bucket % 1 ~= 0 then
        corrupt(key, 'holds a field ' .. name)
      end
    end
    read_count = read_count + 1
    read_prefixes[read_count], read_names[read_count] = prefix, name
    read_buckets[read_count], read_values[read_count] = bucket, flat[f + 1]
  end
  return #flat / 2
end

-- The writes of a call that is allowed, reused by every call: per limit counted, its identifier's
-- key, the limit, the current bucket's new count, whether that bucket had no field yet, whether
-- the hash had no field at all, and the oldest bucket the hash named (false for none).
local write_keys, write_limits, write_counts, write_fresh, write_alone, write_oldest = {}, {}, {}, {}, {}, {}

-- Per limit, the bucket that holds the call's now.
local current_buckets = {}

-- The oldest bucket of limit j that may hold weight at `now`: the window's first, or bucket 0
-- while the window still reaches back before the epoch (no call is older, and the oldest bucket
-- is stored as a whole number).
local function first_live_bucket(j)
  return math.max(current_buckets[j] - buckets[j] + 1, 0)
end

local function judge(first_key, id_count, now, weight)
  for j = 1, limit_count do
    current_buckets[j] = math.floor(now / precisions[j])
  end
  -- (dead, the buckets to delete per identifier, and refunds are built only when needed.)
  local answer, allowed, writes, dead, refunds = {}, true, 0, nil, nil
  for i = 0, id_count - 1 do
    local key = KEYS[first_key + i]
    local field_count = read_hash(key)
    for j = 1, limit_count do
      local prefix, current = prefixes[j], current_buckets[j]
      local first_live = first_live_bucket(j)
      -- answer[base + k] is the count of the window's k-th bucket, window_first + k - 1.
      local base, window_first = #answer, current - buckets[j] + 1
      for k = 1, buckets[j] do
        answer[base + k] = 0
      end
      local oldest, total, counted_now = nil, 0, false
      for r = 1, read_count do
        if read_prefixes[r] == prefix then
          local bucket = read_buckets[r]
          if not bucket then
            oldest = whole(key, read_names[r], read_values[r])
          elseif bucket >= window_first and bucket <= current then
            -- (Two names of one bucket, "7" and "07", are not what this limiter writes: the last
            -- one read counts, in the answer and in the total alike.)
            local at, count = base + bucket - window_first + 1, whole(key, read_names[r], read_values[r])
            total = total - answer[at] + count
            answer[at] = count
            counted_now = counted_now or bucket == current
          end
        end
      end
      if oldest then
        -- Buckets that left the window since the oldest one written (at most a window's).
        local last_gone = math.min(first_live, oldest + buckets[j]) - 1
        if last_gone >= oldest then
          local gone = {}
          for b = oldest, last_gone do
            gone[#gone + 1] = prefix .. b
          end
          dead = dead or {}
          dead[#dead + 1] = { key, gone }
        end
      end
      if total + weight > limits[j] then
        allowed = false
      end
      if mode == 'reward' then
        -- The newest live buckets first.
        local left = weight
        for k = buckets[j], 1, -1 do
          local at = base + k
          local taken = math.min(left, answer[at])
          if taken > 0 then
            answer[at] = answer[at] - taken
            left = left - taken
            refunds = refunds or {}
            refunds[#refunds + 1] = { key, prefix .. (window_first + k - 1), answer[at] }
          end
        end
      end
      writes = writes + 1
      write_keys[writes], write_limits[writes], write_counts[writes] = key, j, answer[#answer] + weight
      write_fresh[writes], write_oldest[writes] = not counted_now, oldest or false
      write_alone[writes] = field_count == 0
    end
  end
  for _, r in ipairs(refunds or {}) do
    redis.call('HSET', r[1], r[2], r[3])
  end
  if consume and allowed then
    -- Written first: at maxmemory, Redis refuses a script's writes only until its first one.
    -- The oldest bucket is written only when it changes: fewer fields, less work for Redis.
    for w = 1, writes do
      local j = write_limits[w]
      local first_live, current_field = first_live_bucket(j), prefixes[j] .. current_buckets[j]
      if write_oldest[w] == first_live then
        redis.call('HSET', write_keys[w], current_field, write_counts[w])
      else
        redis.call('HSET', write_keys[w], prefixes[j] .. 'o', first_live, current_field, write_counts[w])
      end
    end
    for _, d in ipairs(dead or {}) do
      redis.call('HDEL', d[1], unpack(d[2]))
    end
    -- (An identifier's writes are together, one per limit.)
    local renewed
    for w = 1, writes do
      if write_fresh[w] and write_keys[w] ~= renewed then
        renewed = write_keys[w]
        keep_alive(renewed, ttl, write_alone[w])
      end
    end
  end
  return answer
end

return each_counting_call(configuration_args + 1, judge)
