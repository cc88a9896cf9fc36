-- A floor for bench/redis/redis_bench.sh: one MGET for all KEYS, then a
-- plain SET per key (no TTL written).
redis.call('MGET', unpack(KEYS))
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], 'xxxxxxxxxxxxxxxxxxxxxxxx')
end
return 1
