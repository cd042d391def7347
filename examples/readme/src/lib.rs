//! The README's code blocks, one program each in `src/bin/` or one test each in `tests/`,
//! verbatim: `tests/repo/readme.rs` checks that every `rust` block of README.md (and of
//! dlock-testkit's README) is one of these files, and runs each program against a real Redis;
//! the tests start their own under `cargo test`. Run one with:
//! `DLOCK_REDIS_URL=redis://127.0.0.1:6379/ cargo run -p readme --bin quickstart`, or
//! `cargo test -p readme --test lease_lost`.
