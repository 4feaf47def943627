-- The precision sliding window (src/sliding_window.rs) on Redis, for one or many calls at once.
-- (After lua/prelude.lua, which gives it now_of(), answer_of(), each_counting_call() and
-- keep_alive().)
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
--                          lua/prelude.lua)
-- ARGV[4L+4]               the batch's shape (see each_call in lua/prelude.lua)
-- then per call:           its number of identifiers N, its now (microseconds; "" for the
--                          server's clock) and its weight
-- KEYS                     per call, the hashes of its N identifiers
--
-- Reply: per call (see each_counting_call in lua/prelude.lua), { counts... }: for
-- each identifier and limit (identifier-major), the counts of the limit's live buckets, oldest
-- first, before this call (after it for "reward"); or the error message (a string) of a call that
-- failed alone. src/sliding_window.rs judges from them as this script decided.

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
local ttl = tonumber(ARGV[4 * limit_count + 3])


-- The hash's fields are limits' buckets and oldest buckets (also of other limiters that share
-- the namespace).
local function bucket_field(name)
  return string.match(name, '^%d+:%d+:%d+$') or string.match(name, '^%d+:%d+:o$')
end

-- Per limit, the fields an identifier's live buckets have at `fields_now`: its oldest bucket's
-- field first, then its live buckets', oldest first. Built once per now: the calls of a batch
-- mostly share theirs (each string and table a script builds costs Redis CPU).
local live_fields, fields_now = {}, nil

-- The writes of a call that is allowed, reused by every call: per limit counted, its identifier's
-- key, the limit, the current bucket's new count, whether that bucket had no field yet, and the
-- oldest bucket the hash named (false for none).
local write_keys, write_limits, write_counts, write_fresh, write_oldest = {}, {}, {}, {}, {}

-- The oldest bucket of limit j that may hold weight at `now`: the window's first, or bucket 0
-- while the window still reaches back before the epoch (no call is older, and the oldest bucket
-- is stored as a whole number).
local function first_live_bucket(j, now)
  return math.max(math.floor(now / precisions[j]) - buckets[j] + 1, 0)
end

local function judge(first_key, id_count, now, weight)
  if now ~= fields_now then
    for j = 1, limit_count do
      local bucket = math.floor(now / precisions[j])
      local fields = { prefixes[j] .. 'o' }
      for b = bucket - buckets[j] + 1, bucket do
        fields[#fields + 1] = prefixes[j] .. b
      end
      live_fields[j] = fields
    end
    fields_now = now
  end
  -- (dead, the buckets to delete per identifier, and refunds are built only when needed.)
  local answer, allowed, writes, dead, refunds = {}, true, 0, nil, nil
  for i = 0, id_count - 1 do
    local key = KEYS[first_key + i]
    local found = 0
    for j = 1, limit_count do
      local prefix = prefixes[j]
      local first_live = first_live_bucket(j, now)
      local fields = live_fields[j]
      local stored = redis.call('HMGET', key, unpack(fields))
      local oldest = whole(key, fields[1], stored[1])
      local total = 0
      for k = 2, #fields do
        if stored[k] then
          found = found + 1
        end
        local count = whole(key, fields[k], stored[k]) or 0
        answer[#answer + 1] = count
        total = total + count
      end
      if oldest then
        found = found + 1
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
        -- The newest live buckets first; answer[#answer] is the current bucket's count.
        local left, at = weight, #answer
        for k = #fields, 2, -1 do
          local taken = math.min(left, answer[at])
          if taken > 0 then
            answer[at] = answer[at] - taken
            left = left - taken
            refunds = refunds or {}
            refunds[#refunds + 1] = { key, fields[k], answer[at] }
          end
          at = at - 1
        end
      end
      writes = writes + 1
      write_keys[writes], write_limits[writes], write_counts[writes] = key, j, answer[#answer] + weight
      write_fresh[writes], write_oldest[writes] = not stored[#fields], oldest or false
    end
    check_fields(key, found, bucket_field)
  end
  for _, r in ipairs(refunds or {}) do
    redis.call('HSET', r[1], r[2], r[3])
  end
  if consume and allowed then
    -- Written first: at maxmemory, Redis refuses a script's writes only until its first one.
    -- The oldest bucket is written only when it changes: fewer fields, less work for Redis.
    for w = 1, writes do
      local j = write_limits[w]
      local fields = live_fields[j]
      local first_live = first_live_bucket(j, now)
      if write_oldest[w] == first_live then
        redis.call('HSET', write_keys[w], fields[#fields], write_counts[w])
      else
        redis.call('HSET', write_keys[w], fields[1], first_live, fields[#fields], write_counts[w])
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
        keep_alive(renewed, ttl)
      end
    end
  end
  return answer
end

return each_counting_call(4 * limit_count + 4, judge)
