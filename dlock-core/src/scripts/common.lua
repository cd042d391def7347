-- common.lua: the functions that change a mutex, shared by acquire.lua, release.lua and
-- fence.lua, after lock_value.lua (read, unusable, foreign_error). It is not a script of its
-- own: scripts/mod.rs prepends both to each of them when their text is built.

-- The next fencing token for a hold of a lock, taken from `counter`: the fence counter of the
-- lock's cluster slot, "<prefix>fence:{<tag>}", shared by every lock of the slot and named by the
-- client (key.rs). The one place a script issues a fence; the uncontended acquire with `fenced`
-- takes the same step in its MULTI (INCR, then these checks on the client, falling back to
-- fence.lua), see mutex.rs. Returns the fence as a decimal string, or nil and an error reply when
-- the counter holds data dlock did not write (nothing was issued).
--
-- A fence is INCR of the counter, floored at the server time in us, which keeps the fences of
-- every name increasing. A counter that lost values — made anew by INCR after a restart or an
-- eviction, or older than the fences already issued after a failover to a replica that had not
-- received the latest INCRs — would otherwise issue a fence twice. Every fence is at most the
-- server time of its issue (plus the fences issued within that microsecond: one Redis core
-- issues far fewer than one per us), and a failover that loses writes takes longer than that
-- (the sentinels wait down-after-milliseconds first), so the new master's clock is past every
-- fence lost with the old one. (So fences are no timestamps; a clock that steps back, or a
-- promoted replica's clock behind the old master's by more than the failover took, can break
-- the floor.) The uncontended acquire's INCR is taken only where this floor was applied on the
-- same connection before (fence_epoch.rs), which the same argument covers.
-- The counter has no expiry: one key per slot in use.
local function next_fence(counter)
  local fence = redis.pcall('INCR', counter)
  if type(fence) ~= 'number' then
    return nil, foreign_error(counter, 'holds data dlock did not write (the fence counter)')
  end
  local now = redis.call('TIME')
  local floor = tonumber(now[1]) * 1000000 + tonumber(now[2])
  if fence > floor then
    floor = fence
  end
  if floor > fence then
    fence = floor
    redis.call('SET', counter, string.format('%.0f', fence))
  end
  return string.format('%.0f', fence)
end

