//! fenced.lua's comparison held to the model's, step by step, for fencing tokens where a Lua
//! number (a double) would round or a plain string comparison would err: 9 against 10, around
//! 2^53, and up to `u64::MAX`. For every ordered pair `(a, b)` of the tokens below, on a fresh
//! data key, a write with `a` then one with `b` runs on both sides; the replies (with the stored
//! fence's value, which here is the same number on both sides) and the value left must agree.
//! The sequences of `the_scripts_conform_to_the_model` also run fenced.lua, with the fences of
//! real holds, which are far below 2^53.

use dlock_model::{Op, Reply, Server, abstraction, apply};
use redis::Value;

use crate::redis_side::Real;

/// The tokens every pair is drawn from.
const TOKENS: [u64; 14] = [
    1,
    9,
    10,
    99,
    100,
    (1 << 53) - 1,
    1 << 53,
    (1 << 53) + 1,
    (1 << 53) + 2,
    (1 << 63) - 1,
    1 << 63,
    10_000_000_000_000_000_000,
    u64::MAX - 1,
    u64::MAX,
];

/// The real reply decoded to the model's `Reply`, the stored fence as a u64.
fn decode(value: &Value) -> Result<Reply, String> {
    match value {
        Value::Array(items) => match items.as_slice() {
            [Value::Int(1)] => Ok(Reply::Written),
            [Value::Int(0), Value::BulkString(stored)] => std::str::from_utf8(stored)
                .ok()
                .and_then(|s| s.parse().ok())
                .map(|stored| Reply::Stale { stored })
                .ok_or_else(|| format!("a stored fence {stored:?}")),
            _ => Err(format!("an unexpected reply {value:?}")),
        },
        _ => Err(format!("an unexpected reply {value:?}")),
    }
}

/// Runs every pair on `real` and the model; the number of pairs, or the first that differs.
pub(crate) fn pairs(real: &mut Real) -> Result<usize, String> {
    let mut count = 0;
    for a in TOKENS {
        for b in TOKENS {
            real.reset()?;
            let mut model = Server::new(None);
            for (fence, value) in [(a, 1), (b, 2)] {
                let op = Op::FencedSet {
                    key: 0,
                    fence,
                    value,
                };
                let expected = apply(&mut model, 0, op.clone());
                let got = match real.run(&op)? {
                    Ok(value) => decode(&value)?,
                    Err((code, detail)) => return Err(format!("error {code} {detail}")),
                };
                if got != expected {
                    return Err(format!(
                        "fenced_set with {fence} after {a}: model {expected:?}, redis {got:?}"
                    ));
                }
            }
            let left = real
                .state()?
                .fenced
                .get(&0)
                .copied()
                .ok_or("no value left")?;
            let expected = abstraction(&model, 0).fenced.get(&0).copied();
            if Some(left) != expected {
                return Err(format!(
                    "after {a} then {b}: the value of writer {left} is left, the model's is {expected:?}"
                ));
            }
            count += 1;
        }
    }
    Ok(count)
}
