-- shared_limit.lua: sets the limit of a shared lock (a semaphore's permits, semaphore.rs
-- `set_limit`) and admits the waiters at the head of the queue that fit under it. (Runs with
-- lock_value.lua, common.lua, shared.lua and admission.lua prepended; the layout of the keys is in shared.lua.)
--
-- KEYS[1]  the shared lock's hash K
-- ARGV[1]  the new limit, >= 1
-- ARGV[2]  the fence counter of K's slot (for the fences of the waiters admitted)
--
-- Returns  the limit in force before (0: none; nobody held or waited and none was set, so the
--          next acquire would have stored its handle's)
--          error DLOCKFOREIGN  K or the counter holds data dlock did not write, or a lock of a
--                              newer format; K is untouched (with the counter: the limit is
--                              set, the queue waits for the next call)
--
-- The limit set here is kept in K..":limit" without expiry: it is in force for every later
-- grant, whatever limit a handle was built with, until set_limit sets another (or an operator
-- deletes that key). A lower limit takes nothing from the holders: new requests are
-- admitted once the weight held fits under it. Queued requests heavier than the new limit could
-- never be admitted: their entries are dropped and their clients nudged ("<token> 0 0 0 1" on
-- their wake channel: a grant message that can never be trusted, see wait.rs), so that their
-- next attempt fails at once with DLOCKWEIGHT (shared_acquire.lua). A higher limit admits at once
-- the requests at the head that now fit.
-- Retry safety: setting the same limit twice leaves the same state as once.

local key = KEYS[1]
local limit = tonumber(ARGV[1])
local now, refused = begin(key)
if not now then
  return refused
end
local operator, foreign = operator_limit(key)
if foreign then
  return foreign
end
local before = operator or tonumber(redis.call('HGET', key, 'limit') or '0')
redis.call('SET', key .. ':limit', ARGV[1])
redis.call('HSET', key, 'v', '1', 'limit', ARGV[1])
local queue = key .. ':queue'
for _, entry in ipairs(redis.call('LRANGE', queue, 0, -1)) do
  local token, client, pub, weight = string.match(entry, '^1 (%x+) (%x+) %d+ ([PS]) (%d+) ')
  if token and tonumber(weight) > limit then
    redis.call('LREM', queue, 1, entry)
    forget_join(key, token)
    local publish = 'PUBLISH'
    if pub == 'S' then
      publish = 'SPUBLISH'
    end
    redis.call(publish, key .. ':wake:' .. client, token .. ' 0 0 0 1')
  end
end
local _, failed = admit_from_head(key, ARGV[2], now, nil)
set_expiry(key, now)
if failed then
  return failed
end
return before
