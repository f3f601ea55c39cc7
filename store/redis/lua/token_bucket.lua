-- token_bucket.lua mirrors kit.tokenBucketAt (ratelimit/kit/tokenbucket.go)
-- step for step: capacity c, one token every iv µs. State n = whole tokens,
-- t = time the last whole token was credited (so now-t is partial progress).
-- Admits when min(c, tokens + (now-last)/iv) ≥ n.
--
-- The definitions are wrapped in token_bucket(), which returns the algorithm's
-- entry for main.lua and refund.lua: a script runs its whole text on every
-- call, so only the algorithms a call uses get their functions built.
local function token_bucket()
  local function token_bucket_at(p, s, now, n)
    local c, iv = p.max, p.per
    local tokens, last = c, now
    if s.set then
      tokens, last = s.n, s.t
    end
    tokens, last = refill(c, iv, tokens, last, now)
    -- progress towards the next token, < iv unless full; negative when the
    -- clock went back, which lengthens every wait instead of shortening it.
    local progress = now - last
    local d = decision()
    if tokens >= n then
      tokens = tokens - n
      d.allowed = true
      s = {set = true, n = tokens, prev = 0, t = last}
    else
      d.retry = mul_sat(n - tokens, iv) - progress
    end
    d.remaining = tokens
    if tokens < c then
      d.reset = mul_sat(c - tokens, iv) - progress
    end
    return s, d
  end

  -- token_bucket_refund gives back the n tokens a committed request took when
  -- a limit in another Cluster slot denied it: refill to now as the step does,
  -- add n, cap at c. A full bucket is the same as no state, so the key goes.
  local function token_bucket_refund(p, keys, now, n, extra)
    local s = load_pair(keys)
    if not s.set then
      return -- expired: already full
    end
    local c, iv = p.max, p.per
    local tokens, last = refill(c, iv, s.n, s.t, now)
    tokens = math.min(c, tokens + n)
    if tokens >= c then
      redis.call('DEL', keys[1])
      return
    end
    put_pair(keys, {n = tokens, t = last})
  end

  return {nkeys = 1, load = load_pair, save = save_pair, step = token_bucket_at, refund = token_bucket_refund}
end
