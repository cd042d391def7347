-- heartbeat.lua: keep a replica in a job's live set (the replicas the claims take turns
-- among), or take it out when it shuts down; and tell the replica the server's time.
--
-- KEYS[1]  replicas  zset: member = replica id, score = server time (ms) until which it is live
-- KEYS[2]  retries   zset: the job's pending at-least-once runs (take_retry.lua); given only
--                    for an at-least-once job
-- ARGV[1]  replica id
-- ARGV[2]  liveness in ms: live this long from now; 0 removes the replica
--
-- Returns  {now_ms, due_ms}: the server's time in ms (the replica corrects its clock by it),
--          and when the job's first pending at-least-once run is due (-1: none, or no KEYS[2]),
--          so that every replica is there when an attempt's lease lapses.
--
-- claim.lua refreshes the caller the same way, so a replica of a frequent job needs no
-- separate heartbeat. Retry safety: repeating it sets the same state.

local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local liveness = tonumber(ARGV[2])
if liveness > 0 then
  redis.call('ZADD', KEYS[1], string.format('%.0f', now_ms + liveness), ARGV[1])
  redis.call('PEXPIRE', KEYS[1], string.format('%.0f', liveness * 2))
else
  redis.call('ZREM', KEYS[1], ARGV[1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now_ms))
local due = -1
if KEYS[2] then
  local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  due = first[2] and tonumber(first[2]) or -1
end
return {now_ms, due}
