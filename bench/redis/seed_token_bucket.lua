-- The baseline for bench/redis/redis_bench.sh: the token bucket Lua script of
-- the article Sluice started from (shared/seed/rate-limiting-patterns-for-apis),
-- unchanged except for this comment, so that redis-benchmark can run it with
-- EVALSHA. KEYS[1] = bucket, ARGV = capacity, refill rate per second, now (ms).
-- Not used by Sluice itself (see src/store/redis/scripts/).
    local bucket = redis.call('HMGET', KEYS[1], 'tokens', 'lastRefill')
    local tokens = tonumber(bucket[1]) or tonumber(ARGV[1])
    local lastRefill = tonumber(bucket[2]) or tonumber(ARGV[3])
    local capacity = tonumber(ARGV[1])
    local refillRate = tonumber(ARGV[2])
    local now = tonumber(ARGV[3])
    
    local elapsed = (now - lastRefill) / 1000
    tokens = math.min(capacity, tokens + elapsed * refillRate)
    
    local allowed = 0
    if tokens >= 1 then
      tokens = tokens - 1
      allowed = 1
    end
    
    redis.call('HMSET', KEYS[1], 'tokens', tokens, 'lastRefill', now)
    redis.call('PEXPIRE', KEYS[1], math.ceil(capacity / refillRate) * 1000)
    
    return {allowed, math.floor(tokens)}
