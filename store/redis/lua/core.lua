-- core.lua: the scalar steps every script shares, and the lone
-- single-limit request decided before anything else is defined.
--
-- Redis runs a script's whole text on every call, and in Lua every table,
-- closure, tonumber of a decimal string (strtod) and string.format costs far
-- more than arithmetic. So this file comes first: a lone request with one
-- limit (mode 'e' of main.lua, every algorithm but sliding_log) is decided
-- by the block at its end, which builds no table but its reply, and returns
-- before the rest of the script runs. step1, load1, save1 and decide1 are
-- also what the algorithm files and main.lua's batch mode build on, so each
-- algorithm's arithmetic exists once.
--
-- The functions here refer to no local of the script (math.floor rather
-- than a local alias of it): an upvalue costs an allocation on every call.
--
-- Every quantity is an integer below 2^53 (µs or units), exact in Lua's
-- doubles. Numbers handed to redis.call are formatted with %d: Lua's
-- tostring prints only 14 significant digits and would round a Unix time in
-- µs. 9007199254740992 below is 2^53, params.MaxMicros
-- (ratelimit/internal/params), the bound of mul_sat (prelude.lua).

-- clock returns the time of the call in Unix µs, from Redis TIME when arg
-- (the script's time argument) is '' (production), else arg itself (tests
-- only), and the TTL extension in ms: with an explicit time Redis' own
-- clock keeps running while the test's clock may stand still, so keys are
-- kept an hour longer than their reset; an expired state and a kept one
-- answer alike once the test clock passes the reset.
local function clock(arg)
  if arg == '' then
    local t = redis.call('TIME')
    return tonumber(t[1]) * 1000000 + tonumber(t[2]), 0
  end
  return tonumber(arg), 3600000
end

