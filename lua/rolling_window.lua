-- The rolling window (src/rolling_window.rs) on Redis sorted sets, for one or many ids at once.
--
-- The key layout is rolling-rate-limiter's: one sorted set per id, scored by the action's time in
-- microseconds, with unique members, so both libraries read each other's data. Unlike
-- rolling-rate-limiter, a set is never read whole: every step is O(log n), the set is capped at
-- maxInInterval members (older ones can no longer change any answer), and reads the answer does
-- not need are skipped. Concurrent calls of one limiter share one EVALSHA (one key per call).
--
-- KEYS[i]        the sorted set of the i-th call's id
-- ARGV[1]        interval, in microseconds
-- ARGV[2]        maxInInterval
-- ARGV[3]        minDifference, in microseconds
-- ARGV[4]        "limit" to attempt actions (recorded), "peek" to only look (nothing is written)
-- ARGV[5]        "1" to record blocked attempts too, "0" to record allowed ones only
-- ARGV[4 + 2i]   the i-th call's now, in microseconds since the epoch; "" for the server's clock
-- ARGV[5 + 2i]   the i-th call's member (unique)
--
-- Reply: per call, { count, current, previous, anchor } (WindowFacts in src/rolling_window.rs),
-- or, when that call alone failed (e.g. WRONGTYPE), its error message as a string: the count of actions in the window with this one, the newest
-- timestamp, the one before it (read only when minDifference > 0) and the timestamp at index
-- max(0, count - maxInInterval) (read only when the window is full).

local interval = tonumber(ARGV[1])
local max_in_interval = tonumber(ARGV[2])
local min_difference = tonumber(ARGV[3])
local peek = ARGV[4] == 'peek'
local record_blocked = ARGV[5] == '1'

local server_now
local function now_of(given)
  if given ~= '' then
    return tonumber(given)
  end
  if not server_now then
    local time = redis.call('TIME')
    server_now = tonumber(time[1]) * 1000000 + tonumber(time[2])
  end
  return server_now
end

local function score_at(key, rank)
  return tonumber(redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')[2])
end

-- As rolling-rate-limiter's wouldLimit: the attempt is appended after the stored log.
local function peek_at(key, now)
  local window_start = now - interval
  local in_window = redis.call('ZCOUNT', key, string.format('(%.17g', window_start), '+inf')
  local count = in_window + 1
  local previous, anchor = 0, now
  if in_window > 0 and min_difference > 0 then
    previous = score_at(key, -1)
  end
  if count >= max_in_interval then
    local anchor_index = count - max_in_interval
    if anchor_index < in_window then
      anchor = score_at(key, anchor_index - in_window)
    end
  end
  return { count, now, previous, anchor }
end

local function limit_at(key, now, member)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - interval)
  redis.call('ZADD', key, now, member)
  local count = redis.call('ZCARD', key)
  local full = count >= max_in_interval
  local current, previous, anchor = now, 0, now
  if min_difference > 0 or full then
    -- The newest entry is normally this one; a caller whose clock runs behind sees another.
    local newest = redis.call('ZRANGE', key, -2, -1, 'WITHSCORES')
    current = tonumber(newest[#newest])
    if count >= 2 then
      previous = tonumber(newest[2])
    end
  end
  if full then
    anchor = score_at(key, count - max_in_interval)
  end
  local blocked = count > max_in_interval
    or (count >= 2 and min_difference > 0 and current - previous < min_difference)
  if blocked and not record_blocked then
    redis.call('ZREM', key, member)
  elseif count > max_in_interval then
    redis.call('ZREMRANGEBYRANK', key, 0, count - max_in_interval - 1)
  end
  -- The log matters for `interval` after its newest entry. The TTL is rolling-rate-limiter's
  -- (interval in whole seconds, rounded up) plus one second, so that a key outlives clock skew
  -- and calls whose `now` runs ahead of the server's clock (as in tests) by up to a second.
  redis.call('EXPIRE', key, math.ceil(interval / 1000000) + 1)
  return { count, current, previous, anchor }
end

local answers = {}
for i, key in ipairs(KEYS) do
  local now = ARGV[4 + 2 * i]
  local ok, answer
  if peek then
    ok, answer = pcall(peek_at, key, now_of(now))
  else
    ok, answer = pcall(limit_at, key, now_of(now), ARGV[5 + 2 * i])
  end
  if not ok then
    -- A string, not an error reply: clients fail a whole reply that holds an error.
    answer = type(answer) == 'table' and answer.err or tostring(answer)
  end
  answers[i] = answer
end
return answers
