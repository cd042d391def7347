//! Background work, and the Tokio runtime it runs in.
//!
//! A [`crate::Client`] outlives runtimes: a static or default client is commonly built in one
//! runtime (a `#[tokio::test]`, a set-up block) and used in the next. Tasks die with the runtime
//! that ran them, so every background task of a client is started in the runtime that needs it
//! and started again when the one it ran in has ended ([`Task::is_running`] tells). Work that cannot be spawned
//! (no runtime at all, e.g. a guard dropped after its runtime ended) is skipped: what it would
//! have released expires with its lease.

use std::future::Future;
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::task::JoinHandle;

/// Locks a std mutex whose data stays consistent under every panic point (single inserts and
/// removes, plain assignments), so a poisoned lock is still safe to use.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Spawns `future` on the current runtime; `false` (and nothing runs) outside one.
pub(crate) fn spawn_detached<F>(future: F) -> bool
where
    F: Future<Output = ()> + Send + 'static,
{
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            drop(handle.spawn(future));
            true
        }
        Err(_) => false,
    }
}

/// A background task slot: the task it started last, which [`Task::is_running`] reports as
/// gone once it finished or the runtime it ran in has ended.
#[derive(Debug, Default)]
pub(crate) struct Task {
    handle: Mutex<Option<JoinHandle<()>>>,
}

impl Task {
    /// Starts `make()` in the current runtime, replacing the task (left to end by itself) that
    /// ran in the slot. `false` when there is no runtime.
    pub(crate) fn start<F>(&self, make: impl FnOnce() -> F) -> bool
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let mut slot = lock(&self.handle);
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                *slot = Some(handle.spawn(make()));
                true
            }
            Err(_) => {
                *slot = None;
                false
            }
        }
    }

    /// Whether a task runs in the slot (not finished, and its runtime alive).
    pub(crate) fn is_running(&self) -> bool {
        lock(&self.handle)
            .as_ref()
            .is_some_and(|h| !h.is_finished())
    }

    /// Stops the task, if any.
    pub(crate) fn abort(&self) {
        if let Some(handle) = lock(&self.handle).take() {
            handle.abort();
        }
    }
}

/// Sleeps until `at`, or forever when `None` (a `select!` arm with no deadline).
pub(crate) async fn sleep_until(at: Option<std::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_restarts_in_the_next_runtime() {
        let task = Task::default();
        let first = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        first.block_on(async {
            assert!(task.start(std::future::pending::<()>));
            assert!(task.is_running());
        });
        drop(first);
        assert!(!task.is_running(), "its runtime ended");
        assert!(
            !task.start(|| async {}),
            "outside a runtime nothing can run"
        );
        let second = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        second.block_on(async {
            assert!(task.start(std::future::pending::<()>));
            assert!(task.is_running());
            task.abort();
            tokio::task::yield_now().await;
            assert!(!task.is_running());
        });
        assert!(!spawn_detached(async {}));
    }
}
