//! Job groups: at most `max` runs of a group's jobs at once across every replica
//! ([`crate::SchedulerBuilder::group`], [`crate::Job::group`]).
//!
//! A group is a dlock-core [`Semaphore`] of `max` permits named `sched-group:<group>`. Job
//! locks are named `sched:<job>`, so no group's keys (`<prefix>{sched-group:<group>}:sem…`)
//! can be a job's, whatever the names. Each job of a group has its own handle on the
//! semaphore, built with the job's lease, watchdog, `on_lost` and `max_run`, so that a slot is
//! held and renewed exactly like the job's lock. The semaphore queues waiters in FIFO order
//! across processes and hands a released permit to the oldest live waiter (pushed, not polled):
//! the runs of a group's jobs take turns instead of the fastest replica winning every time.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use dlock_core::{Client, Lease, LeaseLost, MutexOptions, Permit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::error::Error;

/// How long a run of a grouped job waits for a slot when its schedule has no next occurrence
/// (a cron expression whose last occurrence passed): one minute.
pub(crate) const WAIT_WITHOUT_NEXT: Duration = Duration::from_secs(60);

/// The dlock lock name of group `group`'s semaphore. Job locks are `sched:<job>`: the
/// different prefix keeps the two apart, also for a job named like a group.
pub(crate) fn lock_name(group: &str) -> String {
    format!("sched-group:{group}")
}

/// Checks the groups declared on a builder, in the order declared: valid names, each once,
/// `max` at least 1. Returns each group's `max`.
///
/// # Errors
/// [`crate::ErrorKind::InvalidJob`] naming the group and the fix.
pub(crate) fn declared(groups: &[(String, u32)]) -> Result<HashMap<Arc<str>, u32>, Error> {
    let mut checked = HashMap::with_capacity(groups.len());
    for (name, max) in groups {
        crate::validate::group_name(name)?;
        if *max == 0 {
            return Err(Error::invalid_job(format!(
                "group `{name}` is declared with max 0, so none of its jobs could ever run; give \
                 the number of runs of its jobs that may go on at once, 1 or more (1: they never \
                 overlap)"
            )));
        }
        if checked
            .insert(Arc::<str>::from(name.as_str()), *max)
            .is_some()
        {
            return Err(Error::invalid_job(format!(
                "group `{name}` is declared twice; declare each group once, with one max"
            )));
        }
    }
    Ok(checked)
}

/// A job's place in its group: the group's name and the job's handle on its semaphore.
#[derive(Clone, Debug)]
pub(crate) struct Membership {
    pub(crate) name: Arc<str>,
    slots: Semaphore,
}

impl Membership {
    /// The membership of job `job` in `group` (looked up in the declared `groups`), with slots
    /// held under the job lock's `options`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidJob`] when the group was not declared, or dlock-core refuses
    /// the semaphore (it does not: names and options were checked before).
    pub(crate) fn new(
        client: &Client,
        job: &str,
        group: &Arc<str>,
        groups: &HashMap<Arc<str>, u32>,
        options: MutexOptions,
    ) -> Result<Self, Error> {
        let Some(&max) = groups.get(group) else {
            let mut known: Vec<&str> = groups.keys().map(|g| &**g).collect();
            known.sort_unstable();
            let known = if known.is_empty() {
                "none is declared".to_owned()
            } else {
                format!("declared: `{}`", known.join("`, `"))
            };
            return Err(Error::invalid_job(format!(
                "job `{job}` joins the group `{group}`, which is not declared on this scheduler \
                 ({known}); declare it with `.group(\"{group}\", max)` on the builder (the same \
                 on every replica), or fix the job's group name"
            )));
        };
        let slots = client
            .semaphore_with(&lock_name(group), max, options)
            .map_err(|e| Error::refused_by_core(&format!("job `{job}`, group `{group}`"), e))?;
        Ok(Self {
            name: group.clone(),
            slots,
        })
    }

