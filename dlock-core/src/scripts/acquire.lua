-- acquire.lua: take a mutex when it is free; otherwise say for how long it is held and, for a
-- waiting caller, put it in the FIFO queue so that release hands the lock straight to it.
--
-- KEYS[1]  lock key   string "<token> <fence> <acquired_ms> <meta>", PX = the lease
-- KEYS[2]  fence key  string: the last fencing token issued for this name; never expires
-- KEYS[3]  queue key  list of waiter entries "<token> <client> <lease_ms> <meta>", oldest first
-- ARGV[1]  owner token (32 hex digits), one per acquire call, the same for each of its retries
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  holder metadata (free text without newlines)
-- ARGV[4]  mode: "try"  leave the queue alone
--                "wait" on failure append ARGV[5] unless it is queued already; on success drop it
--                "last" drop ARGV[5] from the queue whatever the outcome (the wait is over)
-- ARGV[5]  the caller's queue entry (modes "wait" and "last"; ignored for "try")
--
-- Returns  {1, fence, pttl_ms}   the caller holds the lock: taken now, or already its own (a
--                                retried request, or a hand-off granted while it waited)
--          {0, pttl_ms, now_ms}  another owner holds it for pttl_ms more; now_ms = server clock
--
-- Retry safety: the token names the acquisition, so a request that runs twice returns the same
-- fence the second time and never queues the caller twice.
-- Fencing: fence = max(last + 1, server time in us), so tokens keep increasing even after a
-- restart or failover lost the counter, as long as the server clock does not step back.
-- Lua numbers are doubles: integers stay exact below 2^53 (~9e15, year 2255 in microseconds).

local token, mode = ARGV[1], ARGV[4]
local held = redis.call('GET', KEYS[1])

if held then
  if string.sub(held, 1, 32) == token then
    if mode ~= 'try' then
      redis.call('LREM', KEYS[3], 1, ARGV[5])
    end
    return {1, tonumber(string.match(held, '^%S+ (%d+)')), redis.call('PTTL', KEYS[1])}
  end
  if mode == 'wait' then
    if not redis.call('LPOS', KEYS[3], ARGV[5]) then
      redis.call('RPUSH', KEYS[3], ARGV[5])
    end
  elseif mode == 'last' then
    redis.call('LREM', KEYS[3], 1, ARGV[5])
  end
  local now = redis.call('TIME')
  return {0, redis.call('PTTL', KEYS[1]), tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)}
end

local now = redis.call('TIME')
local now_us = tonumber(now[1]) * 1000000 + tonumber(now[2])
local fence = math.max((tonumber(redis.call('GET', KEYS[2])) or 0) + 1, now_us)
local fence_s = string.format('%.0f', fence)
redis.call('SET', KEYS[2], fence_s)
redis.call('SET', KEYS[1],
  token .. ' ' .. fence_s .. ' ' .. string.format('%.0f', math.floor(now_us / 1000)) .. ' ' .. ARGV[3],
  'PX', ARGV[2])
if mode ~= 'try' then
  redis.call('LREM', KEYS[3], 1, ARGV[5])
end
return {1, fence, tonumber(ARGV[2])}
