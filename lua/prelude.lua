-- Shared by every script: the Rust side puts this file in front of each of them (see the
-- `lua_script!` macro in src/binding/mod.rs), so what runs in Redis is prelude + script.

-- A call's now, in microseconds since the epoch: the one it gave, or for "" the Redis server's
-- clock (read once per script call, so every call of a batch shares it).
local server_now
local function now_of(given)
  if given ~= '' then
    return tonumber(given)
  end
  if not server_now then
    local time = redis.call('TIME')
    server_now = tonumber(time[1]) * 1000000 + tonumber(time[2])
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

-- The batch loop of the counting scripts (fixed and sliding window): each call's arguments are
-- its number of identifiers N, its now and its weight, from ARGV[first_arg] on; its N keys
-- follow the previous call's in KEYS. Answers judge(first_key, N, now, weight) per call.
local function each_counting_call(first_arg, judge)
  local answers, next_key, arg = {}, 1, first_arg
  while arg <= #ARGV do
    local id_count = tonumber(ARGV[arg])
    answers[#answers + 1] = answer_of(pcall(judge, next_key, id_count, now_of(ARGV[arg + 1]), tonumber(ARGV[arg + 2])))
    next_key, arg = next_key + id_count, arg + 3
  end
  return answers
end
