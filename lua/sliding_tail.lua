-- The sliding tail (src/sliding_tail.rs) on Redis, for one or many calls at once.
-- (lua/prelude.lua, which gives it now_of(), each_counting_call(), whole(), corrupt() and
-- read_fields(), goes after a lone consume's path, which has lua/lone.lua and its keep_alive().)
--
-- One hash per identifier, at namespace + id, holds every limit's counters: field `<duration>`
-- the count of the window `<duration>:w` (floor(now / duration), aligned to the clock), field
-- `<duration>:p` the count of the window before it. As of now, counters one window old move on
-- (the count becomes the previous count), older ones count 0, and counters in a window newer than
-- now's (written by a host whose clock is ahead) stay in it and are judged at its start. The
-- weighted count is floor(previous * rem / duration) + current, rem = the part of the previous
-- window still inside the sliding window (the whole duration at a window's start). A call of
-- weight w is allowed when weighted + w <= limit for every limit of every identifier; only
-- allowed calls count.
--
-- ARGV[1]              L, the number of limits
-- ARGV[2j], ARGV[2j+1] limit j's duration (microseconds) and limit (j = 1..L)
-- ARGV[2L+2]           "consume" to count an allowed call, "peek" to only look, "reward" to give
--                      the weight back, from the current count first, then the previous one
--                      (never below 0; an identifier without a hash gets none)
-- ARGV[2L+3]           the TTL of a hash, in milliseconds (twice the longest duration, plus a
--                      second), set when a counter moves to a new window (then it outlives every
--                      window the hash counts in, and the one after it); longer, and set on every
--                      write, for counters in a window ahead of now (never shortened: see
--                      keep_alive in lua/lone.lua)
-- ARGV[2L+4]           the batch's shape (see each_call in lua/prelude.lua)
-- then per call:       its number of identifiers N, its now (microseconds; "" for the server's
--                      clock) and its weight
-- KEYS                 per call, the hashes of its N identifiers
--
-- Reply: per call (see each_counting_call in lua/prelude.lua), { counts... } with,
-- per identifier and limit (identifier-major), the window, current and previous counts as of now,
-- before this call (after it for "reward"); or the error message (a string) of a call that failed
-- alone. src/sliding_tail.rs judges from them as this script decided.

-- ARGV[1] to ARGV[2L+3] configure the script (see src/store/script.rs).
local configuration_args = 2 * tonumber(ARGV[1]) + 3

local EXACT = 9007199254740992 -- 2^53

-- a * b for whole a, b below 2^53, exactly, into `limbs`: five limbs of 24 bits, least
-- significant first. Every partial product is below 2^48 and every column sum below 2^51, so
-- doubles hold them. (x, y, p and q are scratch, made for the first product and reused by every
-- other: each table a script builds costs Redis CPU, and most calls need none.)
local LIMB = 16777216
local x, y, p, q
local function product(a, b, limbs)
  for i = 1, 3 do
    x[i], y[i] = a % LIMB, b % LIMB
    a, b = (a - x[i]) / LIMB, (b - y[i]) / LIMB
  end
  local carry = 0
  for i = 1, 5 do
    local sum = carry
    for k = math.max(1, i - 2), math.min(i, 3) do
      sum = sum + x[k] * y[i + 1 - k]
    end
    limbs[i] = sum % LIMB
    carry = (sum - limbs[i]) / LIMB
  end
end

-- Whether a * b < c * d, exactly, for whole numbers below 2^53 (the products may not be).
local function product_less(a, b, c, d)
  local left, right = a * b, c * d
  -- A product computed below 2^53 is exact (one at or above it rounds to 2^53 or more).
  if left < EXACT and right < EXACT then
    return left < right
  end
  if not x then
    x, y, p, q = {}, {}, {}, {}
  end
  product(a, b, p)
  product(c, d, q)
  for i = 5, 1, -1 do
    if p[i] ~= q[i] then
      return p[i] < q[i]
    end
  end
  return false
end

-- The hash's fields are limits' counts, previous counts and windows (also of other limiters that
-- share the namespace, with other durations).
local function tail_field(name)
  return string.match(name, '^%d+$') or string.match(name, '^%d+:p$') or string.match(name, '^%d+:w$')
end

-- A limit's counters as of now, from those stored (`window` nil when none): window, current,
-- previous. Counters one window old move on (the count becomes the previous count), older ones
-- count 0, and counters in a window ahead of now stay in it. Empty counters sit in now's window,
-- so that they read exactly as none (see Tail::at in src/sliding_tail.rs).
local function moved_on(window, current, previous, now_window)
  if not window then
    current, previous = 0, 0
  elseif window == now_window - 1 then
    window, current, previous = now_window, 0, current
  elseif window < now_window - 1 then
    current, previous = 0, 0
  end
  if current == 0 and previous == 0 then
    window = now_window
  end
  return window, current, previous
end

-- (lua/lone.lua goes here)

-- The one limit of a lone consume: its fields' names, duration and limit, made once per
-- configuration (a Function keeps them: see src/store/script.rs), not at every call.
local lone_name, lone_previous_name, lone_window_name, lone_duration, lone_limit
if ARGV[1] == '1' then
  lone_name = ARGV[2]
  lone_previous_name, lone_window_name = lone_name .. ':p', lone_name .. ':w'
  lone_duration, lone_limit = tonumber(lone_name), tonumber(ARGV[3])
end

-- A lone consume under one limit (see lua/lone.lua): the steps of judge() below, for one
-- identifier.
local function lone_consume()
  if not (ARGV[1] == '1' and ARGV[4] == 'consume' and ARGV[6] == '+' and ARGV[7] == '1') then
    return nil
  end
  local key, name, previous_name, window_name = KEYS[1], lone_name, lone_previous_name, lone_window_name
  local duration, limit, weight = lone_duration, lone_limit, tonumber(ARGV[9])
  local now, server_now = lone_now(ARGV[8])
  -- This limit's fields, and other limiters' (see tail_field()), as whole numbers.
  local flat = redis.pcall('HGETALL', key)
  local healthy, current, previous, window = not flat.err, 0, 0, nil
  for f = 1, #flat, 2 do
    local field, value = flat[f], lone_whole(flat[f + 1])
    if not value then
      healthy = false
    elseif field == name then
      current = value
    elseif field == previous_name then
      previous = value
    elseif field == window_name then
      window = value
    elseif not tail_field(field) then
      healthy = false
    end
  end
  healthy = healthy and (not window or window * duration < EXACT)
  if healthy then
    local stored_window, now_window = window, math.floor(now / duration)
    window, current, previous = moved_on(window, current, previous, now_window)
    local rem = duration
    if window == now_window then
      rem = duration - (now - window * duration)
    end
    local spare = limit - current - weight
    if spare < 0 or not product_less(previous, rem, spare + 1, duration) then
      return { { window, current, previous }, server_now }
    end
    -- Counted: as judge() writes, with the TTL of ttl_of().
    local written
    if stored_window == window then
      written = redis.pcall('HSET', key, name, string.format('%d', current + weight))
    else
      written = redis.pcall('HSET', key, name, string.format('%d', current + weight), previous_name, string.format('%d', previous), window_name, string.format('%d', window))
    end
    -- (HSET answers a number; a failure, { err = ... }.)
    if type(written) == 'number' then
      if stored_window ~= window or window > now_window then
        local ttl = ARGV[5]
        if window > now_window then
          local until_ms = math.ceil((window * duration - now + 2 * duration) / 1000) + 1000
          if until_ms > tonumber(ttl) then
            ttl = string.format('%d', until_ms)
          end
        end
        keep_alive(key, ttl, #flat == 0)
      end
      return { { window, current, previous }, server_now }
    end
  end
end

-- (a Function's configured part ends here)
local lone_answer = lone_consume()
if lone_answer then
  return lone_answer
end

-- (lua/prelude.lua goes here)

local limit_count = tonumber(ARGV[1])
-- Limit j's fields, at slots 3j - 2 (current count), 3j - 1 (previous count) and 3j (window) of
-- what read_fields() reads.
local durations, limits, fields, slot_of = {}, {}, {}, {}
for j = 1, limit_count do
  durations[j] = tonumber(ARGV[2 * j])
  limits[j] = tonumber(ARGV[2 * j + 1])
  fields[3 * j - 2] = ARGV[2 * j]
  fields[3 * j - 1] = ARGV[2 * j] .. ':p'
  fields[3 * j] = ARGV[2 * j] .. ':w'
  for slot = 3 * j - 2, 3 * j do
    slot_of[fields[slot]] = slot
  end
end
local mode = ARGV[2 * limit_count + 2]
local ttl = ARGV[2 * limit_count + 3]

-- Limit j's counters as of now (see moved_on()), from what read_fields() read into `stored`.
local function tail_at(key, j, stored, now_window)
  local window = stored[3 * j]
  if window and window * durations[j] >= EXACT then
    corrupt(key, 'holds ' .. fields[3 * j] .. ' = ' .. string.format('%d', window) .. ', a window out of range')
  end
  return moved_on(window, stored[3 * j - 2] or 0, stored[3 * j - 1] or 0, now_window)
end

-- The TTL of a hash written at now with these windows: the shared one (the argument's string: a
-- number given to PEXPIRE costs Redis a conversion), or longer for counters in a window ahead of
-- now, which matter until two windows after theirs.
local function ttl_of(now, windows, now_windows)
  local longest = ttl
  for j = 1, limit_count do
    if windows[j] > now_windows[j] then
      local until_ms = math.ceil((windows[j] * durations[j] - now + 2 * durations[j]) / 1000) + 1000
      if until_ms > tonumber(longest) then
        longest = string.format('%d', until_ms)
      end
    end
  end
  return longest
end

-- Scratch, reused by every call of the batch (each table a script builds costs Redis CPU): an
-- identifier's stored fields as read_fields() reads them; per identifier of the call (from 0)
-- how many of its fields it had and how many fields in all, and per identifier and limit
-- (identifier-major, from 1) the window stored; now's window per limit; and what is written for
-- an identifier: an HSET's arguments and each limit's window.
local stored, found, field_counts, stored_windows, now_windows, values, windows = {}, {}, {}, {}, {}, {}, {}

local function judge(first_key, id_count, now, weight)
  local answer, allowed = {}, true
  for j = 1, limit_count do
    now_windows[j] = math.floor(now / durations[j])
  end
  for i = 0, id_count - 1 do
    local key = KEYS[first_key + i]
    found[i], field_counts[i] = read_fields(key, slot_of, 3 * limit_count, stored, tail_field)
    for j = 1, limit_count do
      stored_windows[i * limit_count + j] = stored[3 * j] or false
      local window, current, previous = tail_at(key, j, stored, now_windows[j])
      answer[#answer + 1] = window
      answer[#answer + 1] = current
      answer[#answer + 1] = previous
      -- A late call (window ahead of now) is judged at the window's start: all of rem.
      local rem = durations[j]
      if window == now_windows[j] then
        rem = durations[j] - (now - window * durations[j])
      end
      -- floor(previous * rem / duration) <= spare, exactly.
      local spare = limits[j] - current - weight
      if spare < 0 or not product_less(previous, rem, spare + 1, durations[j]) then
        allowed = false
      end
    end
  end
  -- The counters to write: those of the answer (after the refund, or with the weight counted).
  local writing = (mode == 'reward') or (mode == 'consume' and allowed)
  if not writing then
    return answer
  end
  for i = 0, id_count - 1 do
    local key = KEYS[first_key + i]
    if mode == 'consume' or found[i] > 0 then
      local n, moved, ahead = 0, false, false
      for j = 1, limit_count do
        local at = 1 + 3 * (i * limit_count + j - 1)
        if mode == 'reward' then
          local from_current = math.min(weight, answer[at + 1])
          answer[at + 1] = answer[at + 1] - from_current
          answer[at + 2] = math.max(0, answer[at + 2] - (weight - from_current))
          if answer[at + 1] == 0 and answer[at + 2] == 0 then
            answer[at] = now_windows[j]
          end
        end
        local current = answer[at + 1]
        if mode == 'consume' then
          current = current + weight
        end
        windows[j] = answer[at]
        values[n + 1], values[n + 2] = fields[3 * j - 2], current
        n = n + 2
        -- The previous count and the window change only when the window moves (or a reward
        -- takes from the previous count): fewer fields to write, less work for Redis. (A count of
        -- 0 goes as a string: a number costs Redis a conversion.)
        if mode == 'reward' or stored_windows[i * limit_count + j] ~= answer[at] then
          moved = true
          values[n + 1], values[n + 2] = fields[3 * j - 1], answer[at + 2] == 0 and '0' or answer[at + 2]
          values[n + 3], values[n + 4] = fields[3 * j], answer[at]
          n = n + 4
        end
        ahead = ahead or answer[at] > now_windows[j]
      end
      redis.call('HSET', key, unpack(values, 1, n))
      if moved or ahead then
        keep_alive(key, ttl_of(now, windows, now_windows), field_counts[i] == 0)
      end
    end
  end
  return answer
end

return each_counting_call(configuration_args + 1, judge)
