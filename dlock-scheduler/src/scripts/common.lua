-- common.lua: helpers prepended to claim.lua and take_request.lua (it defines functions only;
-- the contract of each script is in its own file, right below).
--
-- The ledger's claim record, "<id>:claim" in the ledger hash, is
--   "<replica>\31<host>\31<pid>\31<claimed_ms>\31<manual 0|1>\31<attempt token>"
-- (readers take the first five fields; the attempt token names the one attempt of one replica
-- process that made the claim, so that only that attempt can withdraw it: withdraw.lua).

-- The Redis server's time in ms: every fire time and liveness is measured by it.
local function server_ms()
  local now = redis.call('TIME')
  return tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
end

-- An integer as a string without exponent, for scores and records.
local function int(n)
  return string.format('%.0f', n)
end

-- Claims run `id` (of the occurrence or request time `occurrence_ms`) at `now`: remembers the
-- claim for `retention_ms`, adds the run to the ledger and trims the ledger to `keep` runs.
local function open_run(claims, runs, ledger, id, occurrence_ms, now, retention_ms, keep, record)
  redis.call('ZADD', claims, int(now), id)
  redis.call('ZREMRANGEBYSCORE', claims, '-inf', int(now - retention_ms))
  redis.call('ZADD', runs, occurrence_ms, id)
  redis.call('HSET', ledger, id .. ':claim', record)
  local extra = redis.call('ZCARD', runs) - keep
  if extra > 0 then
    local old = redis.call('ZRANGE', runs, 0, extra - 1)
    for _, old_id in ipairs(old) do
      redis.call('HDEL', ledger, old_id .. ':claim', old_id .. ':end')
    end
    redis.call('ZREMRANGEBYRANK', runs, 0, extra - 1)
  end
end

