-- entry.lua: applies the limits of a batch of requests (embedded last).
--
-- The client sends, in one call, the requests issued in one event-loop turn
-- to one node (and, in a cluster, one slot): each request is decided and
-- written in turn, all-or-nothing, exactly as if each were its own call.
--
-- KEYS      per request, per limit: its state key, then, for an acquire of a
--           limit with a lockout (block > 0), its lockout key (the state key
--           with "!b" after the limit's fingerprint: same hash tag, so same
--           slot). In a cluster all keys of a call share one slot (one hash
--           tag per request, and batches form per slot), so the call stays
--           atomic. Every key is declared, so that Redis routes by all of them
--           (ASK, TRYAGAIN) during a slot migration.
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
--   n       the number of limits of the request
--   6 per limit: algorithm, p1, p2, p3, cost, extra, where (p1, p2, p3) is
--           (capacity, unit, rate) for token_bucket and gcra, and
--           (limit, window_us, 0) for the window algorithms. An acquire names
--           the algorithm and extra is the lockout (block) in microseconds,
--           0 for none. A refund (Store::refund) names it with a '-' before
--           ("-token_bucket") and extra is the charge's time (its decided_at)
--           in microseconds. A request is all acquires or all refunds.
-- Redis TIME is read at most once per call, when a request needs it (now is
-- "" or a deadline is set), and serves every request of the call.
--
-- Returns the Redis TIME this call read (microseconds, 0 if it read none: the
-- client learns the clock offset from it), then per request: now_us (the
-- decisions' decided_at), then per limit allowed, limit, remaining,
-- reset_after_us, retry_after_us (all integers). A request past its deadline
-- is decided as nothing: it reads and writes no state, and each of its limits
-- returns allowed = -1 and zeros. A refund's limits return 1 and zeros.
--
-- Atomic because Redis runs a script without interleaving other commands:
-- every limit of a request is decided on the current state first, and only
-- if all allow is any state written. Each write sets the key's TTL in the
-- same step (SET PX or PEXPIRE): the time until the state is back to "full",
-- rounded up to a whole millisecond and at least 1 ms, so idle keys disappear.
-- A refund only brings that time closer, so it keeps the TTL (SET KEEPTTL,
-- ZREM): the key may then outlive its state's return to full, harmlessly.
-- The deadline is checked in the same script that would charge the request,
-- so nothing can apply it between the check and the charge.
--
-- Lockouts. A limit with a block answers from its lockout key while that
-- holds a time (us) later than now: denied, nothing left, reset_after and
-- retry_after the time left; its algorithm is not run, so its state is
-- neither charged nor written, and keeps refilling underneath. When a request
-- is denied, each limit with a block whose own algorithm denied starts one:
-- its lockout key is set to now + block (PX: the block, rounded up to a whole
-- millisecond, plus the slack), and it answers with the whole block. A
-- refund leaves a lockout alone; a reset (DEL) lifts it.
local extra_ms = tonumber(ARGV[1])
local redis_now = nil
local function redis_time()
  if not redis_now then
    local t = redis.call('TIME')
    redis_now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return redis_now
end
local function ttl_of(us)
  local ms = cdiv(us, 1000)
  if ms < 1 then ms = 1 end
  return ms + extra_ms
end
local out = {0}
local writes = {}
local states = {}  -- per limit of the request: its state key
local locks = {}   -- per limit: its lockout key, if it has a block
local starts = {}  -- per limit: the block its denial starts, or false
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
  local refund = n > 0 and string.byte(ARGV[j], 1) == 45  -- '-'
  if deadline > 0 and redis_time() >= deadline then
    for i = 1, n do
      local o = first + (i - 1) * 5
      out[o + 1] = -1
      out[o + 2] = 0
      out[o + 3] = 0
      out[o + 4] = 0
      out[o + 5] = 0
      -- Skip its keys: the state key, and an acquire's lockout key.
      key = key + 1
      if not refund and tonumber(ARGV[j + 5]) > 0 then key = key + 1 end
      j = j + 6
    end
  elseif refund then
    for i = 1, n do
      local name = ARGV[j]
      local give_back = nil
      if string.byte(name, 1) == 45 then give_back = REFUNDS[string.sub(name, 2)] end
      if not give_back then
        return redis.error_reply('ERR sluice: unknown refund ' .. tostring(name))
      end
      key = key + 1
      local write = give_back(KEYS[key], now, tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2]),
                              tonumber(ARGV[j + 3]), tonumber(ARGV[j + 4]), tonumber(ARGV[j + 5]))
      if write then redis.call('SET', KEYS[key], write, 'KEEPTTL') end
      local o = first + (i - 1) * 5
      out[o + 1] = 1
      out[o + 2] = 0
      out[o + 3] = 0
      out[o + 4] = 0
      out[o + 5] = 0
      j = j + 6
    end
  else
    local all_allowed = true
    for i = 1, n do
      local algorithm = ALGORITHMS[ARGV[j]]
      if not algorithm then
        return redis.error_reply('ERR sluice: unknown algorithm ' .. tostring(ARGV[j]))
      end
      local size = tonumber(ARGV[j + 1])
      local block = tonumber(ARGV[j + 5])
      key = key + 1
      states[i] = KEYS[key]
      locks[i] = nil
      starts[i] = false
      writes[i] = nil
      local o = first + (i - 1) * 5
      local left = 0  -- what is left of a lockout in force (us), 0 for none
      if block > 0 then
        key = key + 1
        locks[i] = KEYS[key]
        local until_us = redis.call('GET', KEYS[key])
        if until_us then
          until_us = tonumber(until_us)
          if until_us > now then left = until_us - now end
        end
      end
      if left > 0 then
        out[o + 1] = 0
        out[o + 2] = size
        out[o + 3] = 0
        out[o + 4] = left
        out[o + 5] = left
        all_allowed = false
      else
        local allowed, limit, remaining, reset, retry, write =
            algorithm(states[i], now, size, tonumber(ARGV[j + 2]), tonumber(ARGV[j + 3]),
                      tonumber(ARGV[j + 4]))
        out[o + 1] = allowed
        out[o + 2] = limit
        out[o + 3] = remaining
        out[o + 4] = reset
        out[o + 5] = retry
        writes[i] = write
        if allowed ~= 1 then
          all_allowed = false
          if block > 0 then starts[i] = block end
        end
      end
      j = j + 6
    end
    if all_allowed then
      for i = 1, n do
        local ttl_ms = ttl_of(out[first + (i - 1) * 5 + 4])
        local write = writes[i]
        if type(write) == 'string' then
          redis.call('SET', states[i], write, 'PX', ttl_ms)
        else
          write(ttl_ms)
        end
      end
    else
      -- Blocks start from the denials, whatever the request's other limits said.
      for i = 1, n do
        local block = starts[i]
        if block then
          redis.call('SET', locks[i], string.format('%d', now + block), 'PX', ttl_of(block))
          local o = first + (i - 1) * 5
          out[o + 3] = 0
          out[o + 4] = block
          out[o + 5] = block
        end
      end
    end
  end
end
out[1] = redis_now or 0
return out
