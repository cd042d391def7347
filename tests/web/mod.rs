//! The `web` example (examples/web) end to end: replicas as separate processes, with orders in
//! memory and in PostgreSQL.
//!
//! Run alone with `make test-web` (filter `web::`; tests/README.md).

mod web_layers;
mod web_pay;
mod web_postgres;
