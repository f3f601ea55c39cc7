-- leaky_bucket.lua mirrors kit.leakyBucketAt (ratelimit/kit/leakybucket.go)
-- step for step: capacity c, one unit leaks every iv µs. State n = whole
-- units queued, t = time the last whole unit leaked (now-t is partial
-- progress). Admits when max(0, level − (now-last)/iv) + n ≤ c. In shape
-- mode the request is held until the units ahead of it have leaked:
-- level·iv − progress, and a hold longer than max_delay is a denial.
--
-- The definitions are wrapped in leaky_bucket(), which returns the algorithm's
-- entry for main.lua and refund.lua: a script runs its whole text on every
-- call, so only the algorithms a call uses get their functions built.
local function leaky_bucket()
  local function leaky_bucket_at(p, s, now, n)
    local c, iv = p.max, p.per
    local level, last = 0, now
    if s.set then
      level, last = s.n, s.t
    end
    level, last = leak(iv, level, last, now)
    local progress = now - last -- negative when the clock went back: waits lengthen
    local d = decision()
    local wait = 0 -- shape mode: time the units ahead need to leak
    if level > 0 and p.shape then
      wait = mul_sat(level, iv) - progress
    end
    local fits = n <= c - level -- level + n ≤ c, without leaving 2^53
    if fits and (p.max_delay == 0 or wait <= p.max_delay) then
      level = level + n
      d.allowed = true
      d.delay = wait
      s = {set = true, n = level, prev = 0, t = last}
    else
      local retry = 0
      if not fits then
        retry = mul_sat(n - (c - level), iv) - progress
      end
      if p.max_delay > 0 and wait > p.max_delay then
        retry = math.max(retry, wait - p.max_delay)
      end
      d.retry = retry
    end
    d.remaining = c - level
    if level > 0 then
      d.reset = mul_sat(level, iv) - progress
    end
    return s, d
  end

  -- leaky_bucket_refund takes the n units of a committed request back out of
  -- the bucket when a limit in another Cluster slot denied it: leak to now as
  -- the step does, then lower the level by n. An empty bucket is no state.
  local function leaky_bucket_refund(p, keys, now, n, extra)
    local s = load_pair(keys)
    if not s.set then
      return
    end
    local iv = p.per
    local level, last = leak(iv, s.n, s.t, now)
    level = math.max(0, level - n)
    if level == 0 then
      redis.call('DEL', keys[1])
      return
    end
    put_pair(keys, {n = level, t = last})
  end

  return {nkeys = 1, load = load_pair, save = save_pair, step = leaky_bucket_at, refund = leaky_bucket_refund}
end
