-- main.lua: evaluate every limit of one request atomically.
--
-- ARGV[1]  mode: 'e' evaluate, 'v' evaluate and also report each admitting
--          limit's unchanged view (Cluster, several slots), 'p' peek
-- ARGV[2]  now in Unix µs, or '' to read Redis TIME (production; only tests
--          pass a time)
-- then 7 ARGV per limit: algorithm code, max (capacity, limit or burst),
--          per (interval or window, µs), shape (1/0), max_delay (µs),
--          cost, shadow (1/0)
-- KEYS     each limit's keys in order (2 for sliding_log, else 1)
--
-- Phase 1 decides every limit without writing. Only if every non-shadow
-- limit admits (and not peeking) does phase 2 write each admitting limit's
-- new state, with a TTL covering its full reset: a denied request writes
-- nothing.
--
-- Returns integers: overall (1/0), now, then 9 per limit: allowed,
-- remaining, reset, retry, delay, consumed (1/0), extra (window index or
-- log seq, for a refund), view remaining, view reset.

-- algorithm returns the entry of an algorithm code, building it on first use.
local DEFINE = {token_bucket, leaky_bucket, fixed_window, sliding_log, sliding_window, gcra}
local built = {}
local function algorithm(code)
  local alg = built[code]
  if not alg then
    alg = DEFINE[code]()
    built[code] = alg
  end
  return alg
end

local mode = ARGV[1]
local now
-- extra_ttl_ms: with an explicit time (tests), Redis' own clock keeps
-- running while the test's clock may stand still, so keys are kept an hour
-- longer than their reset; an expired state and a kept one answer alike
-- once the test clock passes the reset.
local extra_ttl_ms = 0
if ARGV[2] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[2])
  extra_ttl_ms = 3600000
end

-- One limit (the common request): the same steps as the general path below
-- without its tables and second loop. With a single limit the request is
-- admitted exactly when that limit admits or is a shadow, and only an
-- admitting limit has anything to commit.
if #ARGV == 9 then
  local alg = DEFINE[tonumber(ARGV[3])]()
  local p = {
    max = tonumber(ARGV[4]),
    per = tonumber(ARGV[5]),
    shape = ARGV[6] == '1',
    max_delay = tonumber(ARGV[7]),
  }
  local s = alg.load(KEYS)
  local ns, d = alg.step(p, s, now, tonumber(ARGV[8]))
  local vrem, vreset = 0, 0
  if not d.allowed then
    return {ARGV[9] == '1' and 1 or 0, now, 0, d.remaining, d.reset, d.retry, d.delay, 0, 0, 0, 0}
  end
  if mode == 'p' then
    local _, v = alg.step(p, s, now, 2 * p.max)
    return {1, now, 1, v.remaining, v.reset, d.retry, d.delay, 0, 0, 0, 0}
  end
  if mode == 'v' then
    local _, v = alg.step(p, s, now, 2 * p.max) -- before the save: the log's view reads the set
    vrem, vreset = v.remaining, v.reset
  end
  alg.save(KEYS, ns, math.ceil(math.max(1, d.reset) / 1000) + 1 + extra_ttl_ms)
  return {1, now, 1, d.remaining, d.reset, d.retry, d.delay, 1, ns.seq or ns.t, vrem, vreset}
end

-- phase 1: decide
local limits = {}
local overall = true
local ki = 1
-- pending holds the state a limit admitted into, by key: a later limit of
-- the same request on the same key is decided against it, so their costs
-- add up (as in the memory store). Peek looks at each limit alone.
local pending = {}
for ai = 3, #ARGV, 7 do
  local alg = algorithm(tonumber(ARGV[ai]))
  local p = {
    max = tonumber(ARGV[ai + 1]),
    per = tonumber(ARGV[ai + 2]),
    shape = ARGV[ai + 3] == '1',
    max_delay = tonumber(ARGV[ai + 4]),
  }
  local keys = {KEYS[ki], KEYS[ki + 1]}
  ki = ki + alg.nkeys
  local s = pending[keys[1]] or alg.load(keys)
  local ns, d = alg.step(p, s, now, tonumber(ARGV[ai + 5]))
  if d.allowed and mode ~= 'p' then
    pending[keys[1]] = ns
  end
  if not d.allowed and ARGV[ai + 6] ~= '1' then
    overall = false
  end
  limits[#limits + 1] = {alg = alg, p = p, keys = keys, s = s, ns = ns, d = d}
end

-- view returns what an admitting limit shows when it consumes nothing: the
-- step's answer for a cost no state can admit (remaining and reset as now).
local function view(x)
  local _, v = x.alg.step(x.p, x.s, now, 2 * x.p.max)
  return v
end

-- phase 2: commit
local commit = overall and mode ~= 'p'
local out = {overall and 1 or 0, now}
for _, x in ipairs(limits) do
  local d = x.d
  local consumed, extra, vrem, vreset = 0, 0, 0, 0
  if d.allowed and commit then
    consumed = 1
    extra = x.ns.seq or x.ns.t
    if mode == 'v' then
      local v = view(x) -- before the save: the log's view reads the set
      vrem, vreset = v.remaining, v.reset
    end
    x.alg.save(x.keys, x.ns, math.ceil(math.max(1, d.reset) / 1000) + 1 + extra_ttl_ms)
  elseif d.allowed then
    local v = view(x)
    d.remaining, d.reset = v.remaining, v.reset
  end
  out[#out + 1] = d.allowed and 1 or 0
  out[#out + 1] = d.remaining
  out[#out + 1] = d.reset
  out[#out + 1] = d.retry
  out[#out + 1] = d.delay
  out[#out + 1] = consumed
  out[#out + 1] = extra
  out[#out + 1] = vrem
  out[#out + 1] = vreset
end
return out
