-- extend.lua: give locks the caller owns a new lease, counted from now. Used for one lock
-- (MutexGuard::extend) and for the watchdog's batched renewals (up to 100 locks per call).
--
-- KEYS[i]      lock key of the i-th lock (see acquire.lua); in a cluster all share one slot
-- ARGV[2i-1]   owner token of the i-th lock
-- ARGV[2i]     new lease of the i-th lock, in milliseconds
--
-- Returns  an array with, for each lock in order:
--          1   extended
--          0   not held by anyone: the lease had expired or the key was deleted (nothing is
--              re-created)
--          -1  held by another owner, or the key holds something dlock did not write (another
--              type, another format) or a lock of a newer format version: left untouched
--
-- One lock's key holding another type never aborts the batch: each key is read with pcall.
-- Retry safety: owner-checked and absolute (PEXPIRE sets, never adds), so running it twice
-- leaves the same state as running it once.

local out = {}
for i = 1, #KEYS do
  local held = redis.pcall('GET', KEYS[i])
  if not held then
    out[i] = 0
  elseif type(held) ~= 'string' or string.sub(held, 1, 32) ~= ARGV[2 * i - 1]
      or not string.find(held, '^%x+[%-w]1? ') then
    out[i] = -1
  else
    redis.call('PEXPIRE', KEYS[i], ARGV[2 * i])
    out[i] = 1
  end
end
return out
