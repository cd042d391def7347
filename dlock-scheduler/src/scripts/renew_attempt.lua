-- renew_attempt.lua: renew the lease of a running attempt of an at-least-once run, so that the
-- other replicas do not take it for abandoned; or learn that it was superseded.
--
-- KEYS[1]  ledger   hash (see common.lua)
-- KEYS[2]  retries  zset (see claim.lua, take_retry.lua)
-- ARGV[1]  run id
-- ARGV[2]  the attempt's token
-- ARGV[3]  the attempt lease in ms
--
-- Returns  {1, now_ms}  renewed: the run's deadline is now + the lease
--          {0, now_ms}  the run's current attempt is another one, or this one has ended or was
--                       found abandoned (take_retry.lua): the caller stops its run
--
-- An attempt whose deadline passed but that nobody declared abandoned yet is renewed: it
-- still holds the run. The attempt's run lock has a lease of its own; losing that one ends the
-- attempt too (the replica records it, and it is retried).
-- Retry safety: renewing twice sets a later deadline.

local now = server_ms()
local claim = redis.call('HGET', KEYS[1], ARGV[1] .. ':claim')
if not claim then
  return {0, now}
end
local c = fields(claim)
if c[1] ~= '1' or c[7] ~= ARGV[2] then
  return {0, now}
end
local current = redis.call('HGET', KEYS[1], ARGV[1] .. ':end')
if current and fields(current)[2] ~= 'running' then
  return {0, now}
end
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  return {0, now}
end
redis.call('ZADD', KEYS[2], int(now + tonumber(ARGV[3])), ARGV[1])
return {1, now}
