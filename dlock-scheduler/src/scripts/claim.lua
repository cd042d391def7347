-- claim.lua: claim one scheduled occurrence of a job for this replica — at most one replica
-- ever wins a given (job, nominal occurrence) — and open its run record in the ledger. The
-- occurrence goes first to the live replica whose turn it is; the others may take it only
-- after the turn grace (or at once when that replica is not live), so the work is spread over
-- the replicas without delaying it.
--
-- KEYS[1]  claims    zset: member = run id, score = server time of the claim (ms); trimmed to
--                    the retention, so a late or clock-skewed replica still finds the claim
-- KEYS[2]  runs      zset: member = run id, score = nominal occurrence (ms); the ledger's order
-- KEYS[3]  ledger    hash: "<id>:claim", "<id>:end", "<id>:attempts" (see common.lua)
-- KEYS[4]  paused    string: present while the job is paused
-- KEYS[5]  replicas  zset: member = replica id, score = server time (ms) until which it is live
-- KEYS[6]  turn      string: how many scheduled occurrences were claimed (whose turn it is)
-- KEYS[7]  retries   zset: runs of at-least-once jobs whose attempts are not final, by the
--                    server time to look at them again (see take_retry.lua)
-- ARGV[1]  run id: the nominal occurrence in ms
-- ARGV[2]  nominal occurrence in ms
-- ARGV[3]  replica id   ARGV[4] host   ARGV[5] pid   ARGV[6] attempt token
-- ARGV[7]  claim retention in ms (how long a claim is remembered)
-- ARGV[8]  how many runs the ledger keeps
-- ARGV[9]  not before: the occurrence's fire time (nominal + jitter) in ms
-- ARGV[10] turn grace in ms: how long the other replicas leave the occurrence to the replica
--          whose turn it is (0: whoever asks first after the fire time wins)
-- ARGV[11] liveness in ms: the caller counts as live this long after this call
-- ARGV[12] attempt lease in ms for at-least-once delivery (the job's lease), 0 for at most once
-- ARGV[13] the job's turn offset: its rank among its group's jobs (sorted by name), 0 for a job
--          in no group (absent: 0)
--
-- Returns  {1, now_ms, next}            this replica won the occurrence and must run it (or
--                                        record a skip)
--          {0, "claimed", now_ms, next}  another replica (or an earlier attempt) claimed it
--          {0, "paused", now_ms, ""}     the job is paused: nobody runs it
--          {2, wait_ms, now_ms, next}    too early by the server's clock, or another replica's
--                                        turn: try again in wait_ms
--          where `next` is the replica whose turn the next occurrence is, as far as can be told
--          now (the others need not ask before its turn grace has passed); with ARGV[12] > 0
--          (at least once) every reply but "paused" ends with one more element, when the
--          job's first pending run is due in KEYS[7] (server ms, -1: none), so that the
--          replicas that lost the claim know when the winner's attempt lease would lapse
--
-- Whose turn: the live replicas (KEYS[5], expired ones removed) sorted by id; the turn counter
-- plus the job's offset (ARGV[13]), modulo their number, picks one. The jobs of a group share
-- their crons as a rule, so their counters move in step: without the offset every job of the
-- group would pick the same replica at each instant (and one kill would drop the whole round);
-- with it, a round of k jobs on n replicas gives each replica ceil(k / n) at most, while the
-- counters stay in step. The offset is not stored (INCR moves the counter by one). Every replica computes the same from the same keys, and a
-- claim moves the turn on, so consecutive occurrences go round the replicas. Preference only
-- decides *when* a replica may claim; the claim itself stays one check-and-set, so exactly
-- once never depends on it.
--
-- Fire times are checked against the Redis server's clock, not the replica's: a replica whose
-- clock runs ahead would otherwise start an occurrence early, possibly while the previous one
-- still runs elsewhere (and then skip it as an overlap).
--
-- A run still in the ledger counts as claimed even after the claim retention (an at-least-once
-- run may outlive it while its retries are due).
--
-- Retry safety: claiming twice returns "claimed" the second time; a claim whose reply was lost
-- is withdrawn by its attempt token once Redis answers again (withdraw.lua), never run.
-- All keys share the job's hash tag.

local now = server_ms()
local me = ARGV[3]
-- When the first pending at-least-once run is due (appended to the replies, see above).
local function due(reply)
  if tonumber(ARGV[12]) > 0 then
    local first = redis.call('ZRANGE', KEYS[7], 0, 0, 'WITHSCORES')
    reply[#reply + 1] = first[2] and tonumber(first[2]) or -1
  end
  return reply
end
local liveness = tonumber(ARGV[11])
redis.call('ZADD', KEYS[5], int(now + liveness), me)
redis.call('PEXPIRE', KEYS[5], int(liveness * 2))
if redis.call('EXISTS', KEYS[4]) == 1 then
  return {0, 'paused', now, ''}
end
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', int(now))
local live = redis.call('ZRANGE', KEYS[5], 0, -1)
table.sort(live)
local turn = tonumber(redis.call('GET', KEYS[6]) or '0') + (tonumber(ARGV[13] or '') or 0)
local function turn_of(n)
  return live[(n % #live) + 1]
end
if redis.call('ZSCORE', KEYS[1], ARGV[1]) or redis.call('HEXISTS', KEYS[3], ARGV[1] .. ':claim') == 1 then
  return due({0, 'claimed', now, turn_of(turn)})
end
local fire_at = tonumber(ARGV[9])
if now < fire_at then
  return due({2, fire_at - now, now, turn_of(turn + 1)})
end
local grace = tonumber(ARGV[10])
if now < fire_at + grace and turn_of(turn) ~= me then
  return due({2, fire_at + grace - now, now, turn_of(turn + 1)})
end
open_run(KEYS[1], KEYS[2], KEYS[3], KEYS[7], ARGV[1], ARGV[2], now, tonumber(ARGV[7]),
  tonumber(ARGV[8]), claim_record(me, ARGV[4], ARGV[5], now, '0', ARGV[6], 1), tonumber(ARGV[12]))
redis.call('INCR', KEYS[6])
return due({1, now, turn_of(turn + 1)})
