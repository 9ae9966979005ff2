-- luacheck: globals ARGV KEYS redis
-- release(
--   keys=[gate, waiting],
--   args=[owner]
-- )
--
-- Mirrors gatehouse.gate.reference.evaluate_gate_release; change both together.
--
-- Compare-and-delete: only the holder frees the gate, so a job whose lease
-- ran out cannot free its successor's.
--
-- Returns {1, best_waiter} when the owner held the gate and it is now free;
-- best_waiter is the lowest-score member of waiting (left in place: it is
-- woken, and takes its entry out when it acquires), nil if none.
-- Returns {0, nil} when the owner did not hold it; then nothing changes.
--
-- <prefix>:wb:gate:{A}
--   A string: the holder "<queue>:<jobId>", PX = its lease.
--
-- <prefix>:wb:gate:{A}:waiting
--   A sorted set of parked owners, lowest score = best (user first, then oldest).

local gate = KEYS[1]
local waiting = KEYS[2]

local owner = ARGV[1]

if redis.call("get", gate) ~= owner then
  return {0, false}
end
redis.call("del", gate)
local best = redis.call("zrange", waiting, 0, 0)
return {1, best[1] or false}
