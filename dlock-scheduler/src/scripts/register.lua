-- register.lua: publish one scheduler instance's entry in the job registry (which jobs it runs,
-- with their schedules), or withdraw it when the scheduler stops. Run once per heartbeat.
--
-- KEYS[1]  index  zset: member = instance token, score = server time (ms) when its entry expires
-- KEYS[2]  entry  string: "3 <beat ms> <ttl ms> <liveness ms>\n<ARGV[3]>", expiring after the
--                 ttl (PX)
-- ARGV[1]  instance token
-- ARGV[2]  ttl in ms: the entry lives this long from now unless renewed; 0 withdraws it
-- ARGV[3]  the replica and its jobs (see registry.rs)
-- ARGV[4]  liveness in ms: how long after this heartbeat the replica counts as live (readers
--          show it stalled after that; the ttl is longer, so it shows stalled before it goes)
--
-- Returns  the server's time in ms.
--
-- Both keys share the hash tag `{sched:}`: one cluster slot. The entry expires by itself, so a
-- replica that dies vanishes within the ttl; the index is pruned of expired members by every
-- call and expires itself with its last member. Retry safety: repeating it sets the same state
-- (a later heartbeat time).

local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now_ms))
if ttl > 0 then
  local head = string.format('3 %.0f %.0f %.0f\n', now_ms, ttl, tonumber(ARGV[4]))
  redis.call('SET', KEYS[2], head .. ARGV[3], 'PX', string.format('%.0f', ttl))
  redis.call('ZADD', KEYS[1], string.format('%.0f', now_ms + ttl), ARGV[1])
else
  redis.call('DEL', KEYS[2])
  redis.call('ZREM', KEYS[1], ARGV[1])
end
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if last[2] then
  local left = tonumber(last[2]) - now_ms
  if left < 1 then left = 1 end
  redis.call('PEXPIRE', KEYS[1], string.format('%.0f', left))
end
return now_ms
