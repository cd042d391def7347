//! Run with: `cargo run -p web -- --redis-url redis://127.0.0.1:6379/ --listen 127.0.0.1:3000`
//! (flags or `DLOCK_REDIS_URL` / `LISTEN`; `--help` lists them all, `--store postgres
//! --postgres-url URL` among them).
//!
//! The `web` example: an axum service whose `POST /orders/{id}/pay` runs under
//! `#[distributed_lock]`, so that each order is charged once however many replicas serve it.
//! The service lives in the library (`src/lib.rs`, whose docs give the HTTP contract: 200, or
//! 409 `already_paid` with the receipt, or 409 `in_progress` with `Retry-After`, 404, 503), so
//! that the workspace tests can start it as their own binary; this file only starts it.

fn main() -> std::process::ExitCode {
    web::main()
}
