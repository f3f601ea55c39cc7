-- gcra.lua mirrors kit.gcraAt (ratelimit/kit/gcra.go) step for step: the
-- generic cell rate algorithm with burst b and emission interval iv µs.
-- State t = theoretical arrival time (TAT), kept as a plain integer string
-- (Redis' integer encoding). A request of cost n conforms when
-- max(TAT, now) + n·iv − now ≤ b·iv.
--
-- The definitions are wrapped in gcra(), which returns the algorithm's
-- entry for main.lua and refund.lua: a script runs its whole text on every
-- call, so only the algorithms a call uses get their functions built.
local function gcra()
  local function gcra_at(p, s, now, n)
    local b, iv = p.max, p.per
    local tat = now
    if s.set then
      tat = math.max(s.t, now)
    end
    local tau = b * iv -- bounded by NewPolicy to 2^52
    local new_tat = tat + n * iv
    local d = decision()
    if new_tat - now <= tau then
      d.allowed = true
      tat = new_tat
      s = {set = true, n = 0, prev = 0, t = tat}
    else
      d.retry = new_tat - now - tau
    end
    d.remaining = math.max(0, quo(tau - (tat - now), iv)) -- tat-now > tau when the clock went back
    d.reset = tat - now
    return s, d
  end

  local function load_gcra(keys)
    local v = redis.call('GET', keys[1])
    if not v then
      return no_state()
    end
    return {set = true, n = 0, prev = 0, t = tonumber(v)}
  end

  local function save_gcra(keys, s, ttl_ms)
    redis.call('SET', keys[1], int(s.t), 'PX', ttl_ms)
  end

  -- gcra_refund moves the TAT back by the n·iv a committed request added when
  -- a limit in another Cluster slot denied it. A TAT at or before now is the
  -- same as no state.
  local function gcra_refund(p, keys, now, n, extra)
    local s = load_gcra(keys)
    if not s.set then
      return
    end
    local tat = s.t - n * p.per
    if tat <= now then
      redis.call('DEL', keys[1])
      return
    end
    redis.call('SET', keys[1], int(tat), 'KEEPTTL')
  end

  return {nkeys = 1, load = load_gcra, save = save_gcra, step = gcra_at, refund = gcra_refund}
end
