-- admission.lua: the weighted FIFO admission of the shared lock kinds (the layout is in
-- shared.lua, which comes before it). It is not a script of its own: scripts/mod.rs prepends it,
-- after lock_value.lua, common.lua and shared.lua, to shared_acquire.lua, shared_release.lua,
-- shared_limit.lua and rw_change.lua.

-- nil when K's derived keys are absent or of the types dlock writes; otherwise the error reply
-- naming the first that is not. Nothing was modified.
local function derived_unusable(key)
  local expected = {{key .. ':exp', 'zset'}, {key .. ':queue', 'list'},
    {key .. ':limit', 'string'}}
  for _, pair in ipairs(expected) do
    local found = redis.call('TYPE', pair[1])['ok']
    if found ~= 'none' and found ~= pair[2] then
      return foreign_error(pair[1], 'holds a Redis ' .. found .. ' (dlock keeps a ' .. pair[2]
        .. ' there)')
    end
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
-- and its expired holders are purged (a script that then ends without serving the queue calls
-- readmit, so that their permits are not left to a waiter's timer); or nil and the error reply
-- (K holds data dlock did not
-- write, or a newer format: nothing was modified).
local function begin(key)
  local refused, absent = shared_unusable(key)
  if refused then
    return nil, refused
  end
  if absent then
    -- First touch (K is new, or it expired): the derived keys must be dlock's too before anything
    -- is written. While K exists they are written only by these scripts.
    refused = derived_unusable(key)
    if refused then
      return nil, refused
    end
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

-- Whether the client of a queue entry still listens on its wake channel (`pub` "S": a sharded
-- channel). A client that crashed or disconnected has no subscriber there.
local function listening(key, client, pub)
  local numsub = 'NUMSUB'
  if pub == 'S' then
    numsub = 'SHARDNUMSUB'
  end
  local found = redis.call('PUBSUB', numsub, key .. ':wake:' .. client)
  return tonumber(found[2]) > 0
end

-- Admits the waiters at the head of the queue while each fits in the free permits, and stops at
-- the first that does not (strict FIFO: a large request is never overtaken by small ones). An
-- entry that is `caller_entry` is admitted for the caller; every other one is told by a grant on
-- its client's wake channel, and a grant that reaches nobody (the client is gone) is taken back
-- and the next entry tried. A head that does not fit waits for room, unless its client is gone
-- (nobody listens on its wake channel): it is dropped and the next entry tried, so a dead request
-- never keeps fitting ones behind it waiting. (A live client that lost its connection asks again
-- and queues anew: its waiters retry on every reconnect.) Entries dlock did not write are dropped.
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
    weight = tonumber(weight)
    if not token or #token ~= 32 then
      redis.call('LPOP', queue)
    elseif used + weight > limit then
      if entry == caller_entry or listening(key, client, pub) then
        break
      end
      redis.call('LPOP', queue)
      forget_join(key, token)
    else
      redis.call('LPOP', queue)
      forget_join(key, token)
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

-- The limit set by set_limit (a number), or nil when none was; or false and the error reply
-- when K..":limit" holds data dlock did not write.
local function operator_limit(key)
  local set = redis.pcall('GET', key .. ':limit')
  if type(set) == 'table' then
    return false, foreign_error(key .. ':limit', 'holds another Redis type')
  elseif set and not tonumber(set) then
    return false, foreign_error(key .. ':limit', 'holds a value dlock did not write')
  end
  return tonumber(set)
end

-- Sets the expiry of K, K..":exp" and K..":queue" (see the layout above): the latest holder's
-- deadline or, while requests are queued, no sooner than two of the longest queued lease after
-- `now`. K is deleted when nobody holds or waits (the limit is written again by the next acquire).
local function set_expiry(key, now)
  local exp = key .. ':exp'
  local queue = key .. ':queue'
  local last = redis.call('ZRANGE', exp, -1, -1, 'WITHSCORES')
  local keep = tonumber(last[2])
  if redis.call('LLEN', queue) > 0 then
    local waiting = now + 2 * tonumber(redis.call('HGET', key, 'qlease') or '0')
    if not keep or waiting > keep then
      keep = waiting
    end
    redis.call('PEXPIREAT', queue, string.format('%.0f', keep))
  end
  if keep then
    keep = string.format('%.0f', keep)
    redis.call('PEXPIREAT', key, keep)
    if last[2] then
      redis.call('PEXPIREAT', exp, keep)
    end
  else
    redis.call('DEL', key)
  end
end

-- For a script that ends early (a retry that holds already, a mode change that finds nothing
-- to change or is refused): serves the queue as every other ending does, so that the permits of
-- the holders its begin() purged go to the queue now rather than at a waiter's timer.
local function readmit(key, counter, now)
  admit_from_head(key, counter, now, nil)
  set_expiry(key, now)
end
