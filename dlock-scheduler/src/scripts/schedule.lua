-- schedule.lua: add (or replace) or remove one run-time schedule, and tell every replica.
--
-- KEYS[1]  schedules  hash: schedule name -> record (JSON, see schedule_store.rs)
-- KEYS[2]  rev        string: a counter moved by every change (replicas poll it)
-- ARGV[1]  the schedule's name
-- ARGV[2]  its record; "" removes the schedule
-- ARGV[3]  the wake-up channel, "<prefix>{sched:}:schedules:wake" (the hash tag of KEYS)
-- ARGV[4]  "SPUBLISH" on a cluster (the replicas listen with SSUBSCRIBE), else "PUBLISH"
--
-- Returns  {changed 0|1, existed 0|1}: whether the stored record changed (then the counter
--          moved and the replicas were woken), and whether a schedule of that name was there
--
-- Retry safety: a call repeated with the same record (a retried add or remove) changes
-- nothing the second time. The message is a hint: a replica that missed it sees the counter
-- move at its next poll. Both keys and the channel share the hash tag `{sched:}`.

local old = redis.call('HGET', KEYS[1], ARGV[1])
local existed = 0
if old then
  existed = 1
end
if (ARGV[2] == '' and not old) or old == ARGV[2] then
  return {0, existed}
end
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
local rev = redis.call('INCR', KEYS[2])
local publish = 'PUBLISH'
if ARGV[4] == 'SPUBLISH' then
  publish = 'SPUBLISH'
end
redis.call(publish, ARGV[3], rev)
return {1, existed}
