-- prelude.lua: shared helpers for the algorithm scripts (embedded first).
--
-- Redis runs Lua 5.1, whose only number type is a double. Every quantity the
-- scripts keep or compare is an integer below 2^53, so doubles hold it exactly;
-- the helpers below divide without rounding (math.fmod is exact), and
-- sliding_window.lua forms its larger products in two 50-bit halves.
-- RedisStore refuses limits whose numbers would not fit (script_limit.cc).
--
-- The whole script runs on every call (Redis keeps no Lua state between
-- calls, and defining a function costs about 0.1 us), so a call defines
-- only the algorithms its limits use (NEEDED); states are packed doubles
-- (struct.pack, exact below 2^53); and each algorithm returns its decision
-- as multiple values rather than a table. What Redis charges per call
-- element is as much as the algorithms' own work, so the call says each
-- limit once (entry.lua), reads every state with one MGET, and answers in
-- as few integers as the client needs.

-- ALGORITHMS[name] decides one limit; REFUNDS[name] gives back one charge
-- (token_bucket.lua says what they return).
local ALGORITHMS = {}
local REFUNDS = {}
-- ARGV (see entry.lua): extra_ms, whether requests carry their time, the
-- number of limit definitions, 5 per definition (the first its algorithm).
local USED = {}
for d = 0, tonumber(ARGV[3]) - 1 do USED[ARGV[4 + 5 * d]] = true end
local function NEEDED(name)
  return USED[name] ~= nil
end
local spack, sunpack = struct.pack, struct.unpack
local fmod = math.fmod

-- Every declared key's value as the call found it, false for none (MGET
-- answers nil for a key of another type: sliding_log's sorted sets, which
-- sliding_log.lua reads itself). entry.lua keeps it current as it writes, so
-- a key that two requests of the call share is read as the first left it.
local STATES = {}
for from = 1, #KEYS, 512 do  -- unpack() is bounded by Lua's C stack
  local to = from + 511
  if to > #KEYS then to = #KEYS end
  local values = redis.call('MGET', unpack(KEYS, from, to))
  for i = from, to do STATES[KEYS[i]] = values[i - from + 1] end
end

-- floor(a / b) for integers a >= 0, b > 0.
local function idiv(a, b)
  return (a - fmod(a, b)) / b
end

-- ceil(a / b) for integers a >= 0, b > 0.
local function cdiv(a, b)
  local r = fmod(a, b)
  if r == 0 then return a / b end
  return (a - r) / b + 1
end
