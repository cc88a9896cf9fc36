-- lockout.lua: lockouts that grow (embedded between the algorithms and
-- entry.lua, which calls it).
--
-- A limit definition's block argument (entry.lua's ARGV, 5th of each) is
-- either the block in microseconds, or, for a lockout that grows,
-- "<first_us> <factor> <max_us> <forget_after_us>"
-- (src/store/redis/script_limit.h, growing_block_arg).
--
-- A lockout key holds "<until_us>", or for a lockout that grows
-- "<until_us> <block_us>": when its last block ends and how long that one
-- lasted. A block that starts before forget_after has passed since that end
-- lasts factor times the last one, at most max; otherwise it lasts first.
-- The key then lives until forget_after past the block's end, so the
-- history is forgotten with it; a reset (DEL) forgets it at once. Every
-- number is an integer below 2^53 (blocks and forget_after at most 10 years
-- in microseconds), so doubles hold them exactly, as in the C++
-- (Limit::next_block).

-- Per definition whose lockout grows: {factor, max_us, forget_us}.
local BLOCK_GROWTH = {}

-- The first block of definition `d` from its argument `text`.
local function BLOCK_SPEC(d, text)
  local first, factor, max, forget = string.match(text, '^(%d+) (%d+) (%d+) (%d+)$')
  if not first then return tonumber(text) end
  BLOCK_GROWTH[d] = {tonumber(factor), tonumber(max), tonumber(forget)}
  return tonumber(first)
end

-- When the lockout a key holds (`value`, a string) ends.
local function BLOCK_UNTIL(value)
  local until_us = string.match(value, '^(%d+)')
  return tonumber(until_us)
end

-- The block definition `d` (first block `first`) starts at `at`, its lockout
-- key holding `old` (false for none): returns the block, the value to
-- write, and how long the key must live (us).
local function BLOCK_NEXT(d, first, old, at)
  local growth = BLOCK_GROWTH[d]
  if not growth then return first, string.format('%d', at + first), first end
  local factor, max, forget = growth[1], growth[2], growth[3]
  local block = first
  if old then
    local last_until, last = string.match(old, '^(%d+) (%d+)$')
    if last_until and at - tonumber(last_until) < forget then
      last = tonumber(last)
      -- last * factor is formed only when it cannot pass max.
      if last > (max - math.fmod(max, factor)) / factor then
        block = max
      else
        block = last * factor
      end
    end
  end
  return block, string.format('%d %d', at + block, block), block + forget
end
