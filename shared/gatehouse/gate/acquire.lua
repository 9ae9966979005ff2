-- luacheck: globals ARGV KEYS redis
-- acquire(
--   keys=[gate, wanted, waiting],
--   args=[owner, tier, lease_ms, wanted_ttl_ms, waiting_ttl_ms, first_wait_ms]
-- )
--
-- Mirrors gatehouse.gate.reference.evaluate_gate_acquire; change both together.
--
-- Returns {decision, holder, lease_ms_left}:
--   {"acquired", owner, lease_ms}    the gate was free and is now the owner's
--   {"reentrant", owner, lease_ms}   the owner already held it; lease extended
--   {"busy", holder, PTTL}           another owner holds it; the owner is parked
--   {"deferred", nil, -2}            free, but a user job wants it and the owner is scheduled
--
-- <prefix>:wb:gate:{A}
--   A string: the holder "<queue>:<jobId>", PX = its lease.
--
-- <prefix>:wb:gate:{A}:wanted
--   A string: the user job that last found the gate busy, PX = wanted TTL.
--   While it exists a scheduled job does not take a free gate.
--
-- <prefix>:wb:gate:{A}:waiting
--   A sorted set of parked owners, score = tier_rank * 10^13 + first_wait_ms
--   (user = 0, scheduled = 1), so the lowest score is the best waiter. Its
--   TTL is set to waiting_ttl_ms at every park, so abandoned entries vanish.

local gate = KEYS[1]
local wanted = KEYS[2]
local waiting = KEYS[3]

local owner = ARGV[1]
local tier = ARGV[2]
local lease_ms = ARGV[3]
local wanted_ttl_ms = ARGV[4]
local waiting_ttl_ms = ARGV[5]
local first_wait_ms = ARGV[6]

local TIER_SPAN = 10000000000000 -- 10^13; scores stay exact doubles below 2^53

local rank
if tier == "user" then
  rank = 0
elseif tier == "scheduled" then
  rank = 1
else
  return redis.error_reply("ERR gate tier must be user or scheduled")
end

-- ZADD NX: a re-parked waiter keeps its first score (its place in line).
local function park()
  local score = rank * TIER_SPAN + tonumber(first_wait_ms)
  redis.call("zadd", waiting, "NX", string.format("%.0f", score), owner)
  redis.call("pexpire", waiting, waiting_ttl_ms)
end

local holder = redis.call("get", gate)
local decision

if holder == owner then
  redis.call("pexpire", gate, lease_ms)
  decision = "reentrant"
elseif not holder then
  if tier == "scheduled" and redis.call("exists", wanted) == 1 then
    park()
    return {"deferred", false, -2}
  end
  redis.call("set", gate, owner, "PX", lease_ms)
  decision = "acquired"
else
  park()
  if tier == "user" then
    redis.call("set", wanted, owner, "PX", wanted_ttl_ms)
  end
  return {"busy", holder, redis.call("pttl", gate)}
end

-- The owner runs now: it no longer waits (Redis drops the set if it empties).
redis.call("zrem", waiting, owner)
-- A running user job needs no marker; it stays only while another user job waits,
-- and then names that job (the next user in line), keeping its TTL.
if tier == "user" then
  local next_user = redis.call("zrangebyscore", waiting, "-inf", "(" .. string.format("%.0f", TIER_SPAN), "LIMIT", 0, 1)
  if next_user[1] == nil then
    redis.call("del", wanted)
  elseif redis.call("exists", wanted) == 1 then
    redis.call("set", wanted, next_user[1], "KEEPTTL")
  end
end
return {decision, owner, tonumber(lease_ms)}
