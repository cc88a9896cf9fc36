-- gcra.lua: src/core/gcra.cc in integer microseconds.
--
-- Arguments: key, now (us), capacity, unit, rate, cost (as token_bucket.lua).
-- State: two packed doubles, the theoretical arrival time in whole
-- microseconds and frac / rate of a microsecond more (0 <= frac < rate).
-- A missing key is a full bucket (TAT = now). Returns as token_bucket.lua;
-- so does the refund, which takes the tokens off the debt (down to none),
-- and the debit, which adds them to it whatever it is.
if NEEDED('gcra') then
  -- max(0, TAT - now) in units: the tokens missing from a full bucket.
  -- When TAT < now, (TAT - now) * rate + frac < 0 since frac < rate.
  local function debt_at(tat, frac, now, rate)
    if tat > now then
      return (tat - now) * rate + frac
    elseif tat == now then
      return frac
    end
    return 0
  end

  ALGORITHMS['gcra'] = function(key, now, capacity, unit, rate, cost)
    local full = capacity * unit
    local need = cost * unit
    local tat, frac = now, 0
    local raw = STATES[key]
    if raw then tat, frac = sunpack('<dd', raw) end
    local debt = debt_at(tat, frac, now, rate)

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

  REFUNDS['gcra'] = function(key, now, _, unit, rate, cost)
    local raw = STATES[key]
    if not raw then return nil end
    local tat, frac = sunpack('<dd', raw)
    local debt = debt_at(tat, frac, now, rate)
    if debt <= 0 then return nil end  -- full already
    local back = cost * unit
    if debt > back then
      debt = debt - back
    else
      debt = 0
    end
    return spack('<dd', now + idiv(debt, rate), fmod(debt, rate))
  end

  DEBITS['gcra'] = function(key, now, capacity, unit, rate, cost)
    local tat, frac = now, 0
    local raw = STATES[key]
    if raw then tat, frac = sunpack('<dd', raw) end
    local debt = debt_at(tat, frac, now, rate) + cost * unit
    local most = capacity * unit + MAX_DEBT
    if debt > most then debt = most end
    return spack('<dd', now + idiv(debt, rate), fmod(debt, rate)), cdiv(debt, rate)
  end
end
