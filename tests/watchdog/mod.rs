//! Leases and their watchdog: renewal (batched, through outages, past many leases), the
//! shortest lease (`MIN_WATCHDOG_TTL`), suspicion and loss reaching the holder, and a holder
//! that crashes or is paused past its lease.
//!
//! Run alone with `make test-watchdog` (filter `watchdog::`; tests/README.md).

mod holder_crash;
mod lease_lost;
mod lease_suspect;
mod lost_signals;
mod watchdog_batch;
mod watchdog_hold;
mod watchdog_limits;
mod watchdog_outage;
mod watchdog_pause;
