-- The expiring counter (src/expiring_counter.rs) on rate-limiter-flexible's own Redis layout, for
-- one or many calls at once. (lua/prelude.lua, which gives it each_call(), answer_of() and
-- corrupt(), goes after a lone consume's path: see below.)
--
-- One string per key: the points counted, a whole number, with the time left as the key's TTL (no
-- TTL: it never expires). rate-limiter-flexible's RateLimiterRedis reads and writes the same keys
-- the same way, so that both can count together.
--
-- ARGV[1]        the batch's shape (see each_call in lua/prelude.lua)
-- then per call: its mode, its points and its duration in milliseconds (0: the key never expires),
-- or for "union" its limits and durations
--   "add"    adds the points; a key that does not exist starts holding them, with the duration
--            as its TTL; one without a TTL is given the duration (as rate-limiter-flexible does)
--   "set"    sets the key to the points with the duration as its TTL (0: none)
--   "over"   adds the points as "add" does; then, when the key was there already and now holds
--            more than a limit, starts its TTL again: the duration times a growth to the power of
--            how far the count is past the limit + 1, at most 1e12 ms (@fastify/rate-limit's
--            continueExceeding: growth 1; its exponentialBackoff: 2). Its duration argument is
--            "duration limit growth", space separated
--   "get"    reads the key
--   "delete" deletes the key
--   "union"  adds the points to each of its N keys as "add" does, or to none when one of them
--            would go over its limit: its third argument is "limit duration" per key, space
--            separated (rate-limiter-flexible's RateLimiterUnion, atomic)
-- KEYS           per call, its key (a "union" its N keys)
--
-- Reply: per call, { points, ms left (-1: never expires), 1 when this call started the key else 0 }
-- for "add", "over" and "set", the same or {} (no key) for "get", 1 or 0 (whether a key was deleted) for
-- "delete", and for "union" { points, ms left (-2: no key; 0 for a key that did not refuse in a
-- union refused by another), started, 1 when refused } per key, one after the other;
-- or the error message (a string) of a call that failed alone.

-- No argument configures the script (see src/store/script.rs).
local configuration_args = 0

-- Sets the count at `key` to `points` for `duration` ms (0: for good). Returns the count and the
-- ms left (-1: never expires).
local function start(key, points, duration)
  if duration ~= '0' then
    redis.call('SET', key, points, 'PX', duration)
    return tonumber(points), tonumber(duration)
  end
  redis.call('SET', key, points)
  return tonumber(points), -1
end

-- Adds `points` to the count at `key` that has `left` ms (its PTTL: -1 none, -2 no key); a key
-- that is absent starts with them (for `duration` ms). Two commands (the PTTL, then a SET or an
-- INCRBY), where a SET NX first takes three for a key that is there, the usual case. Returns the
-- count, the ms left (-1: never expires) and 1 when this call started the key, else 0.
local function add_after(key, points, duration, left)
  if left == -2 then
    local count, started_left = start(key, points, duration)
    return count, started_left, 1
  end
  local count = redis.call('INCRBY', key, points)
  if left == -1 and duration ~= '0' then
    redis.call('PEXPIRE', key, duration)
    left = tonumber(duration)
  end
  return count, left, 0
end

local function add(key, points, duration)
  return { add_after(key, points, duration, redis.call('PTTL', key)) }
end

-- A union's spec ("limit duration" per key) as its limits (numbers) and durations (strings),
-- parsed once: the calls of one RateLimiterUnion share theirs. Kept from call to call as a
-- Function (up to 16 specs), for the batch as a script. (specs and the scratch below are made on
-- first use: most calls are no union, and each table a script makes costs Redis CPU.)
local specs, spec_count
local function spec_of(text)
  local spec = specs and specs[text]
  if not spec then
    if not specs or spec_count == 16 then
      specs, spec_count = {}, 0
    end
    spec = { {}, {} }
    for limit, duration in string.gmatch(text, '(%S+) (%S+)') do
      spec[1][#spec[1] + 1], spec[2][#spec[2] + 1] = tonumber(limit), duration
    end
    specs[text], spec_count = spec, spec_count + 1
  end
  return spec[1], spec[2]
end

-- Per entry of a union (scratch, reused by every union): the entry before it with the same key
-- (false: none), the count its key held (false: no key), its key's count once the points of the
-- union's entries so far are added (a key given twice takes them twice), and whether it refused.
local same_as, held, after, refused

-- Reads the keys of a union from KEYS[first_key] on, one per entry of `limits` and `durations`,
-- into the scratch above, writing nothing; `count(key, value)` is a key's count (nil: not one).
-- Returns whether an entry refused, or nil when a key held no count.
local function union_read(first_key, points, limits, durations, count)
  if not same_as then
    same_as, held, after, refused = {}, {}, {}, {}
  end
  local added, any_refused = tonumber(points), false
  for i = 1, #durations do
    local key = KEYS[first_key + i - 1]
    same_as[i] = false
    for earlier = 1, i - 1 do
      if KEYS[first_key + earlier - 1] == key then
        same_as[i] = earlier
      end
    end
    if same_as[i] then
      held[i], after[i] = held[same_as[i]], after[same_as[i]] + added
    else
      local value = redis.call('GET', key)
      held[i] = false
      if value then
        held[i] = count(key, value)
        if not held[i] then
          return nil
        end
      end
      after[i] = (held[i] or 0) + added
    end
    refused[i] = after[i] > limits[i]
    any_refused = any_refused or refused[i]
  end
  return any_refused
end

-- The union that union_read read: `points` are added to every key, or to none when one would go
-- over its limit (then each key's answer tells what it holds, and whether it is one that
-- refused). Answers its keys' numbers in one flat table, four per key (a table per key costs
-- Redis more to build and to send).
local function union_answer(first_key, points, durations, any_refused)
  local answers = {}
  for i = 1, #durations do
    local key, at = KEYS[first_key + i - 1], 4 * i - 3
    if any_refused then
      -- Nothing written: what the key holds, and the time left of those that refused (the others'
      -- is not asked for: a refused union answers with the limiters that refused).
      local left = held[i] and (refused[i] and redis.call('PTTL', key) or 0) or -2
      answers[at], answers[at + 1], answers[at + 2], answers[at + 3] = held[i] or 0, left, 0, refused[i] and 1 or 0
    else
      -- A key absent when read starts with the points (no TTL to ask for); given twice, it has
      -- them when its second entry adds to it.
      local left = (held[i] == false and not same_as[i]) and -2 or redis.call('PTTL', key)
      answers[at], answers[at + 1], answers[at + 2] = add_after(key, points, durations[i], left)
      answers[at + 3] = 0
    end
  end
  return answers
end

-- The count a key holds: its string as a whole number (what INCRBY keeps), or nil for anything
-- else, which the lone path leaves to the batch path, where count_of fails the call.
local function lone_count(_, value)
  return string.match(value, '^-?%d+$') and tonumber(value)
end

-- A lone union: the batch path's steps for one union call. A key of another type or holding no
-- count goes on to the batch path with nothing written, which answers it; a write that fails
-- (at maxmemory) answers its error as the batch path would (see answer_of in lua/prelude.lua).
local function lone_union()
  local limits, durations = spec_of(ARGV[4])
  local read, any_refused = pcall(union_read, 1, ARGV[3], limits, durations, lone_count)
  if not read or any_refused == nil then
    return false
  end
  local ok, answer = pcall(union_answer, 1, ARGV[3], durations, any_refused)
  if not ok then
    answer = type(answer) == 'table' and answer.err or tostring(answer)
  end
  return { answer }
end

-- A batch of one "add" (a lone consume's) or of one "union" (see lone_union) is answered here,
-- before the prelude and the rest are set up: each function and table a script makes costs Redis
-- CPU at every call (the prelude's definitions alone cost about 3 µs of a lone consume's 13 to 16:
-- benchmark/RESULTS.md, item 35). An add's failure (WRONGTYPE, a count that is no integer, a
-- write refused at maxmemory) comes before anything is written, and goes on to the batch path,
-- which answers it (as the lone paths of lua/lone.lua do).
local function lone_consume()
  if ARGV[1] ~= '+' then
    return nil
  elseif ARGV[2] == 'union' then
    return lone_union()
  elseif ARGV[2] ~= 'add' then
    return nil
  end
  local ok, answer = pcall(add, KEYS[1], ARGV[3], ARGV[4])
  if ok then
    return { answer }
  end
end

-- (a Function's configured part ends here)
local lone_answer = lone_consume()
if lone_answer then
  return lone_answer
end

-- (lua/prelude.lua goes here)

-- The count a key holds (see lone_count), or the call's failure.
local function count_of(key, value)
  return lone_count(key, value) or corrupt(key, 'holds ' .. value .. ', not a whole number of points')
end

-- "set": the key starts again, holding `points`.
local function set(key, points, duration)
  local count, left = start(key, points, duration)
  return { count, left, 1 }
end

-- The longest TTL "over" gives, in ms (as the engine's longest duration).
local LONGEST_MS = 1e12

-- "add", then past `limit` the TTL starts again, `growth` times longer for each hit further past.
local function add_over(key, points, spec)
  local duration, limit, growth = string.match(spec, '^(%d+) (%S+) (%S+)$')
  local answer = add(key, points, duration)
  if answer[3] == 1 or answer[1] <= tonumber(limit) or duration == '0' then
    return answer
  end
  local window = math.min(tonumber(duration) * tonumber(growth) ^ (answer[1] - tonumber(limit) - 1), LONGEST_MS)
  window = math.max(math.floor(window), 1)
  -- (As a string: a Lua number this large would be written as 1e+12, which PEXPIRE refuses.)
  redis.call('PEXPIRE', key, string.format('%d', window))
  answer[2] = window
  return answer
end

-- A union, from the batch: its keys read (a count that is no whole number fails the call), then
-- written or answered (see union_read and union_answer above).
local function union(first_key, points, limits, durations)
  return union_answer(first_key, points, durations, union_read(first_key, points, limits, durations, count_of))
end

local function call(key, mode, points, duration)
  if mode == 'add' then
    return add(key, points, duration)
  elseif mode == 'over' then
    return add_over(key, points, duration)
  elseif mode == 'set' then
    return set(key, points, duration)
  elseif mode == 'get' then
    local value = redis.call('GET', key)
    if not value then
      return {}
    end
    return { count_of(key, value), redis.call('PTTL', key), 0 }
  end
  return redis.call('DEL', key)
end

local answers, next_key = {}, 1
for i, arg in each_call(configuration_args + 1, 3) do
  local mode = ARGV[arg]
  if mode == 'union' then
    local limits, durations = spec_of(ARGV[arg + 2])
    answers[i] = answer_of(pcall(union, next_key, ARGV[arg + 1], limits, durations))
    next_key = next_key + #durations
  else
    answers[i] = answer_of(pcall(call, KEYS[next_key], mode, ARGV[arg + 1], ARGV[arg + 2]))
    next_key = next_key + 1
  end
end
return answers