    /// Waits, in FIFO order with every other waiter of the group, for one slot, at most
    /// `wait` (zero: takes one only if one is free now), unless the attempt is stopped first.
    ///
    /// # Cancel safety
    /// Dropping the future leaves the group's queue, and gives back a slot granted meanwhile,
    /// in the background (dlock-core's acquire cleans up when dropped); so do the branches
    /// that end the wait early.
    pub(crate) async fn take(&self, wait: Duration, until: Until<'_>) -> Slot {
        tokio::select! {
            biased;
            () = until.superseded.cancelled() => Slot::Superseded,
            () = until.stop.cancelled() => Slot::Stopped,
            lost = until.job_lease.lost() => Slot::JobLeaseLost(lost),
            permit = self.slots.acquire_timeout(1, wait) => match permit {
                Ok(permit) => Slot::Taken(permit),
                Err(e) if e.is_busy() => Slot::Missed,
                Err(e) => Slot::Failed(e),
            },
        }
    }
}

/// What ends a wait for a slot before it is over.
pub(crate) struct Until<'a> {
    /// The attempt was superseded (at-least-once delivery).
    pub(crate) superseded: &'a CancellationToken,
    /// The scheduler stops.
    pub(crate) stop: &'a CancellationToken,
    /// The lease of the job's lock, held while waiting.
    pub(crate) job_lease: &'a Lease,
}

/// How a wait for a slot ended.
#[derive(Debug)]
pub(crate) enum Slot {
    /// A slot is held, renewed with the watchdog until released or dropped.
    Taken(Permit),
    /// No slot came in the wait.
    Missed,
    /// The attempt was superseded meanwhile.
    Superseded,
    /// The scheduler began to shut down meanwhile.
    Stopped,
    /// The lease of the job's lock was lost meanwhile.
    JobLeaseLost(LeaseLost),
    /// Redis refused or did not answer (or the semaphore's stored limit differs from this
    /// replica's `max`).
    Failed(dlock_core::Error),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn group_names_cannot_be_job_lock_names() {
        assert_eq!(lock_name("db"), "sched-group:db");
        assert!(!lock_name("x").starts_with("sched:"));
    }

    #[test]
    fn declared_groups_are_checked_with_the_fix_in_the_message() {
        let ok = declared(&[("a".into(), 1), ("b".into(), 3)]).unwrap();
        assert_eq!((ok["a"], ok["b"]), (1, 3));
        let zero = declared(&[("a".into(), 0)]).unwrap_err();
        assert_eq!(zero.kind(), ErrorKind::InvalidJob);
        assert!(zero.to_string().contains("max 0"), "{zero}");
        let twice = declared(&[("a".into(), 1), ("a".into(), 2)]).unwrap_err();
        assert!(twice.to_string().contains("declared twice"), "{twice}");
        let bad = declared(&[("a{b}".into(), 1)]).unwrap_err();
        assert!(bad.to_string().contains("group name"), "{bad}");
    }

    #[tokio::test]
    async fn an_undeclared_group_is_refused_with_the_declared_ones() {
        let client = Client::open("redis://127.0.0.1:1/").unwrap();
        let groups = declared(&[("db-maintenance".into(), 1)]).unwrap();
        let typo: Arc<str> = "db-maintenace".into();
        let e =
            Membership::new(&client, "vacuum", &typo, &groups, MutexOptions::new()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidJob);
        let text = e.to_string();
        assert!(
            text.contains("`db-maintenace`, which is not declared")
                && text.contains("declared: `db-maintenance`")
                && text.contains(".group(\"db-maintenace\", max)"),
            "{text}"
        );
        let known: Arc<str> = "db-maintenance".into();
        let member = Membership::new(&client, "vacuum", &known, &groups, MutexOptions::new());
        assert_eq!(&*member.unwrap().name, "db-maintenance");
    }
}
