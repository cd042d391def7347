-- fence_raise.lua: round 2 of a quorum lock's fencing (quorum.rs): on one node, raise the fence
-- counter of the lock's slot to at least F, only while the caller still holds the lock there.
--
-- KEYS[1]  lock key (see acquire.lua)
-- ARGV[1]  owner token of the caller's hold on this node
-- ARGV[2]  the fence counter of the lock's slot (see next_fence in common.lua)
-- ARGV[3]  F: the quorum fence (the largest fence of round 1, plus one), a decimal integer
-- ARGV[4]  this node's "data since" key (key.rs: one per server, or per slot on a cluster): when
--          the node's data began, in ms of its own clock, written the first time it is missing
-- ARGV[5]  the lock's TTL in ms
--
-- Returns  1       the counter is at least F now (raised, or it was already)
--          {2, ms} kept out: this node's data is younger than one TTL (it restarted without its
--                  data, or is new), for ms more; the counter is unchanged. A node that lost its
--                  data may have forgotten another holder's lease that is still running, so it
--                  must not count towards a majority until every such lease has run out.
--          0       nobody holds the lock (the caller's lease on this node expired): unchanged
--          -1      another owner holds it (or data dlock did not write): unchanged
--          error DLOCKFOREIGN  the fence counter holds data dlock did not write
--
-- Why owner-checked: the raise must happen inside the caller's hold on this node, so that on
-- this node it is ordered by the lock before every later holder's INCR (next_fence), which then
-- issues more than F. The counter never goes down, so the script can be retried safely.
-- Why "data since" here: a restarted node's keys are gone, this one included, so its absence
-- marks a node whose memory starts now. A node's clock that went back restarts the wait (the
-- record is moved to now): conservative, and bounded by one TTL.

local held = redis.pcall('GET', KEYS[1])
if not held then
  return 0
end
if type(held) ~= 'string' or string.sub(held, 1, 32) ~= ARGV[1] then
  return -1
end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local since = redis.pcall('GET', ARGV[4])
if since then
  since = type(since) == 'string' and string.match(since, '^%d+$') and tonumber(since)
  if not since then
    return redis.error_reply('DLOCKFOREIGN ' .. ARGV[4]
      .. ' holds data dlock did not write (a quorum node\'s data-since record)')
  end
end
if not since or since > now then
  redis.call('SET', ARGV[4], now)
  since = now
end
local left = since + tonumber(ARGV[5]) - now
if left > 0 then
  return {2, left}
end
local current = redis.pcall('GET', ARGV[2])
if current then
  local value = type(current) == 'string' and string.match(current, '^%d+$') and tonumber(current)
  if not value then
    return redis.error_reply('DLOCKFOREIGN ' .. ARGV[2]
      .. ' holds data dlock did not write (the fence counter)')
  end
  if value >= tonumber(ARGV[3]) then
    return 1
  end
end
redis.call('SET', ARGV[2], ARGV[3])
return 1
