-- release.lua: release a mutex the caller owns and hand it to the oldest live waiter, if any.
-- (Runs with common.lua prepended.)
--
-- KEYS[1]  lock key (see acquire.lua, also for the derived :fence and :queue keys)
-- ARGV[1]  owner token of the caller ("" with ARGV[3] = "force")
-- ARGV[2]  optional: the caller's own queue entry to drop first, or "" (an acquire abandoned
--          mid-wait releases this way, whether or not the lock was handed to it meanwhile)
-- ARGV[3]  optional: "force" to release whoever holds the lock (an operator's force_unlock)
--
-- Returns  1   released; nobody waits
--          {2, grant}  released and handed to the next waiter; its client was told on its wake
--              channel, and grant = "<token> <fence> <now_ms> <lease_ms> 1" is the same message, so
--              that a releaser in the waiter's own process can wake it without the pub/sub trip
--          0   not held by anyone: the caller's lease had expired
--          -1  held by another owner: the caller's lease expired and someone else took the lock
--              (also when the key holds data dlock did not write, of any type: left untouched)
--          error DLOCKFOREIGN  "force" on a key that holds a value dlock did not write, or a lock
--              of a newer format version (left untouched)
--
-- Fast path (nobody waits, flag "-"): GET, DEL — two calls, like a plain compare-and-delete.
-- Hand-off: see hand_off in common.lua.
-- Retry safety: owner-checked (unless forced) by the whole 32-digit token, as in acquire.lua and
-- extend.lua, so an empty or partial token matches nothing; running it twice never releases a
-- lock the caller does not own.

local lock = KEYS[1]
if ARGV[2] and ARGV[2] ~= '' then
  redis.call('LREM', lock .. ':queue', 1, ARGV[2])
end
local held = read(lock)
if not held then
  return 0
end
local refused = unusable(lock, held)
if refused then
  if ARGV[3] == 'force' then
    return refused
  end
  return -1
end
if ARGV[3] ~= 'force' and string.sub(held, 1, 32) ~= ARGV[1] then
  return -1
end
if string.byte(held, 33) ~= 119 then -- 'w': somebody waits
  redis.call('DEL', lock)
  return 1
end
local who, grant = hand_off(lock, nil)
if who == 'grant' then
  return {2, grant}
end
return 1
