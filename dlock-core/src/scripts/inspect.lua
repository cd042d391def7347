-- inspect.lua: read who holds a mutex, for operators. Changes nothing.
--
-- KEYS[1]  lock key (see acquire.lua, also for the derived :queue key)
--
-- Returns  {value, counter, pttl_ms, waiters}  value = "<token><flag>[1] <meta>" (the hold's
--                                              fence is its last field once a script issued
--                                              one); counter = the per-name counter "<lock>:fence"
--                                              of dlock up to 0.1, which holds the fence of a
--                                              lock that such a client wrote (format version 0)
--          {false, false, -2, waiters}         when nobody holds the lock

local held = redis.call('GET', KEYS[1])
local counter = false
if held then
  counter = redis.pcall('GET', KEYS[1] .. ':fence')
  if type(counter) ~= 'string' then
    counter = false
  end
end
return {held, counter, redis.call('PTTL', KEYS[1]), redis.call('LLEN', KEYS[1] .. ':queue')}
