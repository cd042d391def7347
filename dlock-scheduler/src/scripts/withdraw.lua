-- withdraw.lua: withdraw a claim whose reply was lost (Redis unreachable or too slow), so that
-- the occurrence falls back to the job's misfire policy, or a `run_now` request is queued
-- again — only if that very attempt made the claim and nothing of its run has started.
--
-- KEYS[1]  claims    zset (see claim.lua)
-- KEYS[2]  runs      zset (see claim.lua)
-- KEYS[3]  ledger    hash (see claim.lua)
-- KEYS[4]  requests  list of pending `run_now` requests
-- KEYS[5]  retries   zset (see claim.lua)
-- ARGV[1]  run id
-- ARGV[2]  the attempt token the claim was made with
-- ARGV[3]  how long the request list is kept without being taken, in seconds (as request.lua's
--          ARGV[2]): a request queued again sets the list's expiry, since taking the last
--          request deleted the list and its expiry with it
--
-- Returns  1  withdrawn (a manual run's request is back at the head of the queue)
--          0  no such claim, made by another attempt, or its run started: nothing changed
--
-- Nothing is kept forever: a request queued again renews the list's expiry, as a new request does.
-- Only a first attempt is withdrawn (a retry's claim follows a run that started).
-- "Started" means an end record exists: the run took its lock (recorded "running") or ended.
-- Retry safety: withdrawing twice withdraws once.
-- All keys share the job's hash tag.

local claim = redis.call('HGET', KEYS[3], ARGV[1] .. ':claim')
if not claim then
  return 0
end
local c = fields(claim)
if c[1] ~= '1' or c[7] ~= ARGV[2] or c[8] ~= '1' or redis.call('HEXISTS', KEYS[3], ARGV[1] .. ':end') == 1 then
  return 0
end
local requested = redis.call('ZSCORE', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1] .. ':claim')
redis.call('ZREM', KEYS[5], ARGV[1])
if string.sub(ARGV[1], 1, 1) == 'm' and requested then
  redis.call('LPUSH', KEYS[4], requested)
  redis.call('EXPIRE', KEYS[4], ARGV[3])
end
return 1
