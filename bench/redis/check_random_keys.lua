-- wrk script: POST /v1/check for policy "bench" (or $POLICY) on one of 10,000
-- (or $KEYS) client keys, chosen at random per request (docs/BENCHMARKS.md,
-- "Redis store through `sluice serve`").
math.randomseed(os.time())
local policy = os.getenv("POLICY") or "bench"
local keys = tonumber(os.getenv("KEYS") or "10000")
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

request = function()
  local key = math.random(0, keys - 1)
  return wrk.format(nil, "/v1/check", nil, '{"policy":"' .. policy .. '","key":"k' .. key .. '"}')
end

