-- acquire.lua: take a mutex when it is free and nobody waits for it; otherwise say for how long it
-- is held and, for a waiting caller, put it in the FIFO queue so that release hands the lock
-- straight to it. (Runs with common.lua prepended.)
--
-- KEYS[1]  lock key   string "<token><flag> <meta>", PX = the lease (see common.lua)
-- Derived keys (same hash tag as KEYS[1], hence the same cluster slot; declaring them would
-- cost every call ~2k instructions per key, measured):
--          KEYS[1]..":fence"  the fence of the last acquisition, i.e. of the holder while held;
--                             expires 7 days after the last acquisition (then the clock floor
--                             below takes over)
--          KEYS[1]..":queue"  waiter entries, oldest first (see common.lua)
-- ARGV[1]  the lock value to set: "<token>-1 <meta>" (token = 32 hex digits, one per acquire
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
--          error DLOCKFOREIGN    the lock key holds a value dlock did not write, a lock of a newer
--                                format version, or one without expiry; nothing was modified
--
-- FIFO: a lock found free while callers wait (its holder's lease ran out: expiry publishes
-- nothing) goes to the oldest live waiter first, exactly as a release would hand it over; the
-- caller takes it only if its own entry is that waiter, and otherwise finds it held (and queues,
-- in mode "wait"). So a newcomer never overtakes the queue, whether the holder released or
-- expired.
-- Fast path (free lock, empty queue, mode "try"): SET NX, LLEN, TIME, SET GET — four calls, one
-- integer reply. The fence key's expiry slides with each acquisition (PX on the SET GET itself:
-- a separate PEXPIRE for a new name cost ~4k instructions, measured), so a lock in use keeps its
-- counter.
-- Fencing: fence = max(last + 1, server time in us), so tokens keep increasing after a restart
-- or failover lost the counter (or it expired), as long as the server clock does not step back;
-- and they keep increasing through a clock step back as long as the counter lives. The
-- acquisition time is the fence (in us) except after such a step. Fences are handled as decimal
-- strings of the same width (16 digits until the year 2286), so no number formatting is needed.
-- Retry safety: the token names the acquisition, so a request that runs twice returns the same
-- fence the second time and never queues the caller twice.

local lock = KEYS[1]
local queue = lock .. ':queue'
local mode = ARGV[3] or 'try'
local entry = nil
if mode ~= 'try' then
  entry = ARGV[4]
end

local taken = redis.call('SET', lock, ARGV[1], 'NX', 'PX', ARGV[2])
if taken and redis.call('LLEN', queue) > 0 then
  -- Free, but callers wait: the oldest live one comes first (possibly this caller).
  local who, fence = hand_off(lock, entry)
  if who == 'caller' then
    return fence
  elseif who == 'grant' then
    taken = false
  else
    -- Nobody in the queue was alive (hand_off emptied it and deleted the key).
    redis.call('SET', lock, ARGV[1], 'PX', ARGV[2])
  end
end

if taken then
  local fence_key = lock .. ':fence'
  local now = redis.call('TIME')
  local fence = now[1] .. string.sub('00000' .. now[2], -6)
  local last = redis.call('SET', fence_key, fence, 'GET', 'PX', 604800000)
  if last and tonumber(last) and (#last > #fence or (#last == #fence and last >= fence)) then
    fence = string.format('%.0f', tonumber(last) + 1)
    redis.call('SET', fence_key, fence, 'PX', 604800000)
  end
  if entry then
    redis.call('LREM', queue, 1, entry)
    if redis.call('LLEN', queue) > 0 then
      redis.call('SETRANGE', lock, 32, 'w')
    end
  end
  return tonumber(fence)
end

local held = read(lock)
local refused = unusable(lock, held)
if refused then
  return refused
end
local pttl = redis.call('PTTL', lock)
if pttl < 0 then
  return foreign_error(lock, 'has no expiry (dlock never writes a lock without a lease)')
end
if string.sub(held, 1, 32) == string.sub(ARGV[1], 1, 32) then
  if entry then
    redis.call('LREM', queue, 1, entry)
  end
  return {1, tonumber(redis.call('GET', lock .. ':fence')) or 0, pttl}
end
if mode == 'wait' then
  if not redis.call('LPOS', queue, entry) then
    redis.call('RPUSH', queue, entry)
  end
  if string.byte(held, 33) ~= 119 then -- 'w'
    redis.call('SETRANGE', lock, 32, 'w')
  end
elseif mode == 'last' then
  redis.call('LREM', queue, 1, entry)
end
local now = redis.call('TIME')
return {0, pttl, tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)}
