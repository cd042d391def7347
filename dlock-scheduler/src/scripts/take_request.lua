-- take_request.lua: take the oldest `run_now` request of a job and claim its run, in one
-- atomic step, so that a request is never popped without being claimed (or the other way).
--
-- KEYS[1]  claims    zset (see claim.lua)
-- KEYS[2]  runs      zset (see claim.lua)
-- KEYS[3]  ledger    hash (see claim.lua)
-- KEYS[4]  paused    string: present while the job is paused
-- KEYS[5]  requests  list of pending requests, oldest first: "<requested_ms>" each
-- KEYS[6]  retries   zset (see claim.lua)
-- ARGV[1]  run id for the request's run, chosen by the caller ("m…", unique per attempt)
-- ARGV[2]  replica id   ARGV[3] host   ARGV[4] pid   ARGV[5] attempt token
-- ARGV[6]  claim retention in ms
-- ARGV[7]  how many runs the ledger keeps
-- ARGV[8]  attempt lease in ms for at-least-once delivery, 0 for at most once
--
-- Returns  {1, requested_ms, now_ms}  this replica took a request and must run it
--          {0, "empty", now_ms}       no request is pending
--          {0, "paused", now_ms}      the job is paused: requests stay queued until resumed
--          {0, "claimed", now_ms}     the run id is taken (not expected): nothing changed
--
-- Retry safety: a call whose reply was lost may have taken a request; its attempt withdraws the
-- claim by its token once Redis answers again, and withdraw.lua puts the request back.
-- All keys share the job's hash tag.

local now = server_ms()
if redis.call('EXISTS', KEYS[4]) == 1 then
  return {0, 'paused', now}
end
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return {0, 'claimed', now}
end
local request = redis.call('LPOP', KEYS[5])
if not request then
  return {0, 'empty', now}
end
local requested = tonumber(request) or now
open_run(KEYS[1], KEYS[2], KEYS[3], KEYS[6], ARGV[1], int(requested), now, tonumber(ARGV[6]),
  tonumber(ARGV[7]), claim_record(ARGV[2], ARGV[3], ARGV[4], now, '1', ARGV[5], 1),
  tonumber(ARGV[8]))
return {1, requested, now}
