-- acquire.lua: the waiting acquire's attempt at a mutex (the uncontended acquire is a plain
-- `SET NX PX GET` sent by the client, see mutex.rs). Takes the lock when it is free and nobody
-- waits for it ahead of the caller; otherwise says for how long it is held and puts the caller
-- in the FIFO queue, so that release hands the lock straight to it. (Runs with common.lua
-- prepended.)
--
-- KEYS[1]  lock key   string "<token><flag>1 <meta>[\x1f<fence>]", PX = the lease (see
--                     common.lua and scripts/wire.rs)
-- Derived key (same hash tag as KEYS[1], hence the same cluster slot; declaring it would cost
-- every call ~2k instructions, measured):
--          KEYS[1]..":queue"  waiter entries, oldest first (see lock_value.lua); expires with
--                             the key kept for them (keep in common.lua)
--          KEYS[1]..":joined:<token>"  mode "join": the mark of a token's first attempt
--                             (first_join in common.lua)
-- ARGV[1]  the lock value to set: "<token>-1 <meta>" (token = 32 hex digits, one per acquire
--          call, the same for each of its retries)
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  mode: "wait"  on failure append ARGV[4] unless it is queued already (LPOS: a scan of
--                        the entries ahead of it); on success drop it
--                "again" as "wait", but ARGV[4] is trusted to be queued still: appended only
--                        when the queue is empty, no scan. Sent only by a waiter whose previous
--                        attempt, in mode "wait" or "join", found it queued and which heard nothing since
--                        (no grant, no disconnection): the one re-ask after its fallback timer
--                        (mutex.rs). An entry can leave the queue without its waiter hearing of
--                        it only if the waiter was paused past a grant's lease or the queue was
--                        deleted by someone else; the empty-queue rule and the next attempt (a
--                        "wait" again) bring it back.
--                "join"  as "wait", but without a scan the first time this token joins: a
--                        waiting acquire's first attempt, whose token is new, so a scan reads the
--                        whole queue to find nothing (queueing 10,000 waiters cost 1.9 s of
--                        Redis time). The same call run again (a cluster client resends a
--                        request whose reply it lost) finds the mark of its first run and scans
--                        the queue from the tail (first_join in common.lua: derived key
--                        KEYS[1]..":joined:<token>", a minute). Its later attempts are "wait" or
--                        "again".
--                "last"  drop ARGV[4] from the queue whatever the outcome (the wait is over)
--                absent  leave the queue alone (a single attempt that does not wait)
-- ARGV[4]  the caller's queue entry (modes "wait", "again", "join" and "last")
-- ARGV[5]  the fence counter of the lock's slot (a key in the same slot, named by the client:
--          see next_fence in common.lua)
--
-- Returns  fence                 the caller took the lock now, with the full lease; its fence
--                                is issued at once and kept with the hold (a waiter wakes with
--                                it, see fence.lua)
--          {1, fence, pttl_ms}   the lock is already the caller's (a retried request, or a
--                                hand-off granted while it waited); fence 0 when none was issued
--                                to the hold yet
--          {0, pttl_ms, now_ms}  another owner holds it for pttl_ms more; now_ms = server clock
--          error DLOCKFOREIGN    the lock key holds a value dlock did not write, a lock of a newer
--                                format version, or one without expiry; nothing was modified.
--                                Also when the fence counter holds data dlock did not write: the
--                                caller is not given the lock; and when the queue key holds
--                                another Redis type (read first: nothing was modified)
--
-- FIFO: a lock found free while callers wait (its holder's lease ran out: expiry publishes
-- nothing) goes to the oldest live waiter first, exactly as a release would hand it over; the
-- caller takes it only if its own entry is that waiter, and otherwise finds it held (and queues,
-- in mode "wait"). So a newcomer never overtakes the queue, whether the holder released or
-- expired (the uncontended acquire checks the queue too, see mutex.rs).
-- Fencing: next_fence (common.lua), as in fence.lua.
-- Retry safety: the token names the acquisition, so a request that runs twice returns the same
-- fence the second time and never queues the caller twice.

