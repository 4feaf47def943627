-- redback's RateLimit (src/bucket_circle.rs) on its own Redis layout, for one or many calls.
-- (After lua/prelude.lua, which gives it now_of(), answer_of() and each_call().)
--
-- One hash per subject at `[namespace:]action:subject`, as redback: field `<bucket>` the count of
-- that bucket of the circle (bucket = floor((t % span) / interval)). One field more, `last`,
-- holds the absolute bucket (floor(t / interval)) of the last add; redback never reads it. With it
-- an add empties every bucket skipped since the last one, and counts skip buckets of an earlier
-- lap (see src/bucket_circle.rs).
--
-- ARGV[1..4]   the interval in microseconds, the number of buckets, subject_expiry in seconds,
--              and "" (unused)
-- ARGV[5]      the batch's shape (see each_call in lua/prelude.lua)
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


-- redback's buckets (`0` .. buckets - 1) and our `last`.
local function circle_field(name)
  if name == 'last' then
    return true
  end
  local bucket = string.match(name, '^%d+$') and tonumber(name)
  return bucket and bucket < buckets
end

-- Reads the whole circle and `last`, checked: { last or nil, count of bucket 0, 1, ... }.
local function read_circle(key)
  local fields = { 'last' }
  for b = 0, buckets - 1 do
    fields[#fields + 1] = b
  end
  local stored = redis.call('HMGET', key, unpack(fields))
  local found = 0
  for i = 1, #fields do
    if stored[i] then
      found = found + 1
    end
    stored[i] = whole(key, fields[i], stored[i])
  end
  check_fields(key, found, circle_field)
  return stored
end

local function add(key, current)
  local stored = read_circle(key)
  local last = stored[1]
  local emptied, zero = {}, {}
  if last and last < current then
    for b = math.max(last + 1, current - buckets + 1), current do
      zero[b % buckets] = true
    end
  end
  zero[(current + 1) % buckets] = true
  zero[(current + 2) % buckets] = true
  local bucket = current % buckets
  local count = 1
  if not zero[bucket] then
    count = (stored[bucket + 2] or 0) + 1
  end
  zero[bucket] = nil
  for b in pairs(zero) do
    emptied[#emptied + 1] = b
  end
  -- Written first: at maxmemory, Redis refuses a script's writes only until its first one.
  redis.call('HSET', key, bucket, count, 'last', math.max(current, last or current))
  if #emptied > 0 then
    redis.call('HDEL', key, unpack(emptied))
  end
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
  local answer, found = { now, whole(key, 'last', stored[1]) or -1 }, 0
  for i = 1, #stored do
    if stored[i] then
      found = found + 1
    end
    if i > 1 then
      answer[i + 1] = whole(key, fields[i], stored[i]) or 0
    end
  end
  if mode == 'count' then
    check_fields(key, found, circle_field)
  end
  return answer
end

local answers = {}
for i, arg in each_call(5, 3) do
  local ok, answer = pcall(call, KEYS[i], ARGV[arg], now_of(ARGV[arg + 1]), tonumber(ARGV[arg + 2]))
  answer = answer_of(ok, answer)
  answers[i] = answer
end
return answers
