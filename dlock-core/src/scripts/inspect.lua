-- inspect.lua: read who holds a mutex, for operators. Changes nothing.
--
-- KEYS[1]  lock key (see acquire.lua, also for the derived :fence and :queue keys)
--
-- Returns  {value, fence, pttl_ms, waiters}  value = "<token><flag> <meta>"; fence = the
--                                            holder's fencing token (the last one issued)
--          {false, false, -2, waiters}       when nobody holds the lock

local held = redis.call('GET', KEYS[1])
local fence = false
if held then
  fence = redis.call('GET', KEYS[1] .. ':fence')
end
return {held, fence, redis.call('PTTL', KEYS[1]), redis.call('LLEN', KEYS[1] .. ':queue')}
