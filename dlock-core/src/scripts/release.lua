-- release.lua: release a mutex the caller owns and hand it to the oldest live waiter, if any.
--
-- KEYS[1]  lock key (see acquire.lua, also for the derived :queue key)
-- ARGV[1]  owner token of the caller ("" with ARGV[4] = "force"), or the whole lock value that
--          the caller's uncontended acquire wrote (it starts with the token)
-- ARGV[2]  the fence counter of the lock's slot, for the fence of a hand-off (see next_fence in
--          common.lua)
-- ARGV[3]  optional: the caller's own queue entry to drop first, or "" (an acquire abandoned
--          mid-wait releases this way, whether or not the lock was handed to it meanwhile)
-- ARGV[4]  optional: "force" to release whoever holds the lock (an operator's force_unlock);
--          "handoff" to hand the caller's lock to the queue even if its value was not flagged
--          (an uncontended acquire that found, afterwards, that callers waited: it took a lock
--          whose holder had expired ahead of them and gives it to the head of the queue)
--
-- Returns  1   released; nobody waits
--          {2, grant}  released and handed to the next waiter; its client was told on its wake
--              channel, and grant = "<token> <fence> <now_ms> <lease_ms> 1" is the same message, so
--              that a releaser in the waiter's own process can wake it without the pub/sub trip
--          0   not held by anyone: the caller's lease had expired (a key kept past its
--              holder's deadline for the queue is handed to the queue's head first)
--          -1  held by another owner: the caller's lease expired and someone else took the lock
--              (also when the key holds data dlock did not write, of any type: left untouched)
--          error DLOCKFOREIGN  "force" on a key that holds a value dlock did not write, or a lock
--              of a newer format version (left untouched); or a hand-off found the fence counter
--              holding data dlock did not write (the lock is left as it was, the waiter queued);
--              or the queue key holds another Redis type, found before anything was written (the
--              lock is left as it was; with "handoff", the caller's own lock, taken ahead of a
--              queue that is not dlock's, is deleted: its acquire fails)
--
-- Fast paths (the caller's own lock, nobody waits: flag "-"): GET, DEL — like a plain
-- compare-and-delete. The first compares the whole value the caller wrote, unchanged since (no
-- waiter flagged it, no fence was added to it): one string comparison, no string made. The
-- second compares the token and the flag, for a lock that came by hand-off or got a fence on
-- demand. Both run before the shared functions are even defined (common.lua is inserted at the
-- marker below), which halves the script's cost on this path (measured with callgrind: ~10k
-- instructions of ~45k per acquire/release pair).
-- Hand-off: see hand_off in common.lua.
-- Retry safety: owner-checked (unless forced) by the whole 32-digit token, as in acquire.lua and
-- extend.lua, so an empty or partial token matches nothing; running it twice never releases a
-- lock the caller does not own.

local lock = KEYS[1]
local held = redis.pcall('GET', lock)
if held == ARGV[1] and not ARGV[3] then
  redis.call('DEL', lock)
  return 1
end
local token = string.sub(ARGV[1], 1, 32)
local entry = ARGV[3]
local mode = ARGV[4]
if type(held) == 'string' and (entry == nil or entry == '') and mode == nil
    and string.sub(held, 1, 32) == token and string.byte(held, 33) == 45 then -- '-'
  redis.call('DEL', lock)
  return 1
end

--@common

-- The queue is touched only below; a queue key of another type is refused by name there, before
-- anything is written.
local queue = lock .. ':queue'
local function foreign_queue()
  return foreign_error(queue, 'holds another Redis type (dlock keeps the queue of ' .. lock
    .. ' there)')
end
if entry and entry ~= '' then
  if type(redis.pcall('LREM', queue, 1, entry)) ~= 'number' then
    return foreign_queue()
  end
  forget_join(lock, token)
  held = read(lock)
end
if not held then
  return 0
end
local refused = unusable(lock, held)
if refused then
  if mode == 'force' then
    return refused
  end
  return -1
end
-- The clock is read only for a value that carries a deadline (version 2).
local now = deadline_of(held) and clock_ms()
if now and not holds(held, now) then
  -- Kept past its deadline for the queue (version 2): nobody's, the caller's lease included
  -- (0). Its head takes it now, as every script that finds it free hands it on.
  if type(redis.pcall('LLEN', queue)) ~= 'number' then
    return foreign_queue()
  end
  local who, grant = hand_off(lock, ARGV[2], nil)
  if who == 'error' then
    return grant
  end
  return 0
end
if mode ~= 'force' and string.sub(held, 1, 32) ~= token then
  if entry and entry ~= '' then
    -- The caller left the queue of a lock someone else holds: the flag and the keep follow.
    keep(lock, held, now or clock_ms(), 0)
  end
  return -1
end
if string.byte(held, 33) ~= 119 and mode ~= 'handoff' then -- 'w': somebody waits
  redis.call('DEL', lock)
  return 1
end
if type(redis.pcall('LLEN', queue)) ~= 'number' then
  if mode == 'handoff' then
    redis.call('DEL', lock)
  end
  return foreign_queue()
end
local who, grant = hand_off(lock, ARGV[2], nil)
if who == 'grant' then
  return {2, grant}
elseif who == 'error' then
  return grant
end
return 1
