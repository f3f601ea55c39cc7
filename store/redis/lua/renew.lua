-- renew.lua: extend leases that are still held (ratelimit.LeaseStore's
-- Renew). A lease that expired or was released stays gone.
--
-- ARGV[1]  now in Unix µs, or '' to read Redis TIME
-- then 2 ARGV per lease: its id, the lease TTL in µs
-- KEYS     each lease's sorted set (concurrency.lua), in order
--
-- Returns the number of leases renewed.

local now, extra_ttl_ms = clock(ARGV[1])
local renewed = 0
for i = 1, #KEYS do
  local key, id, ttl = KEYS[i], ARGV[2 * i], tonumber(ARGV[2 * i + 1])
  local score = redis.call('ZSCORE', key, id)
  if score and tonumber(score) > now then
    redis.call('ZADD', key, 'XX', now + ttl, id)
    local ms = math.ceil(ttl / 1000) + 1 + extra_ttl_ms
    if redis.call('PTTL', key) < ms then
      redis.call('PEXPIRE', key, ms)
    end
    renewed = renewed + 1
  end
end
return renewed
