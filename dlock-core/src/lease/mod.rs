//! Leases: one acquisition in Redis ([`LeaseCore`]), shared by its holds and the watchdog; how
//! its loss reaches the work it protects; releasing and extending it; and the registry of the
//! leases a client holds ([`HeldLocks`]). The arithmetic (TTLs, drift, safe-until) is in
//! `timing.rs`.
//!
//! A lease is *lost* — once, for good — when an extension finds the lock gone or owned by another,
//! when renewal stops (`max_hold`), or when `safe_until` passes without a successful renewal. Loss
//! resolves every [`Lease::lost`](crate::Lease::lost) future, cancels the lease's [`CancellationToken`](tokio_util::sync::CancellationToken) and logs a
//! `tracing` warning, no later than `safe_until`.
//!
//! Before that, a watchdog lease can be *suspect*: a renewal was sent one renewal interval ago
//! and is still not acknowledged (Redis slow, paused, cut off), while `safe_until` is ahead.
//! The lease still stands; the holder gets the time that is left to prepare. The next
//! acknowledged renewal makes it *held* again (recovered). One state machine ([`LeaseState`]):
//!
//! ```text
//! Held ──renewal unanswered for an interval──▶ Suspect ──renewal acknowledged──▶ Held
//!   │                                            │
//!   └───────────── lost (any reason) ────────────┴──▶ Lost(reason)   (final)
//! ```

mod acquisition;
mod handle;
mod loss;
mod state;
pub(crate) mod watchdog;

pub(crate) use acquisition::{HeldLocks, HoldRelease, LeaseCore, NewLease};
pub use handle::Lease;
pub(crate) use handle::watch_group;
pub(crate) use loss::LossSignal;
pub use loss::{LeaseLost, LeaseState, LostReason};
