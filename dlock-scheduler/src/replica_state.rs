//! What the tasks of one scheduler share: [`Shared`] (the client, this replica, the estimate of
//! the server's clock, the settings) and, per registered job, its [`JobEntry`] (keys, run lock,
//! wake-up, liveness and turn state). Built by `builder.rs`, read by every floor above.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use chrono::{DateTime, Utc};
use dlock_core::{Client, Mutex, MutexOptions};
use redis::Value;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::clock::ServerClock;
use crate::context::Replica;
use crate::error::Error;
use crate::group::Membership;
use crate::handler::RegisteredHandler;
use crate::job::{Job, Overlap};
use crate::ledger::JobKeys;
use crate::schedule_store::{ScheduleKeys, UnrunnableSchedule};

/// The state of one scheduler, shared by its job loops, attempts and background tasks.
pub(crate) struct Shared {
    pub(crate) client: Client,
    pub(crate) replica: Arc<Replica>,
    /// Tells this scheduler instance's claims from those of any other (see `withdraw.lua`).
    pub(crate) instance: String,
    pub(crate) attempts: AtomicU64,
    pub(crate) clock: ServerClock,
    /// The jobs this replica runs: those in code, and the run-time schedules it has a
    /// handler for.
    pub(crate) jobs: Jobs,
    /// The handlers registered by name, for run-time schedules and one-off jobs.
    pub(crate) handlers: HashMap<Arc<str>, RegisteredHandler>,
    /// The job groups declared on the builder, with their `max`.
    pub(crate) groups: HashMap<Arc<str>, u32>,
    /// The keys of the run-time schedules.
    pub(crate) schedule_keys: ScheduleKeys,
    /// The run-time schedules this replica does not run, and why (for the job registry).
    pub(crate) unrunnable: std::sync::Mutex<Vec<UnrunnableSchedule>>,
    /// Per registered handler (by its name), the hidden job whose runs are its one-off jobs
    /// (`once:<handler>`, see `once_loop.rs`). Not in `jobs`: they have no schedule, no turns
    /// and no heartbeat, and are not in the job registry.
    pub(crate) once: HashMap<Arc<str>, Arc<JobEntry>>,
    /// Free slots for one-off runs on this replica (all handlers together): a one-off loop
    /// claims only while it holds one, so that the other replicas take the rest.
    pub(crate) once_slots: Arc<tokio::sync::Semaphore>,
    pub(crate) retention: Duration,
    pub(crate) history: usize,
    pub(crate) request_poll: Duration,
    pub(crate) heartbeat: Duration,
    pub(crate) turn_grace: Duration,
    /// Whether `run_until` ends by shutting the client down.
    pub(crate) shutdown_client: bool,
    /// Test hook run every time a job loop's task is polled (`__private::on_loop_poll`).
    pub(crate) loop_hook: Option<LoopHook>,
    /// Gives the enqueuing caller's `traceparent` ([`crate::SchedulerBuilder::trace_context`]).
    pub(crate) trace_hook: Option<crate::trace::TraceHook>,
}

/// The jobs a replica runs, by name: those in code (fixed at `build()`) and the run-time
/// schedules added and removed while it runs. Readers take a snapshot.
pub(crate) struct Jobs {
    all: RwLock<HashMap<Arc<str>, Arc<JobEntry>>>,
}

