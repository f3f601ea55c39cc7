-- leaky_bucket.lua: capacity c, one unit leaks every iv µs. State n = whole
-- units queued, t = time the last whole unit leaked (now-t is partial
-- progress). Admits when max(0, level − (now-last)/iv) + n ≤ c. In shape
-- mode the request is held until the units ahead of it have leaked:
-- level·iv − progress, and a hold longer than max_delay is a denial. The
-- step is core.lua's step1, which mirrors kit.leakyBucketAt
-- (ratelimit/kit/leakybucket.go).
--
-- The definitions are wrapped in leaky_bucket(), which returns the algorithm's
-- entry for main.lua and refund.lua: a script runs its whole text on every
-- call, so only the algorithms a call uses get their functions built.
local function leaky_bucket()
  -- leaky_bucket_refund takes the n units of a committed request back out of
  -- the bucket when a limit in another Cluster slot denied it: leak to now as
  -- the step does, then lower the level by n. An empty bucket is no state.
  local function leaky_bucket_refund(p, keys, now, n, extra)
    local set, level, _, last = load1('2', keys[1])
    if not set then
      return
    end
    level, last = leak(p.per, level, last, now)
    level = max(0, level - n)
    if level == 0 then
      redis.call('DEL', keys[1])
      return
    end
    save1('2', keys[1], level, 0, last)
  end

  return scalar_algorithm('2', leaky_bucket_refund)
end
