//! Operating dlock: inspection, metrics, shutdown, Redis down, runtimes, rolling deploys,
//! errors a user can act on (and at start-up: `connect()`), bad input, foreign data, replica
//! acknowledgement, Sentinel, what only a Redis Cluster has, what dlock reads from each tested
//! server, and the servers it refuses.
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
mod server_texts;
mod startup_checks;
mod unsupported_servers;
