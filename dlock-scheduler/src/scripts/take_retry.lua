-- take_retry.lua: the at-least-once side of a job's runs. Looks at the run that is due first
-- in `retries` and, by the server's clock:
--   * its attempt's lease ran out without an end (its replica was killed, paused or cut off):
--     records that attempt abandoned and schedules the next one after the backoff (or records
--     the run abandoned when no attempt is left);
--   * its next attempt is due: claims that attempt for the caller, with a new token. A
--     one-off job (once.lua) is a run whose attempt 0 is "scheduled": its first attempt is
--     claimed here when it is due, and attempt 0 (which never ran) is not kept as an earlier
--     attempt.
--
-- KEYS[1]  runs     zset (see claim.lua)
-- KEYS[2]  ledger   hash (see common.lua)
-- KEYS[3]  paused   string: present while the job is paused
-- KEYS[4]  retries  zset: member = run id of an at-least-once run whose attempts are not
--                   final, score = server time (ms) to look at it: the running attempt's lease
--                   deadline (renew_attempt.lua), or when its next attempt is due (finish.lua)
-- ARGV[1]  replica id   ARGV[2] host   ARGV[3] pid   ARGV[4] token for the attempt claimed
-- ARGV[5]  the attempt lease in ms (the job's lease)
-- ARGV[6]  attempts in all   ARGV[7] the base backoff in ms
--
-- Returns  {1, id, attempt, occurrence_ms, manual 0|1, args, trace, now_ms}  the caller claimed
--                        attempt `attempt` of run `id` and must run it; args: the run's JSON
--                        arguments ("<id>:args", a one-off job's), or nil; trace: its
--                        "<id>:trace" record (the submitter's traceparent, once.lua), or nil
--          {3, now_ms}           something was settled (an abandoned attempt): call again
--          {0, next_ms, now_ms}  nothing due; the first run is due at next_ms (-1: none)
--          {0, -2, now_ms}       the job is paused: pending attempts wait until it is resumed
--
-- Errors   a run whose records are of another format version (refused by name; nothing is
--          changed).
--
-- Retry safety: a call whose reply was lost may have claimed an attempt nobody runs; its lease
-- runs out, and it is recorded abandoned like a killed replica's (it counts as an attempt).
-- All keys share the job's hash tag.

local now = server_ms()
if redis.call('EXISTS', KEYS[3]) == 1 then
  return {0, -2, now}
end
local due = redis.call('ZRANGE', KEYS[4], '-inf', int(now), 'BYSCORE', 'LIMIT', 0, 1)
if not due[1] then
  local first = redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')
  if first[2] then
    return {0, tonumber(first[2]), now}
  end
  return {0, -1, now}
end
local id = due[1]
local claim = redis.call('HGET', KEYS[2], id .. ':claim')
local current = redis.call('HGET', KEYS[2], id .. ':end')
if not claim then
  redis.call('ZREM', KEYS[4], id)
  return {3, now}
end
local c = fields(claim)
local e = current and fields(current) or {'1', 'running', '', '', '', ''}
if c[1] ~= '1' or e[1] ~= '1' then
  -- A record of another format (a newer dlock's, during a rolling deploy): not this version's
  -- to settle, nor to drop; refused by name, and left to the replicas that read it.
  return redis.error_reply('dlock: the run ' .. id .. ' has records of format version '
    .. c[1] .. '/' .. e[1] .. '; this dlock reads version 1: upgrade this replica')
end
local attempt = tonumber(c[8])
if e[2] == 'running' then
  -- The attempt's lease ran out without an end: abandoned.
  local text = 'its replica stopped renewing the attempt (killed, paused or cut off from Redis)'
  if attempt < tonumber(ARGV[6]) then
    local next_at = now + backoff(tonumber(ARGV[7]), attempt)
    redis.call('HSET', KEYS[2], id .. ':end', end_record('abandoned', int(now), e[4], int(next_at), text))
    redis.call('ZADD', KEYS[4], int(next_at), id)
  else
    redis.call('HSET', KEYS[2], id .. ':end', end_record('abandoned', int(now), e[4], '', text))
    redis.call('ZREM', KEYS[4], id)
  end
  return {3, now}
end
if e[5] == '' then
  -- Final already.
  redis.call('ZREM', KEYS[4], id)
  return {3, now}
end
if attempt > 0 then
  archive_attempt(KEYS[2], id, c, e)
end
redis.call('HSET', KEYS[2], id .. ':claim',
  claim_record(ARGV[1], ARGV[2], ARGV[3], now, c[6], ARGV[4], attempt + 1))
redis.call('HDEL', KEYS[2], id .. ':end')
redis.call('ZADD', KEYS[4], int(now + tonumber(ARGV[5])), id)
local occurrence = redis.call('ZSCORE', KEYS[1], id)
local args = redis.call('HGET', KEYS[2], id .. ':args')
local trace = redis.call('HGET', KEYS[2], id .. ':trace')
return {1, id, attempt + 1, tonumber(occurrence or now), tonumber(c[6]), args, trace, now}
