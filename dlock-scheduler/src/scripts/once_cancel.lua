-- once_cancel.lua: cancel a one-off job that has not started: record it cancelled and take it
-- out of the pending runs.
--
-- KEYS[1]  ledger   hash (see common.lua, once.lua)
-- KEYS[2]  retries  zset (see take_retry.lua)
-- ARGV[1]  run id
-- ARGV[2]  the text recorded with the outcome (no \31 or \30)
--
-- Returns  {1, now_ms}  cancelled: its end record says "cancelled" (ended now), it is no
--                       longer pending, and no replica claims it
--          {0, now_ms}  no such run, or its first attempt was claimed already (it runs, ran,
--                       or was cancelled before): nothing changed
--
-- Only a run still at attempt 0 ("scheduled") is cancelled; a run claimed by a replica is
-- that replica's to finish (at least once: its later attempts are not cancelled either).
-- Retry safety: cancelling twice cancels once (the second call answers 0).
-- All keys share the job's hash tag.

local now = server_ms()
local claim = redis.call('HGET', KEYS[1], ARGV[1] .. ':claim')
local current = redis.call('HGET', KEYS[1], ARGV[1] .. ':end')
if not claim or not current then
  return {0, now}
end
local c = fields(claim)
local e = fields(current)
if c[1] ~= '1' or e[1] ~= '1' or c[8] ~= '0' or e[2] ~= 'scheduled' then
  return {0, now}
end
redis.call('HSET', KEYS[1], ARGV[1] .. ':end', end_record('cancelled', int(now), '', '', ARGV[2]))
redis.call('ZREM', KEYS[2], ARGV[1])
return {1, now}
