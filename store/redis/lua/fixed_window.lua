-- fixed_window.lua: at most l units per window [k·w, (k+1)·w). State t =
-- window index k, n = units admitted in it. Admits when count + n ≤ l. The
-- step is core.lua's step1, which mirrors kit.fixedWindowAt
-- (ratelimit/kit/fixedwindow.go).
--
-- The definitions are wrapped in fixed_window(), which returns the algorithm's
-- entry for main.lua and refund.lua: a script runs its whole text on every
-- call, so only the algorithms a call uses get their functions built.
local function fixed_window()
  -- fixed_window_refund takes back the n units a committed request counted in
  -- window extra, if that window is still the stored one.
  local function fixed_window_refund(p, keys, now, n, extra)
    local set, count, _, idx = load1('3', keys[1])
    if not set or idx ~= extra then
      return
    end
    count = count - n
    if count <= 0 then
      redis.call('DEL', keys[1])
      return
    end
    save1('3', keys[1], count, 0, idx)
  end

  return scalar_algorithm('3', fixed_window_refund)
end
