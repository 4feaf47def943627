-- The rolling window (src/rolling_window.rs) on a Redis sorted set.
--
-- The key layout is rolling-rate-limiter's: one sorted set per id, scored by the action's time in
-- microseconds, with unique members, so both libraries read each other's data. Unlike
-- rolling-rate-limiter, the set is never read whole: every step is O(log n), and the set is capped
-- at maxInInterval members (older ones can no longer change any answer).
--
-- KEYS[1]  the id's sorted set
-- ARGV[1]  now, in microseconds since the epoch; "" to read the Redis server's clock
-- ARGV[2]  interval, in microseconds
-- ARGV[3]  maxInInterval
-- ARGV[4]  minDifference, in microseconds
-- ARGV[5]  "limit" to attempt an action (recorded), "peek" to only look (nothing is written)
-- ARGV[6]  "1" to record blocked attempts too, "0" to record allowed ones only
-- ARGV[7]  the member for this attempt (unique)
--
-- Reply: { count, current, previous, anchor } (see WindowFacts in src/rolling_window.rs):
-- count of actions in the window with this one, the newest timestamp, the one before it
-- (meaningful only when count >= 2) and the timestamp at index max(0, count - maxInInterval).

local key = KEYS[1]
local interval = tonumber(ARGV[2])
local max_in_interval = tonumber(ARGV[3])
local min_difference = tonumber(ARGV[4])

local now
if ARGV[1] == '' then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000000 + tonumber(time[2])
else
  now = tonumber(ARGV[1])
end
local window_start = now - interval

local function score_at(rank)
  return tonumber(redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')[2])
end

if ARGV[5] == 'peek' then
  -- As rolling-rate-limiter's wouldLimit: the attempt is appended after the stored log.
  local stored = redis.call('ZCARD', key)
  local in_window = redis.call('ZCOUNT', key, string.format('(%.17g', window_start), '+inf')
  local count = in_window + 1
  local previous = 0
  if in_window > 0 then
    previous = score_at(stored - 1)
  end
  local anchor_index = math.max(0, count - max_in_interval)
  local anchor = now
  if anchor_index < in_window then
    anchor = score_at(stored - in_window + anchor_index)
  end
  return { count, now, previous, anchor }
end

redis.call('ZREMRANGEBYSCORE', key, '-inf', window_start)
redis.call('ZADD', key, now, ARGV[7])
local count = redis.call('ZCARD', key)
local newest = redis.call('ZRANGE', key, -2, -1, 'WITHSCORES')
local current, previous = tonumber(newest[#newest]), 0
if count >= 2 then
  previous = tonumber(newest[2])
end
local anchor = score_at(math.max(0, count - max_in_interval))

local blocked = count > max_in_interval
  or (count >= 2 and min_difference > 0 and current - previous < min_difference)
if blocked and ARGV[6] == '0' then
  redis.call('ZREM', key, ARGV[7])
elseif count > max_in_interval then
  redis.call('ZREMRANGEBYRANK', key, 0, count - max_in_interval - 1)
end
-- The log matters for `interval` after its newest entry. The TTL is rolling-rate-limiter's
-- (interval in whole seconds, rounded up) plus one second, so that a key outlives clock skew and
-- calls whose `now` runs ahead of the server's clock (as in tests) by up to a second.
redis.call('EXPIRE', key, math.ceil(interval / 1000000) + 1)
return { count, current, previous, anchor }
