-- gcra.lua: src/core/gcra.cc in integer microseconds.
--
-- Arguments: key, now (us), capacity, unit, rate, cost (as token_bucket.lua).
-- State: two packed doubles, the theoretical arrival time in whole
-- microseconds and frac / rate of a microsecond more (0 <= frac < rate).
-- A missing key is a full bucket (TAT = now). Returns as token_bucket.lua.
if NEEDED('gcra') then
  ALGORITHMS['gcra'] = function(key, now, capacity, unit, rate, cost)
    local full = capacity * unit
    local need = cost * unit
    local tat, frac = now, 0
    local raw = redis.call('GET', key)
    if raw then tat, frac = sunpack('<dd', raw) end

    -- debt = max(0, TAT - now) in units: the tokens missing from a full bucket.
    -- When TAT < now, (TAT - now) * rate + frac < 0 since frac < rate.
    local debt = 0
    if tat > now then
      debt = (tat - now) * rate + frac
    elseif tat == now then
      debt = frac
    end

    if debt + need <= full then
      local new_debt = debt + need
      return 1, capacity, idiv(full - new_debt, unit), cdiv(new_debt, rate), 0,
             spack('<dd', now + idiv(new_debt, rate), fmod(new_debt, rate))
    end
    -- debt exceeds full only if time ran backwards; report 0 left then.
    local left = full - debt
    if left < 0 then left = 0 end
    return 0, capacity, idiv(left, unit), cdiv(debt, rate), cdiv(debt + need - full, rate), nil
  end
end
