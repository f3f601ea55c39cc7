-- concurrency.lua mirrors kit.LeaseAt (ratelimit/kit/lease.go): at most l
-- leases of a key held at once. keys[1] is a sorted set with one member per
-- lease, its id, scored by its expiry in µs; a member whose expiry is not
-- after now is expired and is removed before anything is read. p.per is the
-- lease TTL in µs, p.lease this request's lease id.
--
-- The step takes a slot when fewer than l leases are held or this lease is
-- one of them (taking it again renews it). A step of a cost above l is the
-- view main.lua asks for: what the key shows without taking anything. The
-- step sets d.next itself (alg.leases tells main.lua's step so).
--
-- The definitions are wrapped in concurrency(), which returns the
-- algorithm's entry for main.lua and refund.lua, as the other algorithm
-- files do.
local function concurrency()
  local RETRY_CAP = 1000000 -- ratelimit.LeaseRetryCap, µs

  local function load_leases(keys)
    return {key = keys[1], t = 0}
  end

  -- read prunes the expired leases and returns n, held, the earliest expiry
  -- among the other leases (0 if none) and the latest of all (0 if none).
  local function read(key, id, now)
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
    local n = redis.call('ZCARD', key)
    if n == 0 then
      return 0, false, 0, 0
    end
    local held = redis.call('ZSCORE', key, id) ~= false
    local first = redis.call('ZRANGE', key, 0, 1, 'WITHSCORES')
    local earliest = 0
    if first[1] ~= id then
      earliest = tonumber(first[2])
    elseif first[3] then
      earliest = tonumber(first[4])
    end
    local latest = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
    return n, held, earliest, latest
  end

  local function concurrency_at(p, s, now, cost)
    local l, ttl = p.max, p.per
    local take = cost <= l
    local n, held, earliest, latest = read(s.key, p.lease, now)
    local d = decision()
    d.allowed = held or n < l
    if earliest == 0 then
      earliest = now + ttl
    end
    local wait = min(earliest - now, RETRY_CAP)
    if take and d.allowed then
      if not held then
        n = n + 1
      end
      latest = max(latest, now + ttl)
    end
    d.remaining = max(0, l - n)
    if latest > now then
      d.reset = latest - now
    end
    if not d.allowed then
      d.retry = wait
    end
    d.next = 0
    if d.remaining == 0 then
      d.next = wait
    end
    if not take then
      d.allowed = false -- a view never admits (main.lua reads its counts only)
    end
    return {key = s.key, lease = p.lease, exp = now + ttl, t = 0}, d
  end

  -- save stores the lease; ttl_ms covers the latest expiry (d.reset).
  local function save_lease(keys, s, ttl_ms)
    redis.call('ZADD', keys[1], s.exp, s.lease)
    redis.call('PEXPIRE', keys[1], ttl_ms)
  end

  -- refund gives back the lease (extra is its id) a committed request took.
  local function refund_lease(p, keys, now, n, extra)
    redis.call('ZREM', keys[1], extra)
  end

  return {nkeys = 1, leases = true, load = load_leases, save = save_lease, step = concurrency_at, refund = refund_lease}
end
