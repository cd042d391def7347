-- election_read.lua: who leads an election, as observers and `Election::leader` read it
-- (election.rs). Read only.
--
-- KEYS[1]  the election's lock key "<prefix>{election:<name>}" (see election.lua)
-- KEYS[2]  the leader record "<prefix>{election:<name>}:leader", "1 <fence> <value>"
-- ARGV[1]  the fence counter of the lock's slot (a key in the same slot, named by the client:
--          see next_fence in common.lua)
--
-- Returns  {counter, lock_fence, leader_fence, value, lease_ms}
--          counter       the slot's fence counter now (0 if absent): every fence issued before
--                        this read is at most this, every later one above it
--          lock_fence    the fence kept in the lock's value now (0: free, or none issued yet)
--          leader_fence  the record's fence if the lock holds that same fence now (the record
--                        is its current holder's), else 0 with value ""
--          lease_ms      the PTTL of the lock (-2: free): how long the current leader leads
--                        unless its candidates' watchdog renews it, so that an observer
--                        re-reads by then, whatever lease its own handle was built with
--
-- A record is only reported while its fence is the lock's: a leader whose lease ran out (or
-- that was paused past it) stops being reported at once, although its record may remain until
-- it expires or the next leader overwrites it.

local counter = tonumber(redis.pcall('GET', ARGV[1])) or 0
local held = redis.pcall('GET', KEYS[1])
local lock_fence = 0
if type(held) == 'string' then
  lock_fence = tonumber(string.match(held, '^[^ ]* [^\31]*\31[^\31]*\31[^\31]*\31(%d+)$')) or 0
end
local lease = redis.call('PTTL', KEYS[1])
-- Version 2 (candidates wait, issue #35): the leader's lease ends at the deadline in the value;
-- the key is kept a lease longer. The clock without TIME: the key's expiry, absolute and
-- relative. Past the deadline nobody leads.
local deadline = type(held) == 'string' and tonumber(string.match(held, '^%x+w2 (%d+) '))
if deadline then
  lease = deadline - (redis.call('PEXPIRETIME', KEYS[1]) - lease)
  if lease <= 0 then
    lease = -2
    lock_fence = 0
  end
end
local record = redis.pcall('GET', KEYS[2])
if lock_fence > 0 and type(record) == 'string' then
  local fence, value = string.match(record, '^1 (%d+) (.*)$')
  if fence and tonumber(fence) == lock_fence then
    return {counter, lock_fence, lock_fence, value, lease}
  end
end
return {counter, lock_fence, 0, '', lease}
