-- request.lua: queue a `run_now` request of a job and wake the replicas.
--
-- KEYS[1]  requests  list of pending requests, oldest first: "<requested_ms>" each
-- ARGV[1]  request time in ms
-- ARGV[2]  how long the list is kept without being taken, in seconds
-- ARGV[3]  the wake-up channel of the scheduler's key prefix
-- ARGV[4]  the job's name (the message: which job has a request)
--
-- Returns  the number of pending requests of the job, this one included.
--
-- The message is a hint: a replica that missed it (not subscribed, reconnecting) still finds
-- the request by its fallback poll. PUBLISH, not SPUBLISH: on a cluster it reaches the
-- subscribers on every node.
-- Retry safety: a repeated call queues a second request (a second run).

local pending = redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
redis.call('PUBLISH', ARGV[3], ARGV[4])
return pending
