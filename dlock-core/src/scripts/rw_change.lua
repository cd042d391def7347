-- rw_change.lua: changes the mode of one holder of a read-write lock (rwlock.rs), atomically:
-- a writer becomes a reader (downgrade), or the sole reader becomes the writer (upgrade). The
-- hold passes from the old token to a new one with a new lease and the next fence, so the
-- client's lease of each mode is its own. (Runs with lock_value.lua, common.lua, shared.lua and
-- admission.lua prepended; the layout of the keys is in shared.lua: a read-write lock is a shared lock whose reader weighs 1
-- and whose writer weighs the whole limit.)
--
-- KEYS[1]  the lock's hash K
-- ARGV[1]  the holder's token now (32 hex digits)
-- ARGV[2]  the token the hold passes to (32 hex digits, new for this call, the same for its
--          retries)
-- ARGV[3]  "down"  the holder writes and will read: it keeps the lock, and the readers at the
--                  head of the queue (up to the first writer) are admitted beside it
--          "up"    the holder reads and will write: only when it is the sole holder and nobody
--                  waits (an upgrade never waits, so it can never deadlock)
-- ARGV[4]  the writer's weight: the lock's limit
-- ARGV[5]  the new lease in milliseconds
-- ARGV[6]  the fence counter of K's slot (see next_fence in common.lua)
--
-- Returns  {1, fence, pttl_ms}    the hold is the new token's (now, or already: a retry), in
--                                 the new mode, with its fence and lease left
--          {0, 0, 0}              the old token holds nothing: its lease ended (its weight went
--                                 back then), or a forced unlock removed it
--          {-1, used, waiting}    "up" refused: `used` is the weight held by everyone (1 when
--                                 the caller reads alone), `waiting` the queue's length; nothing
--                                 was changed
--          error DLOCKMODE        the old token does not hold in the mode ARGV[3] changes from
--          error DLOCKFOREIGN     K or the counter holds data dlock did not write, or a lock of
--                                 a newer format; nothing was modified
--
-- Retry safety: the new token names the change; run twice, the second run finds the new token
-- holding and returns its fence and lease, changing nothing.

local key = KEYS[1]
local old = ARGV[1]
local new = ARGV[2]
local direction = ARGV[3]
local writer = tonumber(ARGV[4])
local lease = ARGV[5]
local counter = ARGV[6]

local now, refused = begin(key)
if not now then
  return refused
end

local done = redis.call('HGET', key, new)
if done then
  readmit(key, counter, now)
  local fence = string.match(done, '^%d+ (%d+)')
  return {1, tonumber(fence), tonumber(redis.call('ZSCORE', key .. ':exp', new)) - now}
end
local held = redis.call('HGET', key, old)
if not held then
  readmit(key, counter, now)
  return {0, 0, 0}
end
local weight, meta = string.match(held, '^(%d+) %d+ (.*)$')
weight = tonumber(weight)

local to = 1
if direction == 'down' then
  if weight ~= writer then
    return redis.error_reply('DLOCKMODE ' .. key .. ' the holder does not write')
  end
else
  if weight ~= 1 then
    return redis.error_reply('DLOCKMODE ' .. key .. ' the holder does not read')
  end
  local used = tonumber(redis.call('HGET', key, 'used') or '0')
  local waiting = redis.call('LLEN', key .. ':queue')
  if used ~= 1 or waiting > 0 then
    readmit(key, counter, now)
    return {-1, tonumber(redis.call('HGET', key, 'used') or '0'),
      redis.call('LLEN', key .. ':queue')}
  end
  to = writer
end

-- The fence first: if the counter is not dlock's, nothing has changed yet.
local fence, failed = next_fence(counter)
if not fence then
  return failed
end
dismiss(key, old)
redis.call('HSET', key, new, to .. ' ' .. fence .. ' ' .. meta)
redis.call('HINCRBY', key, 'used', to)
redis.call('ZADD', key .. ':exp', now + tonumber(lease), new)
if direction == 'down' then
  -- A counter dlock did not write stops the admission; the caller reads all the same, and the
  -- queue waits for the next call that touches the lock (which reports the counter).
  admit_from_head(key, counter, now, nil)
end
set_expiry(key, now)
return {1, tonumber(fence), tonumber(lease)}
