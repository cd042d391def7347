//! The code blocks of the README, of the guide (`dlock-core/guide/*.md`,
//! `dlock-scheduler/guide/*.md`) and of the crates' READMEs, one program each in `src/bin/` or
//! one test each in `tests/`, verbatim: `tests/repo/readme.rs` checks that every `rust` block of
//! those documents is one of these files, and runs each program against a real Redis; the tests
//! start their own under `cargo test`. Run one with:
//! `DLOCK_REDIS_URL=redis://127.0.0.1:6379/ cargo run -p readme --bin quickstart`, or
//! `cargo test -p readme --test lease_lost`.
