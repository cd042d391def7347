-- finish.lua: record that a run's attempt is running, or how it ended — only by the attempt
-- that holds the run's claim (its token); under at-least-once delivery, schedule the next
-- attempt when this one failed and attempts are left.
--
-- KEYS[1]  ledger   hash (see common.lua)
-- KEYS[2]  retries  zset (see claim.lua, take_retry.lua)
-- ARGV[1]  run id
-- ARGV[2]  the attempt's token (as in its claim record)
-- ARGV[3]  outcome: "running" | "succeeded" | "failed" | "cancelled" | "skipped_overlap"
--          | "skipped_group"
-- ARGV[4]  fencing token of the attempt's lease ("" if none)
-- ARGV[5]  error text ("" if none; no \31 or \30)
-- ARGV[6]  retry: the base backoff in ms when this outcome is retried (at-least-once delivery,
--          a failed or cancelled attempt), "" when it is final
-- ARGV[7]  attempts in all (at-least-once delivery; ignored without ARGV[6])
-- ARGV[8]  the job's wake channel   ARGV[9] the message (the job's name)
-- ARGV[10] "SPUBLISH" on a cluster, else "PUBLISH"
-- ARGV[11] the end record's flags ("" or "s": the lease was suspect as the attempt ended; see
--          common.lua), kept with an end, not with "running"
--
-- Returns  1  recorded, final (ended_ms is the server time; "running" records no end time)
--          2  recorded, and the next attempt is due at the returned time: {2, next_retry_ms}
--          0  no such run, or its current attempt is another one (superseded): nothing changed
--
-- A retry is announced on the wake channel (a hint: replicas also look at their next poll).
-- Retry safety: writing the same outcome twice leaves the same record (the second call
-- returns what the first did, without moving the retry).

local claim = redis.call('HGET', KEYS[1], ARGV[1] .. ':claim')
if not claim then
  return {0}
end
local c = fields(claim)
if c[1] ~= '1' or c[7] ~= ARGV[2] then
  return {0}
end
local current = redis.call('HGET', KEYS[1], ARGV[1] .. ':end')
if current then
  local e = fields(current)
  if e[1] ~= '1' then
    return {0}
  end
  if e[2] ~= 'running' then
    if e[2] ~= ARGV[3] then
      return {0}
    end
    if e[5] ~= '' then
      return {2, tonumber(e[5])}
    end
    return {1}
  end
end
if ARGV[3] == 'running' then
  redis.call('HSET', KEYS[1], ARGV[1] .. ':end', end_record('running', '', ARGV[4], '', ''))
  return {1}
end
local now = server_ms()
local attempt = tonumber(c[8])
if ARGV[6] ~= '' and attempt < tonumber(ARGV[7]) then
  local due = now + backoff(tonumber(ARGV[6]), attempt)
  redis.call('HSET', KEYS[1], ARGV[1] .. ':end',
    end_record(ARGV[3], int(now), ARGV[4], int(due), ARGV[5], ARGV[11]))
  redis.call('ZADD', KEYS[2], int(due), ARGV[1])
  local publish = 'PUBLISH'
  if ARGV[10] == 'SPUBLISH' then
    publish = 'SPUBLISH'
  end
  redis.call(publish, ARGV[8], ARGV[9])
  return {2, due}
end
redis.call('HSET', KEYS[1], ARGV[1] .. ':end',
  end_record(ARGV[3], int(now), ARGV[4], '', ARGV[5], ARGV[11]))
redis.call('ZREM', KEYS[2], ARGV[1])
return {1}
