#!lua flags=allow-cross-slot-keys,allow-oom
-- extend.lua: give locks the caller owns a new lease, counted from now. Used for one lock
-- (MutexGuard::extend) and for the watchdog's batched renewals (up to 100 locks per call).
--
-- n locks: the first d are declared (KEYS), the other n - d are not (on a cluster they belong
-- to other slots of the same node: the watchdog renews one shard per call; Redis routes the
-- call by KEYS[1]). n = (#ARGV + d) / 3.
--
-- KEYS[i]          lock key of the i-th lock, i <= d (see acquire.lua)
-- ARGV[2i-1]       owner token of the i-th lock
-- ARGV[2i]         new lease of the i-th lock, in milliseconds
-- ARGV[2n+i-d]     lock key of the i-th lock, i > d
--
-- Returns  an array with, for each lock in order:
--          1   extended
--          0   not held by anyone: the lease had expired or the key was deleted (nothing is
--              re-created)
--          -1  held by another owner, or the key holds something dlock did not write (another
--              type, another format) or a lock of a newer format version: left untouched
--          -2  not served by this node (its slot moved): not renewed, send it again
--
-- Flags: allow-cross-slot-keys lets the undeclared keys be of other slots (a key this node does
-- not serve fails the read, reported as -2); allow-oom keeps renewals working when the server
-- is at maxmemory (PEXPIRE frees nothing but adds nothing either), as without the flags line.
-- One lock's key holding another type never aborts the batch: each key is read with pcall.
-- Retry safety: owner-checked and absolute (PEXPIRE sets, never adds), so running it twice
-- leaves the same state as running it once.

local d = #KEYS
local n = (#ARGV + d) / 3
local out = {}
for i = 1, n do
  local key = KEYS[i] or ARGV[2 * n + i - d]
  local held = redis.pcall('GET', key)
  if not held then
    out[i] = 0
  elseif type(held) == 'table' and held.err and i > d
      and not string.find(held.err, '^WRONGTYPE') then
    out[i] = -2
  elseif type(held) ~= 'string' or string.sub(held, 1, 32) ~= ARGV[2 * i - 1]
      or not string.find(held, '^%x+[%-w]1? ') then
    out[i] = -1
  else
    redis.call('PEXPIRE', key, ARGV[2 * i])
    out[i] = 1
  end
end
return out
