-- A floor for bench/redis/redis_bench.sh: one MGET for all KEYS, then
-- SET ... PX per key (a TTL written on every decision).
redis.call('MGET', unpack(KEYS))
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], 'xxxxxxxxxxxxxxxxxxxxxxxx', 'PX', 5000)
end
return 1
