-- A floor for bench/redis/redis_bench.sh: one MGET and one MSET for all
-- KEYS (no TTL written, one write call per batch).
redis.call('MGET', unpack(KEYS))
local pairs = {}
for i = 1, #KEYS do
  pairs[2 * i - 1] = KEYS[i]
  pairs[2 * i] = 'xxxxxxxxxxxxxxxxxxxxxxxx'
end
redis.call('MSET', unpack(pairs))
return 1