-- Whether a waiting acquire's first attempt (mode "join" of acquire.lua and shared_acquire.lua)
-- at the queue of `key` runs for the first time: it marks "<key>:joined:<token>" (issue #44).
-- The mark lives a minute, or two leases if longer: longer than a client takes to send again a
-- call whose reply it lost (a cluster client resends within its request timeout). So a first
-- attempt queues without a scan of the queue (filling a queue of n waiters by scans cost O(n^2)),
-- and a resent one scans it, from the tail where its entry is, instead of queueing twice however
-- many others joined in between. A mark of someone else's, of any type, only costs that scan.
local function first_join(key, token, lease)
  local ms = string.format('%.0f', math.max(60000, 2 * tonumber(lease)))
  return redis.call('SET', key .. ':joined:' .. token, '1', 'NX', 'PX', ms) ~= false
end

-- Drops the mark first_join left for `token` once its entry left the queue of `key` (handed the
-- lock or admitted, dropped as gone, or taken out by the request's own last attempt, cancel or
-- success): a resend of that first attempt can then only find the request holding, which
-- returns before any queueing, or over. So a request that ends leaves no mark behind; the mark
-- of one whose client died expires with its minute.
local function forget_join(key, token)
  redis.call('DEL', key .. ':joined:' .. token)
end

-- The lock value and expiry that follow a step which changed the queue or the hold of `lock`,
-- whose usable value is `value` (issue #35). While callers wait: version 2 with the holder's
-- deadline, the key kept until one lease (`lease`, the lease of the request the step served)
-- past the deadline, never shortened (GT). Nobody waits: version 1 "-", expiring at the
-- deadline; a key kept past its deadline is deleted. `now` is the server clock in ms.
-- The queue expires with the key kept for it (issue #44), so that a queue whose callers all
-- died is gone one lease after its holder's deadline, as that key is, instead of staying: its
-- expiry is set to the key's wherever the key's moves — here, in hand_off and in extend.lua —
-- and a new queue always meets a key not kept yet (nobody waited), whose expiry moves. A live
-- waiter asks again by the deadline (its fallback timer is the holder's remaining lease) and so
-- keeps both.
local function keep(lock, value, now, lease)
  local deadline = deadline_of(value)
  if not deadline then
    deadline = now + redis.call('PTTL', lock)
  end
  local token, body = string.sub(value, 1, 32), body_of(value)
  if redis.call('LLEN', lock .. ':queue') > 0 then
    local kept = token .. 'w2 ' .. string.format('%.0f', deadline) .. ' ' .. body
    if kept ~= value then
      redis.call('SET', lock, kept, 'KEEPTTL')
    end
    local at = string.format('%.0f', deadline + lease)
    if redis.call('PEXPIREAT', lock, at, 'GT') == 1 then
      redis.call('PEXPIREAT', lock .. ':queue', at)
    end
  elseif deadline <= now then
    redis.call('DEL', lock)
  else
    local plain = token .. '-1 ' .. body
    if plain ~= value then
      redis.call('SET', lock, plain, 'PXAT', string.format('%.0f', deadline))
    end
  end
end

-- Hands the lock to the oldest live waiter of its queue, replacing whatever the lock key holds
-- (it must be free, or held by the caller who gives it up). `counter` is the slot's fence
-- counter (next_fence).
--
-- For each entry popped, oldest first: a new fence is issued (next_fence),
-- the lock is set to "<token>-1 <meta>\x1f<fence>" PX <lease_ms>, or while more entries wait to
-- "<token>w2 <deadline_ms> <meta>\x1f<fence>" PX twice the lease, the queue expiring with it
-- (kept, see keep above; the fence kept with the hold, see fence.lua), and
--   * the entry is `caller_entry` (an acquire whose own entry is at the head): returns
--     'caller', fence — the lock is the caller's;
--   * otherwise "<token> <fence> <now_ms> <lease_ms> 1" is published (PUBLISH or SPUBLISH, as
--     the entry says) on "<lock>:wake:<client>"; if a subscriber received it, returns 'grant',
--     grant.
--     A publish that reaches nobody means that client is gone (crashed, disconnected): the next
--     entry is tried, so a dead waiter never inherits the lock.
-- Returns nil when no live entry was left: the queue is then empty and the lock key deleted;
-- 'error', reply when the fence counter holds data dlock did not write (the entry stays queued).
-- Entries dlock did not write are dropped.
local function hand_off(lock, counter, caller_entry)
  local queue = lock .. ':queue'
  local now_ms = nil -- the server clock, read once a grant is published
  while true do
    local entry = redis.call('LPOP', queue)
    if not entry then
      redis.call('DEL', lock)
      return nil
    end
    local token, client, lease, pub, meta = string.match(entry, '^1 (%x+) (%x+) (%d+) ([PS]) (.*)$')
    if not token then
      token, client, lease, pub, meta = string.match(entry, '^(%x+) (%x+) (%d+) ([PS]) (.*)$')
    end
    if token and #token == 32 then
      forget_join(lock, token)
      local fence_s, refused = next_fence(counter)
      if not fence_s then
        redis.call('LPUSH', queue, entry)
        -- Its last entry popped, the queue was deleted and is new again: it gets an expiry
        -- (two of its head's leases), so that it cannot stay if nobody asks again.
        redis.call('PEXPIRE', queue, 2 * tonumber(lease), 'NX')
        return 'error', refused
      end
      if not now_ms then
        now_ms = string.format('%.0f', clock_ms())
      end
      if redis.call('LLEN', queue) > 0 then
        -- More wait: version 2, kept one lease past the deadline (keep above).
        local deadline = string.format('%.0f', tonumber(now_ms) + tonumber(lease))
        redis.call('SET', lock, token .. 'w2 ' .. deadline .. ' ' .. meta .. '\31' .. fence_s,
          'PX', 2 * tonumber(lease))
        -- The queue expires with the key kept for it (keep above), from this hold on.
        redis.call('PEXPIRE', queue, 2 * tonumber(lease))
      else
        redis.call('SET', lock, token .. '-1 ' .. meta .. '\31' .. fence_s, 'PX', lease)
      end
      if entry == caller_entry then
        return 'caller', tonumber(fence_s)
      end
      local publish = 'PUBLISH'
      if pub == 'S' then
        publish = 'SPUBLISH'
      end
      local grant = token .. ' ' .. fence_s .. ' ' .. now_ms .. ' ' .. lease .. ' 1'
      if redis.call(publish, lock .. ':wake:' .. client, grant) > 0 then
        return 'grant', grant
      end
    end
  end
end

