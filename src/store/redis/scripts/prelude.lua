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
-- as multiple values rather than a table.

-- ALGORITHMS[name] decides one limit; REFUNDS[name] gives back one charge
-- (token_bucket.lua says what they return).
local ALGORITHMS = {}
local REFUNDS = {}
local USED = {}
do
  -- ARGV (see entry.lua): extra_ms, then per request: deadline, now, n,
  -- 6 per limit, the first the algorithm's name ('-' before it: a refund).
  local j = 2
  while j <= #ARGV do
    local n = tonumber(ARGV[j + 2])
    for i = 0, n - 1 do
      local name = ARGV[j + 3 + 6 * i]
      if string.byte(name, 1) == 45 then name = string.sub(name, 2) end  -- '-'
      USED[name] = true
    end
    j = j + 3 + 6 * n
  end
end
local function NEEDED(name)
  return USED[name] ~= nil
end
local spack, sunpack = struct.pack, struct.unpack
local fmod = math.fmod

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
