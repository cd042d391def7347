//! What operators' tools show of the jobs: each job's schedule, next fire, paused state, the
//! replicas that run it (from the registry) and its ledger, in one call
//! ([`Scheduler::overview`]). The `dlock jobs` command and the dashboard (feature `web`) both
//! read it, so the two can never disagree on what a job's next fire or replicas are.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use chrono::DateTime;
use chrono_tz::Tz;
use dlock_cron::{Schedule, ScheduleError};

use crate::error::Error;
use crate::ledger::RunRecord;
use crate::registry::RegisteredReplica;
use crate::schedule_store::RuntimeSchedule;
use crate::scheduler::Scheduler;

/// A job as an operator sees it: its schedule, its next fire, whether it is paused, which
/// replicas run it now and its last runs.
#[derive(Debug)]
#[non_exhaustive]
pub struct JobOverview {
    /// The job's name.
    pub name: String,
    /// Its cron expression: the first replica's (by id), or this scheduler's own when no
    /// running replica registered the job yet. Each replica's is in [`JobOverview::replicas`].
    pub cron: String,
    /// Its IANA time zone (from the same source as [`JobOverview::cron`]).
    pub time_zone: String,
    /// The next occurrence after the overview was read, in the job's time zone
    /// (`with_timezone(&Utc)` gives the instant); `Ok(None)` when the schedule has no further
    /// occurrence, `Err` when this version cannot read the expression or zone a replica
    /// registered (a replica of another version, or a newer time zone).
    pub next_fire: Result<Option<DateTime<Tz>>, ScheduleError>,
    /// Whether the job is paused ([`Scheduler::pause`]).
    pub paused: bool,
    /// The replicas that registered the job, by replica id (empty: none runs it now),
    /// stalled ones included and marked ([`JobReplica::is_stalled`]).
    pub replicas: Vec<JobReplica>,
    /// Whether those replicas disagree on the cron expression or zone (a deploy in progress).
    pub schedules_differ: bool,
    /// Its ledger ([`Scheduler::history`]), oldest first.
    pub history: Vec<RunRecord>,
    /// The stored schedule, when the job is a run-time schedule
    /// ([`Scheduler::add_schedule`]); `None` for a job in code.
    pub runtime: Option<RuntimeSchedule>,
    /// The live replicas that do not run this run-time schedule, and why (the handler is not
    /// registered on them …), by replica id.
    pub not_run_by: Vec<NotRunBy>,
}

/// A replica that does not run a run-time schedule, and why
/// ([`crate::RegisteredReplica::unrunnable`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct NotRunBy {
    /// The replica's id.
    pub replica: String,
    /// Why it does not run it.
    pub reason: String,
}

/// A replica that runs a job, as the registry shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobReplica {
    /// The replica's id.
    pub id: String,
    /// Host name of its machine.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// Its last heartbeat, by the Redis server's clock.
    pub last_heartbeat: SystemTime,
    /// How often it renews its registration.
    pub heartbeat_every: Duration,
    /// The job's cron expression on this replica.
    pub cron: String,
    /// The job's time zone on this replica.
    pub time_zone: String,
    /// Whether the replica as a whole is stalled: no heartbeat for longer than its liveness
    /// ([`RegisteredReplica::stalled`]).
    pub stalled: bool,
    /// How long its loop for this job had not run at its last heartbeat, when it is stalled
    /// while the process still heartbeats ([`crate::RegisteredJob::loop_stalled_for`]).
    pub loop_stalled_for: Option<Duration>,
    /// The job's delivery on this replica; `None` from replicas of an earlier version.
    pub delivery: Option<crate::Delivery>,
}

impl JobReplica {
    /// Whether the replica takes no turn of this job now: it is stalled as a whole, or its
    /// loop for the job is. The other replicas fire the job without waiting for it.
    pub fn is_stalled(&self) -> bool {
        self.stalled || self.loop_stalled_for.is_some()
    }

    /// Since when the replica has taken no turn of this job, by the Redis server's clock: when
    /// its loop for the job last ran, if that stalled, else its last heartbeat if it is
    /// stalled as a whole; `None` while it runs.
    pub fn stalled_since(&self) -> Option<SystemTime> {
        match self.loop_stalled_for {
            Some(silent) => Some(
                self.last_heartbeat
                    .checked_sub(silent)
                    .unwrap_or(self.last_heartbeat),
            ),
            None => self.stalled.then_some(self.last_heartbeat),
        }
    }
}

impl JobOverview {
    /// Whether this is a run-time schedule that no live replica runs: none has its handler
    /// (see [`JobOverview::not_run_by`]), or those that have it are stalled. Its occurrences
    /// are not claimed until a replica that can run it is live.
    pub fn is_unrunnable(&self) -> bool {
        self.runtime.is_some() && self.replicas.iter().all(JobReplica::is_stalled)
    }

