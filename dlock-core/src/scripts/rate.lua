-- rate.lua: one decision of a rate limiter (GCRA, the generic cell rate algorithm), on the
-- server's clock only. The limiter's state is its theoretical arrival time (TAT): the instant
-- at which the bucket would be full again if nothing more arrived.
--
-- KEYS[1]  the limiter's key: "<prefix>rl:{<name>}", or "<prefix>rl:{<name>:<key>}" for one key
--          of a keyed limiter (each key its own slot)
-- ARGV[1]  mode: "try" (admit now or refuse, nothing reserved), "reserve" (admit now or at
--          the returned wait, the slot reserved either way, unless the wait is longer than
--          ARGV[5]), "refund" (give n cells back: a reservation that was not used)
-- ARGV[2]  n: cells asked for (1 <= n <= burst, checked by the client)
-- ARGV[3]  t: the emission interval, microseconds per cell (1 / rate; may have a fraction)
-- ARGV[4]  tau: the burst tolerance, t * (burst - 1), microseconds
-- ARGV[5]  reserve only: the longest wait worth a reservation, microseconds
--
-- The key holds "1 <tat_us>" (format version 1; the TAT in microseconds of the server clock)
-- with an expiry at the TAT: a key that is gone means a full bucket, so an idle limiter leaves
-- nothing behind. n cells conform at `now` iff now >= tat + t * (n - 1) - tau; admitting them
-- moves the TAT to max(tat, now) + t * n. So no interval of length w admits more than
-- w / t + burst cells.
--
-- Returns  {admitted, wait_us, now_us, remaining}
--          admitted   1 admitted (for "reserve": admitted at now + wait_us), 0 refused
--          wait_us    0 when admitted now; else how long until the n cells would conform (for a
--                     refused "reserve": the wait that was longer than ARGV[5])
--          now_us     the server time of the decision, microseconds since the epoch
--          remaining  cells that would conform right after this decision (0 ..= burst)
--          "refund" returns {1, 0, now_us, remaining}
--          error      DLOCKFOREIGN when the key holds data dlock did not write, or a limiter of
--                     a newer format version (nothing changed)
-- Retry safety: "try" and "reserve" are not idempotent (a retried decision counts twice, as a
-- retried request would); the client does not retry them. "refund" is bounded: it never moves
-- the TAT below now.

local key = KEYS[1]
local mode = ARGV[1]
local n = tonumber(ARGV[2])
local t = tonumber(ARGV[3])
local tau = tonumber(ARGV[4])

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])

local stored = redis.pcall('GET', key)
local tat = now
if type(stored) == 'table' then
  return redis.error_reply('DLOCKFOREIGN ' .. key .. ' holds another Redis type')
elseif stored then
  -- The version first, whatever follows it: a newer format may lay out its value otherwise.
  local version, value = string.match(stored, '^(%d+) (.*)$')
  local stored_tat = version == '1' and string.match(value, '^%d+%.?%d*$') and tonumber(value)
  if stored_tat then
    tat = math.max(stored_tat, now)
  elseif version and tonumber(version) > 1 then
    return redis.error_reply('DLOCKFOREIGN ' .. key .. ' holds a rate limiter of a newer dlock '
      .. '(format version ' .. version .. '); upgrade this client')
  else
    return redis.error_reply('DLOCKFOREIGN ' .. key .. ' holds a value dlock did not write')
  end
end

-- Cells that conform at `now` with the TAT at `at` (at most the burst).
local function remaining(at)
  local room = now + tau - at
  if room < 0 then
    return 0
  end
  return math.floor(room / t + 1e-9) + 1
end

-- Stores the TAT `at`, expiring when it is reached (then the bucket is full: no key needed).
local function store(at)
  local ms = math.ceil((at - now) / 1000)
  if ms < 1 then
    redis.call('DEL', key)
  else
    redis.call('SET', key, string.format('1 %.3f', at), 'PX', ms)
  end
end

if mode == 'refund' then
  local back = math.max(tat - t * n, now)
  store(back)
  return {1, 0, now, remaining(back)}
end

local wait = tat + t * (n - 1) - tau - now
if wait <= 0 then
  local after = tat + t * n
  store(after)
  return {1, 0, now, remaining(after)}
end
wait = math.ceil(wait)
if mode == 'reserve' and wait <= tonumber(ARGV[5]) then
  local after = tat + t * n
  store(after)
  return {1, wait, now, 0}
end
return {0, wait, now, remaining(tat)}
