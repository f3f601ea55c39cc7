-- sliding_window.lua: the sliding-window counter. State t = current window
-- index k, n = units admitted in window k, prev = in window k−1, stored as
-- "n:prev:t". The previous window's count is weighted by the part of it
-- still inside the sliding window: estimate = prev·(w−elapsed)/w + curr.
-- Admits when estimate + n ≤ l. The step is core.lua's step1, which mirrors
-- kit.slidingWindowAt (ratelimit/kit/slidingwindow.go).
--
-- The definitions are wrapped in sliding_window(), which returns the algorithm's
-- entry for main.lua and refund.lua: a script runs its whole text on every
-- call, so only the algorithms a call uses get their functions built.
local function sliding_window()
  -- sliding_window_refund takes back the n units a committed request counted
  -- in window extra: from the current count if that window is still current,
  -- from the previous count if one more window has started since.
  local function sliding_window_refund(p, keys, now, n, extra)
    local set, curr, prev, idx = load1('5', keys[1])
    if not set then
      return
    end
    if idx == extra then
      curr = max(0, curr - n)
    elseif idx == extra + 1 then
      prev = max(0, prev - n)
    else
      return
    end
    if curr == 0 and prev == 0 then
      redis.call('DEL', keys[1])
      return
    end
    save1('5', keys[1], curr, prev, idx)
  end

  return scalar_algorithm('5', sliding_window_refund)
end
