-- Not a floor but a bound for bench/redis/redis_bench.sh: what a fixed
-- window kept as a counter per window costs Redis per decision (a key per
-- window index: INCRBY, a TTL when the counter is new, the charge taken back
-- with DECRBY when it went over the limit), with nothing of Sluice's scripts
-- around it (docs/SCALING.md). Every KEY
-- gets a request of cost 1 at the call's Redis TIME; one reply integer per
-- key (remaining * 2 + allowed).
-- ARGV: limit, window (us).
local rcall = redis.call
local limit, window = tonumber(ARGV[1]), tonumber(ARGV[2])
local t = rcall('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local index = (now - math.fmod(now, window)) / window
local suffix = ':' .. string.format('%d', index)
local ttl = string.format('%d', ((index + 1) * window - now) / 1000 + 1)
local out = {}
for i = 1, #KEYS do
  local key = KEYS[i] .. suffix
  local count = rcall('INCRBY', key, 1)
  if count == 1 then rcall('PEXPIRE', key, ttl) end
  if count > limit then
    rcall('DECRBY', key, 1)
    out[i] = (limit - count + 1) * 2
  else
    out[i] = (limit - count) * 2 + 1
  end
end
return out
