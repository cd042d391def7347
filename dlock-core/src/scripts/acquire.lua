-- acquire.lua: take a mutex when it is free; otherwise say for how long it is held and, for a
-- waiting caller, put it in the FIFO queue so that release hands the lock straight to it.
--
-- KEYS[1]  lock key   string "<token><flag> <meta>", PX = the lease; <flag> is "w" while
--                     callers wait in the queue (release must hand off), else "-"
-- Derived keys (same hash tag as KEYS[1], hence the same cluster slot; declaring them would
-- cost every call ~2k instructions per key, measured):
--          KEYS[1]..":fence"  the fence of the last acquisition, i.e. of the holder while held;
--                             expires 7 days after the last acquisition (then the clock floor
--                             below takes over)
--          KEYS[1]..":queue"  list of waiter entries "<token> <client> <lease_ms> <pub> <meta>",
--                             oldest first; <pub> is "P" (PUBLISH) or "S" (SPUBLISH, cluster)
-- ARGV[1]  the lock value to set: "<token>- <meta>" (token = 32 hex digits, one per acquire
--          call, the same for each of its retries)
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  mode (absent = "try"): "try"  leave the queue alone
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
-- The fence key's expiry slides with each acquisition (PX on the SET GET itself: a separate
-- PEXPIRE for a new name cost ~4k instructions, measured), so a lock in use keeps its counter.
-- Fencing: fence = max(last + 1, server time in us), so tokens keep increasing after a restart
-- or failover lost the counter (or it expired), as long as the server clock does not step back;
-- and they keep increasing through a clock step back as long as the counter lives. The
-- acquisition time is the fence (in us) except after such a step. Fences are handled as decimal
-- strings of the same width (16 digits until the year 2286), so no number formatting is needed.
-- Retry safety: the token names the acquisition, so a request that runs twice returns the same
-- fence the second time and never queues the caller twice.

local fence_key = KEYS[1] .. ':fence'
local mode = ARGV[3] or 'try'

if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local now = redis.call('TIME')
  local fence = now[1] .. string.sub('00000' .. now[2], -6)
  local last = redis.call('SET', fence_key, fence, 'GET', 'PX', 604800000)
  if last and (#last > #fence or (#last == #fence and last >= fence)) then
    fence = string.format('%.0f', tonumber(last) + 1)
    redis.call('SET', fence_key, fence, 'PX', 604800000)
  end
  if mode ~= 'try' then
    local queue = KEYS[1] .. ':queue'
    redis.call('LREM', queue, 1, ARGV[4])
    if redis.call('LLEN', queue) > 0 then
      redis.call('SETRANGE', KEYS[1], 32, 'w')
    end
  end
  return tonumber(fence)
end

local held = redis.call('GET', KEYS[1])
if held and string.sub(held, 1, 32) == string.sub(ARGV[1], 1, 32) then
  if mode ~= 'try' then
    redis.call('LREM', KEYS[1] .. ':queue', 1, ARGV[4])
  end
  return {1, tonumber(redis.call('GET', fence_key)) or 0, redis.call('PTTL', KEYS[1])}
end
if mode == 'wait' then
  local queue = KEYS[1] .. ':queue'
  if not redis.call('LPOS', queue, ARGV[4]) then
    redis.call('RPUSH', queue, ARGV[4])
  end
  if held and string.byte(held, 33) ~= 119 then -- 'w'
    redis.call('SETRANGE', KEYS[1], 32, 'w')
  end
elseif mode == 'last' then
  redis.call('LREM', KEYS[1] .. ':queue', 1, ARGV[4])
end
local now = redis.call('TIME')
return {0, redis.call('PTTL', KEYS[1]), tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)}
