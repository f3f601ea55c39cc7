-- token_bucket.lua: capacity c, one token every iv µs. State n = whole
-- tokens, t = time the last whole token was credited (so now-t is partial
-- progress). Admits when min(c, tokens + (now-last)/iv) ≥ n. The step is
-- core.lua's step1, which mirrors kit.tokenBucketAt
-- (ratelimit/kit/tokenbucket.go).
--
-- The definitions are wrapped in token_bucket(), which returns the algorithm's
-- entry for main.lua and refund.lua: a script runs its whole text on every
-- call, so only the algorithms a call uses get their functions built.
local function token_bucket()
  -- token_bucket_refund gives back the n tokens a committed request took when
  -- a limit in another Cluster slot denied it: refill to now as the step does,
  -- add n, cap at c. A full bucket is the same as no state, so the key goes.
  local function token_bucket_refund(p, keys, now, n, extra)
    local set, tokens, _, last = load1('1', keys[1])
    if not set then
      return -- expired: already full
    end
    local c = p.max
    tokens, last = refill(c, p.per, tokens, last, now)
    tokens = min(c, tokens + n)
    if tokens >= c then
      redis.call('DEL', keys[1])
      return
    end
    save1('1', keys[1], tokens, 0, last)
  end

  return scalar_algorithm('1', token_bucket_refund)
end
