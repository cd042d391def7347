-- inspect.lua: read who holds a mutex, for operators. Changes nothing.
--
-- KEYS[1]  lock key (see acquire.lua, also for the derived :queue key)
--
-- Returns  {value, pttl_ms, waiters}  value = "<token><flag>[1] <meta>" (the hold's fence is its
--                                     last field once a script issued one)
--          {false, -2, waiters}       when nobody holds the lock

local held = redis.call('GET', KEYS[1])
return {held, redis.call('PTTL', KEYS[1]), redis.call('LLEN', KEYS[1] .. ':queue')}
