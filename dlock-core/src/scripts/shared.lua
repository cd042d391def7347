-- shared.lua: the state of the lock kinds that admit several holders at once (the semaphore;
-- the read-write lock builds on the same admission), and the checks every script that reads it
-- needs (now_ms, shared_unusable). It is not a script of its own: scripts/mod.rs prepends it,
-- after lock_value.lua and common.lua, to shared_acquire.lua, shared_release.lua,
-- shared_limit.lua and rw_change.lua (with admission.lua), and to guarded.lua (without).
--
-- A shared lock K ("<prefix>sem:{<name>}") is, all in K's cluster slot:
--   K            hash  "v" = "1" (the format version), "limit" = the permits in force, "used" =
--                      permits held, per holder "<token>" = "<weight> <fence> <meta>", and
--                      "qlease" = the longest lease (ms) of a request that queued: how long K and
--                      the queue outlive the last script that ran while requests wait
--   K..":exp"    zset  holder token -> the end of its lease (server clock, ms)
--   K..":queue"  list  waiter entries, oldest first:
--                      "1 <token> <client> <lease_ms> <pub> <weight> <meta>"
--   K..":joined:<token>"  string  the mark of a waiting request's first attempt (mode "join",
--                      first_join in common.lua), for a minute
--   K..":limit"  string  the limit set by set_limit (shared_limit.lua), without expiry: in force
--                      for every handle, whatever limit it was built with (K's "limit" follows it)
--   K..":wake:<client>"  channel of a client's waiters; a grant is published there as the
--                      mutex's ("<token> <fence> <now_ms> <lease_ms> 1", common.lua hand_off)
-- Every holder has its own lease: a holder whose lease ended is purged by the next call that
-- touches K (purge: O(expired holders)), and its permits go to the queue. K, K..":exp" and
-- K..":queue" expire together: at the latest holder's deadline, or, while requests are queued,
-- no sooner than two of their longest leases after the last script that ran (a live waiter asks
-- again within one lease at most). So a lock whose holders and waiters all crashed disappears by
-- itself, a limit stored by a handle is never forgotten while anyone holds or waits, and K never
-- outlives the deadlines its purge reads. (A read-only script finds the server clock as
-- PEXPIRETIME − PTTL of K: shared_inspect.lua.) K..":limit" is kept until set_limit sets another
-- or an operator deletes it.
-- <meta> is "<host>\x1f<pid>\x1f<label>", as in a mutex's value.

-- The server clock in ms.
local function now_ms()
  local now = redis.call('TIME')
  return tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
end

-- nil when K is absent (then also true) or a shared lock of format version 1; otherwise the
-- error reply (K holds data dlock did not write, or a lock of a newer format). Nothing was
-- modified.
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
  return nil, true
end

