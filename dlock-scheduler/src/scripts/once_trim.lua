-- once_trim.lua: trim the ledger of a handler's one-off jobs (`once:<handler>`) to the last
-- runs it keeps, oldest due time first, never a run still pending or running.
--
-- KEYS[1]  runs     zset (see claim.lua)
-- KEYS[2]  ledger   hash (see common.lua, once.lua)
-- KEYS[3]  retries  zset (see take_retry.lua)
-- ARGV[1]  how many runs the ledger keeps
-- ARGV[2]  how many runs one call looks at, at most (bounds the call's time)
--
-- Returns  the number of runs removed.
--
-- Scheduled jobs are trimmed as they are claimed (common.lua's open_run); one-off jobs are
-- enqueued long before they end, so their ledger is trimmed by the replicas after runs end.
-- A trimmed run loses every record of it: claim, end, attempts, args, trace and key.
-- Retry safety: trimming twice trims once.
-- All keys share the job's hash tag.

local extra = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[1])
if extra <= 0 then
  return 0
end
local removed = 0
local old = redis.call('ZRANGE', KEYS[1], 0, math.min(extra, tonumber(ARGV[2])) - 1)
for _, id in ipairs(old) do
  if not redis.call('ZSCORE', KEYS[3], id) then
    redis.call('HDEL', KEYS[2], id .. ':claim', id .. ':end', id .. ':attempts', id .. ':args',
      id .. ':trace', id .. ':key')
    redis.call('ZREM', KEYS[1], id)
    removed = removed + 1
  end
end
return removed
