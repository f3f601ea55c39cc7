-- sliding_window.lua mirrors kit.slidingWindowAt
-- (ratelimit/kit/slidingwindow.go) step for step: the sliding-window counter.
-- State t = current window index k, n = units admitted in window k, prev = in
-- window k−1, stored as "n:prev:t". The previous window's count is weighted
-- by the part of it still inside the sliding window:
-- estimate = prev·(w−elapsed)/w + curr. Admits when estimate + n ≤ l.
--
-- The floating-point expressions are evaluated in exactly the order of the
-- Go code, so both sides round alike.
--
-- The definitions are wrapped in sliding_window(), which returns the algorithm's
-- entry for main.lua and refund.lua: a script runs its whole text on every
-- call, so only the algorithms a call uses get their functions built.
local function sliding_window()
  -- weighted mirrors kit.weighted: count·(part/w).
  local function weighted(count, part, w)
    return count * (part / w)
  end

  -- first_fit mirrors kit.firstFit: the smallest e in [lo, hi) with
  -- fits(e), or hi; fits must be monotone. (hi − lo)/2 keeps mid exact.
  local function first_fit(lo, hi, fits)
    while lo < hi do
      local mid = lo + math.floor((hi - lo) / 2)
      if fits(mid) then
        hi = mid
      else
        lo = mid + 1
      end
    end
    return lo
  end

  -- sliding_retry mirrors kit.slidingRetry: bisection, as a linear
  -- walk took O(w) steps for a large l.
  local function sliding_retry(l, w, elapsed, curr, prev, n)
    if n <= l - curr and prev > 0 then -- curr + n ≤ l, without leaving 2^53
      local e = first_fit(elapsed + 1, w, function(e)
        return weighted(prev, w - e, w) + curr + n <= l
      end)
      if e < w then
        return e - elapsed
      end
    end
    -- next window: prev' = curr, curr' = 0
    if curr == 0 then
      return w - elapsed
    end
    local e = first_fit(0, w, function(e)
      return weighted(curr, w - e, w) + n <= l
    end)
    return w - elapsed + e
  end

  local function sliding_window_at(p, s, now, n)
    local l, w = p.max, p.per
    local idx = quo(now, w)
    local curr, prev = 0, 0
    if s.set then
      if s.t >= idx then
        -- s.t > idx only if the clock went back: keep the newer window.
        idx, curr, prev = s.t, s.n, s.prev
      elseif s.t == idx - 1 then
        prev = s.n
      end
    end
    local elapsed = math.max(0, now - idx * w)
    -- lag > 0 only if the clock went back: then nothing changes until the
    -- newer window starts, and reset (the key's TTL) and retry wait for it too.
    local lag = math.max(0, idx * w - now)
    local est = weighted(prev, w - elapsed, w) + curr
    local d = decision()
    if est + n <= l then
      curr = curr + n
      est = est + n
      d.allowed = true
      s = {set = true, n = curr, prev = prev, t = idx}
    else
      d.retry = lag + sliding_retry(l, w, elapsed, curr, prev, n)
    end
    d.remaining = math.max(0, l - math.ceil(est))
    if curr > 0 then
      d.reset = lag + 2 * w - elapsed
    elseif prev > 0 then
      d.reset = lag + w - elapsed
    end
    return s, d
  end

  local function load_sliding_window(keys)
    local v = redis.call('GET', keys[1])
    if not v then
      return no_state()
    end
    local n, prev, t = string.match(v, '^(%d+):(%d+):(%-?%d+)$')
    return {set = true, n = tonumber(n), prev = tonumber(prev), t = tonumber(t)}
  end

  local function save_sliding_window(keys, s, ttl_ms, keep)
    local v = string.format('%d:%d:%d', s.n, s.prev, s.t)
    if keep then
      redis.call('SET', keys[1], v, 'KEEPTTL')
    else
      redis.call('SET', keys[1], v, 'PX', ttl_ms)
    end
  end

  -- sliding_window_refund takes back the n units a committed request counted
  -- in window extra: from the current count if that window is still current,
  -- from the previous count if one more window has started since.
  local function sliding_window_refund(p, keys, now, n, extra)
    local s = load_sliding_window(keys)
    if not s.set then
      return
    end
    if s.t == extra then
      s.n = math.max(0, s.n - n)
    elseif s.t == extra + 1 then
      s.prev = math.max(0, s.prev - n)
    else
      return
    end
    if s.n == 0 and s.prev == 0 then
      redis.call('DEL', keys[1])
      return
    end
    save_sliding_window(keys, s, 0, true)
  end

  return {nkeys = 1, load = load_sliding_window, save = save_sliding_window, step = sliding_window_at, refund = sliding_window_refund}
end
