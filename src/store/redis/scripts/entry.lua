-- entry.lua: applies the limits of a batch of requests (embedded last).
--
-- The client sends, in one call, the requests issued in one event-loop turn
-- to one node: each request is decided and written in turn, all-or-nothing,
-- exactly as if each were its own call.
--
-- Keys     per request, per limit: its state key, then, for an acquire of a
--          limit with a lockout (block > 0), its lockout key (the state key
--          with "!b" after the limit's fingerprint: same hash tag, so same
--          slot). All keys of one request share one slot (one hash tag per
--          request). KEYS are the keys of the requests of one slot, declared,
--          so that Redis routes the call by them (MOVED, ASK, TRYAGAIN
--          during a slot migration). In a cluster the requests of the node's
--          other slots follow, their keys in ARGV (below), one group per
--          slot; prelude.lua reads every group before anything is written.
--          The requests come slot after slot; within a slot, in issue order.
-- ARGV[1]   milliseconds added to every TTL (slack for time_source: local).
-- ARGV[2]   "1" when each request carries its own time (time_source local),
--           "0" when every request is decided at the Redis TIME of the call.
-- ARGV[3]   D, the number of limit definitions, then 5 per definition:
--           algorithm, p1, p2, p3, block, where (p1, p2, p3) is (capacity,
--           unit, rate) for token_bucket and gcra, and (limit, window_us, 0)
--           for the window algorithms, and block the lockout in microseconds
--           (0 for none). A batch names each limit once, however many of its
--           requests use it.
-- Then G, the number of further key groups (0 without a cluster, or with
-- one slot), then per group its number of keys and the keys.
-- Then one argument, the requests: numbers, each a packed double
-- (little-endian, what struct.pack('<d') makes; the client's
-- src/store/redis/packed.h), per request:
--   deadline  microseconds since the epoch by Redis's clock, or 0 for none:
--           from then on the client has given up on the request (timed out,
--           its caller answered per on_failure), so it must charge nothing.
--           The client converts its own deadline with a lower bound of the
--           clock offset, so this one is never later than the true one
--           (src/store/redis/clock_offset.h).
--   now     (only when ARGV[2] is "1") microseconds since the epoch
--   n       the number of limits of an acquire, or minus the number of
--           limits of a refund (Store::refund)
--   per limit: its definition (1 to D) and cost, then for a refund the
--           charge's time (its decided_at) in microseconds (a refund's
--           negative cost is a debit: that much more is charged, never
--           refused, the state going into debt: DEBITS of the algorithm), and for an
--           acquire of a fixed_window the time its window is taken at
--           (microseconds: the request's own time, or the client's reading
--           of this node's clock; the window's counter key is named from it:
--           fixed_window.lua).
-- Redis TIME is read once per call: it is the decisions' time unless the
-- requests carry theirs (a fixed window's is always the client's), the
-- deadlines' clock, and the TTLs' (below).
--
-- Returns the Redis TIME this call read (microseconds: the client learns the
-- clock offset from it), then per request: -1 if it was past its deadline (it
-- read and wrote no state); 1 for a refund; for an acquire, per limit
-- remaining * 2 + allowed (1 or 0), reset_after_us and, when not allowed,
-- retry_after_us. A limit's `limit` is its p1, which the client knows. Or,
-- having written nothing, the error NOTLOCAL when a key group's slot is not
-- served by this node (prelude.lua).
--
-- Atomic because Redis runs a script without interleaving other commands:
-- every limit of a request is decided on the current state first, and only
-- if all allow is any state written. Each write of an algorithm's state keeps
-- the key alive at least until the state is back to "full" (rounded up to a
-- whole millisecond, at least 1 ms, plus the slack), so idle keys disappear:
-- the value carries, after the state, the Redis time its TTL runs to. A write
-- that needs no later expiry keeps the TTL (SET KEEPTTL); one that does sets
-- twice what it needs (SET PX), so a busy key pays for a TTL about once per
-- its time to full rather than on every decision, and an idle key outlives
-- its return to full by at most that time again. A refund only brings that
-- time closer, so it keeps the TTL (SET KEEPTTL, ZREM). A fixed window's
-- counter gets its TTL when it is created, to its window's end, and keeps it.
-- The deadline is checked in the same script that would charge the request,
-- so nothing can apply it between the check and the charge.
--
-- Lockouts. A limit with a block answers from its lockout key while that
-- holds a time (us) later than now (a fixed window's: its window's time):
-- denied, nothing left, reset_after and retry_after the time left; its
-- algorithm is not run, so its state is neither charged nor written, and
-- keeps refilling underneath. When a request is denied, each limit with a
-- block whose own algorithm denied starts one: its lockout key is set to
-- now + block (PX: the block, rounded up to a whole millisecond, plus the
-- slack), and it answers with the whole block. A lockout that grows
-- (lockout.lua) starts from the history its key holds and keeps the key
-- forget_after longer. A refund leaves a lockout alone; a reset (DEL) lifts
-- it and forgets its history.
local extra_ms = tonumber(ARGV[1])
local own_time = ARGV[2] == '1'
local t = redis.call('TIME')
local redis_now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local function ttl_of(us)
  local ms = cdiv(us, 1000)
  if ms < 1 then ms = 1 end
  return ms + extra_ms
