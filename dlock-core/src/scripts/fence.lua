-- fence.lua: the fencing token of the caller's current hold of a mutex, issued on demand (once
-- per hold: an uncontended acquire takes the lock with a plain SET and no fence, so that holders
-- that never ask for one pay nothing for it).
--
-- KEYS[1]  lock key (see acquire.lua)
-- ARGV[1]  owner token of the caller
-- ARGV[2]  the fence counter of the lock's slot (see next_fence in common.lua, which
--          scripts/mod.rs prepends)
--
-- Returns  fence   the hold's fencing token: the one already issued to it (a retry, or a grant
--                  or waiting acquire that carried it), else a new one (next_fence), kept with
--                  the hold (the last field of the lock value's meta, see scripts/wire.rs)
--          0       nobody holds the lock (the caller's lease expired): no fence is issued
--          -1      another owner holds it (or data dlock did not write): no fence is issued, so
--                  a stale holder can never obtain one newer than its successor's
--          error DLOCKFOREIGN  the fence counter holds data dlock did not write
--
-- Why fences stay in holding order although issued late: a fence is only issued to the current
-- holder, from one counter that only grows, so any fence of an earlier holder was issued before
-- the next holder took the lock, and every fence of the next holder after.
-- Retry safety: the fence is kept with the hold, so a retry returns the same fence.

local lock = KEYS[1]
local held = redis.pcall('GET', lock)
if not held then
  return 0
end
if type(held) ~= 'string' then
  return -1
end
if deadline_of(held) and not holds(held, clock_ms()) then
  -- Kept past its deadline for the queue: nobody holds it.
  return 0
end
if string.sub(held, 1, 32) ~= ARGV[1] then
  return -1
end
local issued = string.match(held, '^[^ ]* [^\31]*\31[^\31]*\31[^\31]*\31(%d+)$')
if issued then
  return tonumber(issued)
end
local fence, refused = next_fence(ARGV[2])
if not fence then
  return refused
end
redis.call('SET', lock, held .. '\31' .. fence, 'KEEPTTL')
return tonumber(fence)
