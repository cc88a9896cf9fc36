-- fast_fixed_window.lua: the fast path for fixed windows (a script of its
-- own: embed_scripts.cmake keeps it out of the decision script).
--
-- The client sends here the acquires whose only limit is a fixed_window
-- without a block (client.cc), the rest to entry.lua. A batch is decided
-- exactly as entry.lua would decide it: same state keys, same values
-- (fixed_window.lua's two packed doubles, the window index and its count,
-- then the Redis time the key's TTL runs to, as entry.lua's put() writes
-- them), same TTLs, so that either script, a refund, a reset and cached
-- mode's sync all read and write one representation. What it saves is
-- entry.lua's generality: no lockouts, refunds or other algorithms, one
-- deadline per batch, two or three packed numbers and one reply integer per
-- request, and no functions defined per call.
--
-- KEYS      per request, its state key (in a cluster all in one slot).
-- ARGV[1]   milliseconds added to every TTL (slack for time_source: local).
-- ARGV[2]   "1" when each request carries its own time (time_source local),
--           "0" when every request is decided at the Redis TIME of the call.
-- ARGV[3]   the batch's deadline: microseconds since the epoch by Redis's
--           clock, the earliest of its requests' (entry.lua says how the
--           client converts it), or 0 for none. Past it, nothing is read or
--           written: the client has given up on the first of the requests
--           and will on the others within the microseconds of one loop turn.
-- ARGV[4]   D, the number of limit definitions, then 2 per definition: the
--           limit and the window in microseconds.
-- Then one argument, the requests, as packed doubles (little-endian, what
-- struct.pack('<d') makes; the client's src/store/redis/packed.h): per
-- request its time (only when ARGV[2] is "1"), its definition (1 to D) and
-- its cost (1 to the limit).
--
-- Returns the Redis TIME this call read (microseconds), then -1 alone if
-- the batch was past its deadline, or else per request remaining * 2 +
-- allowed when the state counts in the window of the request's time, or,
-- when it counts in a later one (time ran backwards), -2 - (remaining * 2 +
-- allowed) followed by how many windows later. The client knows the limit,
-- the window and the time, so reset_after and retry_after follow
-- (fixed_window.lua): the time to the end of the state's window, except a
-- denial's reset_after, which is 0 when the window holds nothing.
local t = redis.call('TIME')
local redis_now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local deadline = tonumber(ARGV[3])
if deadline > 0 and redis_now >= deadline then return {redis_now, -1} end

local fmod = math.fmod
local spack, sunpack = struct.pack, struct.unpack
local extra_ms = tonumber(ARGV[1])
local own_time = ARGV[2] == '1'
local defs = tonumber(ARGV[4])
local limits, windows = {}, {}
for d = 1, defs do
  limits[d] = tonumber(ARGV[3 + 2 * d])
  windows[d] = tonumber(ARGV[4 + 2 * d])
end

-- Every key's value as the call found it, kept current as the call writes
-- (two requests of a batch may share a key).
local states = {}
for from = 1, #KEYS, 512 do  -- unpack() is bounded by Lua's C stack
  local to = from + 511
  if to > #KEYS then to = #KEYS end
  local values = redis.call('MGET', unpack(KEYS, from, to))
  for i = from, to do states[KEYS[i]] = values[i - from + 1] end
end

local out = {redis_now}
local nout = 1  -- #out, kept rather than counted
local rcall = redis.call
-- A TTL goes to SET as a string: Redis would format a Lua number with
-- "%.17g", whose floating-point formatting costs it more than "%d" does here.
local format = string.format
-- The requests' numbers, packed doubles (read with one struct.unpack each).
local reqs = ARGV[5 + 2 * defs]
local pos = 1
for i = 1, #KEYS do
  local key = KEYS[i]
  local now, d, cost
  if own_time then
    now, d, cost, pos = sunpack('<ddd', reqs, pos)
  else
    d, cost, pos = sunpack('<dd', reqs, pos)
    now = redis_now
  end
  local window, limit = windows[d], limits[d]
  local index = (now - fmod(now, window)) / window
  local ahead, count = 0, 0
  local raw = states[key]
  local expiry = nil  -- the Redis time its TTL runs to, when its value says
  if raw then
    local state_index, state_count
    if #raw == 24 then
      state_index, state_count, expiry = sunpack('<ddd', raw)
    else
      state_index, state_count = sunpack('<dd', raw)
    end
    -- A state from a later window (time ran backwards) keeps counting there.
    if state_index >= index then
      ahead = state_index - index
      index = state_index
      count = state_count
    end
  end
  local after = count + cost
  local code
  if after <= limit then
    code = (limit - after) * 2 + 1
    -- entry.lua's put(): the key lives to the window's end (whole ms, at
    -- least 1, plus the slack); a TTL already long enough is kept.
    local ms = (index + 1) * window - now
    local r = fmod(ms, 1000)
    ms = (ms - r) / 1000
    if r > 0 then ms = ms + 1 end
    if ms < 1 then ms = 1 end
    ms = ms + extra_ms
    -- The value packed at once: the same bytes as the state's two doubles
    -- followed by the expiry's (kept, or new), without the strings between.
    local value
    if expiry and expiry >= redis_now + ms * 1000 then
      value = spack('<ddd', index, after, expiry)
      rcall('SET', key, value, 'KEEPTTL')
    else
      ms = 2 * ms
      value = spack('<ddd', index, after, redis_now + (ms - 1) * 1000)
      rcall('SET', key, value, 'PX', format('%d', ms))
    end
    states[key] = value
  else
    code = (limit - count) * 2
  end
  nout = nout + 1
  if ahead == 0 then
    out[nout] = code
  else
    out[nout] = -2 - code
    nout = nout + 1
    out[nout] = ahead
  end
end
return out
