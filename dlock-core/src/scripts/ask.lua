-- ask.lua: ask the current holder(s) of a lock to give it back (a polite release request,
-- `Client::request_release`). Changes no hold: nothing is released, extended or taken; the
-- holders learn of the request with their next renewal (extend.lua answers 2) and decide.
-- Prepended with lock_value.lua and shared.lua (unusable, shared_unusable, now_ms).
--
-- KEYS[1]  lock key: a mutex's string (see acquire.lua), or a shared lock's hash K (see
--          shared.lua)
-- ARGV[1]  "M" for a mutex, "S" for a shared lock (semaphore, read-write lock)
--
-- The request is kept in KEYS[1]..":ask", a hash in the lock's slot: per holder asked, its
-- owner token (a mutex's 32 hex digits; a shared holder's token as in K..":exp") -> the
-- server time of the request in ms. It expires with the holds it names: no sooner than the
-- lease of the longest of them at the time of asking (PEXPIRE only ever moves it later), so a
-- holder that renews on time — a renewal is due a renewal interval, at most half the lease,
-- before its lease ends — sees it, and a holder acquired later is never asked by an earlier
-- request (its token is new).
--
-- Returns  n >= 0  the number of holders asked (0: nobody holds the lock)
--          error   DLOCKFOREIGN when KEYS[1] holds data dlock did not write, or a lock of a
--                  newer format version, or a mutex without an expiry (someone's PERSIST: the
--                  request could not expire with the hold) (nothing changed)
-- Retry safety: asking twice asks the same holders again, with the later time: the same state
-- but for the time.

local ask = KEYS[1] .. ':ask'
local now = now_ms()

-- Records the request for `token`, kept for at least `keep_ms` from now.
local function record(token, keep_ms)
  redis.call('HSET', ask, token, now)
  if keep_ms > 0 and redis.call('PTTL', ask) < keep_ms then
    redis.call('PEXPIRE', ask, keep_ms)
  end
end

if ARGV[1] == 'M' then
  local value = read(KEYS[1])
  if not value then
    return 0
  end
  local refused = unusable(KEYS[1], value)
  if refused then
    return refused
  end
  local pttl = redis.call('PTTL', KEYS[1])
  if pttl < 0 then
    return foreign_error(KEYS[1], 'holds a lock without an expiry (was it PERSISTed?); its '
      .. 'holder cannot be asked')
  end
  -- Version 2 (callers wait): the hold lasts to the deadline in the value, not to the key's
  -- expiry, which is kept a lease longer; past it, nobody holds the lock.
  local deadline = deadline_of(value)
  if deadline then
    local now = clock_ms()
    if deadline <= now then
      return 0
    end
    pttl = deadline - now
  end
  record(string.sub(value, 1, 32), pttl)
  return 1
end

local refused = shared_unusable(KEYS[1])
if refused then
  return refused
end
local holders = redis.call('ZRANGE', KEYS[1] .. ':exp', '(' .. now, '+inf', 'BYSCORE', 'WITHSCORES')
for i = 1, #holders, 2 do
  record(holders[i], tonumber(holders[i + 1]) - now)
end
return #holders / 2
