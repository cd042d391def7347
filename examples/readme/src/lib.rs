//! The README's code blocks, one program each in `src/bin/`, verbatim: `tests/readme.rs` checks
//! that every `rust` block of README.md is one of these files, and runs each against a real
//! Redis. Run one with: `DLOCK_REDIS_URL=redis://127.0.0.1:6379/ cargo run -p readme --bin quickstart`.
