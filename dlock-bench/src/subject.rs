//! What is measured: a [`Subject`] is a thing that acquires and releases a lock on Redis (the raw
//! floors, rslock, dlock). Every workload drives its subjects through this trait
//! only, so that each runs exactly the same loop, runtime and warm-up, and a new subject is one
//! file implementing it plus its line in [`crate::subjects`].
//!
//! The trait is generic (no boxing, no dynamic dispatch): each subject's calls compile to what a
//! user of it would write by hand.

use std::future::Future;
use std::ops::Range;

use crate::redis_stats::Plain;
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
    /// Whether a holder can read a fencing token (W2-fence reads it in every hold).
    const FENCES: bool = false;
    /// The plain (non-script) commands the subject's client sends itself, which `INFO
    /// commandstats` cannot tell apart from Lua-internal calls (the `SET NX` of the floor and of
    /// rslock, dlock's uncontended `SET NX`): each is a client round trip.
    const OWN_PLAIN: Plain = Plain::NONE;

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

    /// Reads the holder's fencing token, as a holder that fences its writes does (W2-fence);
    /// nothing for a subject without fences ([`Subject::FENCES`]).
    fn read_fence(_guard: &Self::Guard<'_>) -> impl Future<Output = Result<(), BoxError>> + Send {
        async { Ok(()) }
    }

    /// Releases; `Ok(false)` when the lease was already gone.
    fn release(guard: Self::Guard<'_>) -> impl Future<Output = Result<bool, BoxError>> + Send;

    /// One pair on lock `name` (W1, W2): acquire, read the fencing token if `fence` says so
    /// (W2-fence), then release. An error when the lock was held or lost: the pair workloads use
    /// distinct keys, so either means a broken benchmark.
    fn pair(&self, name: &str, fence: Fence) -> impl Future<Output = Result<(), BoxError>> + Send {
        async move {
            let lock = self.lock(name)?;
            let Some(guard) = Self::acquire(&lock).await? else {
                return Err(format!("{}: `{name}` was already held", Self::LABEL).into());
            };
            if fence != Fence::No {
                Self::read_fence(&guard).await?;
            }
            if !Self::release(guard).await? {
                return Err(
                    format!("{}: `{name}` was no longer held at release", Self::LABEL).into(),
                );
            }
            Ok(())
        }
    }
}

/// Whether a pair reads the holder's fencing token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fence {
    /// W1, W2: acquire, release.
    No,
    /// W2-fence: acquire, read the fence, release.
    Read,
    /// W2-fence with warm counters: as `Read`, on a server whose fence counters exist already,
    /// as on one that has served fenced locks before (dlock's counters are per cluster slot and
    /// never expire; the spec's `FLUSHALL` leaves every slot's to be made anew), by a client
    /// that has taken every name once before (in W2).
    ReadWarm,
}

impl Fence {
    /// The names `--fence` takes (the `w1-one` profiling subcommand), one per variant.
    const NAMES: [(&'static str, Fence); 3] = [
        ("no", Fence::No),
        ("read", Fence::Read),
        ("warm", Fence::ReadWarm),
    ];

    /// Parses a `--fence` value.
    pub(crate) fn parse(name: &str) -> Result<Fence, BoxError> {
        Fence::NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, fence)| fence)
            .ok_or_else(|| format!("unknown fence `{name}`; use no, read or warm").into())
    }
}

/// Pairs on `{prefix}{i}` for every `i` in `range`: opens connections and loads scripts before a
/// measured window.
pub(crate) async fn warm_up<S: Subject>(
    subject: &S,
    prefix: &str,
    range: Range<u64>,
) -> Result<(), BoxError> {
    warm_up_with(subject, prefix, range, Fence::No).await
}

/// [`warm_up`], with the pairs of the window to come (W2-fence reads fences while warming up too).
pub(crate) async fn warm_up_with<S: Subject>(
    subject: &S,
    prefix: &str,
    range: Range<u64>,
    fence: Fence,
) -> Result<(), BoxError> {
    for i in range {
        subject.pair(&format!("{prefix}{i}"), fence).await?;
    }
    Ok(())
}
