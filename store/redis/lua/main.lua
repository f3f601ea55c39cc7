-- main.lua: evaluate every limit of one request atomically, or (mode 'b')
-- several requests in turn, each all-or-nothing over its own limits.
--
-- ARGV[1]  mode: 'e' evaluate, 'v' evaluate and also report each admitting
--          limit's unchanged view (Cluster, several slots), 'p' peek,
--          'b' batch: evaluate several requests in order, each as 'e';
--          'B' a batch whose keys are all distinct, so that every key's
--          value is read up front with one MGET (no request can have
--          changed another's key before it is decided); or an algorithm
--          code: the 5-argument form of a lone request core.lua decides
-- ARGV[2]  now in Unix µs, or '' to read Redis TIME (production; only tests
--          pass a time); in mode 'b' every request is decided at this one now
-- then, in modes 'e', 'v', 'p': 7 ARGV per limit: algorithm code, max
--          (capacity, limit or burst), per (interval or window, µs; the
--          lease TTL for concurrency), shape (1/0; the lease id for
--          concurrency), max_delay (µs), cost, shadow (1/0);
--          in mode 'b': the number of distinct policies S, then 5 ARGV per
--          policy (algorithm code, max, per, shape, max_delay as above),
--          then per request: its number of limits n, then 2 ARGV per limit:
--          its policy's index i among the S (1-based; -i for a shadow
--          limit) and its cost; or, for a request with one limit of cost 1
--          whose algorithm is not sliding_log, the one ARGV 'r' followed by
--          that index (r1, r-1)
--          max, per, max_delay and cost are in hexadecimal (tonumber(x, 16)
--          is strtoul, far cheaper than the strtod a decimal takes); the
--          time, the counts and the indices are decimal.
-- KEYS     each limit's keys in order (2 for sliding_log, else 1); in mode
--          'b' every request's keys, request after request
--
-- For each request, phase 1 decides every limit without writing. Only if
-- every non-shadow limit admits (and not peeking) does phase 2 write each
-- admitting limit's new state, with a TTL covering its full reset: a denied
-- request writes nothing. In mode 'b' a request is decided against the state
-- the requests before it in the batch left.
--
-- Returns, in modes 'e', 'v', 'p', integers: overall (1/0), now, then 10 per
-- limit: allowed, remaining, reset, retry, delay, next, consumed (1/0), extra
-- (window index or log seq, for a refund), view remaining, view reset;
-- except that core.lua decides a lone single-limit request of mode 'e'
-- (not a sliding_log) with a shorter reply of its own.
-- In mode 'b': now, then per request its overall (1/0) followed by the first
-- 6 of those per limit (allowed, remaining, reset, retry, delay, next: a batch is
-- never a Cluster call, so the rest are of no use); or, for a request with
-- one limit, decide1's short answer when there is one (core.lua: one
-- negative integer, unlike an overall), and for a request of two limits
-- that decide2 decides and both admit with nothing held back, their two
-- short answers in place of the overall and the 12 values; or, if
-- deciding that request raised an error, one error reply in their place
-- (what that request wrote before the error stays, as it would in mode 'e';
-- the requests before and after it are decided as usual). Mode 'b' makes
-- its writes at the end, once per key (wb below); if Redis refuses them,
-- the call's reply is that error alone.

-- algorithm returns the entry of an algorithm code, building it on first use.
local DEFINE = {token_bucket, leaky_bucket, fixed_window, sliding_log, sliding_window, gcra, concurrency, scg_token_bucket}
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
local now, extra_ttl_ms = clock(ARGV[2])

