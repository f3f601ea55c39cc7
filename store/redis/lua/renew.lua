-- renew.lua: extend the leases a gateway still holds (ratelimit.LeaseStore's
-- Renew), adding back each one the key no longer has (expired while
-- renewals failed, or lost with Redis' data).
--
-- ARGV[1]  now in Unix µs, or '' to read Redis TIME
-- then 2 ARGV per lease: its id, the lease TTL in µs
-- KEYS     each lease's sorted set (concurrency.lua), in order; the leases
--          of one key are adjacent, so each key's expired members are
--          pruned, and its TTL set, once
--
-- Returns the number of leases added back. The caller bounds a call to a
-- hundred leases (lease.go's renewChunk), which keeps it under a
-- millisecond inside Redis.

-- The script stands alone: core.lua's top level would take a renewal of two
-- leases (five arguments) for a lone request. clock is core.lua's.
local function clock(arg)
  if arg == '' then
    local t = redis.call('TIME')
    return tonumber(t[1]) * 1000000 + tonumber(t[2]), 0
  end
  return tonumber(arg), 3600000
end

local now, extra_ttl_ms = clock(ARGV[1])
local readded = 0
local prev, keep = nil, 0
local function expire(key, ms)
  if redis.call('PTTL', key) < ms then
    redis.call('PEXPIRE', key, ms)
  end
end
for i = 1, #KEYS do
  local key, id, ttl = KEYS[i], ARGV[2 * i], tonumber(ARGV[2 * i + 1])
  if key ~= prev then
    if prev then
      expire(prev, keep)
    end
    prev, keep = key, 0
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  end
  readded = readded + redis.call('ZADD', key, now + ttl, id)
  keep = math.max(keep, math.ceil(ttl / 1000) + 1 + extra_ttl_ms)
end
if prev then
  expire(prev, keep)
end
return readded
