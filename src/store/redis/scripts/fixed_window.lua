-- fixed_window.lua: src/core/fixed_window.cc in integer microseconds.
--
-- Arguments: key, now (us), limit, window (us), unused, cost.
-- State: two packed doubles, the window index (windows are aligned to the
-- epoch: index = floor(now / window)) and the count in it. A missing key is
-- an empty window. Returns as token_bucket.lua.
-- The refund takes the charge's time (us) too: the count goes down only if
-- the state's window is the one the charge was counted in.
if NEEDED('fixed_window') then
  ALGORITHMS['fixed_window'] = function(key, now, limit, window, _, cost)
    local index = idiv(now, window)
    local count = 0
    local raw = STATES[key]
    if raw then
      local state_index, state_count = sunpack('<dd', raw)
      -- A state from a later window (time ran backwards) keeps counting there.
      if state_index >= index then
        index = state_index
        count = state_count
      end
    end
    local window_end_in = (index + 1) * window - now
    local after = count + cost
    if after <= limit then
      return 1, limit, limit - after, window_end_in, 0, spack('<dd', index, after)
    end
    local reset = 0
    if count > 0 then reset = window_end_in end
    return 0, limit, limit - count, reset, window_end_in, nil
  end

  REFUNDS['fixed_window'] = function(key, _, _, window, _, cost, charged_at)
    local raw = STATES[key]
    if not raw then return nil end
    local index, count = sunpack('<dd', raw)
    if index ~= idiv(charged_at, window) or count == 0 then return nil end
    if cost > count then cost = count end
    return spack('<dd', index, count - cost)
  end
end
