-- cached_sync.lua: the sync of cached mode (RedisStore, mode cached). One
-- instance's hits since its last sync are applied to the global states, and
-- the states are returned. A script of its own (embed_scripts.cmake keeps it
-- out of the decision script); its states are the decision script's keys
-- and values (token_bucket.lua, fixed_window.lua).
--
-- The keys come in groups, one per cluster slot (one group in all on one
-- Redis), each led by the instance's sequence key for that slot:
-- <prefix>sync:<instance id>, and in a cluster :{<a tag of the slot>}.
-- KEYS      the first group: its sequence key, then its state keys. They
--           route the call (in a cluster, to the master of their slot).
-- ARGV[1]   now: microseconds since the epoch, by the instance's clock
-- ARGV[2]   the call's sequence number (> 0); a resend carries the same one
-- ARGV[3]   milliseconds added to every TTL
-- ARGV[4]   G, the number of further groups (in a cluster, the other slots
--           this master serves); then per group its size and its keys
--           (sequence key first), undeclared, as entry.lua's key groups:
--           every group is read before anything is written, and a slot the
--           node does not serve (moved, migrating) makes the call answer
--           NOTLOCAL having written nothing.
-- Then per state key, in group order: algorithm, p1, p2, p3 (entry.lua's
--   definitions),
--   hits: tokens (token_bucket) or requests (fixed_window) charged by the
--         instance since its last sync; 0 only reads the state (a first fetch)
--   window: fixed_window: the index of the window the hits were counted in,
--         whose counter the state key is (fixed_window.lua)
-- Returns per state key: 1 and its state's two numbers (token_bucket: the
-- level in units and its time in us; fixed_window: the window index and the
-- count), or 0, 0, 0 for a key that does not exist.
--
-- At most once, per slot: a group whose sequence key holds the call's
-- number or a later one applies nothing and only reads (a resend of a call
-- Redis applied but whose reply was lost; in a cluster the resend may group
-- the slots otherwise, and each slot still counts once). Atomic as every
-- script: no other command runs between the reads and the writes.
--
-- Hits are charged at `now`, whenever they were decided: a bucket refills
-- to now first, then pays (never more than charging each at its own time),
-- and may go below empty (debt); every later decision, local or not,
-- refills it as any level. A fixed window's hits count in their window's
-- counter (the client sends none for a window that has ended: no decision
-- reads it again).
local fmod = math.fmod
local spack, sunpack = struct.pack, struct.unpack
local function cdiv(a, b)
  local r = fmod(a, b)
  if r == 0 then return a / b end
  return (a - r) / b + 1
end

local now = tonumber(ARGV[1])
local seq = tonumber(ARGV[2])
local extra_ms = tonumber(ARGV[3])

-- Every group read first (MGET, 512 keys at a time: unpack() is bounded by
-- Lua's C stack): group g's keys are list[from..to], values[g] their values.
local groups = {}
local values = {}
local function read(list, from, to)
  local got = {}
  for first = from, to, 512 do
    local last = first + 511
    if last > to then last = to end
    local part = redis.pcall('MGET', unpack(list, first, last))
    if part.err then return part.err end
    for i = first, last do got[i - from + 1] = part[i - first + 1] end
  end
  groups[#groups + 1] = {list, from, to}
  values[#values + 1] = got
  return nil
end
local refused = read(KEYS, 1, #KEYS)
local j = 5
for _ = 1, tonumber(ARGV[4]) do
  if refused then break end
  local n = tonumber(ARGV[j])
  refused = read(ARGV, j + 1, j + n)
  j = j + 1 + n
end
if refused then return redis.error_reply('NOTLOCAL ' .. refused) end
local t = redis.call('TIME')
local redis_now = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- The decision script's value: the state, then the Redis time its TTL runs to.
local function put(key, a, b, ttl_us)
  local ms = cdiv(ttl_us, 1000)
  if ms < 1 then ms = 1 end
  ms = 2 * (ms + extra_ms)
  redis.call('SET', key, spack('<ddd', a, b, redis_now + (ms - 1) * 1000), 'PX', ms)
end

local out = {}
for g = 1, #groups do
  local list, from, to = groups[g][1], groups[g][2], groups[g][3]
  local got = values[g]
  local apply = seq > tonumber(got[1] or '0')
  if apply then redis.call('SET', list[from], ARGV[2], 'PX', 86400000) end
  for i = from + 1, to do
    local key = list[i]
    local kind = ARGV[j]
    local p1, p2, p3 = tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2]), tonumber(ARGV[j + 3])
    local hits, window = tonumber(ARGV[j + 4]), tonumber(ARGV[j + 5])
    j = j + 6
    local raw = got[i - from + 1]
    local found, a, b = 0, 0, 0
    if kind == 'fixed_window' then
      if raw then found, a, b = 1, window, tonumber(raw) end
    elseif raw then
      found, a, b = 1, sunpack('<dd', raw)
    end
    if apply and hits > 0 then
      if kind == 'token_bucket' then
        local full = p1 * p2
        local level, last = full, now
        if found == 1 then level, last = a, b end
        local elapsed = now - last
        if elapsed > 0 then
          if elapsed >= cdiv(full - level, p3) then
            level = full
          else
            level = level + elapsed * p3
          end
          last = now
        end
        level = level - hits * p2
        put(key, level, last, cdiv(full - level, p3))
        found, a, b = 1, level, last
      elseif kind == 'fixed_window' then
        local count = redis.call('INCRBY', key, ARGV[j - 2])  -- hits, as sent
        if count == hits then
          -- New: it lives to its window's end by either clock, and 100 ms
          -- more (entry.lua's count_put(), fixed_window.lua's WINDOW_SLACK_MS).
          local ends_in = (window + 1) * p2 - now
          if now > redis_now then ends_in = ends_in + now - redis_now end
          local ms = cdiv(ends_in, 1000)
          if ms < 1 then ms = 1 end
          redis.call('PEXPIRE', key, string.format('%d', ms + extra_ms + 100))
        end
        found, a, b = 1, window, count
      else
        return redis.error_reply('ERR sluice: cached mode cannot apply ' .. tostring(kind))
      end
    end
    out[#out + 1] = found
    out[#out + 1] = a
    out[#out + 1] = b
  end
end
return out
