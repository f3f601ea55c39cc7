-- scg_token_bucket.lua: a token_bucket policy with compat scg, which keeps
-- Spring Cloud Gateway's RedisRateLimiter state so that SCG instances and
-- sluice decide from one budget (docs/migrating-from-scg.md).
--
-- Keys: the tokens left and the whole second of the last write, the
-- values SCG keeps under request_rate_limiter.{<id>}.tokens and
-- .timestamp; the Go side names them, without the store's prefix. A
-- missing tokens key counts as a full bucket, a missing timestamp as 0.
-- Parameters: p.max is the capacity (SCG's burstCapacity) and p.max_delay
-- carries the whole tokens added per second (SCG's replenishRate); p.per
-- is not used. Time is the whole second of now (Redis TIME's seconds).
--
-- A step credits rate tokens per whole second since the timestamp (never
-- a negative number of seconds), capped at the capacity, and admits when
-- that covers the cost. Only an admitted request is written (main.lua
-- writes nothing for a denied one): both keys, with the refilled tokens
-- less the cost and the current second, each expiring floor(2·max/rate)
-- seconds (at least 1) later. SCG also writes on a denial, the refilled
-- tokens at the current second; that state and the unwritten one refill to
-- the same number at every later second, so the two answer alike.
local function scg_token_bucket()
  local function load(keys)
    local v = redis.call('MGET', keys[1], keys[2])
    return {n = tonumber(v[1]), t = tonumber(v[2])}
  end

  local function save(keys, s)
    redis.call('SET', keys[1], int(s.n), 'EX', s.ttl)
    redis.call('SET', keys[2], int(s.t), 'EX', s.ttl)
  end

  local function step(p, s, now, n)
    local c, rate = p.max, p.max_delay
    local sec = floor(now / 1000000)
    local filled = min(c, (s.n or c) + max(0, sec - (s.t or 0)) * rate)
    local d = decision()
    local left = filled
    if filled >= n then
      left = filled - n
      d.allowed = true
    else
      d.retry = (sec + ceil((n - filled) / rate)) * 1000000 - now
    end
    d.remaining = left
    if left < c then
      d.reset = (sec + ceil((c - left) / rate)) * 1000000 - now
    end
    return {n = left, t = sec, ttl = max(1, floor(2 * c / rate))}, d
  end

  return {nkeys = 2, load = load, save = save, step = step}
end
