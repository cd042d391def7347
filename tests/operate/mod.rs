//! Operating dlock: inspection, metrics, shutdown, Redis down, runtimes, rolling deploys,
//! errors a user can act on (and at start-up: `connect()`), bad input, foreign data, replica acknowledgement, Sentinel, and
//! what only a Redis Cluster has.
//!
//! Run alone with `make test-operate` (filter `operate::`; tests/README.md).

mod client_shutdown;
mod cluster;
mod durability;
mod error_hints;
mod foreign_data;
mod inspect;
mod invalid_input;
mod metrics;
mod redis_down;
mod rolling_deploy;
mod runtimes;
pub(crate) mod sentinel;
mod startup_checks;
