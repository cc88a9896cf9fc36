-- fixed_window.lua: src/core/fixed_window.cc in integer microseconds.
--
-- Arguments: key, now (us), limit, window (us), unused, cost.
-- State: a counter per window, an integer, in a key of its own whose name
-- carries the window's index (windows are aligned to the epoch: index =
-- floor(now / window)); the client names it (window_key() in
-- script_limit.h) from the time it sends for the limit, which is that
-- window's. A missing key is an empty window. A counter is the state
-- envoyproxy/ratelimit keeps: what Redis charges for it is an integer read
-- and written in place, and the key of an ended window is never read again.
-- Returns as token_bucket.lua; the state to write is the new count (a
-- number: entry.lua writes it with count_put()).
-- The refund's key is the counter of the charge's window (the client names
-- it from the charge's time): it goes down by the cost, to 0 at least.
-- A counter lives to its window's end by this node's clock and by the
-- request's time, whichever is later, plus WINDOW_SLACK_MS: with
-- time_source redis an instance takes a window at its reading of the node's
-- clock, early by up to its fastest round trip, so another instance may
-- still count in a window that has just ended; it must find the counter.
-- (fast_fixed_window.lua and cached_sync.lua, scripts of their own, say the
-- same number.)
local WINDOW_SLACK_MS = 100
if NEEDED('fixed_window') then
  ALGORITHMS['fixed_window'] = function(key, now, limit, window, _, cost)
    local count = tonumber(STATES[key]) or 0
    local window_end_in = window - fmod(now, window)
    local after = count + cost
    if after <= limit then
      return 1, limit, limit - after, window_end_in, 0, after
    end
    local reset = 0
    if count > 0 then reset = window_end_in end
    -- A settled cost may have taken the count past the limit.
    local left = limit - count
    if left < 0 then left = 0 end
    return 0, limit, left, reset, window_end_in, nil
  end

  REFUNDS['fixed_window'] = function(key, _, _, _, _, cost)
    local count = tonumber(STATES[key])
    if not count or count == 0 then return nil end
    if cost > count then cost = count end
    return count - cost
  end

  -- The debit's key is the counter of the charge's window, as the refund's:
  -- it goes up by the cost while that window counts (a counter gone with
  -- its window is not made again). Returns the count and reset_after_us.
  DEBITS['fixed_window'] = function(key, now, _, window, _, cost, charged_at)
    local index = idiv(charged_at, window)
    local count = tonumber(STATES[key])
    if not count then
      if idiv(now, window) ~= index then return nil end
      count = 0
    end
    local reset = (index + 1) * window - now
    if reset < 0 then reset = 0 end
    return count + cost, reset
  end
end
