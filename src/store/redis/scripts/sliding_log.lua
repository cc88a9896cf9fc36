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
--
-- The refund (charge's time last) takes `cost` units out of the entries at
-- or after the charge's time, oldest first (a charge that joined a later,
-- newest entry is found there), if the charge is still in the window. It
-- removes the members itself (ZREM keeps the key's TTL) and returns nil. At
-- one time it removes the highest-numbered members, so the members there stay
-- "<time>:1" to "<time>:<count>" and a later ZADD, which numbers its members
-- from ZCOUNT + 1, never reuses a name still held.
if NEEDED('sliding_log') then
  -- redis.call(command, key, items...) in chunks of 512 items (an even
  -- number: ZADD's score-member pairs stay together), as unpack() is
  -- bounded by Lua's C stack.
  local function call_in_chunks(command, key, items)
    for from = 1, #items, 512 do
      local to = from + 511
      if to > #items then to = #items end
      redis.call(command, key, unpack(items, from, to))
    end
  end

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
        end
        call_in_chunks('ZADD', key, args)
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

  REFUNDS['sliding_log'] = function(key, now, _, window, _, cost, charged_at)
    if charged_at <= now - window then return nil end  -- out of the window: nothing to give back
    local from = string.format('%d', charged_at)
    while cost > 0 do
      local first = redis.call('ZRANGE', key, from, '+inf', 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
      if #first == 0 then break end
      local score = string.format('%d', tonumber(first[2]))
      local count = redis.call('ZCOUNT', key, score, score)
      local take = cost
      if take > count then take = count end
      local members = {}
      for n = count - take + 1, count do members[#members + 1] = score .. ':' .. n end
      call_in_chunks('ZREM', key, members)
      cost = cost - take
      from = '(' .. score
    end
    return nil
  end
end
