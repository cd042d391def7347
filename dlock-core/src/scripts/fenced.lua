-- fenced.lua: a value written only if no writer with a larger fencing token wrote it before
-- (Client::fenced_set, Client::fenced_hset; fenced.rs). For data outside the lock's slot, or
-- written after the hold: the fence a holder got with its lock is the check.
--
-- KEYS[1]  the data: a string (set) or a hash (hset)
-- KEYS[2]  its fence: a string, the decimal fencing token of the last write (fenced.rs names it
--          in KEYS[1]'s cluster slot: "<key>:fence" when the key has a hash tag,
--          "{<key>}:fence" otherwise)
-- ARGV[1]  the writer's fencing token: a u64 in decimal, without leading zeros
-- ARGV[2]  "set" or "hset"
-- ARGV[3…] set: the value; hset: field, value, field, value …
--
-- Returns  {1}               written: the data, and ARGV[1] as its fence
--          {0, <stored>}     a writer with a larger token wrote it: nothing written
--          {-1, <type>}      KEYS[1] holds a type the write cannot change: nothing written
--          error DLOCKFOREIGN …  KEYS[2] holds something dlock did not write: another type, or
--                                a string that is not a canonical decimal u64 (a sign, a leading
--                                zero, more than 20 digits, above 18446744073709551615): nothing
--                                written
--
-- The same token may write again (a holder writes twice, or a retry of a write that took
-- effect): only a larger stored token refuses. Tokens are compared as decimal strings (longer
-- is larger, then byte by byte), exact for every u64, where Lua numbers are doubles; that
-- order is the numbers' only for canonical strings, so a stored fence is read only in the
-- form dlock writes (another program's "0005" is not fence 5). SET replaces the value and
-- clears its expiry, as a plain SET does. The fence key has no expiry: it outlives the data on
-- purpose, so that a stale writer cannot bring deleted data back.
-- Retry safety: a retry with the same token and value leaves the same state.

local function larger(a, b)
  if #a ~= #b then
    return #a > #b
  end
  return a > b
end

-- Whether s is a fence as dlock writes it: a u64 in decimal, without sign or leading zeros.
local function canonical(s)
  if s ~= '0' and not string.find(s, '^[1-9]%d*$') then
    return false
  end
  return #s < 20 or (#s == 20 and s <= '18446744073709551615')
end

local stored = redis.pcall('GET', KEYS[2])
if type(stored) == 'table' then
  return redis.error_reply('DLOCKFOREIGN ' .. KEYS[2] .. ' holds another Redis type (dlock'
    .. ' keeps a fence there: a decimal u64 without sign or leading zeros)')
end
if stored and not canonical(stored) then
  return redis.error_reply('DLOCKFOREIGN ' .. KEYS[2] .. ' holds a string that is not a fence'
    .. ' dlock wrote (a decimal u64 without sign or leading zeros)')
end
if stored and larger(stored, ARGV[1]) then
  return {0, stored}
end
local wants = 'string'
if ARGV[2] == 'hset' then
  wants = 'hash'
end
local now = redis.call('TYPE', KEYS[1])['ok']
if now ~= 'none' and now ~= wants then
  return {-1, now}
end
if ARGV[2] == 'hset' then
  redis.call('HSET', KEYS[1], unpack(ARGV, 3))
else
  redis.call('SET', KEYS[1], ARGV[3])
end
redis.call('SET', KEYS[2], ARGV[1])
return {1}
