-- wrk script: POST /v1/check on one of 10,000 client keys chosen at random,
-- 9 requests in 10 for policy "denied" (1 per hour: denied after a key's
-- first), the 10th for policy "bench" (nothing denied): a 90%-denied load
-- for the deny cache (docs/BENCHMARKS.md, "Redis store through `sluice serve`").
math.randomseed(os.time())
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local n = 0

request = function()
  local key = math.random(0, 9999)
  n = n + 1
  local policy = "denied"
  if n % 10 == 0 then policy = "bench" end
  return wrk.format(nil, "/v1/check", nil, '{"policy":"' .. policy .. '","key":"k' .. key .. '"}')
end
