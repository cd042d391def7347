-- resume.lua: resume a paused job and, when `run_now` requests or at-least-once attempts wait
-- for it, wake the replicas so that they take them at once (not at their next fallback poll).
--
-- KEYS[1]  paused    the job's pause record (any value: paused)
-- KEYS[2]  requests  the job's list of pending `run_now` requests (request.lua)
-- KEYS[3]  retries   the job's at-least-once runs not final yet (take_retry.lua)
-- ARGV[1]  the job's wake-up channel, "<prefix>{sched:<job>}:wake": the hash tag of the keys
-- ARGV[2]  the job's name (the message)
-- ARGV[3]  "SPUBLISH" on a cluster (the replicas listen with SSUBSCRIBE), else "PUBLISH"
--
-- Returns  the number of pending requests and runs (the replicas were woken when it is above
--          zero).
--
-- Retry safety: resuming twice is resuming once; a repeated wake-up finds nothing to take or
-- takes what is pending, as the first would have.

redis.call('DEL', KEYS[1])
local pending = redis.call('LLEN', KEYS[2]) + redis.call('ZCARD', KEYS[3])
if pending > 0 then
  local publish = 'PUBLISH'
  if ARGV[3] == 'SPUBLISH' then
    publish = 'SPUBLISH'
  end
  redis.call(publish, ARGV[1], ARGV[2])
end
return pending
