-- redback's RateLimit (src/bucket_circle.rs) on its own Redis layout, for one or many calls.
-- (lua/prelude.lua, which gives it now_of(), answer_of(), each_call(), whole() and corrupt(), goes
-- after a lone call's path, which has lua/lone.lua.)
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

-- ARGV[1] to ARGV[4] configure the script (see src/store/script.rs).
local configuration_args = 4
local interval = tonumber(ARGV[1])
local buckets = tonumber(ARGV[2])

-- Empties bucket `b` for an add to `bucket` (which it never empties): when `b` holds a count,
-- drops it from `counts` and appends it to `emptied`, made when first needed; returns `emptied`.
local function emptied_with(emptied, counts, b, bucket)
  if b ~= bucket and counts[b] then
    counts[b] = nil
    emptied = emptied or {}
    emptied[#emptied + 1] = b
  end
  return emptied
end

-- redback's add, on the circle `counts` read at `key` (updated to what is written); returns the
-- new `last`. It empties the two buckets ahead, as redback, and every bucket skipped since the last
-- add; the bucket added to starts at 1 when it is one of those. (No table but for what it empties,
-- usually nothing: each table costs Redis at every call.)
local function add(key, current, counts, last)
  local bucket = current % buckets
  local ahead, after = (current + 1) % buckets, (current + 2) % buckets
  local fresh = ahead == bucket or after == bucket
  local emptied = emptied_with(nil, counts, ahead, bucket)
  emptied = emptied_with(emptied, counts, after, bucket)
  if last and last < current then
    -- The skipped buckets run up to the current one: it starts again.
    fresh = true
    for b = math.max(last + 1, current - buckets + 1), current - 1 do
      emptied = emptied_with(emptied, counts, b % buckets, bucket)
    end
  end
  local count = fresh and 1 or (counts[bucket] or 0) + 1
  counts[bucket] = count
  last = math.max(current, last or current)
  -- Written first: at maxmemory, Redis refuses a script's writes only until its first one.
  redis.call('HSET', key, string.format('%d', bucket), string.format('%d', count), 'last', string.format('%d', last))
  if emptied then
    redis.call('HDEL', key, unpack(emptied))
  end
  redis.call('EXPIRE', key, ARGV[3])
  return last
end

-- A call on the circle `counts` and `last` read at `key` (see read_circle() below): its answer.
local function call(key, mode, now, lookback, counts, last)
  local current = math.floor(now / interval)
  if mode ~= 'count' then
    last = add(key, current, counts, last)
  end
  if mode == 'add' then
    return { now }
  end
  local answer = { now, last or -1 }
  for b = current - lookback, current do
    answer[#answer + 1] = counts[b % buckets] or 0
  end
  return answer
end

-- (lua/lone.lua goes here)

-- A batch of one call (see lua/lone.lua), its hash read as read_circle() below reads it.
local function lone_consume()
  if not (ARGV[5] == '+') then
    return nil
  end
  local key = KEYS[1]
  local now = lone_now(ARGV[7])
  local flat = redis.pcall('HGETALL', key)
  local healthy, counts, last = not flat.err, {}, nil
  for f = 1, #flat, 2 do
    local name, value = flat[f], lone_whole(flat[f + 1])
    local bucket = name ~= 'last' and string.match(name, '^%d+$') and tonumber(name)
    if not value then
      healthy = false
    elseif name == 'last' then
      last = value
    elseif bucket and bucket < buckets then
      counts[bucket] = value
    else
      healthy = false
    end
  end
  if healthy then
    local ok, answer = pcall(call, key, ARGV[6], now, tonumber(ARGV[8]), counts, last)
    if ok then
      return { answer }
    end
  end
end

-- (a Function's configured part ends here)
local lone_answer = lone_consume()
if lone_answer then
  return lone_answer
end

-- (lua/prelude.lua goes here)

-- Reads the subject's hash in one call (HGETALL: a subject holds the buckets it was added to in
-- the last span, often far fewer than the circle has): returns the counts by bucket of the
-- circle (absent for none) and `last` (nil when absent). A field that is neither a bucket of
-- this circle nor `last`, or a value that is not a whole number, is data this limiter did not
-- write: the call fails before anything is written.
local function read_circle(key)
  local flat = redis.call('HGETALL', key)
  local counts, last = {}, nil
  for f = 1, #flat, 2 do
    local name = flat[f]
    if name == 'last' then
      last = whole(key, name, flat[f + 1])
    else
      local bucket = string.match(name, '^%d+$') and tonumber(name)
      if not bucket or bucket >= buckets then
        corrupt(key, 'holds a field ' .. name)
      end
      counts[bucket] = whole(key, name, flat[f + 1])
    end
  end
  return counts, last
end

-- A call of the batch, on the hash read_circle() reads.
local function judge(key, mode, now, lookback)
  return call(key, mode, now, lookback, read_circle(key))
end

local answers = {}
for i, arg in each_call(configuration_args + 1, 3) do
  local ok, answer = pcall(judge, KEYS[i], ARGV[arg], now_of(ARGV[arg + 1]), tonumber(ARGV[arg + 2]))
  answer = answer_of(ok, answer)
  answers[i] = answer
end
return answers
