-- request.lua: queue a `run_now` request of a job and wake the replicas.
--
-- KEYS[1]  requests  list of pending requests, oldest first: "<requested_ms>" each
-- ARGV[1]  request time in ms
-- ARGV[2]  how long the list is kept without being taken, in seconds
-- ARGV[3]  the job's wake-up channel, "<prefix>{sched:<job>}:wake": the hash tag of KEYS[1]
-- ARGV[4]  the job's name (the message)
-- ARGV[5]  "SPUBLISH" on a cluster (the replicas listen with SSUBSCRIBE), else "PUBLISH"
--
-- Returns  the number of pending requests of the job, this one included.
--
-- The message is a hint: a replica that missed it (not subscribed, reconnecting) still finds
-- the request by its fallback poll. On a cluster the channel is sharded: it shares KEYS[1]'s
-- slot, so this script may publish on it, and the message stays on that shard.
-- Retry safety: a repeated call queues a second request (a second run).

local pending = redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
local publish = 'PUBLISH'
if ARGV[5] == 'SPUBLISH' then
  publish = 'SPUBLISH'
end
redis.call(publish, ARGV[3], ARGV[4])
return pending
