//! Compile-time behaviour of `#[distributed_lock]`, `#[scheduled]` and `#[rate_limited]`,
//! through trybuild:
//! `ui/pass` must compile under `#![deny(warnings)]` (and run: their `main` only builds futures
//! or jobs, it never polls them),
//! `ui/fail` must fail with exactly the golden `.stderr` next to each file — one file per
//! failure mode. Regenerate a golden file with `TRYBUILD=overwrite`, then read it.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/pass/*.rs");
    cases.compile_fail("tests/ui/fail/*.rs");
}

/// `#[scheduled]`: the same rules, under `ui/scheduled/{pass,fail}`. Its pass tests' `main`
/// builds the jobs (no Redis needed) and checks their name, schedule and options.
#[test]
fn scheduled() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/scheduled/pass/*.rs");
    cases.compile_fail("tests/ui/scheduled/fail/*.rs");
}

/// `#[rate_limited]`: the same rules, under `ui/rate_limited/{pass,fail}`.
#[test]
fn rate_limited() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/rate_limited/pass/*.rs");
    cases.compile_fail("tests/ui/rate_limited/fail/*.rs");
}
