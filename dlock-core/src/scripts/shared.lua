-- shared.lua: functions of the lock kinds that admit several holders at once (the semaphore;
-- the read-write lock builds on the same admission). It is not a script of its own:
-- scripts/mod.rs prepends it, after common.lua (next_fence, foreign_error), to
-- shared_acquire.lua and shared_release.lua.
--
-- A shared lock K ("<prefix>sem:{<name>}") is, all in K's cluster slot:
--   K            hash  "v" = "1" (the format version), "limit" = permits, "used" = permits
--                      held, and per holder "<token>" = "<weight> <fence> <meta>"
--   K..":exp"    zset  holder token -> the end of its lease (server clock, ms)
--   K..":queue"  list  waiter entries, oldest first:
--                      "1 <token> <client> <lease_ms> <pub> <weight> <meta>"
--   K..":wake:<client>"  channel of a client's waiters; a grant is published there as the
--                      mutex's ("<token> <fence> <now_ms> <lease_ms> 1", common.lua hand_off)
-- Every holder has its own lease: a holder whose lease ended is purged by the next call that
-- touches K (purge: O(expired holders)), and its permits go to the queue. K and K..":exp" expire
-- at the latest holder's deadline, so a lock whose holders all crashed disappears by itself.
-- <meta> is "<host>\x1f<pid>\x1f<label>", as in a mutex's value.

-- The server clock in ms.
local function now_ms()
  local now = redis.call('TIME')
  return tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
end

-- nil when K is absent or a shared lock of format version 1; otherwise the error reply (K holds
-- data dlock did not write, or a lock of a newer format). Nothing was modified.
local function shared_unusable(key)
  local version = redis.pcall('HGET', key, 'v')
  if type(version) == 'table' then
    return foreign_error(key, 'holds another Redis type')
  elseif version == '1' then
    return nil
  elseif version then
    if tonumber(version) and tonumber(version) > 1 then
      return foreign_error(key, 'holds a lock of a newer dlock (format version ' .. version
        .. '); upgrade this client')
    end
    return foreign_error(key, 'holds a hash dlock did not write')
  elseif redis.call('EXISTS', key) == 1 then
    return foreign_error(key, 'holds a hash dlock did not write')
  end
  return nil
end

-- Drops the holders whose lease ended by `now` and gives their permits back.
local function purge(key, now)
  local exp = key .. ':exp'
  local gone = redis.call('ZRANGEBYSCORE', exp, '-inf', now)
  for _, token in ipairs(gone) do
    local held = redis.call('HGET', key, token)
    if held then
      redis.call('HINCRBY', key, 'used', -tonumber(string.match(held, '^(%d+)')))
      redis.call('HDEL', key, token)
    end
    redis.call('ZREM', exp, token)
  end
end

-- The start of every script that changes K: the server clock in ms, once K is known to be usable
-- and its expired holders are purged; or nil and the error reply (K holds data dlock did not
-- write, or a newer format: nothing was modified).
local function begin(key)
  local refused = shared_unusable(key)
  if refused then
    return nil, refused
  end
  local now = now_ms()
  purge(key, now)
  return now
end

-- Makes `token` a holder of `weight` permits for `lease_ms`, with the next fence of the slot's
-- `counter`. Returns the fence (a decimal string), or nil and an error reply (the counter holds
-- data dlock did not write; nothing was changed).
local function admit(key, counter, token, weight, lease_ms, now, meta)
  local fence, refused = next_fence(counter)
  if not fence then
    return nil, refused
  end
  redis.call('HSET', key, token, weight .. ' ' .. fence .. ' ' .. meta)
  redis.call('HINCRBY', key, 'used', weight)
  redis.call('ZADD', key .. ':exp', now + tonumber(lease_ms), token)
  return fence
end

-- Takes `token`'s hold away (a release, or a grant that reached nobody). Returns whether it held.
local function dismiss(key, token)
  local held = redis.call('HGET', key, token)
  if not held then
    return false
  end
  redis.call('HINCRBY', key, 'used', -tonumber(string.match(held, '^(%d+)')))
  redis.call('HDEL', key, token)
  redis.call('ZREM', key .. ':exp', token)
  return true
end

-- Admits the waiters at the head of the queue while each fits in the free permits, and stops at
-- the first that does not (strict FIFO: a large request is never overtaken by small ones). An
-- entry that is `caller_entry` is admitted for the caller; every other one is told by a grant on
-- its client's wake channel, and a grant that reaches nobody (the client is gone) is taken back
-- and the next entry tried. Entries dlock did not write are dropped.
-- Returns the caller's fence when it was admitted; nil, error reply when the fence counter holds
-- data dlock did not write (the entry stays queued).
local function admit_from_head(key, counter, now, caller_entry)
  local queue = key .. ':queue'
  local limit = tonumber(redis.call('HGET', key, 'limit'))
  local used = tonumber(redis.call('HGET', key, 'used') or '0')
  local mine = nil
  while limit do
    local entry = redis.call('LINDEX', queue, 0)
    if not entry then
      break
    end
    local token, client, lease, pub, weight, meta =
      string.match(entry, '^1 (%x+) (%x+) (%d+) ([PS]) (%d+) (.*)$')
    if not token or #token ~= 32 then
      redis.call('LPOP', queue)
    else
      weight = tonumber(weight)
      if used + weight > limit then
        break
      end
      redis.call('LPOP', queue)
      local fence, refused = admit(key, counter, token, weight, lease, now, meta)
      if not fence then
        redis.call('LPUSH', queue, entry)
        return nil, refused
      end
      if entry == caller_entry then
        mine = fence
        used = used + weight
      else
        local publish = 'PUBLISH'
        if pub == 'S' then
          publish = 'SPUBLISH'
        end
        local grant = token .. ' ' .. fence .. ' ' .. string.format('%.0f', now) .. ' ' .. lease
          .. ' 1'
        if redis.call(publish, key .. ':wake:' .. client, grant) > 0 then
          used = used + weight
        else
          dismiss(key, token)
        end
      end
    end
  end
  return mine
end

-- Sets K's and K..":exp"'s expiry to the latest holder's deadline; deletes both when nobody
-- holds (the limit is written again by the next acquire).
local function set_expiry(key)
  local exp = key .. ':exp'
  local last = redis.call('ZRANGE', exp, -1, -1, 'WITHSCORES')
  if last[2] then
    redis.call('PEXPIREAT', key, last[2])
    redis.call('PEXPIREAT', exp, last[2])
  else
    redis.call('DEL', key, exp)
  end
end

