-- token_bucket.lua: src/core/token_bucket.cc in integer microseconds.
--
-- Arguments: key, now (us), capacity, unit, rate, cost, where one token is
-- `unit` units and one microsecond refills `rate` units (refill_tokens /
-- refill_period_us reduced by their gcd), so refill never rounds.
-- State: two packed doubles, the level (units) and when it was computed (us).
-- A missing key is a full bucket.
-- Returns allowed (1/0), limit, remaining, reset_after_us, retry_after_us and
-- the state to write if every limit of the request allows (nil when denied).
-- The refund (src/core/refund.cc) takes the same arguments and the charge's
-- time, unused: the bucket refills to now, then gets the tokens back, up to
-- full. It returns the state to write, or nil when the bucket is full or gone.
-- The debit (src/core/debit.cc) takes the same arguments: the bucket
-- refills to now, then pays the cost whatever it holds, going below empty.
-- It returns the state to write and reset_after_us.
if NEEDED('token_bucket') then
  -- The level at `now` and the bucket's clock, from the state `raw` (or nil).
  local function refill(raw, now, full, rate)
    local level, last = full, now
    if raw then level, last = sunpack('<dd', raw) end
    -- Time that runs backwards refills nothing. Comparing elapsed with
    -- ceil(missing / rate) avoids forming elapsed * rate when it would be huge.
    local elapsed = now - last
    if elapsed > 0 then
      if elapsed >= cdiv(full - level, rate) then
        level = full
      else
        level = level + elapsed * rate
      end
    end
    if now > last then last = now end
    return level, last
  end

  ALGORITHMS['token_bucket'] = function(key, now, capacity, unit, rate, cost)
    local full = capacity * unit
    local level, last = refill(STATES[key], now, full, rate)
    local need = cost * unit
    if level >= need then
      local left = level - need
      return 1, capacity, idiv(left, unit), cdiv(full - left, rate), 0, spack('<dd', left, last)
    end
    -- A level in debt (a settled cost) leaves nothing.
    local left = 0
    if level > 0 then left = idiv(level, unit) end
    return 0, capacity, left, cdiv(full - level, rate), cdiv(need - level, rate), nil
  end

  REFUNDS['token_bucket'] = function(key, now, capacity, unit, rate, cost)
    local raw = STATES[key]
    if not raw then return nil end
    local full = capacity * unit
    local level, last = refill(raw, now, full, rate)
    if level >= full then return nil end
    local back = cost * unit
    if back >= full - level then
      level = full
    else
      level = level + back
    end
    return spack('<dd', level, last)
  end

  DEBITS['token_bucket'] = function(key, now, capacity, unit, rate, cost)
    local full = capacity * unit
    local level, last = refill(STATES[key], now, full, rate)
    level = level - cost * unit
    if level < -MAX_DEBT then level = -MAX_DEBT end
    return spack('<dd', level, last), cdiv(full - level, rate)
  end
end
