-- luacheck: globals ARGV KEYS redis
-- forget(
--   keys=[waiting, wanted],
--   args=[owner]
-- )
--
-- Mirrors gatehouse.gate.reference.evaluate_gate_forget; change both together.
--
-- Takes a waiter out of line: it gave up (max wait reached), was found not to
-- be waiting any more (finished, or woken for nothing), or an operator
-- cancelled it. A user job that is forgotten no longer wants the gate either,
-- so its `wanted` mark goes too (scheduled jobs would keep off for nothing).
--
-- Returns 1 if the owner was waiting, else 0.
--
-- <prefix>:wb:gate:{A}:waiting
--   A sorted set of parked owners; Redis deletes it when it empties.
-- <prefix>:wb:gate:{A}:wanted
--   The user job that wants the gate next (string, with its TTL).

local waiting = KEYS[1]
local wanted = KEYS[2]

local owner = ARGV[1]

if redis.call("get", wanted) == owner then
  redis.call("del", wanted)
end
return redis.call("zrem", waiting, owner)
