-- entry.lua: applies the limits of a batch of requests (embedded last).
--
-- The client sends, in one call, the requests issued in one event-loop turn
-- to one node (and, in a cluster, one slot): each request is decided and
-- written in turn, all-or-nothing, exactly as if each were its own call.
--
-- KEYS      the state keys of every limit of every request, in order. In a
--           cluster all keys of a call share one slot (one hash tag per
--           request, and batches form per slot), so the call stays atomic.
-- ARGV[1]   milliseconds added to every TTL (slack for time_source: local).
-- Then, per request:
--   deadline  microseconds since the epoch by Redis's clock, or 0 for none:
--           from then on the client has given up on the request (timed out,
--           its caller answered per on_failure), so it must charge nothing.
--           The client converts its own deadline with a lower bound of the
--           clock offset, so this one is never later than the true one
--           (src/store/redis/clock_offset.h).
--   now     microseconds since the epoch, or "" to read Redis TIME
--           (time_source: redis, so instances with skewed clocks agree)
--   n       the number of limits of the request (its next n KEYS)
--   5 per limit: algorithm, p1, p2, p3, cost, where (p1, p2, p3) is
--           (capacity, unit, rate) for token_bucket and gcra, and
--           (limit, window_us, 0) for the window algorithms.
-- Redis TIME is read at most once per call, when a request needs it (now is
-- "" or a deadline is set), and serves every request of the call.
--
-- Returns the Redis TIME this call read (microseconds, 0 if it read none: the
-- client learns the clock offset from it), then per request: now_us, then per
-- limit allowed, limit, remaining, reset_after_us, retry_after_us (all
-- integers). A request past its deadline is decided as nothing: it reads and
-- writes no state, and each of its limits returns allowed = -1 and zeros.
--
-- Atomic because Redis runs a script without interleaving other commands:
-- every limit of a request is decided on the current state first, and only
-- if all allow is any state written. Each write sets the key's TTL in the
-- same step (SET PX or PEXPIRE): the time until the state is back to "full",
-- rounded up to a whole millisecond and at least 1 ms, so idle keys disappear.
-- The deadline is checked in the same script that would charge the request,
-- so nothing can apply it between the check and the charge.
local extra_ms = tonumber(ARGV[1])
local redis_now = nil
local function redis_time()
  if not redis_now then
    local t = redis.call('TIME')
    redis_now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return redis_now
end
local out = {0}
local writes = {}
local key = 0
local j = 2
while j <= #ARGV do
  local deadline = tonumber(ARGV[j])
  local now = ARGV[j + 1]
  if now == '' then
    now = redis_time()
  else
    now = tonumber(now)
  end
  local n = tonumber(ARGV[j + 2])
  j = j + 3
  local first = #out + 1
  out[first] = now
  if deadline > 0 and redis_time() >= deadline then
    for i = 1, n do
      local o = first + (i - 1) * 5
      out[o + 1] = -1
      out[o + 2] = 0
      out[o + 3] = 0
      out[o + 4] = 0
      out[o + 5] = 0
    end
    j = j + 5 * n
  else
    local all_allowed = true
    for i = 1, n do
      local algorithm = ALGORITHMS[ARGV[j]]
      if not algorithm then
        return redis.error_reply('ERR sluice: unknown algorithm ' .. tostring(ARGV[j]))
      end
      local allowed, limit, remaining, reset, retry, write =
          algorithm(KEYS[key + i], now, tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2]),
                    tonumber(ARGV[j + 3]), tonumber(ARGV[j + 4]))
      local o = first + (i - 1) * 5
      out[o + 1] = allowed
      out[o + 2] = limit
      out[o + 3] = remaining
      out[o + 4] = reset
      out[o + 5] = retry
      writes[i] = write
      if allowed ~= 1 then all_allowed = false end
      j = j + 5
    end
    if all_allowed then
      for i = 1, n do
        local ttl_ms = cdiv(out[first + (i - 1) * 5 + 4], 1000)
        if ttl_ms < 1 then ttl_ms = 1 end
        local write = writes[i]
        if type(write) == 'string' then
          redis.call('SET', KEYS[key + i], write, 'PX', ttl_ms + extra_ms)
        else
          write(ttl_ms + extra_ms)
        end
      end
    end
  end
  key = key + n
end
out[1] = redis_now or 0
return out
