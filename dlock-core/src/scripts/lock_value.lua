-- lock_value.lua: reading a mutex's lock value, shared by every script that reads one
-- (acquire.lua, release.lua and fence.lua through common.lua, and guarded.lua). It is not a
-- script of its own: scripts/mod.rs prepends it when their text is built. Kept apart from
-- common.lua so that a script that only reads the value does not define what it never calls:
-- every function a script's text defines is made anew on each call (for guarded.lua, leaving
-- out common.lua's and admission.lua's functions saved 0.3–0.9 us of 14–16 us per call:
-- redis-benchmark, three alternating rounds on a noisy VM).
--
-- The formats, with their versions, are listed in scripts/wire.rs. In short:
-- The lock key holds "<token>-1 <meta>" with a lease (PX): token = 32 lowercase hex digits,
-- then "-" (nobody waits) and the format version, meta = "<host>\x1f<pid>\x1f<label>",
-- followed by "\x1f<fence>" once a fence was issued to the hold. While callers wait in the
-- queue it holds version 2, "<token>w2 <deadline_ms> <meta>[\x1f<fence>]", with the holder's
-- deadline by the server clock, and the key is kept up to one lease past that deadline (keep in
-- common.lua): a newcomer's plain SET NX then fails whenever callers wait, and every script
-- judges the hold by the deadline, not by the key. Version 1 with flag "w" (a dlock before the
-- kept key) and version 0 ("<token><flag> <meta>") are read as well. Anything else at that key
-- was not written by dlock.
-- The queue KEYS[1]..":queue" holds entries "1 <token> <client> <lease_ms> <pub> <meta>" (version
-- 0 without the leading "1 "), oldest first; <pub> is "P" (PUBLISH) or "S" (SPUBLISH, cluster).

-- The format version of a value found at a lock key (`value` as returned by read(): a string,
-- or an error table for a key of another type); nil when dlock did not write it.
local function lock_version(value)
  if type(value) ~= 'string' then
    return nil
  end
  local token, version = string.match(value, '^(%x+)[%-w](%d?) ')
  if token == nil or #token ~= 32 then
    return nil
  end
  return tonumber(version) or 0
end

-- The lock key's value: a string, false when absent, an error table when the key holds another
-- type (read with pcall, so that such a key is reported instead of aborting the script).
local function read(lock)
  return redis.pcall('GET', lock)
end

-- The error reply for a lock key that holds data dlock did not write. dlock never modifies
-- such a key; the client turns this into an error that names the key.
local function foreign_error(lock, why)
  return redis.error_reply('DLOCKFOREIGN ' .. lock .. ' ' .. why)
end

-- The error reply for a lock value this dlock cannot take or change (not dlock's, or written by
-- a newer dlock: a format version above 2), or nil when it is one it understands.
local function unusable(lock, value)
  local version = lock_version(value)
  if version == nil then
    return foreign_error(lock, 'holds a value dlock did not write')
  elseif version > 2 then
    return foreign_error(lock, 'holds a lock of a newer dlock (format version ' .. version
      .. '); upgrade this client')
  end
  return nil
end


-- The server clock in milliseconds.
local function clock_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The holder's deadline (server ms) kept in a version-2 value, or nil for a value whose hold
-- lasts as long as its key (versions 0 and 1).
local function deadline_of(value)
  return tonumber(string.match(value, '^%x+w2 (%d+) '))
end

-- Whether the (usable) lock value `value` still holds at `now` (ms): a version-2 value kept past
-- its deadline holds for nobody, its own token included. (A value without a deadline holds:
-- callers read the clock only when deadline_of finds one.)
local function holds(value, now)
  local deadline = deadline_of(value)
  return deadline == nil or now < deadline
end

-- What follows the flag and version of a (usable) lock value: "<meta>[\x1f<fence>]".
local function body_of(value)
  return string.match(value, '^%x+w2 %d+ (.*)$') or string.match(value, '^%x+[%-w]%d? (.*)$')
end