-- step1 is one step of the algorithm with code (token_bucket '1',
-- leaky_bucket '2', fixed_window '3', sliding_window '5', gcra '6'; see
-- keys.go) for a request of cost n at now, against the state (set, sn,
-- sprev, st) — set false is no state. Each branch mirrors the algorithm's
-- Go step function (ratelimit/kit) step for step; the algorithm files
-- describe the states. It returns whether the request is admitted, the state
-- to store when it is (n, prev, t), then remaining, reset, retry and delay
-- in µs. c is the max (capacity, limit or burst), iv the interval or window
-- in µs.
local function step1(code, c, iv, shape, max_delay, set, sn, sprev, st, now, n)
  local allowed, reset, retry = false, 0, 0
  if code == '1' then -- kit.tokenBucketAt
    local tokens, last = c, now
    if set then
      tokens, last = sn, st
    end
    if now > last then -- kit.refill (prelude.lua's refill)
      local earned = math.floor((now - last) / iv)
      if earned >= c - tokens then
        tokens, last = c, now
      else
        tokens, last = tokens + earned, last + earned * iv
      end
    end
    -- progress towards the next token, < iv unless full; negative when the
    -- clock went back, which lengthens every wait instead of shortening it.
    local progress = now - last
    if tokens >= n then
      tokens = tokens - n
      allowed = true
    else
      retry = math.min(9007199254740992, (n - tokens) * iv) - progress
    end
    if tokens < c then
      reset = math.min(9007199254740992, (c - tokens) * iv) - progress
    end
    return allowed, tokens, 0, last, tokens, reset, retry, 0
  elseif code == '2' then -- kit.leakyBucketAt
    local level, last = 0, now
    if set then
      level, last = sn, st
    end
    if now > last then -- kit.leak (prelude.lua's leak)
      local leaked = math.floor((now - last) / iv)
      if leaked >= level then
        level, last = 0, now
      else
        level, last = level - leaked, last + leaked * iv
      end
    end
    local progress = now - last -- negative when the clock went back: waits lengthen
    local wait, delay = 0, 0 -- shape mode: time the units ahead need to leak
    if level > 0 and shape then
      wait = math.min(9007199254740992, level * iv) - progress
    end
    local fits = n <= c - level -- level + n ≤ c, without leaving 2^53
    if fits and (max_delay == 0 or wait <= max_delay) then
      level = level + n
      allowed = true
      delay = wait
    else
      if not fits then
        retry = math.min(9007199254740992, (n - (c - level)) * iv) - progress
      end
      if max_delay > 0 and wait > max_delay then
        retry = math.max(retry, wait - max_delay)
      end
    end
    if level > 0 then
      reset = math.min(9007199254740992, level * iv) - progress
    end
    return allowed, level, 0, last, c - level, reset, retry, delay
  elseif code == '3' then -- kit.fixedWindowAt
    local q = now / iv -- Go's now/w: truncated towards zero
    local idx = q < 0 and math.ceil(q) or math.floor(q)
    local count = 0
    if set and st >= idx then
      -- st > idx only if the clock went back: keep the newer window
      -- rather than mint a fresh one.
      idx, count = st, sn
    end
    local till_end = (idx + 1) * iv - now
    if n <= c - count then -- count + n ≤ l, without leaving 2^53
      count = count + n
      allowed = true
    else
      retry = till_end
    end
    if count > 0 then
      reset = till_end
    end
    return allowed, count, 0, idx, c - count, reset, retry, 0
  elseif code == '6' then -- kit.gcraAt
    local tat = now
    if set then
      tat = math.max(st, now)
    end
    local tau = c * iv -- bounded by NewPolicy to 2^52
    local new_tat = tat + n * iv
    if new_tat - now <= tau then
      allowed = true
      tat = new_tat
    else
      retry = new_tat - now - tau
    end
    -- tat-now > tau when the clock went back: the quotient is negative.
    local q = (tau - (tat - now)) / iv
    local remaining = math.max(0, q < 0 and math.ceil(q) or math.floor(q))
    return allowed, 0, 0, tat, remaining, tat - now, retry, 0
  end
  -- '5', kit.slidingWindowAt. The floating-point expressions are evaluated
  -- in exactly the order of the Go code (kit.weighted is count·(part/w)),
  -- so both sides round alike.
  local l, w = c, iv
  local q = now / w
  local idx = q < 0 and math.ceil(q) or math.floor(q)
  local curr, prev = 0, 0
  if set then
    if st >= idx then
      -- st > idx only if the clock went back: keep the newer window.
      idx, curr, prev = st, sn, sprev
    elseif st == idx - 1 then
      prev = sn
    end
  end
  local elapsed = math.max(0, now - idx * w)
  -- lag > 0 only if the clock went back: then nothing changes until the
  -- newer window starts, and reset (the key's TTL) and retry wait for it too.
  local lag = math.max(0, idx * w - now)
  local est = prev * ((w - elapsed) / w) + curr
  if est + n <= l then
    curr = curr + n
    est = est + n
    allowed = true
  else
    -- kit.slidingRetry: the first elapsed time at which the request fits,
    -- found by bisection (kit.firstFit) in this window, else in the next
    -- one (prev' = curr, curr' = 0).
    local r = nil
    if n <= l - curr and prev > 0 then -- curr + n ≤ l, without leaving 2^53
      local lo, hi = elapsed + 1, w
      while lo < hi do
        local mid = lo + math.floor((hi - lo) / 2)
        if prev * ((w - mid) / w) + curr + n <= l then
          hi = mid
        else
          lo = mid + 1
        end
      end
      if lo < w then
        r = lo - elapsed
      end
    end
    if not r then
      if curr == 0 then
        r = w - elapsed
      else
        local lo, hi = 0, w
        while lo < hi do
          local mid = lo + math.floor((hi - lo) / 2)
          if curr * ((w - mid) / w) + n <= l then
            hi = mid
          else
            lo = mid + 1
          end
        end
        r = w - elapsed + lo
      end
    end
    retry = lag + r
  end
  if curr > 0 then
    reset = lag + 2 * w - elapsed
  elseif prev > 0 then
    reset = lag + w - elapsed
  end
  return allowed, curr, prev, idx, math.max(0, l - math.ceil(est)), reset, retry, 0
end

-- State values. Token bucket, leaky bucket and fixed window keep the pair
-- (n, t) (sliding_log keeps its (total, seq) alike, as code '1') as the
-- decimal digits of n+1 followed by t in exactly 16 digits: for
-- 0 ≤ n < 920 and 0 ≤ t < 10^16 (Unix µs until the year 2286) that is an
-- integer below 2^63, which Redis keeps in its compact integer encoding
-- (the ≤ 100 bytes per key goal). Other pairs are stored as "n:t". gcra
-- keeps t as a plain integer; sliding_window keeps "n:prev:t".

-- load1 returns the state of the algorithm with code in key: set (false
-- when the key holds none), n, prev, t. v, when not nil, is the key's value
-- already read (false for none). wb, when not nil, is a batch's write-back
-- table (main.lua's mode 'b'): the key's value is read from it, or read
-- from Redis once and kept there.
local function load1(code, key, v, wb)
  if v == nil then
    if wb then
      v = wb.v[key]
      if v == nil then
        v = redis.call('GET', key)
        wb.v[key] = v
      end
    else
      v = redis.call('GET', key)
    end
  end
  if not v then
    return false, 0, 0, 0
  end
  if code == '6' then
    return true, 0, 0, tonumber(v)
  elseif code == '5' then
    local n, prev, t = string.match(v, '^(%d+):(%d+):(%-?%d+)$')
    return true, tonumber(n), tonumber(prev), tonumber(t)
  end
  local i = string.find(v, ':', 1, true) -- plain find: cheaper than a pattern
  if i then
    return true, tonumber(string.sub(v, 1, i - 1)), 0, tonumber(string.sub(v, i + 1))
  end
  return true, tonumber(string.sub(v, 1, -17)) - 1, 0, tonumber(string.sub(v, -16))
end

-- save1 stores the state (n, prev, t) of the algorithm with code in key
-- with a TTL of ttl_ms, or keeping the key's TTL when ttl_ms is nil
-- (refunds only make a state reach its reset sooner, so the TTL still
-- covers it). With a write-back table wb (see load1; ttl_ms is then set)
-- the value and its TTL are kept there instead, and flush writes the
-- key's last value once, with its last TTL: what the SETs one after the
-- other would have left.
local function save1(code, key, n, prev, t, ttl_ms, wb)
  local v
  if code == '6' then
    v = string.format('%d', t)
  elseif code == '5' then
    v = string.format('%d:%d:%d', n, prev, t)
  elseif n >= 0 and n < 920 and t >= 0 and t < 10000000000000000 then -- 10^16
    v = string.format('%d%016d', n + 1, t)
  else
    v = string.format('%d:%d', n, t)
  end
  if wb then
    if wb.ttl[key] == nil then
      wb.order[#wb.order + 1] = key
    end
    wb.v[key], wb.ttl[key] = v, ttl_ms
  elseif ttl_ms then
    redis.call('SET', key, v, 'PX', string.format('%d', ttl_ms))
  else
    redis.call('SET', key, v, 'KEEPTTL')
  end
end

-- flush writes the keys a write-back table holds (see save1), in the order
-- they were first saved. It returns nil, or the error reply of the first
-- write Redis refused: a server that refuses a script's first write (over
-- maxmemory, a replica, a failed save) refuses all of them.
local function flush(wb)
  for _, key in ipairs(wb.order) do
    local r = redis.pcall('SET', key, wb.v[key], 'PX', string.format('%d', wb.ttl[key]))
    if type(r) == 'table' and r.err then
      return r
    end
  end
  return nil
end

-- next1 is a step's next (kit.StepAt) for the algorithm with code: with
-- nothing left (remaining ≤ 0), the retry of a request of cost 1 against
-- the state after the step of cost n, which for a denied request of cost
-- 1 is its own retry. The step went from (set, sn, sprev, st), and when
-- allowed into (an, aprev, at); that probe is denied, so it changes
-- nothing.
local function next1(code, c, iv, shape, max_delay, n, now, allowed, set, sn, sprev, st, an, aprev, at, remaining, retry)
  if remaining > 0 then
    return 0
  end
  if not allowed and n == 1 then
    return retry
  end
  if allowed then
    set, sn, sprev, st = true, an, aprev, at
  end
  local _, _, _, _, _, _, r = step1(code, c, iv, shape, max_delay, set, sn, sprev, st, now, 1)
  return r
end

-- ttl1 is the TTL in ms of a state whose decision resets in reset µs: its
-- full reset, plus extra_ms (clock's second value).
local function ttl1(reset, extra_ms)
  return math.ceil(math.max(1, reset) / 1000) + 1 + extra_ms
end

-- short1 is the short answer of an admitted decision with nothing held
-- back (retry, delay and next 0): the one integer
-- -1 - (remaining·2^33 + reset), exact in a double while remaining < 2^20
-- and reset < 2^33 µs (about 2.4 hours), and negative, unlike every other
-- first value of a reply (the Go side's shortReply); else nil.
local function short1(remaining, reset, retry, delay, nxt)
  if retry == 0 and delay == 0 and nxt == 0 and remaining >= 0 and remaining < 1048576 and reset >= 0 and reset < 8589934592 then
    return -1 - (remaining * 8589934592 + reset)
  end
  return nil
end

-- decide1 decides and commits one limit alone (the request's only one, so
-- it is admitted exactly when the limit admits) of the algorithm with code
-- in key, at now, as kit.StepAt does: the step, then next1. An admitted
-- request's state is stored with ttl1's TTL. v is as for load1. It returns
-- allowed, remaining, reset, retry, delay, next, and for an admission
-- short1's answer (nil when there is none). wb is as for load1 and save1.
local function decide1(code, c, iv, shape, max_delay, n, key, now, extra_ms, v, wb)
  local set, sn, sprev, st = load1(code, key, v, wb)
  local allowed, an, aprev, at, remaining, reset, retry, delay =
    step1(code, c, iv, shape, max_delay, set, sn, sprev, st, now, n)
  local nxt = next1(code, c, iv, shape, max_delay, n, now, allowed, set, sn, sprev, st, an, aprev, at, remaining, retry)
  if not allowed then
    return false, remaining, reset, retry, delay, nxt, nil
  end
  save1(code, key, an, aprev, at, ttl1(reset, extra_ms), wb)
  return true, remaining, reset, retry, delay, nxt, short1(remaining, reset, retry, delay, nxt)
end

-- A lone request with one limit that is not a sliding_log, a concurrency
-- limit (code '7', which main.lua decides) nor compat scg (code '8',
-- scg_token_bucket.lua) is decided here,
-- in either of two forms (main.lua describes the arguments): mode 'e' with
-- its 9 arguments, or, for a limit in police mode without max_delay, the
-- 5 arguments code, now, max, per, cost (mode '1', '2', '3', '5' or '6':
-- the algorithm's code), as each argument costs Redis a Lua string and a
-- table slot on every call. Its reply is decide1's short answer when there
-- is one, else the limit's allowed, remaining, reset, retry, delay, next
-- (its overall is allowed, or 1 for a shadow limit, which the caller
-- knows).
local argv = ARGV
local lone, lone_at = nil, 0 -- the algorithm code, and where max is
if #argv == 5 then
  lone, lone_at = argv[1], 3
elseif argv[1] == 'e' and #argv == 9 and argv[3] ~= '4' and argv[3] ~= '7' and argv[3] ~= '8' then
  lone, lone_at = argv[3], 4
end
if lone then
  local now, extra_ms = clock(argv[2])
  -- the common values without a parse (0 and 1 are true in Lua)
  local shape, max_delay, cost = false, 0, argv[5]
  if lone_at == 4 then
    shape, cost = argv[6] == '1', argv[8]
    max_delay = argv[7] == '0' and 0 or tonumber(argv[7], 16)
  end
  cost = cost == '1' and 1 or tonumber(cost, 16)
  local allowed, remaining, reset, retry, delay, nxt, short = decide1(lone, tonumber(argv[lone_at], 16),
    tonumber(argv[lone_at + 1], 16), shape, max_delay, cost, KEYS[1], now, extra_ms)
  if short then
    return short
  end
  return {allowed and 1 or 0, remaining, reset, retry, delay, nxt}
end
