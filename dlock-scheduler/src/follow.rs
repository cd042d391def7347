//! Following the run-time schedules on one replica: when they change
//! ([`crate::schedule_store`]: the change counter moved — announced over pub/sub on the client's own
//! connection, and polled every heartbeat in case the announcement was lost), read them all and
//! make this replica's jobs match. A schedule this replica has the handler for becomes a job
//! like one in code (its loop, its `run_now` listener, its turns among the replicas that run
//! it); a removed or changed one's loop stops (a run going on finishes); one it cannot run is
//! listed, with the reason, in its job registry entry ([`crate::UnrunnableSchedule`]) and never
//! claimed.
//!
//! A changed schedule (other handler, cron, zone or arguments) is stopped and started again
//! under the same name: it keeps its ledger, pause and turns. A schedule added again unchanged
//! is left running.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::job_loop::{self, LoopCtx};
use crate::replica_state::{JobEntry, Shared};
use crate::schedule_store::{self, RuntimeSchedule, UnrunnableSchedule};

/// A run-time schedule this replica runs.
struct Running {
    schedule: RuntimeSchedule,
    stop: CancellationToken,
}

struct Follower {
    shared: Arc<Shared>,
    stop: CancellationToken,
    runs: TaskTracker,
    cancel_runs: CancellationToken,
    /// The schedules' job loops and listeners.
    tasks: TaskTracker,
    running: HashMap<String, Running>,
    /// The change counter last read in full.
    seen: Option<i64>,
    /// What was logged already about schedules this replica does not run (said once).
    warned: HashSet<(String, String)>,
}

/// Follows the run-time schedules until `stop`; then waits for their loops to end. Their runs
/// join `runs` and are cancelled with `cancel_runs`, like those of the jobs in code.
pub(crate) async fn follow(
    shared: Arc<Shared>,
    stop: CancellationToken,
    runs: TaskTracker,
    cancel_runs: CancellationToken,
) {
    // A scheduler with neither jobs nor handlers (an admin tool's) is no replica: it runs
    // nothing and publishes no registry entry. A replica with jobs but no handler (an older
    // deploy's) follows too, to say which schedules it does not run.
    if shared.handlers.is_empty() && shared.jobs.is_empty() {
        return;
    }
    let wake = Arc::new(Notify::new());
    let mut this = Follower {
        shared: shared.clone(),
        stop: stop.clone(),
        runs,
        cancel_runs,
        tasks: TaskTracker::new(),
        running: HashMap::new(),
        seen: None,
        warned: HashSet::new(),
    };
    this.tasks.spawn(crate::wake::listen_channel(
        shared.clone(),
        shared.schedule_keys.wake.clone(),
        wake.clone(),
        "the run-time schedules",
        stop.clone(),
    ));
    loop {
        this.look().await;
        tokio::select! {
            () = stop.cancelled() => break,
            () = wake.notified() => {}
            () = tokio::time::sleep(shared.heartbeat) => {}
        }
    }
    this.tasks.close();
    this.tasks.wait().await;
}

impl Follower {
    /// Reads the schedules if they changed since the last look, and makes this replica's jobs
    /// match them.
    async fn look(&mut self) {
        let shared = &self.shared;
        let keys = &shared.schedule_keys;
        let rev = match schedule_store::revision(&shared.client, keys).await {
            Ok(rev) => rev,
            Err(e) => {
                tracing::debug!(error = %e, "dlock-scheduler: could not read the run-time schedules' revision; looking again at the next heartbeat");
                return;
            }
        };
        if self.seen == Some(rev) {
            return;
        }
        match schedule_store::read_all(&shared.client, keys).await {
            Ok(all) => {
                self.reconcile(all);
                // A change made between the two reads moved the counter past `rev`: it is
                // read again at the next look.
                self.seen = Some(rev);
            }
            Err(e) => {
                tracing::warn!(error = %e, "dlock-scheduler: could not read the run-time schedules; looking again at the next heartbeat");
            }
        }
    }

