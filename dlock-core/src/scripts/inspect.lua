-- inspect.lua: read who holds a mutex, for operators. Changes nothing.
--
-- KEYS[1]  lock key (see acquire.lua, also for the derived :queue key)
--
-- Returns  {value, pttl_ms, waiters}  value = "<token><flag>[1|2] <meta>" (the hold's fence is its
--                                     last field once a script issued one); pttl_ms the lease
--                                     left (a version-2 value: to its deadline, see
--                                     lock_value.lua)
--          {false, -2, waiters}       when nobody holds the lock (also a key kept past its
--                                     holder's deadline for the queue)

local held = redis.call('GET', KEYS[1])
local pttl = redis.call('PTTL', KEYS[1])
local waiters = redis.call('LLEN', KEYS[1] .. ':queue')
-- Version 2 (callers wait): the hold lasts to the deadline in the value; the key is kept a lease
-- longer, and past the deadline nobody holds the lock (the queue's head takes it next).
local deadline = type(held) == 'string' and tonumber(string.match(held, '^%x+w2 (%d+) '))
if deadline then
  -- The server clock without TIME (an operator's read-only user may lack it): the key's
  -- expiry, absolute and relative.
  local now = redis.call('PEXPIRETIME', KEYS[1]) - pttl
  if deadline <= now then
    return {false, -2, waiters}
  end
  pttl = deadline - now
end
return {held, pttl, waiters}
