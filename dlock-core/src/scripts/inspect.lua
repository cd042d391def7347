-- inspect.lua: read who holds a mutex, for operators. Changes nothing.
--
-- KEYS[1]  lock key   (see acquire.lua)
-- KEYS[2]  queue key
--
-- Returns  {value, pttl_ms, waiters}  value = "<token> <fence> <acquired_ms> <meta>", or
--          {false, -2, waiters}       when nobody holds the lock

local held = redis.call('GET', KEYS[1])
return {held, redis.call('PTTL', KEYS[1]), redis.call('LLEN', KEYS[2])}
