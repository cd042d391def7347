-- shared_inspect.lua: reads who holds a shared lock (a semaphore, a read-write lock) and how many
-- requests are queued for it, for operators. Changes nothing: holders whose lease ended are left
-- for the next call that changes the lock, and only reported as no longer holding. (The layout
-- of the keys is in shared.lua; this script does not need its functions.)
--
-- It runs with read rights only (the README's viewer user: no TIME, no write): the server clock
-- is read off K..":exp", which always has an expiry while it exists (admission.lua set_expiry), as
-- PEXPIRETIME - PTTL (both read at the script's one instant).
--
-- KEYS[1]  the shared lock's hash K
--
-- Returns  {limit, now_ms, waiters, token_1, holder_1, deadline_1, token_2, …}
--          limit = the limit in force (set by set_limit, else stored by a handle), false when
--          none is; now_ms = the server clock (ms),
--          0 when nobody holds (no deadline to compare); waiters = the length of K..":queue";
--          holder_i = "<weight> <fence> <host>\x1f<pid>\x1f<label>"; deadline_i = the end of its
--          lease (server clock, ms), listed for the holders whose lease has not ended
--          error DLOCKFOREIGN  K, K..":queue" or K..":exp" holds data dlock did not write (of
--                              another type; for K, also a hash of another format; for
--                              K..":exp", a set without expiry)

local key = KEYS[1]
local version = redis.pcall('HGET', key, 'v')
if type(version) == 'table' then
  return redis.error_reply('DLOCKFOREIGN ' .. key .. ' holds another Redis type')
elseif version and version ~= '1' then
  return redis.error_reply('DLOCKFOREIGN ' .. key .. ' holds a hash of format ' .. version
    .. ' (dlock writes 1)')
end
local queue = key .. ':queue'
local waiters = redis.pcall('LLEN', queue)
if type(waiters) == 'table' then
  return redis.error_reply('DLOCKFOREIGN ' .. queue .. ' holds another Redis type (dlock keeps'
    .. ' the queue of ' .. key .. ' there)')
end
local exp = key .. ':exp'
local last = redis.pcall('ZRANGE', exp, -1, -1, 'WITHSCORES')
if last['err'] then
  return redis.error_reply('DLOCKFOREIGN ' .. exp .. ' holds another Redis type (dlock keeps'
    .. ' the lease ends of ' .. key .. ' there)')
end
local out = {redis.call('HGET', key, 'limit') or false, 0, waiters}
-- A limit set by set_limit is the one in force, also while nobody holds or waits.
local set = redis.pcall('GET', key .. ':limit')
if type(set) == 'string' and tonumber(set) then
  out[1] = set
end
if not last[2] then
  return out
end
local pttl = redis.call('PTTL', exp)
if pttl < 0 then
  return redis.error_reply('DLOCKFOREIGN ' .. exp .. ' has no expiry (dlock keeps the lease ends'
    .. ' of ' .. key .. ' there, expiring with the last)')
end
local now = redis.call('PEXPIRETIME', exp) - pttl
out[2] = now
local live = redis.call('ZRANGEBYSCORE', exp, '(' .. string.format('%.0f', now), '+inf',
  'WITHSCORES')
for i = 1, #live, 2 do
  local held = redis.call('HGET', key, live[i])
  if held then
    table.insert(out, live[i])
    table.insert(out, held)
    table.insert(out, tonumber(live[i + 1]))
  end
end
return out
