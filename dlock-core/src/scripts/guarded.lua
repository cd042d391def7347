-- guarded.lua: the caller's writes, applied only while its hold on a lock is still its own, the
-- check and the writes in one atomic step (GuardedWrite::exec, guarded.rs).
-- lock_value.lua and shared.lua are prepended (read, unusable, foreign_error, shared_unusable,
-- now_ms).
--
-- KEYS[1]      the lock: a mutex's lock key (lock_value.lua), or the hash K of a semaphore or
--              read-write lock (shared.lua)
-- KEYS[2]      K..":exp" for a holder of a shared lock; for a mutex, the first target key
-- KEYS[t..]    the target keys (t = 2 for a mutex, 3 for a shared lock), each once
-- ARGV[1]      the owner: the hold's token (32 hex digits), after an "S" for a holder of a
--              shared lock (as extend.lua)
-- ARGV[2]      n, the number of commands
-- then, per command in order: its name (upper case, one of WRITES below), the index in KEYS
--              of its key, the count c of its other arguments, those c arguments
--
-- Returns  {1, r1, …, rn}  applied: the hold was the caller's; ri is {1, <reply>} for the i-th
--                          command, or {0, <error text>} if it failed at run time — the
--                          commands after it still ran and the ones before stay applied, as in
--                          EXEC (an error inside an array would fail the whole reply in clients)
--          {0, "gone"}     the hold ended (expired, released, forced open; a shared lock's
--                          holder purged or past its deadline): nothing written
--          {0, "taken"}    another owner holds the mutex: nothing written
--          {-1, key, type, command}  a target key holds a type the command cannot work on,
--                          as the key would be when the command runs: nothing written
--          error DLOCKFOREIGN …  the lock key holds data dlock did not write, or a lock of a
--                          newer format: nothing written
--          error DLOCKGUARD …    a command the client should have refused (not in WRITES, or
--                          a key index out of range): nothing written
--
-- Order: ownership first (a writer that lost its hold learns that, whatever the data holds),
-- then every target key's type, following the batch (a DEL makes its key free for any type,
-- a command of one type gives its key that type), then the writes. So a refused batch changes
-- nothing, and a batch refused for a type changes nothing either.
-- Retry safety: the check is read-only; whether the writes can be sent twice is the caller's
-- (SET can, INCR cannot), as for any Redis command.
-- When the mutex format changes (a kept key with a deadline inside, issue 35), the owner check
-- here changes with it.

-- The commands a guarded write may run, each on the one key that follows its name, with the
-- type that key must hold (or be absent); "any" works on every type, "none" deletes the key.
-- One string searched by name rather than a table: a table of 34 entries built on every call
-- cost more server time than the rest of a one-command batch.
local WRITES = ' SET=string GET=string GETDEL=none INCR=string INCRBY=string'
  .. ' INCRBYFLOAT=string DECR=string DECRBY=string APPEND=string SETRANGE=string'
  .. ' HSET=hash HSETNX=hash HDEL=hash HINCRBY=hash HINCRBYFLOAT=hash HGET=hash'
  .. ' RPUSH=list LPUSH=list LTRIM=list LREM=list LSET=list LPOP=list RPOP=list'
  .. ' SADD=set SREM=set ZADD=zset ZREM=zset ZINCRBY=zset'
  .. ' DEL=none UNLINK=none EXPIRE=any PEXPIRE=any PERSIST=any EXISTS=any '

-- The type `name`'s key must hold, or nil for a command not in WRITES.
local function wants_of(name)
  if type(name) ~= 'string' or not string.find(name, '^%u+$') then
    return nil
  end
  return string.match(WRITES, ' ' .. name .. '=(%a+) ')
end

local owner = ARGV[1]
local shared = string.byte(owner, 1) == 83 -- 'S'
local first_target = 2
if shared then
  first_target = 3
  local bad = shared_unusable(KEYS[1])
  if bad then
    return bad
  end
  local token = string.sub(owner, 2)
  local deadline = redis.pcall('ZSCORE', KEYS[2], token)
  if type(deadline) == 'table' then
    return foreign_error(KEYS[2], 'holds data dlock did not write')
  end
  -- A holder past its deadline is gone even before a purge removes it.
  if not deadline or tonumber(deadline) <= now_ms() then
    return {0, 'gone'}
  end
else
  local value = read(KEYS[1])
  if not value then
    return {0, 'gone'}
  end
  local bad = unusable(KEYS[1], value)
  if bad then
    return bad
  end
  -- A key kept past its holder's deadline for the queue (version 2) holds for nobody.
  if deadline_of(value) and not holds(value, clock_ms()) then
    return {0, 'gone'}
  end
  if string.sub(value, 1, 32) ~= owner then
    return {0, 'taken'}
  end
end

-- The commands, read once: {name, key, args, the type its key must hold}.
local n = tonumber(ARGV[2])
local commands = {}
local at = 3
for i = 1, n do
  local name = ARGV[at]
  local index = tonumber(ARGV[at + 1])
  local count = tonumber(ARGV[at + 2])
  local wants = wants_of(name)
  if wants == nil or index == nil or index < first_target or index > #KEYS
      or count == nil then
    return redis.error_reply('DLOCKGUARD command ' .. i .. ' (' .. tostring(name)
      .. ') is not one a guarded write runs')
  end
  local args = {}
  for j = 1, count do
    args[j] = ARGV[at + 2 + j]
  end
  commands[i] = {name, KEYS[index], args, wants}
  at = at + 3 + count
end

-- Every key's type as each command will find it.
local types = {}
for i = 1, n do
  local name, key, wants = commands[i][1], commands[i][2], commands[i][4]
  local now = types[key]
  if now == nil then
    now = redis.call('TYPE', key)['ok']
  end
  if wants == 'none' then
    if name == 'GETDEL' and now ~= 'none' and now ~= 'string' then
      return {-1, key, now, name}
    end
    types[key] = 'none'
  elseif wants == 'any' then
    types[key] = now
  elseif now ~= 'none' and now ~= wants then
    return {-1, key, now, name}
  else
    -- A read of an absent key leaves it absent; a write creates it.
    if name == 'GET' or name == 'HGET' or name == 'LPOP' or name == 'RPOP' then
      types[key] = now
    else
      types[key] = wants
    end
  end
end

local out = {1}
for i = 1, n do
  local command = commands[i]
  local reply = redis.pcall(command[1], command[2], unpack(command[3]))
  if type(reply) == 'table' and reply.err then
    out[i + 1] = {0, reply.err}
  else
    out[i + 1] = {1, reply}
  end
end
return out
