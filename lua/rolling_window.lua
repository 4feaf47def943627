-- The rolling window (src/rolling_window.rs) on Redis sorted sets, for one or many ids at once.
-- (lua/prelude.lua, which gives it now_of() and server_now, answer_of(), each_call() and
-- corrupt(), goes after the lone path of a limit or consume, which has lua/lone.lua.)
--
-- The key layout is rolling-rate-limiter's: one sorted set per id, scored by the action's time in
-- microseconds, with unique members, so both libraries read each other's data. Unlike
-- rolling-rate-limiter, a set is never read whole: every step is O(log n), the set is capped at
-- maxInInterval members (older ones can no longer change any answer), and reads the answer does
-- not need are skipped. Concurrent calls of one limiter share one EVALSHA (one key per call).
--
-- The sliding log (modes "consume" and "check") is the same log counting allowed actions only,
-- with weights, and metadata kept in the member after a "|": rolling-rate-limiter reads only the
-- scores, so it still counts these entries.
--
-- KEYS[i]        the sorted set of the i-th call's id
-- ARGV[1]        interval, in microseconds
-- ARGV[2]        maxInInterval
-- ARGV[3]        minDifference, in microseconds
-- ARGV[4]        the mode: "limit" attempts actions (recorded), "peek" only looks; the sliding
--                log's "consume" logs allowed actions, "check" only looks, "reward" forgets the
--                newest `weight` actions and then looks as "check" of weight 1; "entries" reads
--                the log
-- ARGV[5]        "1" to record blocked attempts too, "0" to record allowed ones only ("limit")
-- ARGV[6]        the batch's shape (see each_call in lua/prelude.lua)
-- then per call  its now, in microseconds since the epoch ("" for the server's clock), and its
--                member (unique); for "consume", "check" and "reward" also its weight and
--                what follows each action's member: "|" and the metadata ("|" alone for an
--                empty one), or "" for none
--
-- Reply, per call (or, when that call alone failed, e.g. WRONGTYPE, its error message as a
-- string):
-- - "limit": the count alone when the answer is { count, now, 0, now } (the usual one); otherwise,
--   as "peek":
-- - "peek": { count, current, previous, anchor } (WindowFacts in src/rolling_window.rs):
--   the count of actions in the window with this one, the newest timestamp, the one before it
--   (read only when minDifference > 0 or refusals are not recorded) and the timestamp at index
--   max(0, count - maxInInterval) (read only when the window is full); when refusals are not
--   recorded, also { now, log_newest, log_anchor }: the call's now and the log's facts without
--   it (LogFacts: its newest action and the one whose leaving makes room, 0 when absent);
-- - "consume", "check", "reward": { now, in_window, newest, anchor } (LogFacts; 0 for an absent
--   newest or anchor), before this call (after the refund for "reward"); for an allowed
--   "consume" of one action without minDifference, in_window alone;
-- - "entries": { score, member, score, member, ... } of the actions in the window.
-- Then, when a call had no now of its own, the server's now, once for the batch.

-- ARGV[1] to ARGV[5] configure the script (see src/store/script.rs).
local configuration_args = 5
local interval = tonumber(ARGV[1])
local max_in_interval = tonumber(ARGV[2])
local min_difference = tonumber(ARGV[3])
local mode = ARGV[4]
local record_blocked = ARGV[5] == '1'
-- A log's TTL in seconds, in text (see as_score): rolling-rate-limiter's (the interval in whole
-- seconds, rounded up) plus one second, so that a key outlives clock skew and calls whose `now`
-- runs ahead of the server's clock (as in tests) by up to a second.
local ttl_text = string.format('%d', math.ceil(interval / 1000000) + 1)


-- "(<now - interval>": the exclusive start of the window at `now`, as ZCOUNT and ZRANGEBYSCORE
-- take it, kept for the last now asked for (the calls of a batch mostly share theirs, and each
-- string.format costs Redis CPU).
local window_start_now, window_start_bound
local function after_window_start(now)
  if now ~= window_start_now then
    window_start_now, window_start_bound = now, string.format('(%.17g', now - interval)
  end
  return window_start_bound
end

-- `now` as a score for ZADD, in text, kept for the last now asked for: Redis formats a number
-- argument on every call (snprintf, about 0.4 µs for a time in microseconds, measured), and the
-- calls of a batch mostly share their now.
local score_now, score_text
local function as_score(now)
  if now ~= score_now then
    score_now, score_text = now, string.format('%.17g', now)
  end
  return score_text
end

