//! What is measured: a [`Subject`] is a thing that acquires and releases a lock on Redis (the raw
//! floor, dlock; a peer library later). Every workload drives its subjects through this trait
//! only, so that each runs exactly the same loop, runtime and warm-up, and a new subject is one
//! file implementing it plus its line in [`crate::subjects`].
//!
//! The trait is generic (no boxing, no dynamic dispatch): each subject's calls compile to what a
//! user of it would write by hand.

use std::future::Future;
use std::ops::Range;

use crate::rt::BoxError;

/// A lock implementation under test. Every lock it takes has a lease of
/// [`TTL`](crate::spec::TTL); a blocking acquire waits up to
/// [`ACQUIRE_WAIT`](crate::spec::ACQUIRE_WAIT).
pub(crate) trait Subject: Sized + Send + Sync + 'static {
    /// Name on the command line (`--subject NAME`) and in results.json.
    const NAME: &'static str;
    /// Row label in the report.
    const LABEL: &'static str;
    /// Whether [`Subject::acquire`] waits for a held lock (W3 needs it; the floor does not).
    const WAITS: bool;
    /// Plain (non-script) commands the subject sends once per pair that `INFO commandstats`
    /// cannot tell apart from Lua-internal calls (the floor's `SET`).
    const OWN_PLAIN: &'static [&'static str] = &[];

    /// A handle on one lock name (what the user keeps between acquisitions).
    type Lock<'a>: Send + Sync;
    /// A held lock.
    type Guard<'a>: Send;

    /// Connects to the server at `url`; runs inside the Tokio runtime that will drive it.
    fn connect(url: &str) -> impl Future<Output = Result<Self, BoxError>>;

    /// The handle on lock `name`.
    fn lock<'a>(&'a self, name: &'a str) -> Result<Self::Lock<'a>, BoxError>;

    /// Takes the lock; `Ok(None)` when it stayed held by someone else (the floor at once, a
    /// waiting subject after [`ACQUIRE_WAIT`](crate::spec::ACQUIRE_WAIT)).
    fn acquire<'a, 'l: 'a>(
        lock: &'a Self::Lock<'l>,
    ) -> impl Future<Output = Result<Option<Self::Guard<'a>>, BoxError>> + Send;

    /// Releases; `Ok(false)` when the lease was already gone.
    fn release(guard: Self::Guard<'_>) -> impl Future<Output = Result<bool, BoxError>> + Send;

    /// One pair on lock `name`: acquire, then release (W1, W2). An error when the lock was held
    /// or lost: the pair workloads use distinct keys, so either means a broken benchmark.
    fn pair(&self, name: &str) -> impl Future<Output = Result<(), BoxError>> + Send {
        async move {
            let lock = self.lock(name)?;
            let Some(guard) = Self::acquire(&lock).await? else {
                return Err(format!("{}: `{name}` was already held", Self::LABEL).into());
            };
            if !Self::release(guard).await? {
                return Err(
                    format!("{}: `{name}` was no longer held at release", Self::LABEL).into(),
                );
            }
            Ok(())
        }
    }
}

/// Pairs on `{prefix}{i}` for every `i` in `range`: opens connections and loads scripts before a
/// measured window.
pub(crate) async fn warm_up<S: Subject>(
    subject: &S,
    prefix: &str,
    range: Range<u64>,
) -> Result<(), BoxError> {
    for i in range {
        subject.pair(&format!("{prefix}{i}")).await?;
    }
    Ok(())
}
