//! [`JobContext`]: what a job's handler knows about the run it performs.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use dlock_core::{Client, FencingToken, Lease, LeaseLost, LeaseState};
use tokio_util::sync::CancellationToken;

/// Who runs a scheduler: an id (by default `<host>:<pid>`) with its host and process id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replica {
    pub(crate) id: String,
    pub(crate) host: String,
    pub(crate) pid: u32,
}

impl Replica {
    /// The replica's id, as recorded in the ledger.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Host name of the replica's machine.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Process id of the replica.
    pub fn pid(&self) -> u32 {
        self.pid
    }
}

/// The run a handler performs: which job and occurrence, on which replica, under which lease.
///
/// The run holds the job's lock with the watchdog for its whole duration. Pass
/// [`JobContext::fencing_token`] to the storage you write to; react to
/// [`JobContext::lost`] (or let the scheduler cancel the handler, the default).
#[derive(Clone)]
pub struct JobContext {
    pub(crate) job: Arc<str>,
    pub(crate) occurrence: DateTime<Utc>,
    pub(crate) manual: bool,
    pub(crate) replica: Arc<Replica>,
    pub(crate) lease: Lease,
    pub(crate) fence: FencingToken,
    pub(crate) attempt: u32,
    pub(crate) client: Client,
    /// The run's JSON arguments (a run-time schedule's or a one-off job's).
    pub(crate) args: Option<Arc<str>>,
    /// The lease of the group slot the run holds ([`crate::Job::group`]); `None` for a job
    /// outside a group.
    pub(crate) slot: Option<Lease>,
}

impl JobContext {
    /// The dlock client the scheduler runs on: for more locks, or for Redis commands through
    /// [`Client::connection`].
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The job's name.
    pub fn job(&self) -> &str {
        &self.job
    }

    /// The nominal occurrence being run (the scheduled instant, identical on every replica), or
    /// the request time of a manual run.
    pub fn occurrence(&self) -> DateTime<Utc> {
        self.occurrence
    }

    /// Whether the run was requested with `run_now`, or is a one-off job
    /// ([`crate::Scheduler::run_at`]), rather than scheduled.
    pub fn is_manual(&self) -> bool {
        self.manual
    }

    /// The replica running it.
    pub fn replica(&self) -> &Replica {
        &self.replica
    }

    /// The fencing token of this attempt's lease: larger than that of every earlier run of the
    /// job that took the same lock (every earlier run under [`crate::Overlap::Skip`]; every
    /// earlier attempt of this occurrence under [`crate::Overlap::Allow`]), so a store that
    /// keeps the largest token it saw refuses the writes of an attempt that was superseded.
    /// (Issued with the run's lock, so no round trip.)
    pub fn fencing_token(&self) -> FencingToken {
        self.fence
    }

    /// Which attempt at this occurrence this is: 1 for the first, 2 for the first retry
    /// (at-least-once delivery, [`crate::Delivery`]); always 1 at most once.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The run's arguments, deserialized from the JSON its run-time schedule or one-off job
    /// was created with ([`crate::Scheduler::add_schedule`]).
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidArgs`] when the run has no arguments (a job in code) or they
    /// do not deserialize into `T`; the message says which job and why.
    pub fn args<T: serde::de::DeserializeOwned>(&self) -> Result<T, crate::Error> {
        let json = self.args.as_deref().ok_or_else(|| {
            crate::Error::invalid_args(format!(
                "job `{}` has no arguments: only run-time schedules and one-off jobs carry them",
                self.job
            ))
        })?;
        serde_json::from_str(json).map_err(|e| {
            crate::Error::invalid_args(format!(
                "job `{}`: its arguments {json} do not fit the type the handler asked for                  ({}): {e}",
                self.job,
                std::any::type_name::<T>()
            ))
        })
    }

    /// The run's arguments as the JSON text they were stored as; `None` for a job in code.
    pub fn args_json(&self) -> Option<&str> {
        self.args.as_deref()
    }

    /// How much of the lease is left: of the job's lock, and for a grouped job also of its
    /// group slot, whichever ends first — the run holds both, and either one running out ends
    /// what it may do (the slot's lease is renewed apart from the lock's, so after a pause
    /// the two differ).
    pub fn remaining(&self) -> Duration {
        let lock = self.lease.remaining();
        self.slot
            .as_ref()
            .map_or(lock, |slot| lock.min(slot.remaining()))
    }

    /// Resolves when the run's lease is lost (see [`dlock_core::Lease::lost`]): its renewal was
    /// refused or failed past the lease, this process did not run past it (a pause), or —
    /// at-least-once delivery — another attempt superseded this one (the lock is then released
    /// by the scheduler).
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub async fn lost(&self) -> LeaseLost {
        self.lease.lost().await
    }

    /// A token cancelled when the run's lease is lost.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.lease.cancellation_token()
    }

    /// Resolves when the run's lease is in danger: suspect (a renewal unacknowledged for a
    /// renewal interval while the lease stands) or lost (see [`dlock_core::Lease::suspect`]).
    /// A run that ends while its lease is suspect is recorded so
    /// ([`crate::RunRecord::finished_while_suspect`]).
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub async fn suspect(&self) -> LeaseState {
        self.lease.suspect().await
    }

    /// Where the run's lease stands now: held, suspect or lost.
    pub fn lease_state(&self) -> LeaseState {
        self.lease.state()
    }
}

impl fmt::Debug for JobContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            job,
            occurrence,
            manual,
            replica,
            lease: _,
            fence,
            attempt,
            client: _,
            args,
            slot: _,
        } = self;
        f.debug_struct("JobContext")
            .field("job", job)
            .field("occurrence", occurrence)
            .field("manual", manual)
            .field("replica", &replica.id)
            .field("fence", fence)
            .field("attempt", attempt)
            .field("args", args)
            .finish()
    }
}
