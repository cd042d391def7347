-- election.lua: every write about an election's leadership (election.rs). The leadership is a
-- hold of the election's mutex; its leader record says who leads, and a notice on the record's
-- channel tells observers at once. Owner-checked and atomic: only the current holder, with the
-- fence issued to its hold, writes, so a stale leader (its lease lost: paused, partitioned)
-- never overwrites or deletes the record of the leader after it.
--
-- KEYS[1]  the election's lock key "<prefix>{election:<name>}" (a mutex, see common.lua and
--          scripts/wire.rs: the hold's fence is the last field of its value)
-- KEYS[2]  the leader record "<prefix>{election:<name>}:leader", string "1 <fence> <value>";
--          its name is also the channel of the notices (same hash tag: same cluster slot)
-- ARGV[1]  mode: "publish"  write the record (if it is not ours already) and announce it;
--                           otherwise only refresh its expiry
--                 "resign"  delete the record (if it is ours) and announce the vacancy
-- ARGV[2]  owner token of the caller's hold (32 hex digits)
-- ARGV[3]  the fence of the caller's hold (decimal)
-- ARGV[4]  the publish command: "PUBLISH" (standalone) or "SPUBLISH" (cluster)
-- ARGV[5]  the leader's value (mode "publish"; any bytes)
--
-- Notices (see scripts/wire.rs):  "1 L <fence> <value>"  a leader and its value
--                                 "1 V <fence>"          the leader of <fence> resigned
--
-- Returns  1   publish: the record was written and announced; resign: deleted and announced
--          0   publish: the record was ours already (its expiry refreshed); resign: the record
--              was not ours (nothing to delete; also when it holds data dlock did not write)
--          -1  the caller does not lead: the lock is free, held by another token, or holds
--              another fence (or data dlock did not write); nothing was written
--          error DLOCKFOREIGN  publish: the record key holds data dlock could not have written
--              (another Redis type, or a string not "1 <fence> <value>"); nothing was written
--
-- The record expires at twice the lock's remaining lease, so it outlives every renewal of the
-- watchdog in between the leader's refreshes; readers check it against the lock anyway
-- (election_read.lua), so a record that outlives its leader is never reported.
-- Retry safety: writing the same record twice changes nothing (0), a second resign finds the
-- record gone (0).

local lock, record = KEYS[1], KEYS[2]
local mode, token, fence, publish = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

local held = redis.pcall('GET', lock)
if type(held) ~= 'string' or string.sub(held, 1, 32) ~= token then
  return -1
end
if string.match(held, '^[^ ]* [^\31]*\31[^\31]*\31[^\31]*\31(%d+)$') ~= fence then
  return -1
end

local current = redis.pcall('GET', record)
local current_fence = nil
if type(current) == 'string' then
  current_fence = tonumber(string.match(current, '^1 (%d+) '))
elseif current then
  -- Another Redis type (GET answered an error).
  if mode == 'resign' then
    return 0
  end
  return redis.error_reply('DLOCKFOREIGN ' .. record .. ' holds another Redis type (dlock keeps'
    .. ' the leader record of ' .. lock .. ' there)')
else
  current = nil
end
if current and not current_fence then
  if mode == 'resign' then
    return 0
  end
  return redis.error_reply('DLOCKFOREIGN ' .. record .. ' holds a value dlock did not write (dlock'
    .. ' keeps the leader record of ' .. lock .. ' there)')
end

if mode == 'resign' then
  if current_fence ~= tonumber(fence) then
    return 0
  end
  redis.call('DEL', record)
  redis.call(publish, record, '1 V ' .. fence)
  return 1
end

local pttl = redis.call('PTTL', lock)
-- Version 2 (candidates wait, issue #35): the lease ends at the deadline in the value, the key
-- a lease later.
local deadline = tonumber(string.match(held, '^%x+w2 (%d+) '))
if deadline and pttl > 0 then
  pttl = deadline - (redis.call('PEXPIRETIME', lock) - pttl)
end
if pttl <= 0 then
  return -1
end
if current_fence and current_fence > tonumber(fence) then
  -- A newer leader's record: never overwritten (cannot happen while the lock holds our fence).
  return -1
end
local wanted = '1 ' .. fence .. ' ' .. ARGV[5]
if current == wanted then
  redis.call('PEXPIRE', record, pttl * 2)
  return 0
end
redis.call('SET', record, wanted, 'PX', pttl * 2)
redis.call(publish, record, '1 L ' .. fence .. ' ' .. ARGV[5])
return 1
