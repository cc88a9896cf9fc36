-- sliding_log.lua: src/core/sliding_log.cc in integer microseconds.
--
-- Arguments: key, now (us), limit, window (us), unused, cost.
-- State: a sorted set holding one member per unit of cost of every allowed
-- request, scored by its time in us. Members are unique: "<time>:<n>" where n
-- counts the units at that time (requests at the same time share a score,
-- and a request that arrives earlier than the newest entry joins the newest,
-- as in the memory store). One member per unit keeps every step O(log n):
-- ZCOUNT gives the cost in the window and ZRANGE by rank finds the unit whose
-- expiry makes room. The set holds at most `limit` members in the window.
-- Returns as token_bucket.lua, but the write is a function of the TTL (ms).
if NEEDED('sliding_log') then
  ALGORITHMS['sliding_log'] = function(key, now, limit, window, _, cost)
    local horizon = now - window  -- entries at or before it are out
    local total = redis.call('ZCARD', key)
    local expired = 0
    local newest = nil
    if total > 0 then
      expired = redis.call('ZCOUNT', key, '-inf', horizon)
      newest = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
    end
    local used = total - expired

    if used + cost <= limit then
      local at = now
      if newest and newest > now then at = newest end
      local write = function(ttl_ms)
        if expired > 0 then redis.call('ZREMRANGEBYSCORE', key, '-inf', horizon) end
        local n = 0
        if newest == at then n = redis.call('ZCOUNT', key, at, at) end
        local score = string.format('%d', at)
        local args = {}
        for i = 1, cost do
          args[#args + 1] = score
          args[#args + 1] = score .. ':' .. (n + i)
          -- unpack() is bounded by Lua's C stack: add in chunks.
          if #args >= 512 then
            redis.call('ZADD', key, unpack(args))
            args = {}
          end
        end
        if #args > 0 then redis.call('ZADD', key, unpack(args)) end
        redis.call('PEXPIRE', key, ttl_ms)
      end
      return 1, limit, limit - used - cost, at + window - now, 0, write
    end
    -- Oldest first, units leave the window at their time + window; the
    -- request fits once `used + cost - limit` of them have left.
    local rank = expired + used + cost - limit - 1
    local unit_at = tonumber(redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')[2])
    return 0, limit, limit - used, newest + window - now, unit_at + window - now, nil
  end
end
