-- prelude.lua: helpers shared by the algorithm files and the main scripts,
-- on top of core.lua's scalar steps.

local MAX_MICROS = 9007199254740992 -- 2^53, params.MaxMicros (ratelimit/internal/params)
local floor, ceil, min, max = math.floor, math.ceil, math.min, math.max
local format = string.format

-- mul_sat mirrors params.MulSat: a·b for non-negative a and b, saturated
-- at 2^53. A product above 2^53 rounds to a double ≥ 2^53, so min is exact.
local function mul_sat(a, b)
  return min(MAX_MICROS, a * b)
end

-- quo is Go's integer division a/b for b > 0: it truncates towards zero.
-- For |a| < 2^53 the rounded quotient never crosses an integer, so
-- floor/ceil of the double quotient is exact.
local function quo(a, b)
  local q = a / b
  if q < 0 then
    return ceil(q)
  end
  return floor(q)
end

-- refill mirrors kit.refill (ratelimit/kit/tokenbucket.go): credit the
-- whole tokens earned since last (one every iv µs), capped at c. It returns
-- the tokens and the time the last whole token was credited; a full bucket
-- is credited up to now. step1 (core.lua) does the same inline.
local function refill(c, iv, tokens, last, now)
  if now > last then
    local earned = quo(now - last, iv)
    if earned >= c - tokens then
      return c, now
    end
    return tokens + earned, last + earned * iv
  end
  return tokens, last
end

-- leak mirrors kit.leak (ratelimit/kit/leakybucket.go): take out the whole
-- units leaked since last (one every iv µs). It returns the level and the
-- time the last whole unit leaked; an empty bucket has leaked up to now.
-- step1 (core.lua) does the same inline.
local function leak(iv, level, last, now)
  if now > last then
    local leaked = quo(now - last, iv)
    if leaked >= level then
      return 0, now
    end
    return level - leaked, last + leaked * iv
  end
  return level, last
end

-- int formats an integer-valued number in full.
local function int(x)
  return format('%d', x)
end

-- decision returns a fresh ratelimit.Decision: reset, retry and delay in µs.
local function decision()
  return {allowed = false, remaining = 0, reset = 0, retry = 0, delay = 0}
end

-- load_state returns the state of the algorithm with code in keys[1] as a
-- table: set, n, prev, t. wb is as for load1.
local function load_state(code, keys, wb)
  local set, n, prev, t = load1(code, keys[1], nil, wb)
  return {set = set, n = n, prev = prev, t = t}
end

-- scalar_algorithm returns the entry (see main.lua) of an algorithm whose
-- state is one key and whose step is core.lua's step1 for code; refund is
-- its refund function. Its load and save take a batch's write-back table
-- (core.lua's load1), which the other algorithms ignore. Its code field,
-- which only these entries have, lets main.lua's decide2 call step1
-- directly.
local function scalar_algorithm(code, refund)
  local function load(keys, wb)
    return load_state(code, keys, wb)
  end
  local function save(keys, s, ttl_ms, wb)
    save1(code, keys[1], s.n, s.prev, s.t, ttl_ms, wb)
  end
  local function step(p, s, now, n)
    local allowed, an, aprev, at, remaining, reset, retry, delay =
      step1(code, p.max, p.per, p.shape, p.max_delay, s.set, s.n, s.prev, s.t, now, n)
    local d = {allowed = allowed, remaining = remaining, reset = reset, retry = retry, delay = delay}
    if allowed then
      s = {set = true, n = an, prev = aprev, t = at}
    end
    return s, d
  end
  return {nkeys = 1, code = code, load = load, save = save, step = step, refund = refund}
end
