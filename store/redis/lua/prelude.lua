-- prelude.lua: helpers shared by the algorithm files and the main scripts.
--
-- Every quantity is an integer below 2^53 (µs or units), exact in Lua's
-- doubles. Numbers handed to redis.call are formatted with int() (%d):
-- Lua's tostring prints only 14 significant digits and would round a Unix
-- time in µs.

local MAX_MICROS = 9007199254740992 -- 2^53, params.MaxMicros (ratelimit/internal/params)

-- mul_sat mirrors params.MulSat: a·b for non-negative a and b, saturated
-- at 2^53. A product above 2^53 rounds to a double ≥ 2^53, so min is exact.
local function mul_sat(a, b)
  return math.min(MAX_MICROS, a * b)
end

-- quo is Go's integer division a/b for b > 0: it truncates towards zero.
-- For |a| < 2^53 the rounded quotient never crosses an integer, so
-- floor/ceil of the double quotient is exact.
local function quo(a, b)
  local q = a / b
  if q < 0 then
    return math.ceil(q)
  end
  return math.floor(q)
end

-- refill mirrors kit.refill (ratelimit/kit/tokenbucket.go): credit the
-- whole tokens earned since last (one every iv µs), capped at c. It returns
-- the tokens and the time the last whole token was credited; a full bucket
-- is credited up to now. token_bucket's step and refund both refill here.
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
-- leaky_bucket's step and refund both leak here.
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
  return string.format('%d', x)
end

-- decision returns a fresh ratelimit.Decision: reset, retry and delay in µs.
local function decision()
  return {allowed = false, remaining = 0, reset = 0, retry = 0, delay = 0}
end

-- State values. pack2 stores the pair (a, b) as the decimal digits of a+1
-- followed by b in exactly 16 digits: for 0 ≤ a < 920 and 0 ≤ b < 10^16
-- (Unix µs until the year 2286) that is an integer below 2^63, which Redis
-- keeps in its compact integer encoding (the ≤ 100 bytes per key goal).
-- Other pairs are stored as "a:b".
local PACK_LIMIT = 10000000000000000 -- 10^16

local function pack2(a, b)
  if a >= 0 and a < 920 and b >= 0 and b < PACK_LIMIT then
    return string.format('%d%016d', a + 1, b)
  end
  return string.format('%d:%d', a, b)
end

local function unpack2(v)
  local i = string.find(v, ':', 1, true) -- plain find: cheaper than a pattern
  if i then
    return tonumber(string.sub(v, 1, i - 1)), tonumber(string.sub(v, i + 1))
  end
  return tonumber(string.sub(v, 1, -17)) - 1, tonumber(string.sub(v, -16))
end

local function no_state()
  return {set = false, n = 0, prev = 0, t = 0}
end

-- load_pair and save_pair keep a state (n, t) in one string key: token
-- bucket, leaky bucket and fixed window.
local function load_pair(keys)
  local v = redis.call('GET', keys[1])
  if not v then
    return no_state()
  end
  local n, t = unpack2(v)
  return {set = true, n = n, prev = 0, t = t}
end

local function save_pair(keys, s, ttl_ms)
  redis.call('SET', keys[1], pack2(s.n, s.t), 'PX', ttl_ms)
end

-- put_pair rewrites a pair keeping the key's TTL (refunds only make a state
-- reach its reset sooner, so the TTL still covers it).
local function put_pair(keys, s)
  redis.call('SET', keys[1], pack2(s.n, s.t), 'KEEPTTL')
end
