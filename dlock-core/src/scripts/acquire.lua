-- acquire.lua: take a mutex when it is free; otherwise say for how long it is held and, for a
-- waiting caller, put it in the FIFO queue so that release hands the lock straight to it.
--
-- KEYS[1]  lock key   string "<token><flag> <meta>", PX = the lease; <flag> is "w" while
--                     callers wait in the queue (release must hand off), else "-"
-- KEYS[2]  fence key  string: the fence of the last acquisition, i.e. of the current holder
--                     while the lock is held; PX 7 days, refreshed by every acquisition
-- KEYS[3]  queue key  list of waiter entries "<token> <client> <lease_ms> <meta>", oldest
--                     first (only for modes "wait" and "last"; "try" passes two keys)
-- ARGV[1]  the lock value to set: "<token>- <meta>" (token = 32 hex digits, one per acquire
--          call, the same for each of its retries)
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  mode: "try"  leave the queue alone
--                "wait" on failure append ARGV[4] unless it is queued already; on success drop it
--                "last" drop ARGV[4] from the queue whatever the outcome (the wait is over)
-- ARGV[4]  the caller's queue entry (modes "wait" and "last")
--
-- Returns  fence                 the caller took the lock now, with the full lease (an integer:
--                                the cheapest reply, for the fast path)
--          {1, fence, pttl_ms}   the lock is already the caller's (a retried request, or a
--                                hand-off granted while it waited)
--          {0, pttl_ms, now_ms}  another owner holds it for pttl_ms more; now_ms = server clock
--
-- Fast path (free lock, mode "try"): SET NX, TIME, SET GET — three calls, one integer reply.
-- Fencing: fence = max(last + 1, server time in us), so tokens keep increasing after a restart
-- or failover lost the counter (or it expired after 7 idle days), as long as the server clock
-- does not step back. The acquisition time is the fence (in us) except after such a step.
-- Retry safety: the token names the acquisition, so a request that runs twice returns the same
-- fence the second time and never queues the caller twice.
-- Lua numbers are doubles: integers stay exact below 2^53 (~9e15, year 2255 in microseconds).

-- (Numbers below 1e17 pass to redis.call as exact integers, so fences need no formatting.)

local mode = ARGV[3]
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local now = redis.call('TIME')
  local fence = now[1] * 1000000 + now[2]
  local last = tonumber(redis.call('SET', KEYS[2], fence, 'GET', 'PX', '604800000'))
  if last and last >= fence then
    fence = last + 1
    redis.call('SET', KEYS[2], fence, 'PX', '604800000')
  end
  if mode ~= 'try' then
    redis.call('LREM', KEYS[3], 1, ARGV[4])
    if redis.call('LLEN', KEYS[3]) > 0 then
      redis.call('SETRANGE', KEYS[1], 32, 'w')
    end
  end
  return fence
end

local held = redis.call('GET', KEYS[1])
if held and string.sub(held, 1, 32) == string.sub(ARGV[1], 1, 32) then
  if mode ~= 'try' then
    redis.call('LREM', KEYS[3], 1, ARGV[4])
  end
  return {1, tonumber(redis.call('GET', KEYS[2])), redis.call('PTTL', KEYS[1])}
end
if mode == 'wait' then
  if not redis.call('LPOS', KEYS[3], ARGV[4]) then
    redis.call('RPUSH', KEYS[3], ARGV[4])
  end
  if held and string.byte(held, 33) ~= 119 then -- 'w'
    redis.call('SETRANGE', KEYS[1], 32, 'w')
  end
elseif mode == 'last' then
  redis.call('LREM', KEYS[3], 1, ARGV[4])
end
local now = redis.call('TIME')
return {0, redis.call('PTTL', KEYS[1]), tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)}
