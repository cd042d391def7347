-- record_payment.lua: records the payment of one order, fenced by the lock's fencing token.
-- (examples/web; run with `cargo run -p web`.)
--
-- KEYS[1]  the order hash         order:{<id>}           fields amount, status, fence, paid_by, receipt
-- KEYS[2]  the payment records    order:{<id>}:payments  a list, one receipt per recorded payment
-- ARGV[1]  the writer's fencing token: a u64 in decimal, without leading zeros
-- ARGV[2]  the receipt (JSON)
-- ARGV[3]  the replica that took the payment
--
-- Returns  {"ok"}                   recorded: status=paid, fence=ARGV[1], one record appended
--          {"stale", <last fence>}  a holder with a larger token claimed (claim_order.lua) or paid
--                                   this order: nothing written
--          {"paid", <receipt>}      already paid (under a token not larger): nothing written
--          {"missing"}              no such order: nothing written
--
-- The fence check comes first: a writer whose lease ran out and whose successor has claimed must
-- learn that it was fenced out, whatever the state. Tokens are compared as decimal strings
-- (longer is larger, then lexicographically), exact for every u64: Lua numbers are doubles.
-- Safe to retry: a retry of a write that took effect finds the order paid and returns its receipt.

local function smaller(a, b)
    if #a ~= #b then
        return #a < #b
    end
    return a < b
end

if redis.call('EXISTS', KEYS[1]) == 0 then
    return {'missing'}
end
local last = redis.call('HGET', KEYS[1], 'fence')
if last and smaller(ARGV[1], last) then
    return {'stale', last}
end
if redis.call('HGET', KEYS[1], 'status') == 'paid' then
    return {'paid', redis.call('HGET', KEYS[1], 'receipt')}
end
redis.call('HSET', KEYS[1], 'status', 'paid', 'fence', ARGV[1], 'paid_by', ARGV[3], 'receipt', ARGV[2])
redis.call('RPUSH', KEYS[2], ARGV[2])
return {'ok'}