-- wb is mode 'b''s write-back table (core.lua's load1, save1 and flush):
-- a key several requests of the batch decide on (a global limit's, say) is
-- read once and written once, with the value and TTL the last of them left.
-- Its fields: v, each key's value by key (false for none); ttl, each saved
-- key's TTL in ms; order, the saved keys in the order of their first save.
local wb = nil
if mode == 'b' then
  wb = {v = {}, ttl = {}, order = {}}
end

-- step mirrors kit.StepAt: the algorithm's step, then
-- d.next, with nothing left (remaining 0) the retry of a request of cost 1
-- against the state after the step: how long until one more unit is
-- available. The probe is denied, so it changes nothing.
local function step(alg, p, s, cost)
  local ns, d = alg.step(p, s, now, cost)
  if alg.leases then -- concurrency.lua sets next itself
    return ns, d
  end
  d.next = 0
  if d.remaining <= 0 then
    if not d.allowed and cost == 1 then
      d.next = d.retry
    else
      local _, pd = alg.step(p, ns, now, 1)
      d.next = pd.retry
    end
  end
  return ns, d
end

-- view returns what an admitting limit shows when it consumes nothing: the
-- step's answer for a cost no state can admit (remaining, reset and next as
-- now).
local function view(alg, p, s)
  local _, v = step(alg, p, s, 2 * p.max)
  return v
end

-- ttl_ms is the TTL of a state whose decision is d.
local function ttl_ms(d)
  return ttl1(d.reset, extra_ttl_ms)
end

-- policies holds mode 'b''s policies by index: {code, p}; shadows the
-- entries of shadow limits under them ({code, p, shadow = true}), made
-- when a request needs one. by_ref finds an entry by its reference string
-- (main.lua's header: '2', '-2' for a shadow limit), by_short by the
-- one-ARGV form (r2, r-2; false for any other string): both are filled
-- as requests use them, since a batch's first requests name all the
-- references its others repeat, and formatting every reference up front
-- costs more than its whole use. An entry's alg is its algorithm, once a
-- request needs it.
local policies, shadows = {}, {}
local by_ref, by_short = {}, {}

-- entry returns the entry of policy i, or of a shadow limit under it when
-- shadow is true.
local function entry(i, shadow)
  if not shadow then
    return policies[i]
  end
  local x = shadows[i]
  if not x then
    local p = policies[i]
    x = {code = p.code, p = p.p, shadow = true}
    shadows[i] = x
  end
  return x
end

-- ref returns the entry of the reference string s.
local function ref(s)
  local x = by_ref[s]
  if x == nil then
    local i = tonumber(s)
    x = entry(math.abs(i), i < 0)
    by_ref[s] = x
  end
  return x
end

-- short_ref returns the entry of the one-ARGV form a (not a sliding_log's,
-- which has none), or false when a is not one.
local function short_ref(a)
  local x = by_short[a]
  if x == nil then
    x = false
    if string.byte(a, 1) == 114 then -- 'r'
      if string.byte(a, 2) == 45 then -- 'r-'
        x = entry(tonumber(string.sub(a, 3)), true)
      else
        x = entry(tonumber(string.sub(a, 2)), false)
      end
      if x.code == '4' then
        x = false
      end
    end
    by_short[a] = x
  end
  return x
end

-- limit_at returns the algorithm, policy parameters, cost and shadow flag
-- of the limit whose arguments start at ARGV[a]: 7 arguments in modes 'e',
-- 'v', 'p', 2 in mode 'b'.
local function limit_at(a)
  if mode == 'b' or mode == 'B' then
    local x = ref(ARGV[a])
    local alg = x.alg
    if not alg then
      alg = algorithm(tonumber(x.code))
      x.alg = alg
    end
    local cost = ARGV[a + 1]
    return alg, x.p, cost == '1' and 1 or tonumber(cost, 16), x.shadow == true
  end
  local p = {
    max = tonumber(ARGV[a + 1], 16),
    per = tonumber(ARGV[a + 2], 16),
    shape = ARGV[a + 3] == '1',
    max_delay = tonumber(ARGV[a + 4], 16),
    lease = ARGV[a + 3],
  }
  return algorithm(tonumber(ARGV[a])), p, tonumber(ARGV[a + 5], 16), ARGV[a + 6] == '1'
end

-- stride is the number of ARGV per limit.
local stride = 7
if mode == 'b' or mode == 'B' then
  stride = 2
end

-- limit2 is one of decide2's limits, which stepped from (set, sn, sprev,
-- st) to (an, aprev, at), admitting or not: it saves the new state when
-- the request commits and returns the limit's allowed (1/0), remaining,
-- reset, retry, delay and next, as decide reports them.
local function limit2(code, p, cost, key, set, sn, sprev, st, allowed, an, aprev, at, remaining, reset, retry, delay, commit)
  if allowed and commit then
    save1(code, key, an, aprev, at, ttl1(reset, extra_ttl_ms), wb)
    return 1, remaining, reset, retry, delay,
      next1(code, p.max, p.per, p.shape, p.max_delay, cost, now, true, set, sn, sprev, st, an, aprev, at, remaining, retry)
  elseif allowed then
    -- view: the step for a cost no state admits, from the state as it is
    local _, _, _, _, vrem, vreset, vretry = step1(code, p.max, p.per, p.shape, p.max_delay, set, sn, sprev, st, now, 2 * p.max)
    return 1, vrem, vreset, retry, delay,
      next1(code, p.max, p.per, p.shape, p.max_delay, 2 * p.max, now, false, set, sn, sprev, st, 0, 0, 0, vrem, vretry)
  end
  return 0, remaining, reset, retry, delay,
    next1(code, p.max, p.per, p.shape, p.max_delay, cost, now, false, set, sn, sprev, st, 0, 0, 0, remaining, retry)
