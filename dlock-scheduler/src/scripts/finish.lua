-- finish.lua: record how a run ended, in its ledger entry — only by the replica that claimed it.
--
-- KEYS[1]  ledger hash (see claim.lua)
-- ARGV[1]  run id
-- ARGV[2]  replica id of the caller
-- ARGV[3]  outcome: "succeeded" | "failed" | "cancelled" | "skipped_overlap" | "running"
-- ARGV[4]  fencing token of the run's lease ("" if none)
-- ARGV[5]  error text ("" if none)
--
-- Returns  1  recorded (ended_ms is the server time; "running" records no end time)
--          0  no such run, or claimed by another replica (nothing changed)
--
-- Retry safety: writing the same outcome twice leaves the same record.

local claim = redis.call('HGET', KEYS[1], ARGV[1] .. ':claim')
if not claim or string.sub(claim, 1, #ARGV[2] + 1) ~= ARGV[2] .. '\31' then
  return 0
end
local ended = ''
if ARGV[3] ~= 'running' then
  local now = redis.call('TIME')
  ended = string.format('%.0f', tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000))
end
redis.call('HSET', KEYS[1], ARGV[1] .. ':end',
  ARGV[3] .. '\31' .. ended .. '\31' .. ARGV[4] .. '\31' .. ARGV[5])
return 1
