-- shared_inspect.lua: reads who holds a shared lock (a semaphore, a read-write lock), for
-- operators. Changes nothing: holders whose lease ended are left for the next call that
-- changes the lock, and only reported as no longer holding. (The layout of the keys is in
-- shared.lua; this script does not need its functions.)
--
-- KEYS[1]  the shared lock's hash K
--
-- Returns  {limit, now_ms, waiters, token_1, holder_1, deadline_1, token_2, …}
--          limit = the stored limit, false when nobody holds (K is absent); holder_i =
--          "<weight> <fence> <host>\x1f<pid>\x1f<label>"; deadline_i = the end of its lease
--          (server clock, ms), listed for the holders whose lease has not ended
--          error DLOCKFOREIGN  K holds data dlock did not write, or a newer format

local key = KEYS[1]
local version = redis.pcall('HGET', key, 'v')
if type(version) == 'table' then
  return redis.error_reply('DLOCKFOREIGN ' .. key .. ' holds another Redis type')
elseif version and version ~= '1' then
  return redis.error_reply('DLOCKFOREIGN ' .. key .. ' holds a hash of format ' .. version
    .. ' (dlock writes 1)')
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {redis.call('HGET', key, 'limit') or false, now, redis.call('LLEN', key .. ':queue')}
local live = redis.call('ZRANGEBYSCORE', key .. ':exp', '(' .. now, '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
  local held = redis.call('HGET', key, live[i])
  if held then
    table.insert(out, live[i])
    table.insert(out, held)
    table.insert(out, tonumber(live[i + 1]))
  end
end
return out
