-- A floor for bench/redis/redis_bench.sh: what a script deciding nothing
-- costs Redis per key when it reads and writes each of its KEYS alone, with
-- a TTL (GET, then SET ... PX per key). The value: 24 bytes, as a state.
for i = 1, #KEYS do
  redis.call('GET', KEYS[i])
  redis.call('SET', KEYS[i], 'xxxxxxxxxxxxxxxxxxxxxxxx', 'PX', 5000)
end
return 1
