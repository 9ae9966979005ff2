-- luacheck: globals ARGV KEYS redis
-- forget(
--   keys=[waiting],
--   args=[owner]
-- )
--
-- Mirrors gatehouse.gate.reference.evaluate_gate_forget; change both together.
--
-- Takes a waiter out of line: it gave up (max wait reached) or was found
-- not to be waiting any more (finished, or woken for nothing).
--
-- Returns 1 if the owner was waiting, else 0.
--
-- wb:gate:{A}:waiting
--   A sorted set of parked owners; Redis deletes it when it empties.

local waiting = KEYS[1]

local owner = ARGV[1]

return redis.call("zrem", waiting, owner)
