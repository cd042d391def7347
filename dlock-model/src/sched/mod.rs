//! The scheduler's scripts that the attempt and schedule models leave out (issue #46), each as
//! **one atomic step** over the keys Redis holds for one job, written to follow its Lua line
//! by line: `claim.lua` (turns, misfire), `request.lua`, `take_request.lua`, `withdraw.lua`,
//! the pause (`SET paused 1`) and `resume.lua`, `heartbeat.lua`, `register.lua`, `once.lua`,
//! `once_cancel.lua` and `once_trim.lua`.
//!
//! # The step API (for the conformance driver)
//!
//! * [`JobRedis`]: what Redis holds of one job — the same keys, members, scores and hash
//!   fields as the Lua writes, ledger records as the very strings it writes (see
//!   [`claim_record`], [`end_record`]) — plus the key expiries the scripts set and the
//!   messages they published. [`Registry`] is the same for the job registry (`{sched:}`).
//! * One public function per script, `(state, now_ms, arguments) -> reply`, in [`steps`]
//!   ([`claim`], [`request`], [`take_request`], [`withdraw`], [`pause`], [`resume`],
//!   [`heartbeat`], [`register`], [`once`], [`once_cancel`], [`once_trim`]): `now_ms` is the
//!   server's `TIME` the script reads, the arguments are its `ARGV` (the keys are the job's, so
//!   they are not arguments), the reply is its return, decoded.
//! * Before each step, keys whose expiry has passed are dropped, as Redis does when the script
//!   touches them ([`JobRedis::expire`]): a key expires when the time is past its deadline.
//!
//! The conformance driver decodes real Redis (`ZRANGE … WITHSCORES`, `HGETALL`, `LRANGE`,
//! `PTTL`) into the same types and compares after every step. [`model`] wraps the steps in the
//! checked model of the at-most-once claim path.

pub mod keys;
pub mod model;
pub mod once_model;
pub mod props;
pub mod steps;
#[cfg(test)]
mod tests;
pub mod world;

pub use steps::{
    ClaimArgs, ClaimReply, OnceArgs, OnceReply, RegisterArgs, TakeRequestArgs, TakeRequestReply,
    claim, heartbeat, once, once_cancel, once_trim, pause, register, request, resume, take_request,
    withdraw,
};

pub use keys::*;
