-- claim.lua: claim one scheduled occurrence of a job for this replica — at most one replica
-- ever wins a given (job, nominal occurrence) — and open its run record in the ledger.
--
-- KEYS[1]  claims    zset: member = run id, score = server time of the claim (ms); trimmed to
--                    the retention, so a late or clock-skewed replica still finds the claim
-- KEYS[2]  runs      zset: member = run id, score = nominal occurrence (ms); the ledger's order
-- KEYS[3]  ledger    hash: "<id>:claim" (see common.lua),
--                          "<id>:end" = "<outcome>\31<ended_ms>\31<fence>\31<error text>"
-- KEYS[4]  paused    string: present while the job is paused
-- ARGV[1]  run id: the nominal occurrence in ms
-- ARGV[2]  nominal occurrence in ms
-- ARGV[3]  replica id   ARGV[4] host   ARGV[5] pid   ARGV[6] attempt token
-- ARGV[7]  claim retention in ms (how long a claim is remembered)
-- ARGV[8]  how many runs the ledger keeps
-- ARGV[9]  not before: the occurrence's fire time (nominal + jitter) in ms
--
-- Returns  {1, now_ms}            this replica won the occurrence and must run it (or record
--                                 a skip)
--          {0, "claimed", now_ms} another replica (or an earlier attempt) claimed it already
--          {0, "paused", now_ms}  the job is paused: nobody runs it
--          {2, wait_ms, now_ms}   too early by the server's clock: try again in wait_ms
--
-- Fire times are checked against the Redis server's clock, not the replica's: a replica whose
-- clock runs ahead would otherwise start an occurrence early, possibly while the previous one
-- still runs elsewhere (and then skip it as an overlap).
--
-- Retry safety: claiming twice returns "claimed" the second time; a claim whose reply was lost
-- is withdrawn by its attempt token once Redis answers again (withdraw.lua), never run.
-- All keys share the job's hash tag.

local now = server_ms()
if redis.call('EXISTS', KEYS[4]) == 1 then
  return {0, 'paused', now}
end
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return {0, 'claimed', now}
end
local fire_at = tonumber(ARGV[9])
if now < fire_at then
  return {2, fire_at - now, now}
end
open_run(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], now, tonumber(ARGV[7]), tonumber(ARGV[8]),
  ARGV[3] .. '\31' .. ARGV[4] .. '\31' .. ARGV[5] .. '\31' .. int(now) .. '\31' .. '0' .. '\31' .. ARGV[6])
return {1, now}