end

-- put1 sets out[o+1..o+w] to a limit's values as decide reports them;
-- consumed and extra (1 and the new state's t for an admitting limit of a
-- committed request, else 0 and 0) only when w is 10.
local function put1(out, o, w, allowed, remaining, reset, retry, delay, nxt, consumed, extra)
  out[o + 1] = allowed
  out[o + 2] = remaining
  out[o + 3] = reset
  out[o + 4] = retry
  out[o + 5] = delay
  out[o + 6] = nxt
  if w == 10 then
    out[o + 7] = consumed
    out[o + 8] = extra
    out[o + 9] = 0
    out[o + 10] = 0
  end
end

-- decide2 is decide in mode 'e' (or a batch's) for a request of two limits
-- that step1 decides, on two different keys: the same steps and answers
-- without decide's tables, the common request of a gateway (a per-client
-- limit and a global one). It returns the request's overall (1/0); or, in
-- a batch (w 6), for a request admitted by both limits with nothing held
-- back, nil, having put the two limits' short answers (short1) at out[o]
-- and out[o+1], o being #out, the overall's place.
local function decide2(alg1, p1, cost1, shadow1, key1, alg2, p2, cost2, shadow2, key2, w, out)
  local c1, c2 = alg1.code, alg2.code
  local set1, sn1, sprev1, st1 = load1(c1, key1, nil, wb)
  local ok1, an1, aprev1, at1, rem1, reset1, retry1, delay1 =
    step1(c1, p1.max, p1.per, p1.shape, p1.max_delay, set1, sn1, sprev1, st1, now, cost1)
  local set2, sn2, sprev2, st2 = load1(c2, key2, nil, wb)
  local ok2, an2, aprev2, at2, rem2, reset2, retry2, delay2 =
    step1(c2, p2.max, p2.per, p2.shape, p2.max_delay, set2, sn2, sprev2, st2, now, cost2)
  local commit = (ok1 or shadow1) and (ok2 or shadow2)
  local a1, r1, e1, t1, d1, n1 = limit2(c1, p1, cost1, key1, set1, sn1, sprev1, st1, ok1, an1, aprev1, at1, rem1, reset1, retry1, delay1, commit)
  local a2, r2, e2, t2, d2, n2 = limit2(c2, p2, cost2, key2, set2, sn2, sprev2, st2, ok2, an2, aprev2, at2, rem2, reset2, retry2, delay2, commit)
  local o = #out
  if w == 6 and commit then
    local s1 = a1 == 1 and short1(r1, e1, t1, d1, n1)
    local s2 = s1 and a2 == 1 and short1(r2, e2, t2, d2, n2)
    if s2 then
      out[o], out[o + 1] = s1, s2
      return nil
    end
  end
  local x1, x2 = 0, 0
  if commit then
    x1, x2 = a1, a2
  end
  put1(out, o, w, a1, r1, e1, t1, d1, n1, x1, x1 == 1 and at1 or 0)
  put1(out, o + w, w, a2, r2, e2, t2, d2, n2, x2, x2 == 1 and at2 or 0)
  return commit and 1 or 0
end

