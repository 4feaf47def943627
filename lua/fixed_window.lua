-- Fixed window counters (src/fixed_window.rs) on Redis, for one or many calls at once.
-- (lua/prelude.lua, which gives it each_counting_call(), whole() and corrupt(), goes after
-- counting first's lone path, which has lua/lone.lua and its keep_alive().)
--
-- One hash per identifier, at namespace + id, holds every limit's counter: field
-- `<duration>:<window>` (the duration in microseconds, the window's index floor(now / duration),
-- aligned to the clock) = the count in that window. A limit keeps one field, of the newest window
-- it counted in: a window that has ended counts 0, and its field is deleted when the counter
-- moves to a new one. Other limiters that share the namespace keep their own durations' fields
-- in the same hash. A call judges every limit of every identifier first and counts only when all
-- admit it: only allowed actions are counted.
--
-- Two ways to the same answers and writes:
-- - Counting first, for a call to consume of one identifier under one limit (what an app sends,
--   a call per request): HINCRBY of the current window's field, then HLEN to see that the hash
--   holds nothing else (HGETALL when it does: an ended window's field beside a new one is
--   deleted); a refused call gives the weight back. An allowed call costs Redis one write and
--   one read, where reading first costs a read of the whole hash and a write.
-- - Reading first, for every other call and whatever counting first does not expect (a late
--   call, data that fails the checks, a write refused at maxmemory): the increment is undone,
--   and the call is judged from an HGETALL.
--
-- ARGV[1]             L, the number of limits
-- ARGV[2j], ARGV[2j+1] limit j's duration (microseconds) and limit (j = 1..L)
-- ARGV[2L+2]          "consume" to count an allowed call, "peek" to only look, "reward" to give
--                     the weight back to the counters of the current windows (never below 0;
--                     an identifier without a hash gets none)
-- ARGV[2L+3]          the TTL of a hash, in milliseconds (the longest duration, plus a second),
--                     set when a counter moves to a new window (never shortened: see
--                     keep_alive in lua/lone.lua): then it outlives every window the hash
--                     counts in (each ends within its duration, at most the longest)
-- ARGV[2L+4]          the batch's shape (see each_call in lua/prelude.lua)
-- then per call:      its number of identifiers N, its now (microseconds; "" for the server's
--                     clock) and its weight
-- KEYS                per call, the hashes of its N identifiers
--
-- Reply: per call (see each_counting_call in lua/prelude.lua), { counts... } with the
-- N * L counts before this call (after it for "reward"; identifier-major), a number when there is
-- one; when a counter is in a window ahead of the call's now (a late call), each count is followed
-- by how many windows ahead it is. Or the error message (a string) of a call that failed alone. src/fixed_window.rs judges from the counts the same way this
-- script decided.
--
-- Earlier versions kept a limit's count at field `<duration>` and its window at `<duration>:w`.
-- Reading first takes such a pair as the counter it is, and moves it to the field of its window
-- when it writes.

local limit_count = tonumber(ARGV[1])
-- ARGV[1] to ARGV[2L+3] configure the script (see src/store/script.rs).
local configuration_args = 2 * limit_count + 3
local mode = ARGV[2 * limit_count + 2]
local ttl = ARGV[2 * limit_count + 3]

-- (lua/lone.lua goes here)

-- The field of a duration's (a string, as in ARGV) window: '%d' writes every whole number up to
-- 2^53 in full, where Lua's own conversion would write 1e+15.
local function field_of(duration, window)
  return duration .. ':' .. string.format('%d', window)
end

---------------------------------------------------------------------------------------------------
-- Counting first (L = 1, "consume", one identifier).

local duration, limit = ARGV[2], tonumber(ARGV[3])
-- The field of the current window (and the window), as of `field_now`, and the weight as an
-- argument.
local field, field_window, field_now, weight_arg, weight_of_arg

-- Reads the hash at `key` beside `field` (the current window's, `window`): whether it holds other
-- limiters' counters (`<duration>:<window>` of another duration, holding a whole number below
-- 10^15), and how many fields of this limit's ended windows, put into `ended`; or nil when it
-- holds anything else (a newer window of this limit, for a late call; the earlier layout;
-- foreign fields), for reading first to answer and check.
local ended
local function other_fields(key, window)
  local flat, others, ended_count = redis.call('HGETALL', key), false, 0
  for f = 1, #flat, 2 do
    local name, value = flat[f], flat[f + 1]
    if name ~= field then
      local other, other_window = string.match(name, '^(%d+):(%d+)$')
      if not other or #value > 15 or not string.match(value, '^%d+$') then
        return nil
      elseif other ~= duration then
        others = true
      elseif tonumber(other_window) < window then
        ended = ended or {}
        ended_count = ended_count + 1
        ended[ended_count] = name
      else
        return nil
      end
    end
  end
  return others, ended_count
end

-- Takes back the weight counting first added to the hash at `key` (the field it created, when
-- `fresh`).
local function undo(key, fresh)
  if fresh then
    redis.call('HDEL', key, field)
  else
    redis.call('HINCRBY', key, field, '-' .. weight_arg)
  end
end

-- The count before a call to consume `weight` at `now` of the identifier at `key`, counted when
-- allowed; or nil, with nothing changed, when reading first must answer.
local function count_first(key, now, weight)
  if weight > limit then
    return nil
  end
  if now ~= field_now then
    field_window = math.floor(now / tonumber(duration))
    field, field_now = field_of(duration, field_window), now
  end
  if weight ~= weight_of_arg then
    weight_arg, weight_of_arg = string.format('%d', weight), weight
  end
  local count = redis.pcall('HINCRBY', key, field, weight_arg)
  if type(count) ~= 'number' then
    -- WRONGTYPE, a field that holds no integer, maxmemory: nothing was written.
    return nil
  end
  local before = count - weight
  -- A count of `weight` is a new window's (or one a reward took to 0: undone, it is deleted, which
  -- counts the same but for a late call, only in a hash that reading first then answers).
  local fresh = before == 0
  -- A field alone in its hash is all there is (a new id's, most often). Beside others, a new
  -- window's field may have the ended window's; a counter's field, nothing but other limiters'
  -- counters (it was checked when created). Anything else, and a count out of range, are for
  -- reading first.
  local others, ended_count = false, 0
  if redis.call('HLEN', key) ~= 1 then
    others, ended_count = other_fields(key, field_window)
    if others == nil or (ended_count > 0 and not fresh) then
      undo(key, fresh)
      return nil
    end
  end
  if before < 0 or before >= 9007199254740992 then
    undo(key, fresh)
    return nil
  end
  if ended_count > 0 then
    redis.call('HDEL', key, unpack(ended, 1, ended_count))
  end
  if fresh then
    keep_alive(key, ttl, not others)
  end
  if count > limit then
    undo(key, fresh)
  end
  return before
end

-- A batch of one such call (what an app sends under light load, a request at a time) is answered
-- here when counting first can, before the prelude and the set-up below (see lua/lone.lua), and
-- otherwise not tried again there.
-- (Answers false when counting first could not answer.)
local counts_first = limit_count == 1 and mode == 'consume'
local function lone_consume()
  if not (counts_first and ARGV[6] == '+' and ARGV[7] == '1') then
    return nil
  end
  local now, server_now = lone_now(ARGV[8])
  local count = count_first(KEYS[1], now, tonumber(ARGV[9]))
  if count then
    return { count, server_now }
  end
  return false
end

-- (a Function's configured part ends here)
local lone_answer = lone_consume()
if lone_answer then
  return lone_answer
end
counts_first = counts_first and lone_answer ~= false

-- (lua/prelude.lua goes here)

---------------------------------------------------------------------------------------------------
-- Reading first (any L, mode and number of identifiers).

-- Set up on first use (each table costs Redis CPU to build, which counting first does without):
-- each limit's duration (a string, as in ARGV, and a number) and limit, and j by duration; and
-- scratch tables, reused by every call of the batch (identifier-major from 1, n = (i - 1) * L + j):
-- each counter's count, the window it counts in, whether that window holds a count, and how many
-- windows ahead of now's it is (a late call's: src/fixed_window.rs waits for its end); while
-- an identifier's hash is read, each limit's newest window, its count and its field, and the count
-- and window of the earlier layout; the fields to delete (older windows, the earlier layout) of
-- every identifier, stale_to[i] the last of identifier i's; per identifier, whether it had a
-- counter of this limiter, and whether its hash holds other limiters' fields. And the arguments
-- of an HSET.
local durations, duration_numbers, limits, limit_of
local counts, counted, exists, ahead, newest, newest_count, newest_field, old_count, old_window
local stale, stale_to, found, shared, values
local stale_count

local function set_up()
  durations, duration_numbers, limits, limit_of = {}, {}, {}, {}
  for j = 1, limit_count do
    durations[j] = ARGV[2 * j]
    duration_numbers[j] = tonumber(ARGV[2 * j])
    limits[j] = tonumber(ARGV[2 * j + 1])
    limit_of[ARGV[2 * j]] = j
  end
  counts, counted, exists, ahead, newest, newest_count, newest_field = {}, {}, {}, {}, {}, {}, {}
  old_count, old_window, stale, stale_to, found, shared, values = {}, {}, {}, {}, {}, {}, {}
end

local function mark_stale(name)
  stale_count = stale_count + 1
  stale[stale_count] = name
end

-- Reads one field of identifier i's hash at `key` into the scratch tables.
local function read_field(key, i, name, value)
  local field_duration, window = string.match(name, '^(%d+):(%d+)$')
  local j = limit_of[field_duration or name]
  if field_duration and j then
    window, value = whole(key, name, window), whole(key, name, value)
    found[i] = true
    if not newest[j] or window > newest[j] then
      if newest[j] then
        mark_stale(newest_field[j])
      end
      newest[j], newest_count[j], newest_field[j] = window, value, name
    else
      mark_stale(name)
    end
  elseif j then
    old_count[j] = whole(key, name, value)
    mark_stale(name)
  else
    local old = string.match(name, '^(%d+):w$')
    j = limit_of[old]
    if j then
      old_window[j] = whole(key, name, value)
      mark_stale(name)
    elseif field_duration or old or string.match(name, '^%d+$') then
      -- Another limiter's counter (or the earlier layout's).
      whole(key, name, value)
      shared[i] = true
    else
      corrupt(key, 'holds a field ' .. name)
    end
  end