local lock = KEYS[1]
local queue = lock .. ':queue'
local mode = ARGV[3]
local entry = ARGV[4]
local counter = ARGV[5]

-- The queue's length, read before the first write: a queue key of another type is refused by
-- name. A free lock needs this LLEN anyway; an attempt that finds the lock held pays this one
-- O(1) read more (the price of refusing before SET NX rather than undoing it).
local waiting = redis.pcall('LLEN', queue)
if type(waiting) ~= 'number' then
  return foreign_error(queue, 'holds another Redis type (dlock keeps the queue of ' .. lock
    .. ' there)')
end
-- Free: no key, or a key kept past its holder's deadline for the queue (version 2, see
-- lock_value.lua), which is nobody's.
local now = clock_ms()
local taken = redis.call('SET', lock, ARGV[1], 'NX', 'PX', ARGV[2])
local held = nil
if not taken then
  held = read(lock)
  if type(held) == 'string' and not unusable(lock, held) and not holds(held, now) then
    redis.call('SET', lock, ARGV[1], 'PX', ARGV[2])
    taken = true
    held = nil
  end
end
if taken and waiting > 0 then
  -- Free, but callers wait: the oldest live one comes first (possibly this caller).
  local who, fence = hand_off(lock, counter, entry)
  if who == 'caller' then
    return fence
  elseif who == 'error' then
    redis.call('DEL', lock)
    return fence
  elseif who == 'grant' then
    taken = false
    held = nil
  else
    -- Nobody in the queue was alive (hand_off emptied it and deleted the key).
    redis.call('SET', lock, ARGV[1], 'PX', ARGV[2])
  end
end

if taken then
  local fence, refused = next_fence(counter)
  if not fence then
    redis.call('DEL', lock)
    return refused
  end
  if entry then
    redis.call('LREM', queue, 1, entry)
    forget_join(lock, string.sub(ARGV[1], 1, 32))
  end
  local value = string.sub(ARGV[1], 1, 32) .. '-' .. string.sub(ARGV[1], 34) .. '\31' .. fence
  redis.call('SET', lock, value, 'KEEPTTL')
  keep(lock, value, now, tonumber(ARGV[2]))
  return tonumber(fence)
end

if not held then
  held = read(lock)
end
local refused = unusable(lock, held)
if refused then
  return refused
end
local pttl = redis.call('PTTL', lock)
if pttl < 0 then
  return foreign_error(lock, 'has no expiry (dlock never writes a lock without a lease)')
end
local deadline = deadline_of(held)
if deadline then
  pttl = deadline - now
end
if string.sub(held, 1, 32) == string.sub(ARGV[1], 1, 32) then
  if entry then
    redis.call('LREM', queue, 1, entry)
    forget_join(lock, string.sub(ARGV[1], 1, 32))
    keep(lock, held, now, tonumber(ARGV[2]))
  end
  local issued = string.match(held, '^[^ ]* [^\31]*\31[^\31]*\31[^\31]*\31(%d+)$')
  return {1, tonumber(issued) or 0, pttl}
end
if mode == 'wait' or mode == 'again' or mode == 'join' then
  -- "again" skips the scan: with 10,000 waiters, each re-ask's LPOS cost ~100 us (measured), and
  -- a holder that dies makes every waiter re-ask within the same few milliseconds.
  local queued = false
  if mode == 'again' then
    queued = redis.call('LLEN', queue) > 0
  elseif mode == 'join' then
    queued = not first_join(lock, string.sub(ARGV[1], 1, 32), ARGV[2])
      and redis.call('LPOS', queue, entry, 'RANK', -1)
  else
    queued = redis.call('LPOS', queue, entry)
  end
  if not queued then
    redis.call('RPUSH', queue, entry)
  end
  keep(lock, held, now, tonumber(ARGV[2]))
elseif mode == 'last' then
  redis.call('LREM', queue, 1, entry)
  forget_join(lock, string.sub(ARGV[1], 1, 32))
  keep(lock, held, now, tonumber(ARGV[2]))
end
return {0, pttl, now}
