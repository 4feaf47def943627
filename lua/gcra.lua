-- The generic cell rate algorithm (src/gcra.rs) on Redis, for one or many calls at once.
-- (lua/prelude.lua, which gives it now_of(), whole() and each_counting_call(), goes after a lone
-- consume's path, which has lua/lone.lua.)
--
-- redis-cell's layout: one plain string per identifier, at namespace + id, holding its
-- theoretical arrival time (TAT) in whole microseconds; a TAT at or before now, like a missing
-- key, is an empty identifier. A weight w costs w * T: it is allowed when
-- max(tat, now) + w * T - tau <= now, and then the TAT moves there. A call judges every
-- identifier first and charges them all only when all admit it. Every write sets the key's TTL
-- to its TAT plus a second (the key lives as long as it matters, as in redis-cell).
--
-- ARGV[1]   T, the emission interval in microseconds (what a weight of 1 costs)
-- ARGV[2]   burst, the most weight admitted at once
-- ARGV[3]   tau = T * burst, in microseconds
-- ARGV[4]   "consume" to charge an allowed call, "peek" to only look, "reward" to move the TAT
--           back by weight * T (the key is deleted when that is at or before now; an identifier
--           without a key gets none)
-- ARGV[5]   the longest TTL of a key in milliseconds (tau plus a second; unused: each key gets
--           its own)
-- ARGV[6]        the batch's shape (see each_call in lua/prelude.lua)
-- then per call: its number of identifiers N, its now (microseconds; "" for the server's clock)
-- and its weight
-- KEYS      per call, the strings of its N identifiers
--
-- Reply: per call (see each_counting_call in lua/prelude.lua), { tats... }: the N
-- stored TATs (0 for none) before this call (after it for "reward"), or the error message (a
-- string) of a call that failed alone. src/gcra.rs judges from them as this script decided.
--
-- Exactness: every number is a whole number below 2^53. A TAT is at most a now (< 4e15) plus
-- tau (<= 1e15), and a charge adds at most tau; a refund's weight * T may be larger (any weight
-- up to 1e15), but then it is at least 2^53 in doubles too, larger than any TAT: the key is
-- deleted, as the exact arithmetic says.

-- ARGV[1] to ARGV[5] configure the script (see src/store/script.rs).
local configuration_args = 5
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local tau = tonumber(ARGV[3])
local mode = ARGV[4]

-- Writes a TAT, with a TTL of the time until it is reached plus a second. (Whole numbers go to
-- Redis as strings: a number passed to redis.call costs Redis a %.17g.)
local function store(key, tat, now)
  local ttl = math.ceil((tat - now) / 1000) + 1000
  redis.call('SET', key, string.format('%d', tat), 'PX', string.format('%d', ttl))
end

-- (lua/lone.lua goes here)

-- A lone consume (see lua/lone.lua): the steps of judge() below, for one identifier.
local function lone_consume()
  if not (mode == 'consume' and ARGV[6] == '+' and ARGV[7] == '1') then
    return nil
  end
  local key, weight = KEYS[1], tonumber(ARGV[9])
  local now, server_now = lone_now(ARGV[8])
  local stored = redis.pcall('GET', key)
  local tat = 0
  if stored then
    tat = lone_whole(stored)
  end
  if tat then
    local next_tat = math.max(tat, now) + weight * interval
    if weight > burst or next_tat - tau > now then
      return { tat, server_now }
    end
    if pcall(store, key, next_tat, now) then
      return { tat, server_now }
    end
  end
end

-- (a Function's configured part ends here)
local lone_answer = lone_consume()
if lone_answer then
  return lone_answer
end

-- (lua/prelude.lua goes here)

-- Scratch tables, reused by every call of the batch (each table costs Redis CPU): the call's
-- stored TATs (false for none) and its answer's TATs (0 for none).
local tats, answered = {}, {}

local function judge(first_key, id_count, now, weight)
  local allowed = weight <= burst
  for i = 1, id_count do
    local key = KEYS[first_key + i - 1]
    local tat = whole(key, 'a TAT', redis.call('GET', key))
    tats[i], answered[i] = tat or false, tat or 0
    if allowed and math.max(tat or 0, now) + weight * interval - tau > now then
      allowed = false
    end
  end
  if mode == 'reward' then
    for i = 1, id_count do
      local key, tat = KEYS[first_key + i - 1], tats[i]
      if tat then
        local left = tat - weight * interval
        if left > now then
          store(key, left, now)
          answered[i] = left
        else
          redis.call('DEL', key)
          answered[i] = 0
        end
      end
    end
  elseif mode == 'consume' and allowed then
    for i = 1, id_count do
      store(KEYS[first_key + i - 1], math.max(tats[i] or 0, now) + weight * interval, now)
    end
  end
  if id_count == 1 then
    return answered[1]
  end
  return { unpack(answered, 1, id_count) }
end

return each_counting_call(configuration_args + 1, judge)
