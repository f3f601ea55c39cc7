-- fixed_window.lua mirrors kit.fixedWindowAt (ratelimit/kit/fixedwindow.go)
-- step for step: at most l units per window [k·w, (k+1)·w). State t = window
-- index k, n = units admitted in it. Admits when count + n ≤ l.
--
-- The definitions are wrapped in fixed_window(), which returns the algorithm's
-- entry for main.lua and refund.lua: a script runs its whole text on every
-- call, so only the algorithms a call uses get their functions built.
local function fixed_window()
  local function fixed_window_at(p, s, now, n)
    local l, w = p.max, p.per
    local idx = quo(now, w)
    local count = 0
    if s.set and s.t >= idx then
      -- s.t > idx only if the clock went back: keep the newer window
      -- rather than mint a fresh one.
      idx, count = s.t, s.n
    end
    local till_end = (idx + 1) * w - now
    local d = decision()
    if n <= l - count then -- count + n ≤ l, without leaving 2^53
      count = count + n
      d.allowed = true
      s = {set = true, n = count, prev = 0, t = idx}
    else
      d.retry = till_end
    end
    d.remaining = l - count
    if count > 0 then
      d.reset = till_end
    end
    return s, d
  end

  -- fixed_window_refund takes back the n units a committed request counted in
  -- window extra, if that window is still the stored one.
  local function fixed_window_refund(p, keys, now, n, extra)
    local s = load_pair(keys)
    if not s.set or s.t ~= extra then
      return
    end
    local count = s.n - n
    if count <= 0 then
      redis.call('DEL', keys[1])
      return
    end
    put_pair(keys, {n = count, t = s.t})
  end

  return {nkeys = 1, load = load_pair, save = save_pair, step = fixed_window_at, refund = fixed_window_refund}
end
