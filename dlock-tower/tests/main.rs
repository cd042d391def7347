//! dlock-tower's tests on real Redis (dlock-testkit): in-process axum apps, each replica with a
//! dlock `Client` of its own, as separate processes would have. One binary (one link), a module
//! per layer.

// Helpers outside #[test] functions unwrap too: a panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cost;
mod idempotency;
mod rate_limit;
mod single_flight;
mod support;
