-- fast_fixed_window.lua: the fast path for fixed windows (a script of its
-- own: embed_scripts.cmake keeps it out of the decision script).
--
-- The client sends here the acquires whose only limit is a fixed_window
-- without a block (client.cc), the rest to entry.lua. A batch is decided
-- exactly as entry.lua would decide it, on the same state: a counter per
-- window, in a key named with the window's index (fixed_window.lua), so
-- that either script, a refund, a reset and cached mode's sync all read and
-- write one representation. What it saves is entry.lua's generality: no
-- lockouts, refunds or other algorithms, one deadline per batch, no read
-- before the write, and one reply integer per request. Per request it
-- costs Redis what envoyproxy/ratelimit's INCRBY + EXPIRE does: INCRBY, a
-- PEXPIRE when the counter is new, and a DECRBY back when it went over.
--
-- KEYS      per request, its window's counter key (in a cluster all in one
--           slot).
-- ARGV[1]   milliseconds added to every TTL (slack for time_source: local).
-- ARGV[2]   the batch's deadline: microseconds since the epoch by Redis's
--           clock, the earliest of its requests' (entry.lua says how the
--           client converts it), or 0 for none. Past it, nothing is read or
--           written: the client has given up on the first of the requests
--           and will on the others within 2 ms (a batch takes requests for
--           at most that long: client.cc).
-- ARGV[3]   D, the number of limit definitions, then 2 per definition: the
--           limit and the window in microseconds.
-- Then one argument, the requests, as packed doubles (little-endian, what
-- struct.pack('<d') makes; the client's src/store/redis/packed.h): per
-- request the time its window is taken at (microseconds: its own time, or
-- the client's reading of this node's clock), its definition (1 to D) and
-- its cost (1 to the limit).
--
-- Returns the Redis TIME this call read (microseconds), then -1 alone if
-- the batch was past its deadline, or else per request remaining * 2 +
-- allowed. The client knows the limit, the window and the time, so
-- reset_after and retry_after follow (fixed_window.lua): the time to the
-- end of the window, except a denial's reset_after, which is 0 when the
-- window holds nothing.
local rcall = redis.call
local t = rcall('TIME')
local redis_now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local deadline = tonumber(ARGV[2])
if deadline > 0 and redis_now >= deadline then return {redis_now, -1} end

local fmod = math.fmod
local sunpack = struct.unpack
local extra_ms = tonumber(ARGV[1])
local defs = tonumber(ARGV[3])
local limits, windows = {}, {}
for d = 1, defs do
  limits[d] = tonumber(ARGV[2 + 2 * d])
  windows[d] = tonumber(ARGV[3 + 2 * d])
end

local out = {redis_now}
-- Numbers go to Redis as strings: Redis would format a Lua number with
-- "%.17g", whose floating-point formatting costs it more than "%d" does
-- here. A batch's costs are few (mostly 1): each is formatted once.
local format = string.format
local cost_texts = {}
-- The requests' numbers, packed doubles (read with one struct.unpack each).
local reqs = ARGV[4 + 2 * defs]
local pos = 1
for i = 1, #KEYS do
  local key = KEYS[i]
  local now, d, cost
  now, d, cost, pos = sunpack('<ddd', reqs, pos)
  local limit = limits[d]
  local cost_text = cost_texts[cost]
  if not cost_text then
    cost_text = format('%d', cost)
    cost_texts[cost] = cost_text
  end
  local count = rcall('INCRBY', key, cost_text)
  if count == cost then
    -- New: it lives to its window's end (whole ms, at least 1, plus the
    -- slack) by this node's clock and by the request's time, whichever is
    -- later, and 100 ms more (fixed_window.lua's WINDOW_SLACK_MS: another
    -- instance's reading of the clock may lag). A counter that a refund
    -- brought to 0 gets the same TTL again.
    local window = windows[d]
    local us = window - fmod(now, window)
    if now > redis_now then us = us + now - redis_now end
    local r = fmod(us, 1000)
    local ms = (us - r) / 1000
    if r > 0 then ms = ms + 1 end
    if ms < 1 then ms = 1 end
    rcall('PEXPIRE', key, format('%d', ms + extra_ms + 100))
  end
  if count <= limit then
    out[i + 1] = (limit - count) * 2 + 1
  else
    rcall('DECRBY', key, cost_text)
    -- A settled cost may have taken the count past the limit.
    local left = limit - count + cost
    if left < 0 then left = 0 end
    out[i + 1] = left * 2
  end
end
return out
