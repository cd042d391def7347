-- fence_raise.lua: round 2 of a quorum lock's fencing (quorum.rs): on one node, raise the fence
-- counter of the lock's slot to at least F, only while the caller still holds the lock there.
--
-- KEYS[1]  lock key (see acquire.lua)
-- ARGV[1]  owner token of the caller's hold on this node
-- ARGV[2]  the fence counter of the lock's slot (see next_fence in common.lua)
-- ARGV[3]  F: the quorum fence (the largest fence of round 1, plus one), a decimal integer
--
-- Returns  1       the counter is at least F now (raised, or it was already)
--          0       nobody holds the lock (the caller's lease on this node expired): unchanged
--          -1      another owner holds it (or data dlock did not write): unchanged
--          error DLOCKFOREIGN  the fence counter holds data dlock did not write
--
-- Why owner-checked: the raise must happen inside the caller's hold on this node, so that on
-- this node it is ordered by the lock before every later holder's INCR (next_fence), which then
-- issues more than F. The counter never goes down, so the script can be retried safely.

local held = redis.pcall('GET', KEYS[1])
if not held then
  return 0
end
if type(held) ~= 'string' or string.sub(held, 1, 32) ~= ARGV[1] then
  return -1
end
local current = redis.pcall('GET', ARGV[2])
if current then
  local value = type(current) == 'string' and string.match(current, '^%d+$') and tonumber(current)
  if not value then
    return redis.error_reply('DLOCKFOREIGN ' .. ARGV[2]
      .. ' holds data dlock did not write (the fence counter)')
  end
  if value >= tonumber(ARGV[3]) then
    return 1
  end
end
redis.call('SET', ARGV[2], ARGV[3])
return 1
