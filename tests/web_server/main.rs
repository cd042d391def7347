//! Run with: `dlock-test-web --redis-url … --listen 127.0.0.1:0` (started by `web_pay.rs`, not by
//! hand; by hand, run the example itself: `cargo run -p web`).
//!
//! The `web` example's service, unchanged: the example's own `main` is this same one line. It is
//! a binary of the test package because Cargo only tells a test where the binaries of its own
//! package are (`CARGO_BIN_EXE_<name>`) and only builds those for `cargo test -p dlock-tests`.

fn main() -> std::process::ExitCode {
    web::main()
}
