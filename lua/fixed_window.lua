-- Fixed window counters (src/fixed_window.rs) on Redis, for one or many calls at once.
-- (After lua/prelude.lua, which gives it each_counting_call() and read_fields().)
--
-- One hash per identifier, at namespace + id, holds every limit's counter: field `<duration>`
-- the count, field `<duration>:w` the index of the window it counts in (floor(now / duration),
-- aligned to the clock). A counter whose window has ended counts 0. Reading all the limits of an
-- identifier is one HGETALL (which also shows foreign fields), counting them one HSET: the cost
-- does not grow with the number of limits. A call judges every limit of every identifier first and counts only when all admit
-- it: only allowed actions are counted.
--
-- ARGV[1]             L, the number of limits
-- ARGV[2j], ARGV[2j+1] limit j's duration (microseconds) and limit (j = 1..L)
-- ARGV[2L+2]          "consume" to count an allowed call, "peek" to only look, "reward" to give
--                     the weight back to the counters of the current windows (never below 0;
--                     an identifier without a hash gets none)
-- ARGV[2L+3]          the TTL of a hash, in milliseconds (the longest duration, plus a second),
--                     set when the longest limit's window changes
-- ARGV[2L+4]          the batch's shape (see each_call in lua/prelude.lua)
-- then per call:      its number of identifiers N, its now (microseconds; "" for the server's
--                     clock) and its weight
-- KEYS                per call, the hashes of its N identifiers
--
-- Reply: per call (less its now: see each_counting_call in lua/prelude.lua), { counts... } with the
-- N * L counts before this call (after it for "reward"; identifier-major), or the error message (a
-- string) of a call that failed alone. src/fixed_window.rs judges from the counts the same way this
-- script decided.

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
local ttl = tonumber(ARGV[2 * limit_count + 3])
local longest = 1
for j = 2, limit_count do
  if durations[j] > durations[longest] then
    longest = j
  end
end

-- The hash's fields are limits' counters and windows (also of other limiters that share the
-- namespace, with other durations).
local function counter_field(name)
  return string.match(name, '^%d+$') or string.match(name, '^%d+:w$')
end

-- Scratch tables, reused by every call of the batch (Redis CPU is per table built): an
-- identifier's stored fields, each limit's current window (as of `windows_now`), the window each
-- counter counts in (identifier-major), whether an identifier's TTL is renewed, whether any of
-- its counters moved to a new window, how many of its fields it had, and the arguments of an
-- HSET.
local stored, windows, counted, renew, moved, found, values = {}, {}, {}, {}, {}, {}, {}
local windows_now

-- Fills `values` with every limit's field and new count (with `windows_too`, also its window
-- field and the window it counts in) for identifier i (0-based) of a call whose answer holds
-- the counts before it plus `add`. Returns the number of values.
local function new_counts(answer, i, add, windows_too)
  local n = 0
  for j = 1, limit_count do
    local at = i * limit_count + j
    values[n + 1] = fields[2 * j - 1]
    values[n + 2] = math.max(0, answer[1 + at] + add)
    n = n + 2
    if windows_too then
      values[n + 1] = fields[2 * j]
      values[n + 2] = counted[at]
      n = n + 2
    end
  end
  return n
end

local function judge(first_key, id_count, now, weight)
  local answer, allowed = { now }, true
  if now ~= windows_now then
    for j = 1, limit_count do
      windows[j] = math.floor(now / durations[j])
    end
    windows_now = now
  end
  for i = 0, id_count - 1 do
    local key = KEYS[first_key + i]
    found[i] = read_fields(key, slot_of, 2 * limit_count, stored, counter_field)
    -- The TTL is renewed when the longest window changes: set then, it outlives that window.
    renew[i] = stored[2 * longest] ~= windows[longest]
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
      counted[i * limit_count + j] = window
      answer[#answer + 1] = count
      if count + weight > limits[j] then
        allowed = false
      end
    end
  end
  if mode == 'reward' then
    for i = 0, id_count - 1 do
      if found[i] > 0 then
        redis.call('HSET', KEYS[first_key + i], unpack(values, 1, new_counts(answer, i, -weight, false)))
        for j = 1, limit_count do
          local at = 1 + i * limit_count + j
          answer[at] = math.max(0, answer[at] - weight)
        end
      end
    end
  elseif mode == 'consume' and allowed then
    for i = 0, id_count - 1 do
      local key = KEYS[first_key + i]
      -- The windows are written only when one moved: fewer fields, less work for Redis.
      redis.call('HSET', key, unpack(values, 1, new_counts(answer, i, weight, moved[i])))
      if renew[i] then
        redis.call('PEXPIRE', key, ttl)
      end
    end
  end
  return answer
end

return each_counting_call(2 * limit_count + 4, judge)
