-- release.lua: release a mutex the caller owns and hand it to the oldest live waiter, if any.
--
-- KEYS[1]  lock key   (see acquire.lua)
-- KEYS[2]  fence key
-- KEYS[3]  queue key
-- ARGV[1]  owner token of the caller
-- ARGV[2]  publish command: "PUBLISH" (standalone) or "SPUBLISH" (cluster: stays on the shard)
-- ARGV[3]  optional: the caller's own queue entry to drop first, or "" (an acquire abandoned
--          mid-wait releases this way, whether or not the lock was handed to it meanwhile)
-- ARGV[4]  optional: "force" to release whoever holds the lock (an operator's force_unlock)
--
-- Returns  1   released; nobody waits
--          2   released and handed to the next waiter (its client was told on its wake channel)
--          0   not held by anyone: the caller's lease had expired
--          -1  held by another owner: the caller's lease expired and someone else took the lock
--
-- Fast path (nobody waits, flag "-"): GET, DEL — two calls.
-- Hand-off: the oldest entry becomes the owner with its own lease and a fresh fence, and
-- "<token> <fence> <now_ms> <lease_ms>" is published on "<lock key>:wake:<client>". A publish
-- that reaches no subscriber means that client is gone (crashed, disconnected): the entry is
-- dropped and the next one is tried, so a dead waiter never inherits the lock.
-- Retry safety: owner-checked (unless forced); running it twice never releases a lock the caller
-- does not own.

if ARGV[3] and ARGV[3] ~= '' then
  redis.call('LREM', KEYS[3], 1, ARGV[3])
end
local held = redis.call('GET', KEYS[1])
if not held then
  return 0
end
if ARGV[4] ~= 'force' and string.find(held, ARGV[1], 1, true) ~= 1 then
  return -1
end
if string.byte(held, 33) ~= 119 then -- 'w': somebody waits
  redis.call('DEL', KEYS[1])
  return 1
end

local now_us, last
while true do
  local entry = redis.call('LPOP', KEYS[3])
  if not entry then
    redis.call('DEL', KEYS[1])
    return 1
  end
  local token, client, lease, meta = string.match(entry, '^(%x+) (%x+) (%d+) (.*)$')
  if token then
    if not now_us then
      local now = redis.call('TIME')
      now_us = tonumber(now[1]) * 1000000 + tonumber(now[2])
      last = tonumber(redis.call('GET', KEYS[2])) or 0
    end
    last = math.max(last + 1, now_us)
    local fence_s = string.format('%.0f', last)
    redis.call('SET', KEYS[2], fence_s, 'PX', '604800000')
    local flag = '-'
    if redis.call('LLEN', KEYS[3]) > 0 then
      flag = 'w'
    end
    redis.call('SET', KEYS[1], token .. flag .. ' ' .. meta, 'PX', lease)
    local told = redis.call(ARGV[2], KEYS[1] .. ':wake:' .. client,
      token .. ' ' .. fence_s .. ' ' .. string.format('%.0f', math.floor(now_us / 1000)) .. ' ' .. lease)
    if told > 0 then
      return 2
    end
  end
end
