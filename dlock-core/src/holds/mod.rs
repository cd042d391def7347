//! What a holder has: a hold's guard, reentrancy, and writes applied only while it holds.

pub(crate) mod guard;
pub(crate) mod guarded;
pub(crate) mod hold;
