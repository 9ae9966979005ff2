-- luacheck: globals ARGV KEYS redis
-- heartbeat(
--   keys=[gate],
--   args=[owner, lease_ms]
-- )
--
-- Mirrors gatehouse.gate.reference.evaluate_gate_heartbeat; change both together.
--
-- Returns 1 when the owner still holds the gate (its lease is now lease_ms),
-- 0 when it lost it (expired or taken over); then nothing changes.
--
-- <prefix>:wb:gate:{A}
--   A string: the holder "<queue>:<jobId>", PX = its lease.

local gate = KEYS[1]

local owner = ARGV[1]
local lease_ms = ARGV[2]

if redis.call("get", gate) ~= owner then
  return 0
end
redis.call("pexpire", gate, lease_ms)
return 1