end

-- The limit definitions: what each request's limits refer to.
local defs = tonumber(ARGV[3])
local kind, p1, p2, p3, blocks = {}, {}, {}, {}, {}
for d = 1, defs do
  local a = 4 + 5 * (d - 1)
  kind[d] = ARGV[a]
  p1[d] = tonumber(ARGV[a + 1])
  p2[d] = tonumber(ARGV[a + 2])
  p3[d] = tonumber(ARGV[a + 3])
  blocks[d] = BLOCK_SPEC(d, ARGV[a + 4])  -- lockout.lua
end

-- Writes an algorithm's state, keeping the key until `reset_us` from now.
local rcall = redis.call
-- A TTL goes to SET as a string: Redis would format a Lua number with
-- "%.17g", whose floating-point formatting costs it more than "%d" does here.
local format = string.format
local function put(key, state, reset_us)
  local ttl_ms = ttl_of(reset_us)
  local old = STATES[key]
  local size = #state
  -- A millisecond less than the TTL set: Redis counts it from its own
  -- millisecond clock, which may be up to 1 ms behind TIME.
  if old and #old == size + 8 then
    local expiry = sunpack('<d', old, size + 1)
    if expiry >= redis_now + ttl_ms * 1000 then
      -- The same bytes as state .. string.sub(old, size + 1), one string
      -- built instead of two.
      local value = spack('<c0d', state, expiry)
      rcall('SET', key, value, 'KEEPTTL')
      STATES[key] = value
      return
    end
  end
  ttl_ms = 2 * ttl_ms
  local value = spack('<c0d', state, redis_now + (ttl_ms - 1) * 1000)
  rcall('SET', key, value, 'PX', format('%d', ttl_ms))
  STATES[key] = value
end

-- Writes a counter (fixed_window.lua). A new one lives to the end of its
-- window, `reset_us` from `now`, by this node's clock as well as by `now`'s,
-- and WINDOW_SLACK_MS more.
local function count_put(key, count, reset_us, now)
  local value = format('%d', count)
  if STATES[key] then
    rcall('SET', key, value, 'KEEPTTL')
  else
    if now > redis_now then reset_us = reset_us + now - redis_now end
    rcall('SET', key, value, 'PX', format('%d', ttl_of(reset_us) + WINDOW_SLACK_MS))
  end
  STATES[key] = value
end

