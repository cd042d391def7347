-- lock_value.lua: reading a mutex's lock value, shared by every script that reads one
-- (acquire.lua, release.lua and fence.lua through common.lua, and guarded.lua). It is not a
-- script of its own: scripts/mod.rs prepends it when their text is built. Kept apart from
-- common.lua so that a script that only reads the value does not define what it never calls:
-- every function a script's text defines is made anew on each call (for guarded.lua, leaving
-- out common.lua's and admission.lua's functions saved 0.3–0.9 us of 14–16 us per call:
-- redis-benchmark, three alternating rounds on a noisy VM).
--
-- The formats, with their versions, are listed in scripts/wire.rs. In short:
-- The lock key holds "<token><flag>1 <meta>" with a lease (PX): token = 32 lowercase hex digits,
-- flag "w" while callers wait in the queue (release must hand off) or "-", then the format
-- version, meta = "<host>\x1f<pid>\x1f<label>", followed by "\x1f<fence>" once a fence was
-- issued to the hold. Version 0 ("<token><flag> <meta>") is read as well. Anything else at that
-- key was not written by dlock.
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
-- a newer dlock: a format version above 1), or nil when it is one it understands.
local function unusable(lock, value)
  local version = lock_version(value)
  if version == nil then
    return foreign_error(lock, 'holds a value dlock did not write')
  elseif version > 1 then
    return foreign_error(lock, 'holds a lock of a newer dlock (format version ' .. version
      .. '); upgrade this client')
  end
  return nil
end

