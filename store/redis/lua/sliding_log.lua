-- sliding_log.lua mirrors kit.slidingLogAt (ratelimit/kit/slidinglog.go)
-- step for step: an exact log of the admitted requests in (now−w, now].
-- keys[1] is a sorted set with one member per admitted request, scored by
-- its time in µs; the member "seq:cost" is unique (seq counts admissions),
-- so two requests in the same µs stay two entries. keys[2] holds the pair
-- (total, seq): the sum of the costs in the set and the last seq used.
-- Admits when the sum of the costs in the window + n ≤ l.
--
-- The definitions are wrapped in sliding_log(), which returns the algorithm's
-- entry for main.lua and refund.lua: a script runs its whole text on every
-- call, so only the algorithms a call uses get their functions built.
local function sliding_log()
  local LOG_PAGE = 256

  -- log_cost returns the cost recorded in a member "seq:cost".
  local function log_cost(member)
    return tonumber(string.match(member, ':(%d+)$'))
  end

  -- last_entry returns the time of the newest entry.
  local function last_entry(key)
    return tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
  end

  local function load_sliding_log(keys)
    local set, total, _, seq = load1('1', keys[2]) -- a pair, as a token bucket's
    return {set = set, key = keys[1], total = total, seq = seq}
  end

  -- newest returns the time of the newest entry: the last one admitted
  -- earlier in this call, else the set's last.
  local function newest(s, pend)
    if #pend > 0 then
      return pend[#pend].at
    end
    return last_entry(s.key)
  end

  local function sliding_log_at(p, s, now, n)
    local l, w = p.max, p.per
    -- pend: entries admitted by earlier limits of this call on this key,
    -- oldest first, not yet in the set (their state has been trimmed).
    local pend = s.pend or {}
    -- entries at or before now−w have left the window (Go drops them from
    -- the front of the log; here they are subtracted, and removed on save)
    local used = s.total
    if s.set and not s.pend then
      local gone = redis.call('ZRANGEBYSCORE', s.key, '-inf', int(now - w))
      for _, m in ipairs(gone) do
        used = used - log_cost(m)
      end
    end
    local d = decision()
    local last = nil -- time of the last entry in the window
    if n <= l - used then -- used + n ≤ l, without leaving 2^53
      used = used + n
      -- Keep the log ordered even if the clock went back, so that reset (the
      -- key's TTL) covers every entry.
      local at = now
      if used > n then
        at = math.max(at, newest(s, pend))
      end
      local np = {}
      for i, e in ipairs(pend) do
        np[i] = e
      end
      np[#np + 1] = {at = at, cost = n, seq = s.seq + 1}
      d.allowed = true
      s = {set = true, key = s.key, total = used, seq = s.seq + 1, pend = np, cut = now - w}
      last = at
    else
      -- wait until enough of the oldest entries have left the window
      local need, freed, offset, found = n - (l - used), 0, 0, false
      while not found do
        local page = redis.call('ZRANGEBYSCORE', s.key, '(' .. int(now - w), '+inf',
          'WITHSCORES', 'LIMIT', int(offset), int(LOG_PAGE))
        if #page == 0 then
          break
        end
        for i = 1, #page, 2 do
          freed = freed + log_cost(page[i])
          if freed >= need then
            d.retry = tonumber(page[i + 1]) + w - now
            found = true
            break
          end
        end
        offset = offset + LOG_PAGE
      end
      for _, e in ipairs(pend) do
        if found then
          break
        end
        freed = freed + e.cost
        if freed >= need then
          d.retry = e.at + w - now
          found = true
        end
      end
      if used > 0 then
        last = newest(s, pend)
      end
    end
    d.remaining = l - used
    if last then
      d.reset = last + w - now
    end
    return s, d
  end

  local function save_sliding_log(keys, s, ttl_ms)
    redis.call('ZREMRANGEBYSCORE', keys[1], '-inf', int(s.cut))
    for _, e in ipairs(s.pend) do
      redis.call('ZADD', keys[1], int(e.at), int(e.seq) .. ':' .. int(e.cost))
    end
    redis.call('PEXPIRE', keys[1], ttl_ms)
    save1('1', keys[2], s.total, 0, s.seq, ttl_ms)
  end

  -- sliding_log_refund removes the entry a committed request added (its seq
  -- is extra) when a limit in another Cluster slot denied it.
  local function sliding_log_refund(p, keys, now, n, extra)
    if redis.call('ZREM', keys[1], int(extra) .. ':' .. int(n)) == 0 then
      return -- already gone: expired or reset
    end
    if redis.call('ZCARD', keys[1]) == 0 then
      redis.call('DEL', keys[1], keys[2])
      return
    end
    local s = load_sliding_log(keys)
    if s.set then
      save1('1', keys[2], math.max(0, s.total - n), 0, s.seq)
    end
  end

  return {nkeys = 2, load = load_sliding_log, save = save_sliding_log, step = sliding_log_at, refund = sliding_log_refund}
end
