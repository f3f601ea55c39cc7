-- refund.lua: undo what main.lua committed for limits whose request another
-- Cluster slot denied (commit-then-refund; see the package documentation).
--
-- ARGV[1]  now in Unix µs, or '' to read Redis TIME
-- then 5 ARGV per limit: algorithm code, max, per (µs), cost, extra (the
--          window index or log seq main.lua returned; the lease id for
--          concurrency)
-- KEYS     each limit's keys in order (2 for sliding_log, else 1)
--
-- Each refund only ever gives budget back that this request took, and
-- never more than the algorithm's maximum, so it cannot over-admit.

local DEFINE = {token_bucket, leaky_bucket, fixed_window, sliding_log, sliding_window, gcra, concurrency, scg_token_bucket}

local now = clock(ARGV[1])

local ki = 1
for ai = 2, #ARGV, 5 do
  local alg = DEFINE[tonumber(ARGV[ai])]()
  local p = {max = tonumber(ARGV[ai + 1]), per = tonumber(ARGV[ai + 2])}
  local extra = ARGV[ai + 4] -- a lease id for concurrency ('7')
  if ARGV[ai] ~= '7' then
    extra = tonumber(extra)
  end
  alg.refund(p, {KEYS[ki], KEYS[ki + 1]}, now, tonumber(ARGV[ai + 3]), extra)
  ki = ki + alg.nkeys
end
return 1
