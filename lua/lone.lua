-- Shared by the lone paths (and keep_alive(), by the scripts whose hashes other limiters share,
-- which have it from here): a script may begin with a path that answers a batch of one consume of
-- one identifier (what an app sends a request at a time) before lua/prelude.lua and the rest of
-- the script are set up, since each function and table a script makes costs Redis CPU at every
-- call (benchmark/RESULTS.md, item 36). Such a path takes the steps of the batch path for that
-- one call; what it does not expect (data this limiter did not write, another type at the key,
-- a write refused) goes on to the batch path with nothing written, which answers it (and reads
-- the server's clock again). The Rust side puts this file where a script has the line
-- "-- (lua/lone.lua goes here)" (see the `lua_script!` macro in src/binding/mod.rs).

-- A lone call's now in microseconds: the one it gave; or the Redis server's clock, returned a
-- second time (the reply ends with it: see each_counting_call in lua/prelude.lua), read now for
-- "", or for "~<now>" as the direct lane estimated it (see now_of in lua/prelude.lua).
local function lone_now(given)
  if given == '' then
    local time = redis.call('TIME')
    local now = time[1] * 1000000 + time[2]
    return now, now
  end
  if string.byte(given) == 126 then
    local now = tonumber(string.sub(given, 2))
    return now, now
  end
  return tonumber(given)
end

-- A stored whole number from 0 to 2^53 as the batch path's whole() takes it, or nil for anything
-- else (which the batch path then fails on).
local function lone_whole(value)
  local number = tonumber(value)
  if not number or number ~= number or number < 0 or number >= 9007199254740992 then
    return nil
  end
  return number % 1 == 0 and number or nil
end

-- The bucket at `key` (see bucket_pair in lua/prelude.lua): true, nil, nil when the key holds
-- nothing; true and both values when it holds "<a>:<b>" of two whole numbers; false for anything
-- else (another type, an earlier version's hash, other text), which the batch path answers.
local function lone_pair(key)
  local value = redis.pcall('GET', key)
  if not value then
    return true, nil, nil
  end
  if type(value) ~= 'string' then
    return false
  end
  -- Digits only: tonumber gives whole numbers from 0 (as lone_whole, whose other checks these
  -- pass), up to the bound (nil when the pattern does not match).
  local a, b = string.match(value, '^(%d+):(%d+)$')
  a, b = tonumber(a), tonumber(b)
  if a and b and a < 9007199254740992 and b < 9007199254740992 then
    return true, a, b
  end
  return false
end

-- Sets the TTL of the hash at `key` to `ttl_ms` unless it has a longer one: limiters that share a
-- namespace share an id's hash, each giving it the TTL its own counters need, and none may cut
-- another's short. `alone` says no other TTL can matter (no PTTL to read): the hash holds no other
-- limiter's fields, or it held nothing before this call wrote it (a new key has no TTL).
local function keep_alive(key, ttl_ms, alone)
  if not alone and redis.call('PTTL', key) >= tonumber(ttl_ms) then
    return
  end
  redis.call('PEXPIRE', key, ttl_ms)
end