-- decide evaluates one request in mode m ('e', 'v' or 'p'): its n limits'
-- arguments start at ARGV[ai], their keys at KEYS[ki]. It appends the w
-- values (10, or 6 for a batch) of each limit to out and returns the
-- request's overall (1/0) and the index of the key after the request's.
local function decide(m, ai, ki, n, w, out)
  local o = #out
  -- One limit (the common request): the same steps as the general path
  -- below without its tables and second loop. With a single limit the
  -- request is admitted exactly when that limit admits or is a shadow, and
  -- only an admitting limit has anything to commit.
  if n == 1 then
    local alg, p, cost, shadow = limit_at(ai)
    local keys = KEYS
    if ki > 1 then
      keys = {KEYS[ki], KEYS[ki + 1]}
    end
    local s = alg.load(keys, wb)
    local ns, d = step(alg, p, s, cost)
    local allowed, remaining, reset, nxt = 0, d.remaining, d.reset, d.next
    local consumed, extra, vrem, vreset = 0, 0, 0, 0
    local overall = 1
    if not d.allowed then
      if not shadow then
        overall = 0
      end
    elseif m == 'p' then
      allowed = 1
      local v = view(alg, p, s)
      remaining, reset, nxt = v.remaining, v.reset, v.next
    else
      allowed = 1
      if m == 'v' then
        local v = view(alg, p, s) -- before the save: the log's view reads the set
        vrem, vreset = v.remaining, v.reset
      end
      alg.save(keys, ns, ttl_ms(d), wb)
      consumed, extra = 1, ns.seq or ns.t
    end
    out[o + 1] = allowed
    out[o + 2] = remaining
    out[o + 3] = reset
    out[o + 4] = d.retry
    out[o + 5] = d.delay
    out[o + 6] = nxt
    if w == 10 then
      out[o + 7] = consumed
      out[o + 8] = extra
      out[o + 9] = vrem
      out[o + 10] = vreset
    end
    return overall, ki + alg.nkeys
  end

  if n == 2 and m == 'e' then
    local alg1, p1, cost1, shadow1 = limit_at(ai)
    local alg2, p2, cost2, shadow2 = limit_at(ai + stride)
    if alg1.code and alg2.code and KEYS[ki] ~= KEYS[ki + 1] then
      return decide2(alg1, p1, cost1, shadow1, KEYS[ki], alg2, p2, cost2, shadow2, KEYS[ki + 1], w, out), ki + 2
    end
  end

  -- phase 1: decide
  local limits = {}
  local overall = true
  -- pending holds the state a limit admitted into, by key: a later limit of
  -- the same request on the same key is decided against it, so their costs
  -- add up (as in the memory store). Peek looks at each limit alone.
  local pending = {}
  for li = 0, n - 1 do
    local alg, p, cost, shadow = limit_at(ai + stride * li)
    local keys = {KEYS[ki], KEYS[ki + 1]}
    ki = ki + alg.nkeys
    local s = pending[keys[1]] or alg.load(keys, wb)
    local ns, d = step(alg, p, s, cost)
    if d.allowed and m ~= 'p' then
      pending[keys[1]] = ns
    end
    if not d.allowed and not shadow then
      overall = false
    end
    limits[#limits + 1] = {alg = alg, p = p, keys = keys, s = s, ns = ns, d = d}
  end

  -- phase 2: commit
  local commit = overall and m ~= 'p'
  for _, x in ipairs(limits) do
    local d = x.d
    local consumed, extra, vrem, vreset = 0, 0, 0, 0
    if d.allowed and commit then
      consumed = 1
      extra = x.ns.seq or x.ns.t
      if m == 'v' then
        local v = view(x.alg, x.p, x.s) -- before the save: the log's view reads the set
        vrem, vreset = v.remaining, v.reset
      end
      x.alg.save(x.keys, x.ns, ttl_ms(d), wb)
    elseif d.allowed then
      local v = view(x.alg, x.p, x.s)
      d.remaining, d.reset, d.next = v.remaining, v.reset, v.next
    end
    out[o + 1] = d.allowed and 1 or 0
    out[o + 2] = d.remaining
    out[o + 3] = d.reset
    out[o + 4] = d.retry
    out[o + 5] = d.delay
    out[o + 6] = d.next
    if w == 10 then
      out[o + 7] = consumed
      out[o + 8] = extra
      out[o + 9] = vrem
      out[o + 10] = vreset
    end
    o = o + w
  end
  return overall and 1 or 0, ki
end

if mode ~= 'b' and mode ~= 'B' then
  local out = {0, now}
  out[1] = decide(mode, 3, 1, (#ARGV - 2) / 7, 10, out)
  return out
end

-- batch: the policies, then one request after another; an error in one
-- request is its own. A request with one limit (not a sliding_log) is
-- decided by core.lua's decide1 without the tables decide builds.
local ai = 4 + 5 * tonumber(ARGV[3])
for a = 4, ai - 1, 5 do
  local x = {
    code = ARGV[a],
    p = {
      max = tonumber(ARGV[a + 1], 16),
      per = tonumber(ARGV[a + 2], 16),
      shape = ARGV[a + 3] == '1',
      max_delay = tonumber(ARGV[a + 4], 16),
    },
  }
  policies[#policies + 1] = x
end

-- nkeys returns the number of keys of a limit whose policy is x.
local function nkeys(x)
  if x.code == '4' then
    return 2
  end
  return 1
end

-- failed puts the error err of the request whose values start at out[at]
-- there, dropping whatever the request appended after it.
local function failed(out, at, err)
  for i = #out, at + 1, -1 do
    out[i] = nil
  end
  if type(err) == 'table' then
    err = err.err
  end
  out[at] = {err = tostring(err)}
end

-- values: in mode 'B' every key's value (false for none), by key index.
-- In mode 'b' the same MGET fills the write-back table instead, each key
-- once (a sliding_log's keys too, which its functions never read there),
-- when there are at most 256 keys to unpack onto the Lua stack (batch.go's
-- distinctMax, which bounds mode 'B' alike).
local values = {}
if mode == 'B' then
  values = redis.call('MGET', unpack(KEYS))
elseif wb and #KEYS <= 256 then
  local v = wb.v
  for i, x in ipairs(redis.call('MGET', unpack(KEYS))) do
    local k = KEYS[i]
    if v[k] == nil then
      v[k] = x
    end
  end
end
local out = {now}
local o = 1 -- #out
local ki = 1
local nargv = #ARGV
while ai <= nargv do
  local a, cost, width = ARGV[ai], 1, 1 -- width: the request's ARGV
  local x = short_ref(a) -- the one-ARGV form, r<i>
  if not x and a == '1' then
    x, width = ref(ARGV[ai + 1]), 3
    cost = ARGV[ai + 2] == '1' and 1 or tonumber(ARGV[ai + 2], 16)
  end
  if x and x.code ~= '4' then
    local p = x.p
    local ok, allowed, remaining, reset, retry, delay, nxt, short =
      pcall(decide1, x.code, p.max, p.per, p.shape, p.max_delay, cost, KEYS[ki], now, extra_ttl_ms, values[ki], wb)
    if not ok then
      o = o + 1
      failed(out, o, allowed)
    elseif short then
      o = o + 1
      out[o] = short
    else
      out[o + 1] = (allowed or x.shadow) and 1 or 0
      out[o + 2] = allowed and 1 or 0
      out[o + 3] = remaining
      out[o + 4] = reset
      out[o + 5] = retry
      out[o + 6] = delay
      out[o + 7] = nxt
      o = o + 7
    end
    ki = ki + 1
    ai = ai + width
  else
    local n = tonumber(ARGV[ai])
    local at = o + 1
    out[at] = 0
    local ok, res, next_ki = pcall(decide, 'e', ai + 1, ki, n, 6, out)
    if ok then
      if res ~= nil then -- nil: decide2 put two short answers
        out[at] = res
      end
      ki = next_ki
    else
      failed(out, at, res)
      for li = 0, n - 1 do
        ki = ki + nkeys(policies[math.abs(tonumber(ARGV[ai + 1 + 2 * li]))])
      end
    end
    o = #out
    ai = ai + 1 + 2 * n
  end
end
if wb then
  -- The batch's writes, once per key. Refused, they fail the whole call:
  -- its answers would count what was never stored.
  local err = flush(wb)
  if err then
    return err
  end
end
return out
