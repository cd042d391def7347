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
-- The checks are order_checks.lua's, prepended, as in claim_order.lua (the fence first).
-- Safe to retry: a retry of a write that took effect finds the order paid and returns its receipt.

local refusal = refused(KEYS[1], ARGV[1])
if refusal then
    return refusal
end
redis.call('HSET', KEYS[1], 'status', 'paid', 'fence', ARGV[1], 'paid_by', ARGV[3], 'receipt', ARGV[2])
redis.call('RPUSH', KEYS[2], ARGV[2])
return {'ok'}
