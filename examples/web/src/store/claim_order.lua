-- claim_order.lua: a lock holder claims one order with its fencing token before it charges it.
-- (examples/web; run with `cargo run -p web`.)
--
-- KEYS[1]  the order hash         order:{<id>}   fields amount, status, fence, paid_by, receipt
-- ARGV[1]  the holder's fencing token: a u64 in decimal, without leading zeros
--
-- Returns  {"claimed", <amount>}    unpaid, and the order's fence is now ARGV[1]
--          {"stale", <last fence>}  a holder with a larger token claimed or paid it: nothing written
--          {"paid", <receipt>}      already paid (under a token not larger): nothing written
--          {"missing"}              no such order: nothing written
--
-- The claim stores the holder's token in the order before the provider is called, so that a
-- holder whose lease ran out while it was charging (paused past it) cannot record its payment
-- once a newer holder has claimed the order, even if the newer holder has not recorded yet.
-- The checks are order_checks.lua's, prepended, as in record_payment.lua.

local refusal = refused(KEYS[1], ARGV[1])
if refusal then
    return refusal
end
redis.call('HSET', KEYS[1], 'fence', ARGV[1])
return {'claimed', redis.call('HGET', KEYS[1], 'amount')}
