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
-- limit once (entry.lua), reads every state with one MGET (per cluster
-- slot), and answers in as few integers as the client needs.

-- ALGORITHMS[name] decides one limit; REFUNDS[name] gives back one charge;
-- DEBITS[name] charges a settled cost's excess, never refused (token_bucket.lua
-- says what they return).
local ALGORITHMS = {}
local REFUNDS = {}
local DEBITS = {}
-- The deepest a debit takes a bucket below empty, in units: its level stays
-- an integer a double holds exactly.
local MAX_DEBT = 2 ^ 52
-- ARGV (see entry.lua): extra_ms, whether requests carry their time, the
-- number of limit definitions, 5 per definition (the first its algorithm).
local USED = {}
for d = 0, tonumber(ARGV[3]) - 1 do USED[ARGV[4 + 5 * d]] = true end
local function NEEDED(name)
  return USED[name] ~= nil
end
local spack, sunpack = struct.pack, struct.unpack
local fmod = math.fmod

-- The call's keys, in request order (CALL_KEYS, which entry.lua walks), and
-- each one's value as the call found it (STATES: false for none; MGET
-- answers nil for a key of another type: sliding_log's sorted sets, which
-- sliding_log.lua reads itself). entry.lua keeps STATES current as it
-- writes, so a key that two requests of the call share is read as the first
-- left it.
-- The declared KEYS are one cluster slot's: they route the call. In a
-- cluster the keys of the node's other slots follow in ARGV, one group per
-- slot (entry.lua), undeclared: a script without a shebang line (Redis's
-- compatibility mode) may touch keys of any slot its node serves, though
-- each command only keys of one slot. So every group is read here, one
-- MGET per slot, before anything is written: a slot the node does not serve
-- (moved, or migrating and the group's keys not all here) refuses its read,
-- and the call answers NOTLOCAL having written nothing, for the client to
-- send each slot's requests on its own (src/store/redis/client.cc).
local CALL_KEYS = {}
local STATES = {}
-- Reads list[from..to], keys of one slot; the refusal if there is one.
local function read(list, from, to)
  for first = from, to, 512 do  -- unpack() is bounded by Lua's C stack
    local last = first + 511
    if last > to then last = to end
    local values = redis.pcall('MGET', unpack(list, first, last))
    if values.err then return values.err end
    for i = first, last do
      CALL_KEYS[#CALL_KEYS + 1] = list[i]
      STATES[list[i]] = values[i - first + 1]
    end
  end
  return nil
end
-- ARGV[REQUESTS]: the number of further groups; then each group (its size,
-- its keys); then the requests.
local REQUESTS = 4 + 5 * tonumber(ARGV[3])
local refused = read(KEYS, 1, #KEYS)
local groups = tonumber(ARGV[REQUESTS])
REQUESTS = REQUESTS + 1
for _ = 1, groups do
  if refused then break end
  local n = tonumber(ARGV[REQUESTS])
  refused = read(ARGV, REQUESTS + 1, REQUESTS + n)
  REQUESTS = REQUESTS + 1 + n
end
if refused then return redis.error_reply('NOTLOCAL ' .. refused) end

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
