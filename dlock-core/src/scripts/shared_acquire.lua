-- shared_acquire.lua: an attempt to take `weight` permits of a shared lock (semaphore.rs).
-- Takes them when they are free and nobody waits ahead of the caller; otherwise says how long
-- until the nearest holder's lease ends and, in mode "wait", queues the caller, so that a
-- release (or this script, run by anyone after a lease ran out) admits it. (Runs with
-- lock_value.lua, common.lua, shared.lua and admission.lua prepended; the layout of the keys is in shared.lua.)
--
-- KEYS[1]  the shared lock's hash K; K..":exp" and K..":queue" are derived (same hash tag)
-- ARGV[1]  the caller's token: 32 hex digits, one per acquire call, the same for its retries
-- ARGV[2]  weight: permits to take, 1 <= weight
-- ARGV[3]  limit: the lock's permits as the caller's handle knows them
-- ARGV[4]  "keep" (the one limit mode): a limit stored by another handle that differs from
--          ARGV[3] is an error; a limit set by set_limit is in force whatever ARGV[3] says
-- ARGV[5]  lease in milliseconds
-- ARGV[6]  mode: "wait"  on failure append ARGV[7] unless it is queued already (LPOS: a scan of
--                        the entries ahead of it)
--                "again" as "wait", but ARGV[7] is trusted to be queued still: appended only
--                        when the queue is empty, no scan (the one re-ask after the fallback
--                        timer that follows a "wait" which found the caller queued, with no
--                        grant, nudge or disconnection heard since; see acquire.lua)
--                "join"  as "wait", but without a scan the first time this token joins: a
--                        waiting request's first attempt, whose token is new (filling a queue of
--                        n requests by scans cost O(n^2)); run again (a resend of a call whose
--                        reply was lost), it finds the mark of its first run and scans the queue
--                        from the tail, so the request is never queued twice (first_join in
--                        common.lua, issue #44: a request queued twice would be admitted twice)
--                "last"  drop ARGV[7] from the queue whatever the outcome (the wait is over)
--                ""      leave the queue alone (a single attempt that does not wait)
-- ARGV[7]  the caller's queue entry "1 <token> <client> <lease_ms> <pub> <weight> <meta>"
--          (modes "wait", "again", "join" and "last"; "" otherwise)
-- ARGV[8]  the fence counter of K's slot (see next_fence in common.lua)
-- ARGV[9]  <meta> of the caller: "<host>\x1f<pid>\x1f<label>"
--
-- Returns  {1, fence, pttl_ms}    the caller holds the permits (now, or already: a retry, or a
--                                 grant published while it waited), pttl_ms of lease left
--          {0, wait_ms, now_ms}   not now; wait_ms until the nearest holder's lease ends (the
--                                 longest a waiter's fallback timer need sleep); now_ms = server
--                                 clock
--          error DLOCKLIMIT <key> <stored>   a limit stored by another handle differs
--          error DLOCKWEIGHT <key> <weight> <limit>   weight > the limit in force (the client
--                                 refuses weight > its handle's limit before it asks; this is a
--                                 limit lowered by set_limit); the caller's entry is dropped
--          error DLOCKFOREIGN     K or the counter holds data dlock did not write, or a lock of
--                                 a newer format; nothing was modified
--
-- FIFO: the queue's head is admitted first (admit_from_head); the caller takes permits only
-- when its own entry is admitted, or when nobody waits and they fit. So a request for many
-- permits at the head is never overtaken by later small ones. A caller that leaves (mode
-- "last") admits whatever fits behind it before the script ends.
-- Retry safety: the token names the acquisition; a request that runs twice finds the caller a
-- holder the second time and returns the same fence; the caller is never queued twice.

local key = KEYS[1]
local token = ARGV[1]
local weight = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local lease = ARGV[5]
local mode = ARGV[6]
local entry = ARGV[7]
local counter = ARGV[8]
local queue = key .. ':queue'

local now, refused = begin(key)
if not now then
  return refused
end

local mine = redis.call('HGET', key, token)
if mine then
  if entry ~= '' then
    redis.call('LREM', queue, 1, entry)
    forget_join(key, token)
  end
  readmit(key, counter, now)
  local fence = string.match(mine, '^%d+ (%d+)')
  local deadline = tonumber(redis.call('ZSCORE', key .. ':exp', token))
  return {1, tonumber(fence), deadline - now}
end

local operator, foreign = operator_limit(key)
if foreign then
  return foreign
end
local stored = redis.call('HGET', key, 'limit')
if operator then
  -- Set by set_limit: in force for every handle, whatever limit it was built with.
  limit = operator
elseif stored and tonumber(stored) ~= limit then
  return redis.error_reply('DLOCKLIMIT ' .. key .. ' ' .. stored)
end
if weight > limit then
  if entry ~= '' and redis.call('LREM', queue, 1, entry) > 0 then
    forget_join(key, token)
    admit_from_head(key, counter, now, nil)
  end
  set_expiry(key, now)
  return redis.error_reply('DLOCKWEIGHT ' .. key .. ' ' .. ARGV[2] .. ' '
    .. string.format('%.0f', limit))
end
if tonumber(stored) ~= limit then
  redis.call('HSET', key, 'v', '1', 'limit', string.format('%.0f', limit))
end

local fence, failed = admit_from_head(key, counter, now, entry)
if failed then
  set_expiry(key, now)
  return failed
end
if not fence and redis.call('LLEN', queue) == 0 then
  local used = tonumber(redis.call('HGET', key, 'used') or '0')
  if used + weight <= limit then
    fence, failed = admit(key, counter, token, weight, lease, now, ARGV[9])
    if failed then
      set_expiry(key, now)
      return failed
    end
  end
end
if fence then
  set_expiry(key, now)
  return {1, tonumber(fence), tonumber(lease)}
end

if mode == 'wait' or mode == 'again' or mode == 'join' then
  local queued
  if mode == 'again' then
    queued = redis.call('LLEN', queue) > 0
  elseif mode == 'join' then
    queued = not first_join(key, token, lease) and redis.call('LPOS', queue, entry, 'RANK', -1)
  else
    queued = redis.call('LPOS', queue, entry)
  end
  if not queued then
    redis.call('RPUSH', queue, entry)
    local longest = tonumber(redis.call('HGET', key, 'qlease') or '0')
    if tonumber(lease) > longest then
      redis.call('HSET', key, 'qlease', lease)
    end
  end
elseif mode == 'last' then
  -- The caller leaves the queue: whatever now fits behind it is admitted at once, instead of
  -- waiting for an unrelated lease to end.
  redis.call('LREM', queue, 1, entry)
  forget_join(key, token)
  local _, failed = admit_from_head(key, counter, now, nil)
  if failed then
    set_expiry(key, now)
    return failed
  end
end
set_expiry(key, now)
local nearest = redis.call('ZRANGE', key .. ':exp', 0, 0, 'WITHSCORES')
local wait = tonumber(lease)
if nearest[2] then
  wait = tonumber(nearest[2]) - now
end
return {0, wait, now}
