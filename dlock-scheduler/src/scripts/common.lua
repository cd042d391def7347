-- common.lua: helpers prepended to the scheduler's scripts that read or write run records
-- (claim, take_request, take_retry, renew_attempt, finish, withdraw). It defines functions
-- only; the contract of each script is in its own file, right below.
--
-- Run records, format version 1, in the job's ledger hash (fields separated by \31; no field
-- holds \31 or \30: ids and names are checked, texts cleaned by the client):
--   "<id>:claim"     "1\31<replica>\31<host>\31<pid>\31<claimed_ms>\31<manual 0|1>\31<attempt token>\31<attempt>"
--                    the run's current attempt: who claimed it, when, and the token that names
--                    that one attempt of one replica process (only it may record, renew or
--                    withdraw it)
--   "<id>:end"       "1\31<outcome>\31<ended_ms>\31<fence>\31<next_retry_ms>\31<text>[\31<flags>]"
--                    how the current attempt ended ("running" while it runs, no end time);
--                    flags (absent when none): "s" when the attempt's lease was suspect as it
--                    ended (a renewal unacknowledged for a renewal interval: it may have ended
--                    after another took over);
--                    next_retry_ms is set while a retry is pending (at-least-once delivery);
--                    "scheduled" (with next_retry_ms = its due time) for a one-off job that
--                    waits for its first attempt (once.lua: its claim is attempt 0, no token)
--   "<id>:attempts"  the run's earlier attempts, oldest first, separated by \30, each
--                    "1\31<attempt>\31<replica>\31<host>\31<pid>\31<claimed_ms>\31<ended_ms>\31<outcome>\31<fence>\31<text>"
--   "<id>:args"      a one-off job's arguments (JSON), as given when it was enqueued
--   "<id>:trace"     "1\31<traceparent>": the W3C trace context of whoever enqueued a one-off
--                    job (once.lua), absent when it gave none
--   "<id>:key"       "1\31<key>": the idempotency key a keyed one-off job was enqueued with
--                    (once.lua; the run id is "o" + its SHA-1), absent for one without a key
--                    (everything after the first \31 is the key: it may hold any byte)
-- A record of another version is never rewritten: the scripts answer as if it were another
-- attempt's (nothing changes), and the readers refuse it by its version.

-- The Redis server's time in ms: every fire time, lease and retry is measured by it.
local function server_ms()
  local now = redis.call('TIME')
  return tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
end

-- An integer as a string without exponent, for scores and records.
local function int(n)
  return string.format('%.0f', n)
end

-- The \31-separated fields of a record (empty fields kept).
local function fields(record)
  local out = {}
  for field in string.gmatch(record .. '\31', '([^\31]*)\31') do
    out[#out + 1] = field
  end
  return out
end

-- A claim record of version 1.
local function claim_record(replica, host, pid, claimed_ms, manual, token, attempt)
  return '1\31' .. replica .. '\31' .. host .. '\31' .. pid .. '\31' .. int(claimed_ms) .. '\31'
    .. manual .. '\31' .. token .. '\31' .. int(attempt)
end

-- An end record of version 1.
local function end_record(outcome, ended_ms, fence, next_retry_ms, text, flags)
  local record = '1\31' .. outcome .. '\31' .. ended_ms .. '\31' .. fence .. '\31'
    .. next_retry_ms .. '\31' .. text
  if flags and flags ~= '' then
    record = record .. '\31' .. flags
  end
  return record
end

-- The delay before attempt `attempt + 1`: the base doubled per attempt after the first, at
-- most one hour.
local function backoff(base_ms, attempt)
  local delay = base_ms * 2 ^ (attempt - 1)
  if delay > 3600000 then
    delay = 3600000
  end
  return delay
end

-- Moves the current attempt (claim `c`, end `e`, both field tables of version 1) of run `id`
-- into its list of earlier attempts.
local function archive_attempt(ledger, id, c, e)
  local entry = '1\31' .. c[8] .. '\31' .. c[2] .. '\31' .. c[3] .. '\31' .. c[4] .. '\31' .. c[5]
    .. '\31' .. e[3] .. '\31' .. e[2] .. '\31' .. e[4] .. '\31' .. (e[6] or '')
  local earlier = redis.call('HGET', ledger, id .. ':attempts')
  if earlier then
    entry = earlier .. '\30' .. entry
  end
  redis.call('HSET', ledger, id .. ':attempts', entry)
end

-- Claims run `id` (of the occurrence or request time `occurrence_ms`) at `now`: remembers the
-- claim for `retention_ms`, adds the run to the ledger and trims the ledger to `keep` runs
-- (but never a run whose attempts are still going or due: it stays until it is final). With
-- `lease_ms` > 0 (at-least-once delivery) the attempt's lease starts: the run is in `retries`
-- until its deadline, renewed by its replica (renew_attempt.lua).
local function open_run(claims, runs, ledger, retries, id, occurrence_ms, now, retention_ms, keep,
                        record, lease_ms)
  redis.call('ZADD', claims, int(now), id)
  redis.call('ZREMRANGEBYSCORE', claims, '-inf', int(now - retention_ms))
  redis.call('ZADD', runs, occurrence_ms, id)
  redis.call('HSET', ledger, id .. ':claim', record)
  if lease_ms > 0 then
    redis.call('ZADD', retries, int(now + lease_ms), id)
  end
  local extra = redis.call('ZCARD', runs) - keep
  if extra > 0 then
    local old = redis.call('ZRANGE', runs, 0, extra - 1)
    for _, old_id in ipairs(old) do
      if not redis.call('ZSCORE', retries, old_id) then
        redis.call('HDEL', ledger, old_id .. ':claim', old_id .. ':end', old_id .. ':attempts')
        redis.call('ZREM', runs, old_id)
      end
    end
  end
end