    /// How many runs of the ledger each replica made, by replica id (replicas that ran
    /// nothing are not listed).
    pub fn runs_per_replica(&self) -> BTreeMap<&str, usize> {
        let mut counts = BTreeMap::new();
        for run in &self.history {
            *counts.entry(run.replica.as_str()).or_insert(0) += 1;
        }
        counts
    }
}

/// One job's schedule, from a registration or this scheduler's own job.
#[derive(Default)]
struct Source {
    cron: String,
    time_zone: String,
    replicas: Vec<JobReplica>,
    runtime: Option<RuntimeSchedule>,
    not_run_by: Vec<NotRunBy>,
}

/// Each job's registrations and this scheduler's own jobs, by job name.
fn by_job(
    own: &Scheduler,
    registry: Vec<RegisteredReplica>,
    schedules: Vec<RuntimeSchedule>,
) -> BTreeMap<String, Source> {
    let mut jobs: BTreeMap<String, Source> = BTreeMap::new();
    for schedule in schedules {
        jobs.insert(
            schedule.name.clone(),
            Source {
                cron: schedule.cron.clone(),
                time_zone: schedule.time_zone.clone(),
                runtime: Some(schedule),
                ..Source::default()
            },
        );
    }
    for replica in &registry {
        if replica.stalled {
            continue;
        }
        for not_run in &replica.unrunnable {
            if let Some(source) = jobs.get_mut(&not_run.name) {
                source.not_run_by.push(NotRunBy {
                    replica: replica.id.clone(),
                    reason: not_run.reason.clone(),
                });
            }
        }
    }
    for replica in registry {
        for job in replica.jobs {
            let entry = jobs.entry(job.name).or_insert_with(|| Source {
                cron: job.cron.clone(),
                time_zone: job.time_zone.clone(),
                ..Source::default()
            });
            entry.replicas.push(JobReplica {
                id: replica.id.clone(),
                host: replica.host.clone(),
                pid: replica.pid,
                last_heartbeat: replica.last_heartbeat,
                heartbeat_every: replica.heartbeat_every,
                cron: job.cron,
                time_zone: job.time_zone,
                stalled: replica.stalled,
                loop_stalled_for: job.loop_stalled_for,
                delivery: job.delivery,
            });
        }
    }
    for entry in own.shared.jobs.all() {
        let Some(schedule) = &entry.job.schedule else {
            continue;
        };
        jobs.entry(entry.job.name.to_string())
            .or_insert_with(|| Source {
                cron: schedule.cron().to_owned(),
                time_zone: schedule.time_zone().name().to_owned(),
                ..Source::default()
            });
    }
    jobs
}

impl Scheduler {
    /// Every job that a running replica registered ([`Scheduler::registered_replicas`]) or
    /// that this scheduler has, by name: cron, zone, next fire, paused state, the replicas
    /// that run it and its ledger. What `dlock jobs` and the dashboard show.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use dlock_scheduler::Scheduler;
    ///
    /// let admin = Scheduler::builder(dlock_core::Client::open("redis://127.0.0.1:6379/")?).build()?;
    /// for job in admin.overview().await? {
    ///     let next = job.next_fire.as_ref().ok().and_then(|t| t.map(|t| t.to_rfc3339()));
    ///     println!("{}: next {next:?}, paused {}, runs {:?}", job.name, job.paused, job.runs_per_replica());
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// A Redis error ([`crate::ErrorKind::Redis`]), also when the registry or a ledger holds
    /// data this version did not write.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn overview(&self) -> Result<Vec<JobOverview>, Error> {
        let registry = self.registered_replicas().await?;
        // A schedule of a newer format is listed by the replicas that do not run it (with
        // the reason); here it is left out rather than failing the whole overview.
        let shared = &self.shared;
        let schedules = crate::schedule_store::read_all(&shared.client, &shared.schedule_keys)
            .await?
            .into_iter()
            .filter_map(|(_, read)| read.ok())
            .collect();
        let now = self.shared.clock.now();
        let mut out = Vec::new();
        for (name, source) in by_job(self, registry, schedules) {
            let next_fire = Schedule::new(&source.cron, &source.time_zone)
                .map(|s| s.next_after(now).map(|t| t.with_timezone(&s.time_zone())));
            let schedules_differ = source
                .replicas
                .iter()
                .any(|r| (&r.cron, &r.time_zone) != (&source.cron, &source.time_zone));
            out.push(JobOverview {
                paused: self.is_paused(&name).await?,
                history: self.history(&name).await?,
                name,
                cron: source.cron,
                time_zone: source.time_zone,
                next_fire,
                replicas: source.replicas,
                schedules_differ,
                runtime: source.runtime,
                not_run_by: source.not_run_by,
            });
        }
        Ok(out)
    }
}
