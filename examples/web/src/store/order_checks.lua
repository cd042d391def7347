-- order_checks.lua: the checks claim_order.lua and record_payment.lua make first, in this order
-- (examples/web). Not a script of its own: redis_store.rs prepends it to each.
--
-- The fence check comes first: a writer whose lease ran out and whose successor has claimed must
-- learn that it was fenced out, whatever the state. Tokens are compared as decimal strings
-- (longer is larger, then lexicographically), exact for every u64: Lua numbers are doubles.

local function smaller(a, b)
    if #a ~= #b then
        return #a < #b
    end
    return a < b
end

-- The reply that refuses `token` for the order at `order`, or nil when it may write:
-- {"missing"}, {"stale", <last fence>}, or {"paid", <receipt>}.
local function refused(order, token)
    if redis.call('EXISTS', order) == 0 then
        return {'missing'}
    end
    local last = redis.call('HGET', order, 'fence')
    if last and smaller(token, last) then
        return {'stale', last}
    end
    if redis.call('HGET', order, 'status') == 'paid' then
        return {'paid', redis.call('HGET', order, 'receipt')}
    end
    return nil
end
