-- Fixed window counters (src/fixed_window.rs) on Redis, for one or many calls at once.
-- (After lua/prelude.lua, which gives it now_of(), answer_of(), each_counting_call(),
-- read_fields() and the scratch table `pair`.)
--
-- One hash per identifier, at namespace + id, holds every limit's counter: field `<duration>`
-- the count, field `<duration>:w` the index of the window it counts in (floor(now / duration),
-- aligned to the clock). A counter whose window has ended counts 0. Reading all the limits of an
-- identifier is one HGETALL (which also shows foreign fields), counting them one HSET: the cost
-- does not grow with the number of limits. A call judges every limit of every identifier first
-- and counts only when all admit it: only allowed actions are counted. A call alone of one
-- identifier under one limit takes a short path (below) to the same answer and writes.
--
-- ARGV[1]             L, the number of limits
-- ARGV[2j], ARGV[2j+1] limit j's duration (microseconds) and limit (j = 1..L)
-- ARGV[2L+2]          "consume" to count an allowed call, "peek" to only look, "reward" to give
--                     the weight back to the counters of the current windows (never below 0;
--                     an identifier without a hash gets none)
-- ARGV[2L+3]          the TTL of a hash, in milliseconds (the longest duration, plus a second),
--                     set when a counter moves to a new window: then it outlives every window
--                     the hash counts in (each ends within its duration, at most the longest)
-- ARGV[2L+4]          the batch's shape (see each_call in lua/prelude.lua)
-- then per call:      its number of identifiers N, its now (microseconds; "" for the server's
--                     clock) and its weight
-- KEYS                per call, the hashes of its N identifiers
--
-- Reply: per call (see each_counting_call in lua/prelude.lua), { counts... } with the
-- N * L counts before this call (after it for "reward"; identifier-major), or the error message (a
-- string) of a call that failed alone. src/fixed_window.rs judges from the counts the same way this
-- script decided.

-- The hash's fields are limits' counters and windows (also of other limiters that share the
-- namespace, with other durations).
local function counter_field(name)
  return string.match(name, '^%d+$') or string.match(name, '^%d+:w$')
end

-- One call alone, of one identifier under one limit, to consume or peek: what an app sends
-- under light load, a call per request. It decides as judge() below does, without the set-up a
-- batch needs (building its tables costs Redis more than the call's own work).
if ARGV[1] == '1' and ARGV[6] == '+' and ARGV[7] == '1' and ARGV[4] ~= 'reward' then
  local key, count_field, duration, limit = KEYS[1], ARGV[2], tonumber(ARGV[2]), tonumber(ARGV[3])
  local now, weight = now_of(ARGV[8]), tonumber(ARGV[9])
  local function alone()
    local window_field = count_field .. ':w'
    -- (Into the prelude's scratch `pair`: a table fewer to build.)
    read_fields(key, { [count_field] = 1, [window_field] = 2 }, 2, pair, counter_field)
    local stored_count, stored_window = pair[1], pair[2]
    -- As judge(): a counter never moves back to an older window, and the TTL is renewed when
    -- it moves to a new one.
    local window, count = math.floor(now / duration), 0
    local moved = not (stored_window and stored_window >= window)
    if not moved then
      count, window = stored_count or 0, stored_window
    end
    if ARGV[4] == 'consume' and count + weight <= limit then
      if moved then
        redis.call('HSET', key, count_field, count + weight, window_field, window)
        redis.call('PEXPIRE', key, ARGV[5])
      else
        redis.call('HSET', key, count_field, count + weight)
      end
    end
    return count
  end
  local answers = { answer_of(pcall(alone)) }
  if server_now then
    answers[2] = server_now
  end
  return answers
end

local limit_count = tonumber(ARGV[1])
-- Limit j's fields: its count at slot 2j - 1 of a hash's fields as read_fields() reads them, its
-- window at slot 2j.
local durations, limits, fields, slot_of = {}, {}, {}, {}
for j = 1, limit_count do
  durations[j] = tonumber(ARGV[2 * j])
  limits[j] = tonumber(ARGV[2 * j + 1])
  fields[2 * j - 1] = ARGV[2 * j]
  fields[2 * j] = ARGV[2 * j] .. ':w'
  slot_of[fields[2 * j - 1]] = 2 * j - 1
  slot_of[fields[2 * j]] = 2 * j
end
local mode = ARGV[2 * limit_count + 2]
local ttl = ARGV[2 * limit_count + 3]

-- Scratch tables, reused by every call of the batch (Redis CPU is per table built, so a call
-- builds none but its answer, and only when it has several counts): an identifier's stored
-- fields, each limit's current window (as of `windows_now`), the call's counts and the window
-- each counts in (identifier-major, from 1), per identifier (from 1) how many fields it had and
-- whether any of its counters moved to a new window, and the arguments of an HSET.
local stored, windows, counts, counted, found, moved, values = {}, {}, {}, {}, {}, {}, {}
local windows_now

-- Writes identifier i's counters (its key `key`, its counts from counts[first + 1]) plus `add`
-- (never below 0), with their windows when one moved.
local function write(key, i, first, add)
  local n = 0
  for j = 1, limit_count do
    values[n + 1] = fields[2 * j - 1]
    values[n + 2] = math.max(0, counts[first + j] + add)
    n = n + 2
    if moved[i] then
      values[n + 1] = fields[2 * j]
      values[n + 2] = counted[first + j]
      n = n + 2
    end
  end
  redis.call('HSET', key, unpack(values, 1, n))
end

local function judge(first_key, id_count, now, weight)
  if now ~= windows_now then
    for j = 1, limit_count do
      windows[j] = math.floor(now / durations[j])
    end
    windows_now = now
  end
  local allowed, n = true, 0
  for i = 1, id_count do
    found[i] = read_fields(KEYS[first_key + i - 1], slot_of, 2 * limit_count, stored, counter_field)
    moved[i] = false
    for j = 1, limit_count do
      -- A counter never moves back to an older window: a late call (a host with a slow clock)
      -- counts in the newer window it is in (see Counters in src/fixed_window.rs).
      local count, window = 0, windows[j]
      local stored_window = stored[2 * j]
      if stored_window and stored_window >= window then
        count, window = stored[2 * j - 1] or 0, stored_window
      else
        moved[i] = true
      end
      n = n + 1
      counts[n], counted[n] = count, window
      if count + weight > limits[j] then
        allowed = false
      end
    end
  end
  if mode == 'consume' then
    if allowed then
      for i = 1, id_count do
        local key = KEYS[first_key + i - 1]
        -- The windows are written only when one moved: fewer fields, less work for Redis. So is
        -- the TTL: set when any counter moves to a new window (not only the longest limit's:
        -- a shorter window can end after the longest one's, with durations of 40 s and 60 s).
        write(key, i, (i - 1) * limit_count, weight)
        if moved[i] then
          redis.call('PEXPIRE', key, ttl)
        end
      end
    end
  elseif mode == 'reward' then
    -- The counts after the refund, of identifiers that had a hash (others get none).
    for i = 1, id_count do
      if found[i] > 0 then
        local first = (i - 1) * limit_count
        moved[i] = false
        write(KEYS[first_key + i - 1], i, first, -weight)
        for j = 1, limit_count do
          counts[first + j] = math.max(0, counts[first + j] - weight)
        end
      end
    end
  end
  if n == 1 then
    return counts[1]
  end
  local answer = {}
  for k = 1, n do
    answer[k] = counts[k]
  end
  return answer
end

return each_counting_call(2 * limit_count + 4, judge)