local function score_at(key, rank)
  return tonumber(redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')[2])
end

-- The latest time a score may hold, in microseconds: 2^53 - 1 (as ZCOUNT takes it, and as a
-- number).
local LAST_TIME = '9007199254740991'
local LAST_TIME_NUMBER = 9007199254740991
-- How long the sliding log keeps an action after it left the window (LATE_CALL_MARGIN in
-- src/rolling_window.rs): a call from a host whose clock is behind must still count what its own
-- window holds.
local LATE_CALL_MARGIN = 1000000

-- Drops the entries that left the window (at or before `window_start`), if any.
local function prune(key, oldest, window_start)
  if oldest and oldest <= window_start then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%.17g', window_start))
  end
end

-- For an attempt that is not recorded (recordBlocked false), appends to `answer` the call's now
-- and the log's facts without it (LogFacts): the newest of the in_window actions in the window,
-- and the k-th oldest, k = count - maxInInterval (count with the attempt), when k >= 1: the
-- window has room once it leaves (0 when absent).
local function with_unrecorded(answer, key, now, count, in_window)
  if record_blocked then
    return answer
  end
  local newest, anchor, k = 0, 0, count - max_in_interval
  if in_window > 0 then
    newest = score_at(key, -1)
    if k >= 1 and k <= in_window then
      anchor = score_at(key, k - 1 - in_window)
    end
  end
  answer[5], answer[6], answer[7] = now, newest, anchor
  return answer
end

-- Answers a limit call once its attempt, at `now`, is in the log and the window pruned: `count`
-- entries in the window. The usual answer, { count, now, 0, now } (no reads needed), is sent as
-- the count alone (a table costs Redis more to build and send; src/binding/rolling_window.rs
-- expands it). The log matters for `interval` after its newest entry: its TTL is set on every
-- call (see ttl_text).
local function limit_answer(key, now, member, count)
  local full = count >= max_in_interval
  if min_difference == 0 and not full then
    -- Allowed, and { count, now, 0, now }: no reads, and no table to build.
    redis.call('EXPIRE', key, ttl_text)
    return count
  end
  -- The newest entry is normally this one; a caller whose clock runs behind sees another.
  local newest = redis.call('ZRANGE', key, -2, -1, 'WITHSCORES')
  local current, previous, anchor = tonumber(newest[#newest]), 0, now
  if count >= 2 then
    previous = tonumber(newest[2])
  end
  if full then
    anchor = score_at(key, count - max_in_interval)
  end
  local blocked = count > max_in_interval
    or (count >= 2 and min_difference > 0 and current - previous < min_difference)
  local answer = { count, current, previous, anchor }
  if blocked and not record_blocked then
    redis.call('ZREM', key, member)
    answer = with_unrecorded(answer, key, now, count, count - 1)
  elseif count > max_in_interval then
    redis.call('ZREMRANGEBYRANK', key, 0, count - max_in_interval - 1)
  end
  redis.call('EXPIRE', key, ttl_text)
  return answer
end

-- The log at `key` counted for the window at `now` (starting at or after the epoch), in integer
-- replies (reading a score costs Redis several times more): its entries in the window and those
-- at or before its start, when every entry is a time from 0 to 2^53 - 1 (the two then add up to
-- the whole log). nil, having read nothing else, when they do not, the window starts before the
-- epoch, or the key holds another type: reading the log's ends (checked_ends) then tells. `size`
-- is the log's ZCARD when already read.
local function counted(key, now, size)
  local window_start = now - interval
  if window_start < 0 then
    return nil
  end
  size = size or redis.pcall('ZCARD', key)
  if type(size) ~= 'number' then
    return nil
  end
  if size == 0 then
    return 0, 0
  end
  local in_window = redis.call('ZCOUNT', key, after_window_start(now), LAST_TIME)
  if in_window == size then
    return in_window, 0
  end
  local earlier = redis.call('ZCOUNT', key, 0, string.format('%.17g', window_start))
  if in_window + earlier ~= size then
    return nil
  end
  return in_window, earlier
end

-- limit_at for the usual call: checked with counts, and run without a pcall (one per call costs
-- Redis more than a count); the entries that left the window are the oldest, pruned by rank.
-- Answers nil, with nothing changed, for limit_at to answer: when counted() does, for a member
-- already there, and for a write refused at maxmemory.
local function limit_first(key, now, member)
  local in_window, earlier = counted(key, now)
  -- The first write (see limit_at); NX: a member already there is limit_at's.
  if not in_window or redis.pcall('ZADD', key, 'NX', as_score(now), member) ~= 1 then
    return nil
  end
  if earlier > 0 then
    redis.call('ZREMRANGEBYRANK', key, 0, earlier - 1)
  end
  return limit_answer(key, now, member, in_window + 1)
end

-- The sliding log's answer to a call at `now` once the log is checked: `in_window` actions in
-- the window, the newest of them `newest` (0 when none); `oldest`, the log's oldest score (nil for
-- none), says whether an action may have left the window. Logs the `weight` if allowed and
-- `write`, each action's member followed by `suffix` (its metadata); a call that writes then
-- forgets what left the window (only LATE_CALL_MARGIN past it), refused or not.
local function log_answer(key, now, member, weight, suffix, write, in_window, newest, oldest)
  local anchor = 0
  local k = in_window + weight - max_in_interval
  if k >= 1 and k <= in_window then
    anchor = score_at(key, k - 1 - in_window)
  end
  local allowed = in_window + weight <= max_in_interval
    and not (in_window > 0 and min_difference > 0 and now - newest < min_difference)
  if write and allowed then
    if weight == 1 then
      -- The usual call: one action, and no table to build.
      redis.call('ZADD', key, as_score(now), member .. ':1' .. suffix)
    else
      -- In chunks: unpack() has a limit on how many values it returns.
      for first = 1, weight, 500 do
        local members = {}
        for i = first, math.min(weight, first + 499) do
          members[#members + 1] = as_score(now)
          members[#members + 1] = member .. ':' .. i .. suffix
        end
        redis.call('ZADD', key, unpack(members))
      end
    end
    redis.call('EXPIRE', key, ttl_text)
  end
  -- After the additions (see limit_at).
  if write then
    prune(key, oldest, now - interval - LATE_CALL_MARGIN)
  end
  return { now, in_window, newest, anchor }
end

-- log_at for the usual consume (one action, no minDifference), as limit_first does limit_at's.
-- The answer of an allowed one, { now, in_window, 0, 0 } (an allowed action's verdict needs
-- neither the newest action before it nor an anchor: judge in src/rolling_window.rs), is the count
-- alone.
local function log_first(key, now, member, weight, suffix)
  if weight ~= 1 or min_difference > 0 or now < interval then
    return nil
  end
  local size = redis.pcall('ZCARD', key)
  if type(size) == 'number' and size >= max_in_interval then
    -- Refused unless an action left the window. When the oldest is in the window and the newest a
    -- time (so that every entry is one in the window), the log's ends answer with no count: the
    -- newest, and the anchor, which is the oldest when the window holds exactly maxInInterval.
    local oldest = score_at(key, 0)
    if oldest > now - interval then
      local newest = score_at(key, -1)
      if newest <= LAST_TIME_NUMBER then
        local k = size + 1 - max_in_interval
        return { now, size, newest, k == 1 and oldest or score_at(key, k - 1 - size) }
      end
    end
  end
  local in_window, earlier = counted(key, now, size)
  if not in_window then
    return nil
  end
  -- (0 stands for the oldest score: at or before the window's start when `earlier` counts any.)
  local oldest = earlier > 0 and 0 or nil
  if in_window + 1 > max_in_interval then
    -- Refused: nothing is added, and the log's newest is in the window.
    return log_answer(key, now, member, 1, suffix, true, in_window, score_at(key, -1), oldest)
  end
  if redis.pcall('ZADD', key, 'NX', as_score(now), member .. ':1' .. suffix) ~= 1 then
    return nil
  end
  redis.call('EXPIRE', key, ttl_text)
  prune(key, oldest, now - interval - LATE_CALL_MARGIN)
  return in_window
end

-- (lua/lone.lua goes here)

-- A batch of one limit or consume (see lua/lone.lua) is answered here when limit_first or
-- log_first can, before the prelude and the rest are set up (and otherwise not tried again there:
-- lone_consume() then answers false).
local function lone_consume()
  if not (ARGV[6] == '+' and (mode == 'limit' or mode == 'consume')) then
    return nil
  end
  local now, server_now = lone_now(ARGV[7])
  local answer
  if mode == 'limit' then
    answer = limit_first(KEYS[1], now, ARGV[8])
  else
    answer = log_first(KEYS[1], now, ARGV[8], tonumber(ARGV[9]), ARGV[10])
  end
  if answer ~= nil then
    return { answer, server_now }
  end
  return false
end

-- (a Function's configured part ends here)
local lone_answer = lone_consume()
if lone_answer then
  return lone_answer
end
local tried_first = lone_answer == false

-- (lua/prelude.lua goes here)

local function check_score(key, score)
  if score ~= score or score < 0 or score >= 9007199254740992 then
    corrupt(key, 'holds a score of ' .. tostring(score) .. ', not a time in microseconds')
  end
end

-- The oldest and newest scores of the log (nil when empty), once every score is known to be a
-- time: from 0 to 2^53 microseconds. A set holding -inf, +inf or a negative score was not written
-- by a limiter (nor by rolling-rate-limiter): the call fails before anything is written.
local function checked_ends(key)
  local oldest = score_at(key, 0)
  if not oldest then
    return nil, nil
  end
  local newest = score_at(key, -1)
  check_score(key, oldest)
  check_score(key, newest)
  return oldest, newest
end

-- As rolling-rate-limiter's wouldLimit: the attempt is appended after the stored log.
local function peek_at(key, now)
  local _, newest = checked_ends(key)
  local in_window = redis.call('ZCOUNT', key, after_window_start(now), '+inf')
  local count = in_window + 1
  local previous, anchor = 0, now
  if in_window > 0 and (min_difference > 0 or not record_blocked) then
    previous = newest
  end
  if count >= max_in_interval then
    local anchor_index = count - max_in_interval
    if anchor_index < in_window then
      anchor = score_at(key, anchor_index - in_window)
    end
  end
  return with_unrecorded({ count, now, previous, anchor }, key, now, count, in_window)
end

local function limit_at(key, now, member)
  local oldest = checked_ends(key)
  -- Added first: at maxmemory, Redis refuses a script's writes only until its first one. (The
  -- attempt, at `now`, is inside the window: pruning after it does not remove it.)
  redis.call('ZADD', key, as_score(now), member)
  prune(key, oldest, now - interval)
  return limit_answer(key, now, member, redis.call('ZCARD', key))
end

-- The sliding log: only allowed actions are logged, `weight` of them, followed by `suffix`.
local function log_at(key, now, member, weight, suffix, write)
  local oldest, stored_newest = checked_ends(key)
  local in_window = redis.call('ZCOUNT', key, after_window_start(now), '+inf')
  -- (When the window holds an action, the log's newest is in it.)
  local newest = 0
  if in_window > 0 then
    newest = stored_newest
  end
  return log_answer(key, now, member, weight, suffix, write, in_window, newest, oldest)
end

-- The newest maxInInterval actions in the window (a set written with a larger limit, or by
-- rolling-rate-limiter, may hold more), oldest first.
local function entries_at(key, now)
  checked_ends(key)
  local start = after_window_start(now)
  local in_window = redis.call('ZCOUNT', key, start, '+inf')
  return redis.call('ZRANGEBYSCORE', key, start, '+inf', 'WITHSCORES', 'LIMIT',
    math.max(0, in_window - max_in_interval), max_in_interval)
end

-- Forgets the newest `weight` actions (a key that does not exist stays so), then looks.
local function reward_at(key, now, weight)
  checked_ends(key)
  redis.call('ZREMRANGEBYRANK', key, -weight, -1)
  return log_at(key, now, '', 1, '', false)
end

local logging = mode == 'consume' or mode == 'check' or mode == 'reward'
local stride = logging and 4 or 2
local answers = {}
for i, arg in each_call(configuration_args + 1, stride) do
  local key = KEYS[i]
  local now = now_of(ARGV[arg])
  local ok, answer
  if mode == 'peek' then
    ok, answer = pcall(peek_at, key, now)
  elseif mode == 'limit' then
    if not tried_first then
      answer = limit_first(key, now, ARGV[arg + 1])
    end
    ok = answer ~= nil
    if not ok then
      ok, answer = pcall(limit_at, key, now, ARGV[arg + 1])
    end
  elseif mode == 'reward' then
    ok, answer = pcall(reward_at, key, now, tonumber(ARGV[arg + 2]))
  elseif logging then
    local member, weight, suffix = ARGV[arg + 1], tonumber(ARGV[arg + 2]), ARGV[arg + 3]
    if mode == 'consume' and not tried_first then
      answer = log_first(key, now, member, weight, suffix)
    end
    ok = answer ~= nil
    if not ok then
      ok, answer = pcall(log_at, key, now, member, weight, suffix, mode == 'consume')
    end
  else
    ok, answer = pcall(entries_at, key, now)
  end
  answer = answer_of(ok, answer)
  answers[i] = answer
end
-- For the calls without a now of their own (a count alone stands for a table with the call's
-- now).
if server_now then
  answers[#answers + 1] = server_now
end
return answers