local out = {redis_now}
local nout = 1  -- #out, kept rather than counted
local writes = {}
local states = {}  -- per limit of the request: its state key
local nows = {}    -- per limit: the time it is decided at
local locks = {}   -- per limit: its lockout key, if it has a block
local starts = {}  -- per limit: the definition whose block its denial starts, or false
local resets = {}  -- per limit: its reset_after_us
local key = 0
-- The requests' numbers, packed doubles (struct.unpack reads them without
-- the string and the tonumber() per number that arguments of their own cost).
local reqs = ARGV[REQUESTS]
local pos, size = 1, #reqs
while pos <= size do
  local deadline, now, n
  if own_time then
    deadline, now, n, pos = sunpack('<ddd', reqs, pos)
  else
    deadline, n, pos = sunpack('<dd', reqs, pos)
    now = redis_now
  end
  local refund = n < 0
  if refund then n = -n end
  if deadline > 0 and redis_now >= deadline then
    nout = nout + 1
    out[nout] = -1
    -- Skip its keys: the state key, and an acquire's lockout key.
    for _ = 1, n do
      key = key + 1
      if refund then
        pos = pos + 24
      else
        local d = sunpack('<d', reqs, pos)
        if blocks[d] > 0 then key = key + 1 end
        pos = pos + 16
        if kind[d] == 'fixed_window' then pos = pos + 8 end
      end
    end
  elseif refund then
    for _ = 1, n do
      local d, cost, charged_at
      d, cost, charged_at, pos = sunpack('<ddd', reqs, pos)
      key = key + 1
      local k = CALL_KEYS[key]
      local write, reset
      if cost < 0 then
        -- A debit: the state to write and the time until it is full again,
        -- which moves out, so the TTL is set as for an acquire.
        local take = DEBITS[kind[d]]
        if not take then
          return redis.error_reply('ERR sluice: unknown debit ' .. tostring(kind[d]))
        end
        write, reset = take(k, now, p1[d], p2[d], p3[d], -cost, charged_at)
      else
        local give_back = REFUNDS[kind[d]]
        if not give_back then
          return redis.error_reply('ERR sluice: unknown refund ' .. tostring(kind[d]))
        end
        write = give_back(k, now, p1[d], p2[d], p3[d], cost, charged_at)
      end
      if reset then
        if type(write) == 'number' then
          count_put(k, write, reset, now)
        else
          put(k, write, reset)
        end
      elseif type(write) == 'number' then
        write = format('%d', write)
        rcall('SET', k, write, 'KEEPTTL')
        STATES[k] = write
      elseif write then
        -- Keeps the expiry the value carries, if any, with its TTL.
        local old = STATES[k]
        if old and #old == #write + 8 then write = write .. string.sub(old, #write + 1) end
        rcall('SET', k, write, 'KEEPTTL')
        STATES[k] = write
      end
    end
    nout = nout + 1
    out[nout] = 1
  else
    local all_allowed = true
    local first = nout + 1
    local o = first
    for i = 1, n do
      local d, cost
      d, cost, pos = sunpack('<dd', reqs, pos)
      local at = now
      if kind[d] == 'fixed_window' then at, pos = sunpack('<d', reqs, pos) end
      nows[i] = at
      local algorithm = ALGORITHMS[kind[d]]
      if not algorithm then
        return redis.error_reply('ERR sluice: unknown algorithm ' .. tostring(kind[d]))
      end
      local block = blocks[d]
      key = key + 1
      states[i] = CALL_KEYS[key]
      locks[i] = nil
      starts[i] = false
      writes[i] = nil
      local left = 0  -- what is left of a lockout in force (us), 0 for none
      if block > 0 then
        key = key + 1
        locks[i] = CALL_KEYS[key]
        local until_us = STATES[CALL_KEYS[key]]
        if until_us then
          until_us = BLOCK_UNTIL(until_us)
          if until_us > at then left = until_us - at end
        end
      end
      if left > 0 then
        out[o] = 0
        out[o + 1] = left
        out[o + 2] = left
        o = o + 3
        all_allowed = false
      else
        local allowed, _, remaining, reset, retry, write =
            algorithm(states[i], at, p1[d], p2[d], p3[d], cost)
        out[o] = remaining * 2 + allowed
        out[o + 1] = reset
        resets[i] = reset
        writes[i] = write
        if allowed == 1 then
          o = o + 2
        else
          out[o + 2] = retry
          o = o + 3
          all_allowed = false
          if block > 0 then starts[i] = d end
        end
      end
    end
    nout = o - 1
    if all_allowed then
      for i = 1, n do
        local write = writes[i]
        if type(write) == 'string' then
          put(states[i], write, resets[i])
        elseif type(write) == 'number' then
          count_put(states[i], write, resets[i], nows[i])
        else
          write(ttl_of(resets[i]))
        end
      end
    else
      -- Blocks start from the denials, whatever the request's other limits
      -- said; they replace what those limits answered.
      o = first
      for i = 1, n do
        local d = starts[i]
        local step = 3
        if out[o] % 2 == 1 then step = 2 end
        if d then
          local block, value, keep = BLOCK_NEXT(d, blocks[d], STATES[locks[i]], nows[i])
          rcall('SET', locks[i], value, 'PX', ttl_of(keep))
          STATES[locks[i]] = value
          out[o] = 0
          out[o + 1] = block
          out[o + 2] = block
        end
        o = o + step
      end
    end
  end
end
return out
