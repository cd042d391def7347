-- read_registry.lua: the job registry's index and the server's time, for readers (read-only).
--
-- KEYS[1]  index  zset: member = instance token, score = server time (ms) when its entry expires
--
-- Returns  {now_ms, instance...}: the server's time in ms (readers call an entry stalled when
--          it is past the entry's last heartbeat plus its liveness), then the instances whose
--          entries have not expired, in the index's order.
--
-- One script rather than ZRANGE and TIME: on a cluster, TIME has no key and could go to another
-- node than the one whose clock wrote the heartbeats. Retry safety: it writes nothing.

local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local out = {now_ms}
for _, instance in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. string.format('%.0f', now_ms), '+inf')) do
  out[#out + 1] = instance
end
return out
