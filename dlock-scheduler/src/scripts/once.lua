-- once.lua: enqueue a one-off job of a handler: a pending run of the handler's hidden job
-- `once:<handler>`, due at a given time, that the replicas claim as its first attempt with
-- take_retry.lua when it is due (by the server's clock).
--
-- KEYS[1]  claims   zset (see claim.lua): the run id, by enqueue time; kept for the retention
-- KEYS[2]  runs     zset (see claim.lua): the run id, by due time (its "occurrence")
-- KEYS[3]  ledger   hash (see common.lua); "<id>:args" holds the run's JSON arguments
-- KEYS[4]  retries  zset (see take_retry.lua): the run id, by due time
-- ARGV[1]  run id chosen by the caller ("o" + 16 hex digits), or "" with an idempotency key
-- ARGV[2]  idempotency key, or "" for none: the run id is then "o" + the key's SHA-1 (hex),
--          and a new run stores the key itself as "<id>:key" = "1\31<key>" (format version 1:
--          what operators see of it)
-- ARGV[3]  due time in ms (server clock; a time in the past means now), or "" to use ARGV[4]
-- ARGV[4]  delay in ms from now (server clock), when ARGV[3] is ""
-- ARGV[5]  replica id   ARGV[6] host   ARGV[7] pid   (who enqueued it)
-- ARGV[8]  the arguments (JSON)
-- ARGV[9]  claim retention in ms
-- ARGV[10] the job's wake channel   ARGV[11] the message (the job's name)
-- ARGV[12] "SPUBLISH" on a cluster, else "PUBLISH"
-- ARGV[13] debounce: the longest wait in ms from the key's first call, or "" for none (with
--          an idempotency key only)
-- ARGV[14] "1": replace the arguments of the key's pending run with ARGV[8], else ""
-- ARGV[15] the submitter's W3C traceparent (checked by the caller), or "" for none: stored as
--          "<id>:trace" = "1\31<traceparent>" (format version 1); a replace replaces it too
--
-- Returns  {1, id, due_ms, now_ms}  enqueued
--          {0, id, due_ms, now_ms}  the idempotency key was used already (its run is pending,
--                                   in the ledger, or was enqueued within the retention):
--                                   nothing changed; due_ms is -1 when only the claim is left
--          {2, id, -1, now_ms}      the caller's run id is taken (not expected): nothing
--                                   changed, call again with another
--          {3, id, due_ms, now_ms}  debounce or replace: the key's run was still pending and
--                                   was updated (its due time is now due_ms)
--          {4, id, due_ms, now_ms}  debounce or replace: the key's run is no longer pending
--                                   (claimed, running, ended, cancelled, or only its claim is
--                                   left; due_ms -1 then): nothing changed
--          {5, id, due_ms, now_ms}  debounce or replace: the key's run has records of another
--                                   format version (a newer dlock's): refused, nothing changed
--
-- The pending run's records (format version 1): a claim of attempt 0 by the enqueuing replica
-- with no token (no attempt can record, renew or withdraw it), and an end record "scheduled"
-- whose next_retry_ms is the due time. take_retry.lua claims attempt 1 over it and does not
-- archive attempt 0 (it never ran). A new run due before every pending one is announced on the
-- wake channel, so that replicas sleeping until a later due time look now (a hint: they also
-- look at their fallback poll).
-- Debounce (ARGV[13]): a new run is due at min(requested, now + max wait); a call for a pending
-- run moves it to min(requested, first call + max wait) (a time past is due now), where the first
-- call is its attempt 0's claim time (kept by every update): however often the key is called,
-- the run is due no later than the first call plus the max wait (as that call gave it).
-- Replace (ARGV[14]): the pending run's arguments become ARGV[8]; one "<id>:args" field, so
-- never two payloads. Pending means records of version 1, attempt 0, "scheduled": a run a
-- replica claimed (take_retry.lua, atomically) is never altered, nor are its later attempts.
-- The key record is written only with a new run (debounce and replace keep it: the same key
-- gives the same id); a run enqueued by an older dlock has none, and readers show its key as
-- unknown.
-- Retry safety: with an idempotency key, a repeated call enqueues nothing (a repeated
-- debounce moves the due time to the same place or later, still capped; a repeated replace
-- writes the same arguments); without one, a repeated call enqueues a second run.
-- All keys share the job's hash tag.

local now = server_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', int(now - tonumber(ARGV[9])))
-- The requested due time (the past: now).
local requested = now + tonumber(ARGV[4])
if ARGV[3] ~= '' then
  requested = math.max(tonumber(ARGV[3]), now)
end
local max_wait = tonumber(ARGV[13] or '')
local replace = ARGV[14] == '1'
-- Wakes the replicas when a run due at `due` is due before every pending one was (`first`,
-- read before the change): replicas sleeping until a later due time look now (a hint: they
-- also look at their fallback poll).
local function announce(first, due)
  if not first[2] or due < tonumber(first[2]) then
    local publish = 'PUBLISH'
    if ARGV[12] == 'SPUBLISH' then
      publish = 'SPUBLISH'
    end
    redis.call(publish, ARGV[10], ARGV[11])
  end
end
local id = ARGV[1]
if ARGV[2] ~= '' then
  id = 'o' .. redis.sha1hex(ARGV[2])
  if redis.call('ZSCORE', KEYS[1], id) or redis.call('HEXISTS', KEYS[3], id .. ':claim') == 1 then
    local due = tonumber(redis.call('ZSCORE', KEYS[2], id) or -1)
    if not max_wait and not replace then
      return {0, id, due, now}
    end
    local claim = redis.call('HGET', KEYS[3], id .. ':claim')
    local current = redis.call('HGET', KEYS[3], id .. ':end')
    if not claim or not current then
      return {4, id, due, now}
    end
    local c = fields(claim)
    local e = fields(current)
    if c[1] ~= '1' or e[1] ~= '1' then
      -- A newer dlock's records (a rolling deploy): never misread, never rewritten.
      return {5, id, due, now}
    end
    if c[8] ~= '0' or e[2] ~= 'scheduled' then
      return {4, id, due, now}
    end
    if max_wait then
      -- Not clamped to now: a cap in the past keeps the run due (now), not later.
      due = math.min(requested, tonumber(c[5]) + max_wait)
      local first = redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')
      redis.call('ZADD', KEYS[2], int(due), id)
      redis.call('ZADD', KEYS[4], int(due), id)
      redis.call('HSET', KEYS[3], id .. ':end', end_record('scheduled', '', '', int(due), ''))
      announce(first, due)
    end
    if replace then
      redis.call('HSET', KEYS[3], id .. ':args', ARGV[8])
      if (ARGV[15] or '') ~= '' then
        redis.call('HSET', KEYS[3], id .. ':trace', '1\31' .. ARGV[15])
      else
        redis.call('HDEL', KEYS[3], id .. ':trace')
      end
    end
    return {3, id, due, now}
  end
elseif redis.call('ZSCORE', KEYS[1], id) or redis.call('HEXISTS', KEYS[3], id .. ':claim') == 1 then
  return {2, id, -1, now}
end
local due = requested
if max_wait then
  due = math.min(requested, now + max_wait)
end
local first = redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')
redis.call('ZADD', KEYS[1], int(now), id)
redis.call('ZADD', KEYS[2], int(due), id)
redis.call('ZADD', KEYS[4], int(due), id)
redis.call('HSET', KEYS[3],
  id .. ':claim', claim_record(ARGV[5], ARGV[6], ARGV[7], now, 1, '', 0),
  id .. ':end', end_record('scheduled', '', '', int(due), ''),
  id .. ':args', ARGV[8])
if ARGV[2] ~= '' then
  redis.call('HSET', KEYS[3], id .. ':key', '1\31' .. ARGV[2])
end
if (ARGV[15] or '') ~= '' then
  redis.call('HSET', KEYS[3], id .. ':trace', '1\31' .. ARGV[15])
end
announce(first, due)
return {1, id, due, now}
