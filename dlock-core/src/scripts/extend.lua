-- extend.lua: give a mutex the caller owns a new lease, counted from now.
--
-- KEYS[1]  lock key (see acquire.lua)
-- ARGV[1]  owner token of the caller
-- ARGV[2]  new lease in milliseconds
--
-- Returns  1   extended
--          0   not held by anyone: the caller's lease had expired (nothing is re-created)
--          -1  held by another owner
--
-- Retry safety: owner-checked and absolute (PEXPIRE sets, never adds), so running it twice
-- leaves the same state as running it once.

local held = redis.call('GET', KEYS[1])
if not held then
  return 0
end
if string.sub(held, 1, 32) ~= ARGV[1] then
  return -1
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
