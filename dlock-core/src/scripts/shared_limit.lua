-- shared_limit.lua: sets the limit of a shared lock (a semaphore's permits, semaphore.rs
-- `set_limit`) and admits the waiters at the head of the queue that fit under it. (Runs with
-- common.lua and shared.lua prepended; the layout of the keys is in shared.lua.)
--
-- KEYS[1]  the shared lock's hash K
-- ARGV[1]  the new limit, >= 1
-- ARGV[2]  the fence counter of K's slot (for the fences of the waiters admitted)
--
-- Returns  the limit stored before (0: none; nobody held, so the next acquire would have
--          stored its own)
--          error DLOCKFOREIGN  K or the counter holds data dlock did not write, or a lock of a
--                              newer format; K is untouched (with the counter: the limit is
--                              set, the queue waits for the next call)
--
-- A lower limit takes nothing from the holders: new requests are admitted once the weight held
-- fits under it. A higher one admits at once the requests at the head that now fit.
-- Retry safety: setting the same limit twice leaves the same state as once.

local key = KEYS[1]
local now, refused = begin(key)
if not now then
  return refused
end
local before = tonumber(redis.call('HGET', key, 'limit') or '0')
redis.call('HSET', key, 'v', '1', 'limit', ARGV[1])
local _, failed = admit_from_head(key, ARGV[2], now, nil)
set_expiry(key)
if failed then
  return failed
end
return before