impl Jobs {
    pub(crate) fn new(in_code: HashMap<Arc<str>, Arc<JobEntry>>) -> Self {
        Self {
            all: RwLock::new(in_code),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<Arc<str>, Arc<JobEntry>>> {
        // A panic while the lock was held left the map whole (inserts and removes only).
        self.all
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<Arc<str>, Arc<JobEntry>>> {
        self.all
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Every job now, in no particular order.
    pub(crate) fn all(&self) -> Vec<Arc<JobEntry>> {
        self.read().values().cloned().collect()
    }

    /// The job named `name`, if this replica runs it.
    pub(crate) fn get(&self, name: &str) -> Option<Arc<JobEntry>> {
        self.read().get(name).cloned()
    }

    /// Whether this replica runs a job named `name`.
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.read().contains_key(name)
    }

    /// The names of every job now.
    pub(crate) fn names(&self) -> Vec<Arc<str>> {
        self.read().keys().cloned().collect()
    }

    /// Whether there is no job (yet).
    pub(crate) fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// Adds a run-time schedule's job; `false` if the name is taken.
    pub(crate) fn insert(&self, entry: Arc<JobEntry>) -> bool {
        let mut all = self.write();
        if all.contains_key(&entry.job.name) {
            return false;
        }
        all.insert(entry.job.name.clone(), entry);
        true
    }

    /// Removes a run-time schedule's job.
    pub(crate) fn remove(&self, name: &str) -> Option<Arc<JobEntry>> {
        self.write().remove(name)
    }
}

impl Shared {
    /// The run-time schedules this replica does not run, and why.
    pub(crate) fn unrunnable(&self) -> Vec<UnrunnableSchedule> {
        self.unrunnable
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Notes which run-time schedules this replica does not run.
    pub(crate) fn set_unrunnable(&self, unrunnable: Vec<UnrunnableSchedule>) {
        *self
            .unrunnable
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = unrunnable;
    }
}

/// A test hook run in a job loop's task with the job's name (`__private::on_loop_poll`).
pub(crate) type LoopHook = Arc<dyn Fn(&str) + Send + Sync>;

impl Shared {
    /// A token naming one attempt of this scheduler instance (see `withdraw.lua`).
    pub(crate) fn attempt_token(&self) -> String {
        let n = self.attempts.fetch_add(1, Ordering::Relaxed);
        format!("{}.{n}", self.instance)
    }

    /// How long after telling Redis a replica still counts as live: three heartbeats.
    pub(crate) fn liveness(&self) -> Duration {
        self.heartbeat.saturating_mul(3)
    }

    /// A reply came back: learn the server's time from it and, if the request refreshed this
    /// replica's liveness for a job (`live_for`), note when.
    pub(crate) fn heard(
        &self,
        live_for: Option<&JobEntry>,
        sent: DateTime<Utc>,
        server_ms: Option<&Value>,
    ) {
        let received = self.clock.local();
        if let Some(Value::Int(server_ms)) = server_ms {
            self.clock.sample(sent, received, *server_ms);
        }
        if let Some(entry) = live_for {
            entry
                .beat_ms
                .store(received.timestamp_millis(), Ordering::Relaxed);
        }
    }
}

/// A registered job with its keys and lock handle.
pub(crate) struct JobEntry {
    pub(crate) job: Job,
    pub(crate) keys: JobKeys,
    /// The job's run lock (overlap guard) for [`Overlap::Skip`].
    lock: Mutex,
    options: MutexOptions,
    /// Notified when a `run_now` request for the job may be waiting (a wake-up message, or a
    /// gap in the subscription).
    pub(crate) wake: Notify,
    /// When this replica last told Redis it is live for the job (a claim or a heartbeat), in
    /// ms of the replica's clock: a heartbeat is only sent when no claim did it lately.
    pub(crate) beat_ms: AtomicI64,
    /// Whose turn the next occurrence is, as the last claim reply said ([`Turn`]).
    next_turn: AtomicU8,
    /// When the job's loop last ran: the heartbeat vouches for this replica only while it does.
    pub(crate) loop_beat: LoopBeat,
    /// At-least-once delivery: the earliest time (server ms) a pending run of the job is due,
    /// as a claim or heartbeat reply told (`i64::MAX`: nothing new); the job's loop takes it
    /// and looks for retries then, so that every replica, not only the one that claimed the
    /// attempt, is there when an attempt's lease lapses.
    retry_due: AtomicI64,
    /// Notified when `retry_due` moved earlier.
    pub(crate) retry_hint: Notify,
    /// The job's group, if it joined one ([`JobEntry::join_group`]).
    pub(crate) group: Option<Membership>,
    /// The job's turn offset in `claim.lua`: its rank among the jobs of its group in code
    /// (sorted by name; [`spread_groups`]), 0 for the others, so that a group's jobs due at
    /// one instant start on different replicas.
    pub(crate) turn_offset: u64,
}

impl JobEntry {
    /// Checks `job` and makes its entry.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidJob`] for what `build()` refuses of a job.
    pub(crate) fn new(client: &Client, job: Job) -> Result<Self, Error> {
        crate::validate::job(&job)?;
        let keys = JobKeys::new(client, &job.name)?;
        let mut options = MutexOptions::new()
            .ttl(job.lease)
            .watchdog()
            // The ledger records each run's fence: issue it with the lock.
            .fenced()
            .reentrant(false)
            .on_lost(job.on_lost)
            // The job is in the lock name already; a label built from the name would pass the
            // label limit (256 bytes) for names the job-name limit accepts.
            .label("dlock-scheduler");
        if let Some(max_run) = job.max_run {
            options = options.max_hold(max_run);
        }
        // dlock-core checks the lease range and the lock name built from the job name.
        let lock = client
            .mutex_with(&keys.lock_name, options.clone())
            .map_err(|e| Error::refused_by_core(&format!("job `{}`", job.name), e))?;
        Ok(Self {
            job,
            keys,
            lock,
            options,
            wake: Notify::new(),
            beat_ms: AtomicI64::new(i64::MIN),
            next_turn: AtomicU8::new(Turn::Unknown as u8),
            retry_due: AtomicI64::new(i64::MAX),
            retry_hint: Notify::new(),
            loop_beat: LoopBeat::new(),
            group: None,
            turn_offset: 0,
        })
    }

    /// Gives the entry its group's slots, if the job joined a group (`build()`); `groups` are
    /// the declared ones with their `max`. A slot is held under the options of the job's lock.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidJob`] for a group that was not declared.
    pub(crate) fn join_group(
        &mut self,
        client: &Client,
        groups: &HashMap<Arc<str>, u32>,
    ) -> Result<(), Error> {
        if let Some(group) = &self.job.group {
            let options = self.options.clone();
            let member = Membership::new(client, &self.job.name, group, groups, options)?;
            self.group = Some(member);
        }
        Ok(())
    }

    /// The lock a run takes: the job's, or (overlap allowed) the run's own.
    pub(crate) fn lock_for(
        &self,
        client: &Client,
        run_id: &str,
    ) -> Result<Mutex, dlock_core::Error> {
        match self.job.overlap {
            Overlap::Skip => Ok(self.lock.clone()),
            Overlap::Allow => client.mutex_with(
                &format!("{}@{run_id}", self.keys.lock_name),
                self.options.clone(),
            ),
        }
    }

    /// Notes, from a reply, when the job's first pending at-least-once run is due (server ms;
    /// negative: none), and wakes the job's loop if that is earlier than it knew.
    pub(crate) fn note_retry_due(&self, due_ms: i64) {
        if due_ms >= 0 && self.retry_due.fetch_min(due_ms, Ordering::Relaxed) > due_ms {
            self.retry_hint.notify_one();
        }
    }

    /// Takes the earliest due time noted since the last call, if any.
    pub(crate) fn take_retry_due(&self) -> Option<DateTime<Utc>> {
        let due = self.retry_due.swap(i64::MAX, Ordering::Relaxed);
        (due != i64::MAX)
            .then(|| chrono::TimeZone::timestamp_millis_opt(&Utc, due).single())
            .flatten()
    }

    /// Notes whose turn the next occurrence is, as a claim reply told.
    pub(crate) fn set_next_turn(&self, turn: Turn) {
        self.next_turn.store(turn as u8, Ordering::Relaxed);
    }

    /// Takes the last answer about whose turn the next occurrence is, leaving "unknown" (it
    /// describes one occurrence).
    pub(crate) fn take_next_turn(&self) -> Turn {
        match self.next_turn.swap(Turn::Unknown as u8, Ordering::Relaxed) {
            1 => Turn::Mine,
            2 => Turn::Others,
            _ => Turn::Unknown,
        }
    }
}

/// When a job's loop last ran, and whether the heartbeat found it stalled (`liveness.rs`):
/// the loop's task marks every poll ([`LoopBeat::tick`]), and is polled at least once per
/// heartbeat while it runs, so a loop whose task panicked or is stuck behind a blocked thread
/// falls silent.
pub(crate) struct LoopBeat {
    /// What `ticked_ms` counts from (monotonic: a stepped wall clock is no stall).
    origin: Instant,
    /// The loop's last poll, in ms since `origin`.
    ticked_ms: AtomicU64,
    /// Whether the heartbeat's last look found the loop stalled.
    stalled: AtomicBool,
}

impl LoopBeat {
    fn new() -> Self {
        Self {
            origin: Instant::now(),
            ticked_ms: AtomicU64::new(0),
            stalled: AtomicBool::new(false),
        }
    }

    /// The loop runs now.
    pub(crate) fn tick(&self) {
        let ms = u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.ticked_ms.store(ms, Ordering::Relaxed);
    }

    /// How long the loop has not run.
    pub(crate) fn silence(&self) -> Duration {
        let ticked = Duration::from_millis(self.ticked_ms.load(Ordering::Relaxed));
        self.origin.elapsed().saturating_sub(ticked)
    }

    /// Notes whether the loop is stalled; returns what the previous look found.
    pub(crate) fn set_stalled(&self, stalled: bool) -> bool {
        self.stalled.swap(stalled, Ordering::Relaxed)
    }

    /// Whether the heartbeat's last look found the loop stalled.
    pub(crate) fn is_stalled(&self) -> bool {
        self.stalled.load(Ordering::Relaxed)
    }
}

/// Whose turn the next occurrence of a job is, as the last claim reply told: a replica whose
/// turn it is not asks only after the turn grace, so that only one replica wakes up at the fire
/// time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Turn {
    Unknown = 0,
    Mine = 1,
    Others = 2,
}

/// Gives each job of a group its rank in the group (by name) as its turn offset, so that the
/// jobs of a group due at one instant go round the live replicas instead of all starting on
/// the one whose turn it is (issue #51). Every replica built with the same jobs computes the
/// same ranks; one with other jobs only changes who is asked first, never who may claim.
pub(crate) fn spread_groups(entries: &mut [JobEntry]) {
    let mut by_group: HashMap<Arc<str>, Vec<Arc<str>>> = HashMap::new();
    for entry in entries.iter() {
        if let Some(group) = &entry.job.group {
            by_group
                .entry(group.clone())
                .or_default()
                .push(entry.job.name.clone());
        }
    }
    for names in by_group.values_mut() {
        names.sort();
    }
    for entry in entries.iter_mut() {
        let rank = entry.job.group.as_ref().and_then(|group| {
            let names = by_group.get(group)?;
            names.iter().position(|name| *name == entry.job.name)
        });
        entry.turn_offset = rank.map_or(0, |r| r as u64);
    }
}