end

-- Reads identifier i's hash into the scratch tables, as of the windows at `now`.
local function read(key, i, now)
  for j = 1, limit_count do
    newest[j], newest_field[j], old_count[j], old_window[j] = false, false, false, false
  end
  stale_count = i > 1 and stale_to[i - 1] or 0
  found[i], shared[i] = false, false
  local flat = redis.call('HGETALL', key)
  for f = 1, #flat, 2 do
    read_field(key, i, flat[f], flat[f + 1])
  end
  local n = (i - 1) * limit_count
  for j = 1, limit_count do
    -- The earlier layout's pair is the counter of its window.
    local old = old_window[j]
    if old then
      found[i] = true
      if newest[j] == old then
        newest_count[j] = newest_count[j] + (old_count[j] or 0)
      elseif not newest[j] or old > newest[j] then
        if newest[j] then
          mark_stale(newest_field[j])
        end
        -- (Its own fields are stale already.)
        newest[j], newest_count[j], newest_field[j] = old, old_count[j] or 0, false
      end
    end
    -- A counter never moves back to an older window: a late call (a host with a slow clock)
    -- counts in the newer window it is in (see Counters in src/fixed_window.rs).
    local window = math.floor(now / duration_numbers[j])
    if newest[j] and newest[j] >= window then
      counts[n + j], counted[n + j], exists[n + j] = newest_count[j], newest[j], true
      ahead[n + j] = newest[j] - window
    else
      counts[n + j], counted[n + j], exists[n + j], ahead[n + j] = 0, window, false, 0
      -- A consume moves the counter to the new window. A reward leaves an ended window's counter
      -- for a late call that still counts in it (src/fixed_window.rs keeps it too).
      if newest_field[j] and mode == 'consume' then
        mark_stale(newest_field[j])
      end
    end
  end
  stale_to[i] = stale_count
