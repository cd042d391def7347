-- release.lua: release a mutex the caller owns and hand it to the oldest live waiter, if any.
--
-- KEYS[1]  lock key (see acquire.lua, also for the derived :fence and :queue keys)
-- ARGV[1]  owner token of the caller ("" with ARGV[3] = "force")
-- ARGV[2]  optional: the caller's own queue entry to drop first, or "" (an acquire abandoned
--          mid-wait releases this way, whether or not the lock was handed to it meanwhile)
-- ARGV[3]  optional: "force" to release whoever holds the lock (an operator's force_unlock)
--
-- Returns  1   released; nobody waits
--          {2, grant}  released and handed to the next waiter; its client was told on its wake
--              channel, and grant = "<token> <fence> <now_ms> <lease_ms>" is the same message, so
--              that a releaser in the waiter's own process can wake it without the pub/sub trip
--          0   not held by anyone: the caller's lease had expired
--          -1  held by another owner: the caller's lease expired and someone else took the lock
--
-- Fast path (nobody waits, flag "-"): GET, DEL — two calls, like a plain compare-and-delete.
-- Hand-off: the oldest entry becomes the owner with its own lease and a fresh fence (as in
-- acquire.lua), and "<token> <fence> <now_ms> <lease_ms>" is published (PUBLISH or SPUBLISH, as
-- the entry says) on "<lock key>:wake:<client>". A publish that reaches no subscriber means that
-- client is gone (crashed, disconnected): the entry is dropped and the next one is tried, so a
-- dead waiter never inherits the lock.
-- Retry safety: owner-checked (unless forced) by the whole 32-digit token, as in acquire.lua and
-- extend.lua, so an empty or partial token matches nothing; running it twice never releases a
-- lock the caller does not own.

local queue = KEYS[1] .. ':queue'
if ARGV[2] and ARGV[2] ~= '' then
  redis.call('LREM', queue, 1, ARGV[2])
end
local held = redis.call('GET', KEYS[1])
if not held then
  return 0
end
if ARGV[3] ~= 'force' and string.sub(held, 1, 32) ~= ARGV[1] then
  return -1
end
if string.byte(held, 33) ~= 119 then -- 'w': somebody waits
  redis.call('DEL', KEYS[1])
  return 1
end

local fence_key = KEYS[1] .. ':fence'
local now_us, last
while true do
  local entry = redis.call('LPOP', queue)
  if not entry then
    redis.call('DEL', KEYS[1])
    return 1
  end
  local token, client, lease, pub, meta = string.match(entry, '^(%x+) (%x+) (%d+) ([PS]) (.*)$')
  if token then
    if not now_us then
      local now = redis.call('TIME')
      now_us = tonumber(now[1]) * 1000000 + tonumber(now[2])
      last = tonumber(redis.call('GET', fence_key)) or 0
    end
    last = math.max(last + 1, now_us)
    local fence_s = string.format('%.0f', last)
    redis.call('SET', fence_key, fence_s, 'PX', 604800000)
    local flag = '-'
    if redis.call('LLEN', queue) > 0 then
      flag = 'w'
    end
    redis.call('SET', KEYS[1], token .. flag .. ' ' .. meta, 'PX', lease)
    local publish = 'PUBLISH'
    if pub == 'S' then
      publish = 'SPUBLISH'
    end
    local grant = token .. ' ' .. fence_s .. ' ' .. string.format('%.0f', math.floor(now_us / 1000)) .. ' ' .. lease
    if redis.call(publish, KEYS[1] .. ':wake:' .. client, grant) > 0 then
      return {2, grant}
    end
  end
end