    /// Stops the loops of schedules that were removed or changed, starts those of new ones,
    /// and notes the ones this replica does not run.
    fn reconcile(
        &mut self,
        all: Vec<(String, Result<RuntimeSchedule, schedule_store::Unreadable>)>,
    ) {
        let mut wanted = HashMap::new();
        let mut unrunnable = Vec::new();
        for (name, read) in all {
            match read {
                Ok(schedule) => {
                    wanted.insert(name, schedule);
                }
                Err(unreadable) => unrunnable.push(UnrunnableSchedule {
                    reason: unreadable.describe(&name),
                    name,
                    handler: String::new(),
                }),
            }
        }
        let names: Vec<String> = self.running.keys().cloned().collect();
        for name in names {
            let keep = wanted
                .get(&name)
                .is_some_and(|wanted| wanted.same_work(&self.running[&name].schedule));
            if !keep && let Some(running) = self.running.remove(&name) {
                running.stop.cancel();
                self.shared.jobs.remove(&name);
                let how = if wanted.contains_key(&name) {
                    "changed; restarting it"
                } else {
                    "removed"
                };
                tracing::info!(schedule = %name, "dlock-scheduler: run-time schedule {how}");
            }
        }
        for (name, schedule) in wanted {
            if self.running.contains_key(&name) {
                continue;
            }
            match self.start(&schedule) {
                Ok(stop) => {
                    tracing::info!(schedule = %name, handler = %schedule.handler, cron = %schedule.cron, "dlock-scheduler: running run-time schedule");
                    self.running.insert(name, Running { schedule, stop });
                }
                Err(reason) => unrunnable.push(UnrunnableSchedule {
                    name,
                    handler: schedule.handler,
                    reason,
                }),
            }
        }
        for not_run in &unrunnable {
            if self
                .warned
                .insert((not_run.name.clone(), not_run.reason.clone()))
            {
                tracing::warn!(schedule = %not_run.name, handler = %not_run.handler, reason = %not_run.reason, "dlock-scheduler: this replica does not run a run-time schedule; the replicas that can run it do");
            }
        }
        unrunnable.sort_by(|a, b| a.name.cmp(&b.name));
        self.shared.set_unrunnable(unrunnable);
    }

    /// Starts `schedule`'s job on this replica; `Err` says why it cannot.
    fn start(&self, schedule: &RuntimeSchedule) -> Result<CancellationToken, String> {
        let shared = &self.shared;
        let handler = shared
            .handlers
            .get(schedule.handler.as_str())
            .ok_or_else(|| {
                format!(
                    "the handler `{}` is not registered on this replica",
                    schedule.handler
                )
            })?;
        if shared.jobs.contains(&schedule.name) {
            return Err("a job in this replica's code has the same name".to_owned());
        }
        let entry = entry_for(shared, handler, schedule).map_err(|e| e.to_string())?;
        let entry = Arc::new(entry);
        if !shared.jobs.insert(entry.clone()) {
            return Err("a job in this replica's code has the same name".to_owned());
        }
        let stop = self.stop.child_token();
        let ctx = LoopCtx {
            shared: shared.clone(),
            entry,
            stop: stop.clone(),
            runs: self.runs.clone(),
            cancel_runs: self.cancel_runs.clone(),
            start_after: Some(DateTime::<Utc>::from(schedule.added_at)),
        };
        job_loop::spawn(&self.tasks, ctx);
        Ok(stop)
    }
}

/// The job entry of run-time schedule `schedule` with `handler`: checked as `build()` checks a
/// job in code.
///
/// # Errors
/// What `build()` refuses of such a job: a bad name, cron expression or zone, or options that
/// do not fit the schedule (a jitter as long as its interval).
pub(crate) fn entry_for(
    shared: &Shared,
    handler: &crate::handler::RegisteredHandler,
    schedule: &RuntimeSchedule,
) -> Result<JobEntry, crate::Error> {
    crate::validate::job_name(&schedule.name)?;
    let cron = crate::Schedule::new(&schedule.cron, &schedule.time_zone)?;
    let args = schedule.args.as_deref().map(Arc::from);
    let mut entry = JobEntry::new(&shared.client, handler.job(&schedule.name, cron, args))?;
    entry.join_group(&shared.client, &shared.groups)?;
    Ok(entry)
}
