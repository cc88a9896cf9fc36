-- sliding_window.lua: src/core/sliding_window.cc in integer microseconds.
--
-- Arguments: key, now (us), limit, window (us), unused, cost.
-- State: three packed doubles, the epoch-aligned window index and the counts
-- allowed in it and in the window before. A missing key is empty.
--
-- The estimate previous * (window - elapsed) / window + current is compared
-- on products (times window), which reach limit * window: up to 2^81 for the
-- largest limits and windows, so they are formed exactly with mul().
-- retry_after is the memory store's rounded up to a whole microsecond; the
-- branch between "later in this window" and "in the next window" is taken on
-- the memory store's nanosecond condition so that both agree.
-- Returns as token_bucket.lua.
-- The refund takes the charge's time (us) too: the charge leaves the count
-- of the window it was counted in, current or previous, if the state still
-- keeps that window.
if NEEDED('sliding_window') then
  -- Products up to 2^100, exactly, as two 50-bit halves.
  local B25 = 33554432          -- 2^25
  local B50 = 1125899906842624  -- 2^50

  -- The exact product a * b of integers 0 <= a, b < 2^50, as hi * 2^50 + lo
  -- with 0 <= lo < 2^50. Every partial product stays below 2^52.
  local function mul(a, b)
    local a0 = fmod(a, B25)
    local a1 = (a - a0) / B25
    local b0 = fmod(b, B25)
    local b1 = (b - b0) / B25
    local mid = a1 * b0 + a0 * b1
    local m0 = fmod(mid, B25)
    local hi = a1 * b1 + (mid - m0) / B25
    local lo = a0 * b0 + m0 * B25
    if lo >= B50 then
      lo = lo - B50
      hi = hi + 1
    end
    return hi, lo
  end

  -- floor((hi * 2^50 + lo) / d) and the remainder, for 0 < d < 2^50 and a
  -- quotient below 2^50. The double estimate is off by at most one; the exact
  -- remainder, formed with mul(), corrects it.
  local function divmod(hi, lo, d)
    local q = math.floor((hi * B50 + lo) / d)
    if q >= B50 then q = B50 - 1 end
    local ph, pl = mul(q, d)
    local r = (hi - ph) * B50 + (lo - pl)
    while r < 0 do
      q = q - 1
      r = r + d
    end
    while r >= d do
      q = q + 1
      r = r - d
    end
    return q, r
  end

  ALGORITHMS['sliding_window'] = function(key, now, limit, window, _, cost)
    local index = idiv(now, window)
    local current, previous = 0, 0
    local raw = STATES[key]
    if raw then
      local state_index, state_current, state_previous = sunpack('<ddd', raw)
      if state_index >= index then
        -- Same window (or a later one, if time ran backwards: keep counting there).
        index = state_index
        current = state_current
        previous = state_previous
      elseif state_index == index - 1 then
        previous = state_current
      end
    end
    local window_start = index * window
    local elapsed = 0
    if now > window_start then elapsed = now - window_start end
    local after = current + cost

    -- weighted = previous * (window - elapsed); allowed iff
    -- weighted + after * window <= limit * window. ceil(weighted / window) is
    -- what the estimate takes from the remaining count.
    local wh, wl = mul(previous, window - elapsed)
    local taken, rem = divmod(wh, wl, window)
    if rem > 0 then taken = taken + 1 end
    local room = limit - after
    local allowed = false
    if room >= 0 then
      local rh, rl = mul(room, window)
      allowed = wh < rh or (wh == rh and wl <= rl)
    end

    if allowed then
      local reset = 0  -- until restored: current leaves in two windows, previous in one
      if after > 0 then
        reset = window_start + 2 * window - now
      elseif previous > 0 then
        reset = window_start + window - now
      end
      return 1, limit, room - taken, reset, 0, spack('<ddd', index, after, previous)
    end

    local left = limit - current - taken
    if left < 0 then left = 0 end
    local reset = 0
    if current > 0 then
      reset = window_start + 2 * window - now
    elseif previous > 0 then
      reset = window_start + window - now
    end
    -- Earliest retry within this window: `previous` weighs less as time passes.
    -- Here slack < previous, so the quotient is below window.
    local slack = limit - after
    if slack >= 0 and previous > 0 and slack * (window * 1000) >= previous then
      local sh, sl = mul(slack, window)
      return 0, limit, left, reset, window_start + window - divmod(sh, sl, previous) - now, nil
    end
    -- Next window: `current` becomes the previous count and nothing is current.
    -- When only `previous` kept this window from admitting, room can reach
    -- `current` and the formula 0 or less: the next window admits at its start.
    local e_next = 0
    local room_next = limit - cost
    if current > 0 and room_next < current then
      local nh, nl = mul(room_next, window)
      e_next = window - divmod(nh, nl, current)
    end
    return 0, limit, left, reset, window_start + window + e_next - now, nil
  end

  REFUNDS['sliding_window'] = function(key, _, _, window, _, cost, charged_at)
    local raw = STATES[key]
    if not raw then return nil end
    local index, current, previous = sunpack('<ddd', raw)
    local charged_index = idiv(charged_at, window)
    if index == charged_index and current > 0 then
      if cost > current then cost = current end
      return spack('<ddd', index, current - cost, previous)
    elseif index == charged_index + 1 and previous > 0 then
      if cost > previous then cost = previous end
      return spack('<ddd', index, current, previous - cost)
    end
    return nil
  end
end
