-- Shared by every script: the Rust side puts this file in front of each of them (see the
-- `lua_script!` macro in src/binding/mod.rs), so what runs in Redis is prelude + script.

-- A call's now, in microseconds since the epoch: the one it gave, or the Redis server's clock,
-- once per script call, so every call of a batch shares it: for "" read with TIME, for
-- "~<now>" as the direct lane of a lone call estimated it, which spares Redis the TIME
-- (src/store/direct.rs: never ahead of the server's clock, never behind a now this process
-- was answered with before; a lone call's path that goes on to the batch path brings it here).
local server_now
local function now_of(given)
  if given ~= '' and string.byte(given) ~= 126 then
    return tonumber(given)
  end
  if not server_now then
    if given ~= '' then
      server_now = tonumber(string.sub(given, 2))
    else
      local time = redis.call('TIME')
      server_now = tonumber(time[1]) * 1000000 + tonumber(time[2])
    end
  end
  return server_now
end

-- What one call of a batch answers, from pcall's results: its answer, or when it failed alone
-- (e.g. WRONGTYPE) its error message as a string: not an error reply, which clients take as a
-- failure of the whole batch.
local function answer_of(ok, answer)
  if ok then
    return answer
  end
  return type(answer) == 'table' and answer.err or tostring(answer)
end

-- The calls of a batch (src/store/batch.rs), in order. ARGV[first_arg] is the batch's shape, a
-- byte per call: "+" when the call's `stride` arguments follow the previous call's in ARGV, "="
-- when they are the previous call's (most calls of a batch share theirs: the server's clock,
-- weight 1, and each argument costs Redis more than the byte). Yields (the call's number, the
-- index in ARGV of its first argument).
local function each_call(first_arg, stride)
  local shape, call, arg = ARGV[first_arg], 0, first_arg + 1 - stride
  return function()
    call = call + 1
    local kind = string.byte(shape, call)
    if not kind then
      return nil
    end
    if kind == 43 then
      arg = arg + stride
    end
    return call, arg
  end
end

-- The batch loop of the counting scripts: each call's arguments (see each_call) are its number
-- of identifiers N, its now and its weight (read once per run of calls that share them); its N
-- keys follow the previous call's in KEYS. judge(first_key, N, now, weight) answers a call with
-- its values, a table, or a number when there is one (a table costs Redis more to build and
-- send). `try_first`, when given, is asked first, with the same arguments and without pcall (a
-- pcall per call costs Redis more than a short path's own work): a path that cannot fail, which
-- answers nil (having changed nothing) for judge to answer. Then, when a call had no now of its
-- own, the server's now follows once for the batch (src/store/batch.rs).
local function each_counting_call(first_arg, judge, try_first)
  local answers, next_key, read_arg, id_count, now, weight = {}, 1
  for call, arg in each_call(first_arg, 3) do
    if arg ~= read_arg then
      id_count, now, weight = tonumber(ARGV[arg]), now_of(ARGV[arg + 1]), tonumber(ARGV[arg + 2])
      read_arg = arg
    end
    local answer = try_first and try_first(next_key, id_count, now, weight)
    if answer == nil then
      answer = answer_of(pcall(judge, next_key, id_count, now, weight))
    end
    answers[call] = answer
    next_key = next_key + id_count
  end
  if server_now then
    answers[#answers + 1] = server_now
  end
  return answers
end

-- Data this limiter did not write at its key (a key of another type is WRONGTYPE already): the
-- call fails alone with a message naming the key, before anything is written.
local function corrupt(key, what)
  error({ err = 'ERR ratekeeper: ' .. key .. ' ' .. what ..
    ' (not written by this limiter: reset the id or delete the key)' })
end

-- A stored whole number from 0 to 2^53 (a count, a window, a bucket, a time in microseconds):
-- nil when absent, the call's failure when it is anything else ("abc", "-5", "1e999", "nan").
local function whole(key, field, value)
  if not value then
    return nil
  end
  local number = tonumber(value)
  if not number or number ~= number or number < 0 or number >= 9007199254740992 or number % 1 ~= 0 then
    corrupt(key, 'holds ' .. field .. ' = ' .. value .. ', not a whole number')
  end
  return number
end

-- Reads the hash at `key` in one call (HGETALL: one redis.call costs Redis more than the Lua
-- around it): sets into[slot] to the whole number of each field that slot_of names (slot_of[name]
-- = slot, from 1 to slot_count; false for a field absent), fails on a field that neither slot_of
-- nor `valid(name)` knows. Returns the number of slot_of's fields found, and of every field (0
-- when the key holds nothing: a hash written then has no TTL yet, see keep_alive in
-- lua/lone.lua).
local function read_fields(key, slot_of, slot_count, into, valid)
  for slot = 1, slot_count do
    into[slot] = false
  end
  local flat, found = redis.call('HGETALL', key), 0
  for f = 1, #flat, 2 do
    local name = flat[f]
    local slot = slot_of[name]
    if slot then
      into[slot] = whole(key, name, flat[f + 1])
      found = found + 1
    elseif not valid(name) then
      corrupt(key, 'holds a field ' .. name)
    end
  end
  return found, #flat / 2
end

-- A bucket: two whole numbers always written together (a level, and the instant it is as of),
-- stored as the string "<first>:<second>" (one SET ... PX writes it with its TTL, where a hash
-- needs HSET and PEXPIRE). Returns both, or nil, nil when the key holds nothing. A hash of the two
-- fields `first` and `second` (earlier versions' layout) is read as its two values, and the next
-- write replaces it with the string. Anything else is data this limiter did not write, and the
-- call fails.
-- (pair and pair_slots are scratch, made on first use: most scripts need none, and each table a
-- script makes costs Redis CPU at every call.)
local pair, pair_slots
local function no_other_field()
  return false
end
local function bucket_pair(key, first, second)
  local value = redis.pcall('GET', key)
  if type(value) == 'table' then
    -- WRONGTYPE: an earlier version's hash, or another type (whose error stands).
    if redis.call('TYPE', key).ok ~= 'hash' then
      error(value)
    end
    if not pair then
      pair, pair_slots = {}, {}
    end
    pair_slots[first], pair_slots[second] = 1, 2
    local found = read_fields(key, pair_slots, 2, pair, no_other_field)
    if found == 1 then
      corrupt(key, 'holds only one of the fields ' .. first .. ' and ' .. second)
    end
    return pair[1] or nil, pair[2] or nil
  end
  if not value then
    return nil, nil
  end
  local a, b = string.match(value, '^([^:]*):([^:]*)$')
  if not a then
    corrupt(key, 'holds "' .. value .. '", not ' .. first .. ':' .. second)
  end
  return whole(key, first, a), whole(key, second, b)
end
