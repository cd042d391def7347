-- shared_release.lua: gives back the permits of one holder of a shared lock (semaphore.rs) and
-- admits the waiters at the head of the queue that now fit. (Runs with lock_value.lua,
-- common.lua, shared.lua and admission.lua prepended; the layout of the keys is in shared.lua.)
--
-- KEYS[1]  the shared lock's hash K
-- ARGV[1]  the holder's token (32 hex digits)
-- ARGV[2]  the fence counter of K's slot (for the fences of the waiters admitted)
-- ARGV[3]  optional: the caller's own queue entry to drop first (an acquire abandoned mid-wait
--          releases this way, whether or not it was admitted meanwhile)
--
-- Returns  1                   the caller held its permits and gave them back
--          0                   the caller held nothing: its lease had ended (its permits went
--                              back then), or a forced unlock removed it
--          error DLOCKFOREIGN  K holds data dlock did not write or a newer format (untouched),
--                              or the fence counter does (the caller's permits are given back;
--                              the queue waits for the next call)
--
-- Owner-checked: only the caller's own hold is removed. Retry safety: a second run finds
-- nothing of the caller's and answers 0, changing nothing of anyone else's.

local key = KEYS[1]
local now, refused = begin(key)
if not now then
  return refused
end
if ARGV[3] then
  redis.call('LREM', key .. ':queue', 1, ARGV[3])
  forget_join(key, ARGV[1])
end
local held = 0
if dismiss(key, ARGV[1]) then
  held = 1
end
local _, failed = admit_from_head(key, ARGV[2], now, nil)
set_expiry(key, now)
if failed then
  return failed
end
return held
