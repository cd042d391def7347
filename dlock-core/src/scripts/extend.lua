#!lua flags=allow-cross-slot-keys,allow-oom
-- extend.lua: give locks the caller owns a new lease, counted from now. Used for one lock
-- (MutexGuard::extend) and for the watchdog's batched renewals (up to 100 locks per call).
--
-- n locks: the first d are declared (KEYS), the other n - d are not (on a cluster they belong
-- to other slots of the same node: the watchdog renews one shard per call; Redis routes the
-- call by KEYS[1]). n = (#ARGV + d) / 3.
--
-- KEYS[i]          lock key of the i-th lock, i <= d (see acquire.lua), or the hash of a
--                  shared lock (see shared.lua)
-- ARGV[2i-1]       owner token of the i-th lock; "S<token>" for a holder of a shared lock
-- ARGV[2i]         new lease of the i-th lock, in milliseconds
-- ARGV[2n+i-d]     lock key of the i-th lock, i > d
--
-- Returns  an array with, for each lock in order:
--          2   extended, and someone asked this holder to give the lock back (ask.lua: the
--              holder's token is in KEY..":ask"); the holder decides
--          1   extended
--          0   not held by anyone: the lease had expired or the key was deleted (nothing is
--              re-created); also a key kept past its holder's deadline for the queue
--          -1  held by another owner, or the key holds something dlock did not write (another
--              type, another format) or a lock of a newer format version: left untouched
--          -2  not served by this node (its slot moved): not renewed, send it again
--
-- Flags: allow-cross-slot-keys lets the undeclared keys be of other slots (a key this node does
-- not serve fails the read, reported as -2); allow-oom keeps renewals working when the server
-- is at maxmemory (PEXPIRE frees nothing but adds nothing either), as without the flags line.
-- One lock's key holding another type never aborts the batch: each key is read with pcall.
-- Retry safety: owner-checked and absolute (PEXPIRE sets, never adds), so running it twice
-- leaves the same state as running it once.

local d = #KEYS
local n = (#ARGV + d) / 3
local out = {}
local now = nil -- the server clock in ms, read for the first shared holder

-- The i-th lock is a holder of a shared lock: its deadline in K..":exp" moves to now + lease,
-- and the expiry of K and K..":exp" to the latest deadline (while requests wait: if that is
-- later, and K..":queue"'s too) (a purge by another call may have come first: a
-- deadline already passed counts as gone).
local function extend_shared(i, key, token, lease)
  local score = redis.pcall('ZSCORE', key .. ':exp', token)
  if type(score) == 'table' then
    if i > d and not string.find(score.err, '^WRONGTYPE') then
      return -2
    end
    return -1
  end
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  if not score or tonumber(score) <= now then
    return 0
  end
  local deadline = now + tonumber(lease)
  redis.call('ZADD', key .. ':exp', 'XX', deadline, token)
  local last = redis.call('ZRANGE', key .. ':exp', -1, -1, 'WITHSCORES')
  if redis.call('EXISTS', key .. ':queue') == 1 then
    -- Requests wait: never sooner than set_expiry (admission.lua) kept the three keys for them
    -- (GT), so they still expire together and never before a deadline K holds.
    redis.call('PEXPIREAT', key, last[2], 'GT')
    redis.call('PEXPIREAT', key .. ':exp', last[2], 'GT')
    redis.call('PEXPIREAT', key .. ':queue', last[2], 'GT')
  else
    -- Nobody waits: K and its deadlines expire with the latest holder, even after an extension
    -- to a shorter lease (a stored limit must not outlive the last holder).
    redis.call('PEXPIREAT', key, last[2])
    redis.call('PEXPIREAT', key .. ':exp', last[2])
  end
  return 1
end

-- 2 when the holder `token` of lock `key` was asked to give it back (ask.lua), else 1. Read
-- with pcall: an ask key of another type (written by someone else) is no request.
local function extended(key, token)
  if redis.pcall('HEXISTS', key .. ':ask', token) == 1 then
    return 2
  end
  return 1
end

for i = 1, n do
  local key = KEYS[i] or ARGV[2 * n + i - d]
  local owner = ARGV[2 * i - 1]
  if string.byte(owner, 1) == 83 then -- 'S': a holder of a shared lock
    local token = string.sub(owner, 2)
    out[i] = extend_shared(i, key, token, ARGV[2 * i])
    if out[i] == 1 then
      out[i] = extended(key, token)
    end
  else
    local held = redis.pcall('GET', key)
    if not held then
      out[i] = 0
    elseif type(held) == 'table' and held.err and i > d
        and not string.find(held.err, '^WRONGTYPE') then
      out[i] = -2
    elseif type(held) ~= 'string' or string.sub(held, 1, 32) ~= owner
        or not string.find(held, '^%x+[%-w][12]? ') then
      out[i] = -1
    else
      -- Version 2 (callers wait, the key is kept past the deadline: see lock_value.lua): the
      -- deadline in the value moves, and the keep with it (one lease past it, never shorter).
      local deadline, rest = string.match(held, '^%x+w2 (%d+) (.*)$')
      if deadline then
        if not now then
          local t = redis.call('TIME')
          now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        end
        if tonumber(deadline) <= now then
          out[i] = 0
        else
          local lease = tonumber(ARGV[2 * i])
          local moved = string.format('%.0f', now + lease)
          redis.call('SET', key, owner .. 'w2 ' .. moved .. ' ' .. rest, 'KEEPTTL')
          local at = string.format('%.0f', now + 2 * lease)
          if redis.call('PEXPIREAT', key, at, 'GT') == 1 then
            -- The queue expires with the key kept for it (keep in common.lua).
            redis.call('PEXPIREAT', key .. ':queue', at)
          end
          out[i] = extended(key, owner)
        end
      else
        redis.call('PEXPIRE', key, ARGV[2 * i])
        out[i] = extended(key, owner)
      end
    end
  end
end
return out
