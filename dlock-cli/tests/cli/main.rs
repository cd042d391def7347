//! The `dlock` binary, run as a user runs it (`assert_cmd`), against real `redis-server`
//! processes started by `dlock-testkit` (a standalone server, a 3-master cluster): one file per
//! behaviour. Locks and scheduler replicas are held by this test process through dlock itself.

// A panic is how a test fails, helpers included.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

mod failures;
mod inspect;
mod jobs;
mod locks;
mod once;
mod reach;
mod schedule;
mod secrets;
mod unlock;
