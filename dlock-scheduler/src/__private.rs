//! Used by the code `#[scheduled]` generates, and test hooks for dlock's own integration
//! tests. Not a public API: no stability guarantees.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

pub use dlock_core::OnLost;
pub use std::time::Duration;

use crate::builder::SchedulerBuilder;
use crate::context::JobContext;
use crate::error::Error;
use crate::job::Job;

/// What a job's handler may return: `Result<(), E>` with `E: Display`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a job's result",
    label = "the return type of a #[scheduled] function",
    note = "return `Result<(), E>` where `E: std::fmt::Display` (its text is recorded in the run ledger), e.g. `Result<(), std::io::Error>` or `anyhow::Result<()>`"
)]
pub trait JobOutput {
    /// The error whose text the ledger records.
    type Error: fmt::Display;

    /// The result as `Job::new` takes it.
    fn into_result(self) -> Result<(), Self::Error>;
}

// Not recommended: a `Result<(), E>` whose `E` is not `Display` then gets `JobOutput`'s own
// message and note, not the raw "`E` doesn't implement `Display`".
#[diagnostic::do_not_recommend]
impl<E: fmt::Display> JobOutput for Result<(), E> {
    type Error = E;

    fn into_result(self) -> Result<(), E> {
        self
    }
}

/// [`Job::new`], with the handler's output checked by [`JobOutput`] (so that a wrong return
/// type is reported on the return type, with the note above).
///
/// # Errors
/// As [`Job::new`].
pub fn job<F, Fut, R>(name: &str, cron: &str, tz: &str, handler: F) -> Result<Job, Error>
where
    F: Fn(JobContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = R> + Send + 'static,
    R: JobOutput + 'static,
{
    Job::new(name, cron, tz, move |ctx| {
        let run = handler(ctx);
        async move { run.await.into_result() }
    })
}

/// Test hook: `hook(job name)` runs in each job loop's task every time the task is polled,
/// before the loop itself, so that a test can make one loop panic or block its thread as a bug
/// would, while the rest of the scheduler (its heartbeat) goes on. For dlock's integration
/// tests (`tests/scheduler/scheduler_stall.rs`); never needed in an application.
pub fn on_loop_poll(
    builder: SchedulerBuilder,
    hook: impl Fn(&str) + Send + Sync + 'static,
) -> SchedulerBuilder {
    builder.loop_hook(Arc::new(hook))
}

/// The conformance test's access to the scheduler's scripts: only with the `__conformance`
/// feature, which only dlock's own test package turns on.
#[cfg(feature = "__conformance")]
pub mod conformance;

/// Every Lua script the scheduler runs: its file's name and the very `redis::Script` it sends.
/// For dlock's own test that each one loads on every tested server
/// (`tests/operate/server_texts.rs`); never needed in an application.
pub fn scripts() -> Vec<(&'static str, &'static redis::Script)> {
    crate::scripts::all().to_vec()
}
