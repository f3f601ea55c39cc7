-- gcra.lua: the generic cell rate algorithm with burst b and emission
-- interval iv µs. State t = theoretical arrival time (TAT), kept as a plain
-- integer string (Redis' integer encoding). A request of cost n conforms
-- when max(TAT, now) + n·iv − now ≤ b·iv. The step is core.lua's step1,
-- which mirrors kit.gcraAt (ratelimit/kit/gcra.go).
--
-- The definitions are wrapped in gcra(), which returns the algorithm's
-- entry for main.lua and refund.lua: a script runs its whole text on every
-- call, so only the algorithms a call uses get their functions built.
local function gcra()
  -- gcra_refund moves the TAT back by the n·iv a committed request added when
  -- a limit in another Cluster slot denied it. A TAT at or before now is the
  -- same as no state.
  local function gcra_refund(p, keys, now, n, extra)
    local set, _, _, tat = load1('6', keys[1])
    if not set then
      return
    end
    tat = tat - n * p.per
    if tat <= now then
      redis.call('DEL', keys[1])
      return
    end
    save1('6', keys[1], 0, 0, tat)
  end

  return scalar_algorithm('6', gcra_refund)
end
