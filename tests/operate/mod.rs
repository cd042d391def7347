//! Operating dlock: inspection, metrics, shutdown, Redis down, runtimes, rolling deploys,
//! errors a user can act on (and at start-up: `connect()`), bad input, foreign data, replica
//! acknowledgement, Sentinel, what only a Redis Cluster has, what dlock reads from each tested
//! server, the servers it refuses, and a client on the application's own connection.
//!
//! Run alone with `make test-operate` (filter `operate::`; tests/README.md).

mod app_connection;
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
