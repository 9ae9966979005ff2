-- luacheck: globals ARGV KEYS redis
-- extend(
--   keys=[gate],
--   args=[owner, lease_ms]
-- )
--
-- Mirrors gatehouse.gate.reference.evaluate_gate_extend; change both together.
--
-- Extend-for-pause: a holder rescheduled for a WB rate-limit pause keeps the
-- gate; the caller passes lease_ms = pause + margin. Same rule as heartbeat
-- (the lease becomes exactly lease_ms), kept apart so the pause path can
-- change alone.
--
-- Returns 1 when the owner holds the gate (lease now lease_ms), else 0 and
-- nothing changes.
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
