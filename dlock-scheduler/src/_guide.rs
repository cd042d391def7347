//! The guide: how to use dlock-scheduler, chapter by chapter, beyond the crate page.
//!
//! Each chapter is a markdown file in `dlock-scheduler/guide/`, shipped in the package and
//! rendered here as a module with nothing but documentation (no items: nothing here is API).
//! Every `rust` block in it is a complete program of dlock's repository (`examples/readme/`),
//! verbatim; dlock's tests hold each block to its file and build and run it against a real
//! Redis, so they are not doctests a second time (lib.rs leaves this module out of doctests).
//!
//! | chapter | what it covers |
//! |---|---|
//! | [`jobs`] | cron jobs in code (`Job`, `#[scheduled]`) and added at run time; per-occurrence claims; the calendar |
//! | [`delivery`] | at most once (the default) or at least once, when a replica dies |
//! | [`one_offs_and_groups`] | one-off and delayed jobs; job groups that limit runs at once |
//! | [`operating`] | the ledger, pause / resume / run now, shutdown, stalled loops, the dashboard, metrics |
//!
//! The locks underneath (leases, fencing, deployments, TLS and ACL users) are in
//! [`dlock_core::_guide`].

#[doc = include_str!("../guide/jobs.md")]
pub mod jobs {}

#[doc = include_str!("../guide/delivery.md")]
pub mod delivery {}

#[doc = include_str!("../guide/one_offs_and_groups.md")]
pub mod one_offs_and_groups {}

#[doc = include_str!("../guide/operating.md")]
pub mod operating {}