end

-- Writes identifier i's counters (its key `key`, counts from counts[first + 1]) plus `add` (never
-- below 0): every limit's for a consume, for a reward those of windows that hold a count (a
-- counter rewarded to 0 stays in its window: a late call still counts there). Deletes the stale
-- fields read, and keeps the hash alive when a counter moved to a new window.
local function write(key, i, first, add)
  local n, moved = 0, false
  for j = 1, limit_count do
    if mode == 'consume' or exists[first + j] then
      values[n + 1] = field_of(durations[j], counted[first + j])
      values[n + 2] = string.format('%d', math.max(0, counts[first + j] + add))
      n = n + 2
      moved = moved or not exists[first + j]
    end
  end
  if n > 0 then
    redis.call('HSET', key, unpack(values, 1, n))
  end
  local from = i > 1 and stale_to[i - 1] or 0
  if stale_to[i] > from then
    redis.call('HDEL', key, unpack(stale, from + 1, stale_to[i]))
  end
  if moved then
    keep_alive(key, ttl, not shared[i])
  end
end

local function read_first(first_key, id_count, now, weight)
  if not durations then
    set_up()
  end
  local allowed, n, late = true, 0, false
  for i = 1, id_count do
    read(KEYS[first_key + i - 1], i, now)
    for j = 1, limit_count do
      n = n + 1
      if counts[n] + weight > limits[j] then
        allowed = false
      end
      late = late or ahead[n] > 0
    end
  end
  if mode == 'consume' then
    if allowed then
      for i = 1, id_count do
        write(KEYS[first_key + i - 1], i, (i - 1) * limit_count, weight)
      end
    end
  elseif mode == 'reward' then
    -- The counts after the refund, of counters whose window holds a count.
    for i = 1, id_count do
      if found[i] then
        local first = (i - 1) * limit_count
        write(KEYS[first_key + i - 1], i, first, -weight)
        for j = 1, limit_count do
          counts[first + j] = math.max(0, counts[first + j] - weight)
        end
      end
    end
  end
  if n == 1 and not late then
    return counts[1]
  end
  -- The counts; for a late call, each with how many windows ahead it is.
  local answer = {}
  for k = 1, n do
    if late then
      answer[2 * k - 1], answer[2 * k] = counts[k], ahead[k]
    else
      answer[k] = counts[k]
    end
  end
  return answer
end

---------------------------------------------------------------------------------------------------

-- Counting first cannot fail once its HINCRBY has (the calls after it touch a hash it wrote, and
-- Redis refuses no write at maxmemory after a script's first), so it runs without a pcall.
local try_first
if counts_first then
  try_first = function(first_key, id_count, now, weight)
    if id_count == 1 then
      return count_first(KEYS[first_key], now, weight)
    end
  end
end

return each_counting_call(configuration_args + 1, read_first, try_first)
