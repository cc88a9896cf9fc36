-- Not a floor but a bound for bench/redis/redis_bench.sh: what a script
-- that decides one token_bucket limit per key and nothing else costs Redis
-- (the arithmetic of src/store/redis/scripts/token_bucket.lua, the value
-- and TTL rule of entry.lua's put(), one reply integer pair per key), with
-- none of entry.lua's generality (definitions, several limits, lockouts,
-- refunds, deadlines per request, functions defined per call). Every KEY
-- gets a request of cost 1 at the call's Redis TIME.
-- ARGV: capacity, unit, rate (token_bucket.lua's), ttl slack in ms.
local fmod = math.fmod
local spack, sunpack = struct.pack, struct.unpack
local rcall, format = redis.call, string.format
local capacity, unit, rate = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local extra_ms = tonumber(ARGV[4])
local full = capacity * unit
local t = rcall('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local values = rcall('MGET', unpack(KEYS))
local out = {}
for i = 1, #KEYS do
  local raw = values[i]
  local level, last, expiry = full, now, nil
  if raw then level, last, expiry = sunpack('<ddd', raw) end
  local elapsed = now - last
  if elapsed > 0 then
    local missing = full - level
    local r = fmod(missing, rate)
    local to_full = (missing - r) / rate
    if r > 0 then to_full = to_full + 1 end
    if elapsed >= to_full then level = full else level = level + elapsed * rate end
    last = now
  end
  if level >= unit then
    local left = level - unit
    local missing = full - left
    local r = fmod(missing, rate)
    local reset = (missing - r) / rate
    if r > 0 then reset = reset + 1 end
    local ms = reset - fmod(reset, 1000)
    ms = ms / 1000
    if fmod(reset, 1000) > 0 then ms = ms + 1 end
    if ms < 1 then ms = 1 end
    ms = ms + extra_ms
    if expiry and expiry >= now + ms * 1000 then
      rcall('SET', KEYS[i], spack('<ddd', left, last, expiry), 'KEEPTTL')
    else
      ms = 2 * ms
      rcall('SET', KEYS[i], spack('<ddd', left, last, now + (ms - 1) * 1000), 'PX', format('%d', ms))
    end
    out[2 * i - 1] = (left - fmod(left, unit)) / unit * 2 + 1
    out[2 * i] = reset
  else
    out[2 * i - 1] = (level - fmod(level, unit)) / unit * 2
    out[2 * i] = 0
  end
end
return out
