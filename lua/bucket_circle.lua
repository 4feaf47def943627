-- redback's RateLimit (src/bucket_circle.rs) on its own Redis layout, for one or many calls.
-- (After lua/prelude.lua, which gives it now_of() and answer_of().)
--
-- One hash per subject at `[namespace:]action:subject`, as redback: field `<bucket>` the count of
-- that bucket of the circle (bucket = floor((t % span) / interval)). One field more, `last`,
-- holds the absolute bucket (floor(t / interval)) of the last add; redback never reads it. With it
-- an add empties every bucket skipped since the last one, and counts skip buckets of an earlier
-- lap (see src/bucket_circle.rs).
--
-- ARGV[1..4]   the interval in microseconds, the number of buckets, subject_expiry in seconds,
--              and "" (unused)
-- then per call: its mode ("add", "count" or "addcount"), its now (microseconds; "" for the
--              server's clock) and its lookback (buckets before the current one to count)
-- KEYS         per call, the subject's hash
--
-- Reply: per call, { now, last (-1 when unknown), counts... } with the counts of the absolute
-- buckets current - lookback .. current (after the add, for "addcount"); { now } for "add"; or
-- the error message (a string) of a call that failed alone.

local interval = tonumber(ARGV[1])
local buckets = tonumber(ARGV[2])
local expiry = tonumber(ARGV[3])


local function add(key, current)
  local last = tonumber(redis.call('HGET', key, 'last'))
  local emptied = {}
  if last and last < current then
    for b = math.max(last + 1, current - buckets + 1), current do
      emptied[#emptied + 1] = b % buckets
    end
  end
  emptied[#emptied + 1] = (current + 1) % buckets
  emptied[#emptied + 1] = (current + 2) % buckets
  redis.call('HDEL', key, unpack(emptied))
  redis.call('HINCRBY', key, current % buckets, 1)
  redis.call('HSET', key, 'last', math.max(current, last or current))
  redis.call('EXPIRE', key, expiry)
end

local function call(key, mode, now, lookback)
  local current = math.floor(now / interval)
  if mode ~= 'count' then
    add(key, current)
  end
  if mode == 'add' then
    return { now }
  end
  local fields = { 'last' }
  for b = current - lookback, current do
    fields[#fields + 1] = b % buckets
  end
  local stored = redis.call('HMGET', key, unpack(fields))
  local answer = { now, tonumber(stored[1]) or -1 }
  for i = 2, #stored do
    answer[i + 1] = tonumber(stored[i]) or 0
  end
  return answer
end

local answers, arg = {}, 5
for i, key in ipairs(KEYS) do
  local ok, answer = pcall(call, key, ARGV[arg], now_of(ARGV[arg + 1]), tonumber(ARGV[arg + 2]))
  answer = answer_of(ok, answer)
  answers[i] = answer
  arg = arg + 3
end
return answers
