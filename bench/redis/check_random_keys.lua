-- wrk script: POST /v1/check for policy "bench" on one of 10,000 client keys,
-- chosen at random per request (docs/BENCHMARKS.md, "through sluice serve").
math.randomseed(os.time())
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

request = function()
  local key = math.random(0, 9999)
  return wrk.format(nil, "/v1/check", nil, '{"policy":"bench","key":"k' .. key .. '"}')
end

