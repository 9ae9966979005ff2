-- luacheck: globals ARGV KEYS redis
-- yield(
--   keys=[gate, wanted, waiting],
--   args=[owner]
-- )
--
-- Mirrors gatehouse.gate.reference.evaluate_gate_yield; change both together.
--
-- Yield-if-wanted: a scheduled holder at a WB rate-limit pause hands the gate
-- over only when a user job wants it. Running scheduled work is never
-- interrupted; this is its only hand-over point. wanted stays, so that no
-- scheduled job takes the freed gate before the user job.
--
-- Returns {1, best_waiter} when the owner held the gate, wanted existed and
-- the gate is now free (best_waiter as in release, nil if none); else {0, nil}
-- and nothing changes.
--
-- <prefix>:wb:gate:{A}
--   A string: the holder "<queue>:<jobId>", PX = its lease.
--
-- <prefix>:wb:gate:{A}:wanted
--   A string: the user job that last found the gate busy.
--
-- <prefix>:wb:gate:{A}:waiting
--   A sorted set of parked owners, lowest score = best (user first, then oldest).

local gate = KEYS[1]
local wanted = KEYS[2]
local waiting = KEYS[3]

local owner = ARGV[1]

if redis.call("get", gate) ~= owner or redis.call("exists", wanted) == 0 then
  return {0, false}
end
redis.call("del", gate)
local best = redis.call("zrange", waiting, 0, 0)
return {1, best[1] or false}
