-- claim.lua: claim one occurrence of a job for this replica — at most one replica ever wins a
-- given (job, nominal occurrence) — and open its run record in the ledger.
--
-- KEYS[1]  claims   zset: member = run id, score = server time of the claim (ms); trimmed to
--                   the retention, so a late or clock-skewed replica still finds the claim
-- KEYS[2]  runs     zset: member = run id, score = nominal occurrence (ms); the ledger's order
-- KEYS[3]  ledger   hash: "<id>:claim" = "<replica>\31<host>\31<pid>\31<claimed_ms>\31<manual>",
--                         "<id>:end"   = "<outcome>\31<ended_ms>\31<fence>\31<error text>"
-- KEYS[4]  paused   string: present while the job is paused
-- ARGV[1]  run id: the nominal occurrence in ms ("<ms>"), or "m<ms>" for a manual run
-- ARGV[2]  nominal occurrence in ms
-- ARGV[3]  replica id   ARGV[4] host   ARGV[5] pid
-- ARGV[6]  claim retention in ms (how long a claim is remembered)
-- ARGV[7]  how many runs the ledger keeps
-- ARGV[8]  "1" for a manual run (run_now), else "0"
-- ARGV[9]  not before: the occurrence's fire time (nominal + jitter) in ms, or 0 (manual runs)
--
-- Returns  {1, claimed_ms}   this replica won the occurrence and must run it (or record a skip)
--          {0, "claimed"}    another replica claimed it already
--          {0, "paused"}     the job is paused: nobody runs it
--          {2, wait_ms}      too early by the server's clock: try again in wait_ms
--
-- Fire times are checked against the Redis server's clock, not the replica's: a replica whose
-- clock runs ahead would otherwise start an occurrence early, possibly while the previous one
-- still runs elsewhere (and then skip it as an overlap).
--
-- Retry safety: claiming twice returns "claimed" the second time; the caller treats a claim
-- whose reply was lost as lost (at most once), never as won.
-- All keys share the job's hash tag.

if redis.call('EXISTS', KEYS[4]) == 1 then
  return {0, 'paused'}
end
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return {0, 'claimed'}
end
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local not_before = tonumber(ARGV[9])
if now_ms < not_before then
  return {2, not_before - now_ms}
end
local now_s = string.format('%.0f', now_ms)
redis.call('ZADD', KEYS[1], now_s, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now_ms - tonumber(ARGV[6])))
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1] .. ':claim',
  ARGV[3] .. '\31' .. ARGV[4] .. '\31' .. ARGV[5] .. '\31' .. now_s .. '\31' .. ARGV[8])
local keep = tonumber(ARGV[7])
local extra = redis.call('ZCARD', KEYS[2]) - keep
if extra > 0 then
  local old = redis.call('ZRANGE', KEYS[2], 0, extra - 1)
  for _, id in ipairs(old) do
    redis.call('HDEL', KEYS[3], id .. ':claim', id .. ':end')
  end
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, extra - 1)
end
return {1, now_ms}
