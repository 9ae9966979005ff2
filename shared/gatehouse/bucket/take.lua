-- luacheck: globals ARGV KEYS redis
-- take(
--   keys=[bucket],
--   args=[now_ms, burst, limit, period_ms, cost]
-- )
--
-- Mirrors gatehouse.bucket.reference.evaluate_bucket_take; change both
-- together, operation for operation: both sides compute in doubles and must
-- produce the same bits.
--
-- Returns wait_ms: 0 when cost tokens were taken; otherwise nothing is taken
-- or written and wait_ms is how long until cost tokens will be there.
--
-- <prefix>:wb:bucket:{A}:<bucket>
--   A hash: tokens = tokens left after the last take ("%.6f"), ts = ms of
--   the last take. A missing key is a full bucket. At most burst tokens;
--   refills limit tokens per period_ms. PEXPIRE = time until full again
--   plus IDLE_GRACE_MS, so idle buckets vanish (and vanishing changes nothing).

local key = KEYS[1]

local now = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local period_ms = tonumber(ARGV[4])
local cost = tonumber(ARGV[5])

local IDLE_GRACE_MS = 1000

-- The stored precision; rounding before comparing keeps decision and state in step.
local function quantize(x)
  return tonumber(string.format("%.6f", x))
end

local rate = limit / period_ms

local stored = redis.call("hmget", key, "tokens", "ts")
local tokens, ts
if stored[1] and stored[2] then
  tokens = tonumber(stored[1])
  ts = tonumber(stored[2])
else
  tokens = burst
  ts = now
end

-- Clocks of several workers disagree: an earlier now refills nothing, and ts never moves back.
local elapsed = now - ts
if elapsed < 0 then
  elapsed = 0
end
local refill = quantize(math.min(burst, tokens + elapsed * rate))

if refill < cost then
  return math.ceil((cost - refill) / rate)
end

local left = quantize(refill - cost)
local ttl = math.ceil((burst - left) / rate) + IDLE_GRACE_MS
redis.call("hset", key, "tokens", string.format("%.6f", left), "ts", string.format("%.0f", math.max(ts, now)))
redis.call("pexpire", key, string.format("%.0f", ttl))
return 0
