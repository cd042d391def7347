//! `dlock jobs`, `dlock runs`, `dlock pause`, `dlock resume` and `dlock run-now`: the
//! scheduler's jobs as its running replicas registered them, their ledger, and the controls.

use chrono::Utc;
use dlock_scheduler::{AttemptRecord, RunOutcome, RunRecord, Scheduler};
use serde::Serialize;

use crate::failure::{Exit, Failure};
use crate::report::Report;
use crate::table::{Table, human_duration, json_time, millis, shown, utc};

/// A job in `dlock jobs --json`.
#[derive(Debug, Serialize)]
struct JobJson {
    name: String,
    /// The cron expression and zone of the first replica (by id); each replica's are in
    /// `replicas`.
    cron: String,
    time_zone: String,
    /// The next occurrence, RFC 3339 in UTC, and the same instant in the job's zone.
    next: Option<String>,
    next_local: Option<String>,
    paused: bool,
    last_run: Option<RunJson>,
    replicas: Vec<ReplicaJson>,
    /// The handler, when the job is a run-time schedule (`Scheduler::add_schedule`); `null`
    /// for a job in code.
    handler: Option<String>,
    /// A run-time schedule's JSON arguments (`null`: none, or a job in code).
    args: Option<serde_json::Value>,
    /// A run-time schedule that no live replica runs (none has its handler, or those that
    /// have it are stalled): its occurrences are not claimed.
    unrunnable: bool,
    /// The live replicas that do not run this run-time schedule, and why.
    not_run_by: Vec<NotRunJson>,
}

/// A live replica that does not run a run-time schedule.
#[derive(Debug, Serialize)]
struct NotRunJson {
    replica: String,
    reason: String,
}

/// A replica running a job.
#[derive(Debug, Serialize)]
struct ReplicaJson {
    id: String,
    host: String,
    pid: u32,
    last_heartbeat: String,
    heartbeat_ms: u64,
    cron: String,
    time_zone: String,
    /// `null` while it takes the job's turns; `"replica"` when it is stalled as a whole (no
    /// heartbeat for longer than its liveness), `"loop"` when its loop for this job is.
    stalled: Option<&'static str>,
    /// Since when it has taken no turn of the job (server clock), `null` while it runs.
    stalled_since: Option<String>,
    /// The job's delivery on this replica: `{"mode": "at_most_once"}` or `{"mode":
    /// "at_least_once", "attempts", "backoff_ms"}`; `null` from a replica of an earlier version.
    delivery: Option<DeliveryJson>,
}

/// A job's delivery, as a replica registered it.
#[derive(Debug, Serialize)]
struct DeliveryJson {
    mode: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    attempts: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    backoff_ms: Option<u64>,
}

impl DeliveryJson {
    fn of(delivery: dlock_scheduler::Delivery) -> Self {
        match delivery {
            dlock_scheduler::Delivery::AtLeastOnce { attempts, backoff } => Self {
                mode: "at_least_once",
                attempts: Some(attempts),
                backoff_ms: Some(millis(backoff)),
            },
            _ => Self {
                mode: "at_most_once",
                attempts: None,
                backoff_ms: None,
            },
        }
    }
}

impl ReplicaJson {
    fn of(r: &dlock_scheduler::JobReplica) -> Self {
        let stalled = if r.loop_stalled_for.is_some() {
            Some("loop")
        } else {
            r.stalled.then_some("replica")
        };
        Self {
            id: r.id.clone(),
            host: r.host.clone(),
            pid: r.pid,
            last_heartbeat: json_time(utc(r.last_heartbeat)),
            heartbeat_ms: millis(r.heartbeat_every),
            cron: r.cron.clone(),
            time_zone: r.time_zone.clone(),
            stalled,
            stalled_since: r.stalled_since().map(|t| json_time(utc(t))),
            delivery: r.delivery.map(DeliveryJson::of),
        }
    }

    /// The replica in the table's REPLICAS column.
    fn cell(&self) -> String {
        match self.stalled {
            Some("loop") => format!("{} (loop stalled)", self.id),
            Some(_) => format!("{} (stalled)", self.id),
            None => self.id.clone(),
        }
    }
}

/// A run from the ledger.
#[derive(Debug, Serialize)]
struct RunJson {
    occurrence: String,
    manual: bool,
    replica: String,
    host: String,
    pid: u32,
    started_at: String,
    ended_at: Option<String>,
    duration_ms: Option<u64>,
    /// `running`, `succeeded`, `failed`, `cancelled`, `skipped_overlap`, `skipped_group`,
    /// `abandoned`, `scheduled` (a one-off job waiting for its due time).
    outcome: &'static str,
    /// The error or cancellation text, if any.
    error: Option<String>,
    fencing_token: Option<u64>,
    /// The current (or last) attempt's number, from 1 (always 1 at most once).
    attempt: u32,
    /// When the next attempt is due (RFC 3339, UTC) while a retry is pending; `null` when the
    /// run is final or its attempt runs.
    next_retry: Option<String>,
    /// The attempts before the current one, oldest first (at-least-once delivery).
    earlier_attempts: Vec<AttemptJson>,
    /// The current attempt ended while its lease was suspect (a renewal unacknowledged for
    /// a renewal interval).
    finished_while_suspect: bool,
    /// The start, for the table (shown in the job's zone).
    #[serde(skip)]
    started: chrono::DateTime<Utc>,
}

/// An earlier attempt of a run.
#[derive(Debug, Serialize)]
struct AttemptJson {
    attempt: u32,
    replica: String,
    host: String,
    pid: u32,
    started_at: String,
    ended_at: Option<String>,
    outcome: &'static str,
    error: Option<String>,
    fencing_token: Option<u64>,
}

/// The outcome's JSON code and its text.
fn outcome_json(outcome: &RunOutcome) -> (&'static str, Option<String>) {
    match outcome {
        RunOutcome::Running => ("running", None),
        RunOutcome::Succeeded => ("succeeded", None),
        RunOutcome::Failed(e) => ("failed", Some(e.clone())),
        RunOutcome::Cancelled(why) => ("cancelled", Some(why.clone())),
        RunOutcome::SkippedOverlap => ("skipped_overlap", None),
        RunOutcome::SkippedGroup => ("skipped_group", None),
        RunOutcome::Abandoned => ("abandoned", None),
        RunOutcome::Scheduled => ("scheduled", None),
        other => ("unknown", Some(other.to_string())),
    }
}

impl AttemptJson {
    fn of(a: &AttemptRecord) -> Self {
        let (outcome, error) = outcome_json(&a.outcome);
        Self {
            attempt: a.attempt,
            replica: a.replica.clone(),
            host: a.host.clone(),
            pid: a.pid,
            started_at: json_time(utc(a.started_at)),
            ended_at: a.ended_at.map(|t| json_time(utc(t))),
            outcome,
            error,
            fencing_token: a.fencing_token.map(|f| f.get()),
        }
    }
}

impl RunJson {
    fn of(r: &RunRecord) -> Self {
        let (outcome, error) = outcome_json(&r.outcome);
        Self {
            occurrence: json_time(r.occurrence),
            manual: r.manual,
            replica: r.replica.clone(),
            host: r.host.clone(),
            pid: r.pid,
            started_at: json_time(utc(r.started_at)),
            ended_at: r.ended_at.map(|t| json_time(utc(t))),
            duration_ms: duration(r).map(millis),
            outcome,
            error,
            fencing_token: r.fencing_token.map(|f| f.get()),
            attempt: r.attempt,
            next_retry: r.next_retry.map(|t| json_time(utc(t))),
            earlier_attempts: r.earlier_attempts.iter().map(AttemptJson::of).collect(),
            finished_while_suspect: r.finished_while_suspect,
            started: utc(r.started_at),
        }
    }
}

fn duration(r: &RunRecord) -> Option<std::time::Duration> {
    r.ended_at?.duration_since(r.started_at).ok()
}

/// `dlock jobs`: what [`Scheduler::overview`] reads (the dashboard shows the same).
///
/// # Errors
/// Redis unreachable or erring.
pub(crate) async fn jobs(admin: &Scheduler, json: bool, in_utc: bool) -> Result<Report, Failure> {
    let mut out = Vec::new();
    let mut notes = Vec::new();
    for job in admin.overview().await? {
        let name = &job.name;
        let (next, next_local) = match &job.next_fire {
            Ok(next) => (
                next.map(|t| json_time(t.with_timezone(&Utc))),
                next.map(|t| shown(t.with_timezone(&Utc), Some(&job.time_zone), in_utc)),
            ),
            Err(e) => {
                notes.push(format!(
                    "job `{name}`: cannot compute its next occurrence: {e}"
                ));
                (None, None)
            }
        };
        if job.schedules_differ {
            notes.push(format!(
                "the replicas of job `{name}` disagree on its schedule (a deploy in progress?); \
                 see `dlock jobs --json`"
            ));
        }
        stall_notes(&mut notes, name, &job.replicas);
        let unrunnable = job.is_unrunnable();
        if unrunnable {
            let why: Vec<String> = job
                .not_run_by
                .iter()
                .map(|n| format!("{}: {}", n.replica, n.reason))
                .collect();
            let why = if why.is_empty() {
                "no replica is live".to_owned()
            } else {
                why.join("; ")
            };
            notes.push(format!(
                "run-time schedule `{name}`: no live replica runs it ({why}); its occurrences \
                 are not claimed until a replica with its handler runs"
            ));
        }
        let (handler, args) = match &job.runtime {
            Some(s) => (
                Some(s.handler.clone()),
                s.args.as_deref().and_then(|a| serde_json::from_str(a).ok()),
            ),
            None => (None, None),
        };
        out.push(JobJson {
            handler,
            args,
            unrunnable,
            not_run_by: job
                .not_run_by
                .iter()
                .map(|n| NotRunJson {
                    replica: n.replica.clone(),
                    reason: n.reason.clone(),
                })
                .collect(),
            last_run: job.history.last().map(RunJson::of),
            replicas: job.replicas.iter().map(ReplicaJson::of).collect(),
            name: job.name,
            cron: job.cron,
            time_zone: job.time_zone,
            next,
            next_local,
            paused: job.paused,
        });
    }
    let handlers = crate::once::handlers(admin).await?;
    let mut report = if json {
        #[derive(Serialize)]
        struct Jobs<'a> {
            jobs: &'a [JobJson],
            /// The handlers of one-off jobs (`dlock once` lists their pending jobs).
            one_off_handlers: &'a [crate::once::HandlerJson],
        }
        Report::json(&Jobs {
            jobs: &out,
            one_off_handlers: &handlers,
        })?
    } else {
        let mut t = Table::new(&[
            "JOB", "CRON", "ZONE", "NEXT", "LAST RUN", "PAUSED", "HANDLER", "REPLICAS",
        ]);
        for job in &out {
            let last = job.last_run.as_ref().map_or_else(
                || "none".to_owned(),
                // In the job's zone, as NEXT is: one zone per row, each time labelled.
                |r| {
                    let started = shown(r.started, Some(&job.time_zone), in_utc);
                    format!("{} ({started}, {})", r.outcome, r.replica)
                },
            );
            t.row(vec![
                job.name.clone(),
                job.cron.clone(),
                job.time_zone.clone(),
                job.next_local.clone().unwrap_or_else(|| "none".into()),
                last,
                if job.paused { "yes" } else { "no" }.to_owned(),
                job.handler.clone().unwrap_or_else(|| "-".into()),
                if job.unrunnable && job.replicas.is_empty() {
                    "none can run it".to_owned()
                } else {
                    job.replicas
                        .iter()
                        .map(ReplicaJson::cell)
                        .collect::<Vec<_>>()
                        .join(", ")
                },
            ]);
        }
        let mut text = if out.is_empty() {
            String::new()
        } else {
            t.render()
        };
        if !handlers.is_empty() {
            // A section of its own: one-off jobs have no schedule (`dlock once` lists them).
            let mut t = Table::new(&crate::once::HandlerJson::HEADER);
            for h in &handlers {
                t.row(h.row());
            }
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&t.render());
        }
        Report::new(text)
    };
    for note in notes {
        report = report.note(note);
    }
    if out.is_empty() && handlers.is_empty() {
        report = report
            .note(
                "no scheduler replica is running under this prefix (replicas register their \
                 jobs while they run)",
            )
            .exit(Exit::NotFound);
    }
    Ok(report)
}

/// A note for each replica of job `name` that takes no turn of it now: one that is stalled
/// as a whole is noted once, with the first of its jobs.
fn stall_notes(notes: &mut Vec<String>, name: &str, replicas: &[dlock_scheduler::JobReplica]) {
    for r in replicas {
        let Some(since) = r.stalled_since().map(|t| json_time(utc(t))) else {
            continue;
        };
        let note = if r.loop_stalled_for.is_some() {
            format!(
                "replica `{}` (pid {}): its loop for job `{name}` has not run since {since} (its \
                 task panicked, or a blocked thread holds it up); the other replicas take its \
                 turns",
                r.id, r.pid
            )
        } else {
            format!(
                "replica `{}` (pid {}) is stalled: no heartbeat since {since} (blocked, \
                 paused, cut off from Redis, or dead); the other replicas take its turns, and \
                 it is listed until its entry expires",
                r.id, r.pid
            )
        };
        if !notes.contains(&note) {
            notes.push(note);
        }
    }
}

/// `dlock runs JOB [--limit N]`: the latest runs, oldest first.
///
/// # Errors
/// A bad job name (usage); Redis unreachable or erring.
pub(crate) async fn runs(
    admin: &Scheduler,
    job: &str,
    limit: usize,
    json: bool,
    in_utc: bool,
) -> Result<Report, Failure> {
    let history = admin.history(job).await?;
    let zone = if in_utc || json {
        None
    } else {
        zone_of(admin, job).await?
    };
    let zone = zone.as_deref();
    let latest = &history[history.len().saturating_sub(limit)..];
    let runs: Vec<RunJson> = latest.iter().map(RunJson::of).collect();
    let report = if json {
        #[derive(Serialize)]
        struct Runs<'a> {
            job: &'a str,
            runs: &'a [RunJson],
        }
        Report::json(&Runs { job, runs: &runs })?
    } else {
        let mut t = Table::new(&[
            "OCCURRENCE",
            "STARTED",
            "REPLICA",
            "HOST",
            "PID",
            "OUTCOME",
            "DURATION",
            "FENCE",
            "TRIGGER",
            "ATTEMPT",
        ]);
        for (r, json_run) in latest.iter().zip(&runs) {
            t.row(vec![
                shown(r.occurrence, zone, in_utc),
                shown(utc(r.started_at), zone, in_utc),
                r.replica.clone(),
                r.host.clone(),
                r.pid.to_string(),
                outcome_cell(r),
                duration(r).map_or_else(|| "-".into(), human_duration),
                json_run
                    .fencing_token
                    .map_or_else(|| "-".into(), |f| f.to_string()),
                if r.manual { "run-now" } else { "schedule" }.to_owned(),
                attempt_cell(r, zone, in_utc),
            ]);
        }
        Report::new(if runs.is_empty() {
            String::new()
        } else {
            t.render()
        })
    };
    if runs.is_empty() {
        return Ok(report
            .note(format!("the ledger holds no run of job `{job}`"))
            .exit(Exit::NotFound));
    }
    Ok(report)
}

/// The time zone of `job`, as a live replica registered it (the first by id) or as its
/// run-time schedule says; `None` for a job without one (a handler's one-off jobs, or a job no
/// replica registers now): its times are shown in UTC.
async fn zone_of(admin: &Scheduler, job: &str) -> Result<Option<String>, Failure> {
    let registered = admin
        .registered_replicas()
        .await?
        .into_iter()
        .flat_map(|r| r.jobs)
        .find(|j| j.name == job)
        .map(|j| j.time_zone);
    if registered.is_some() {
        return Ok(registered);
    }
    Ok(admin
        .schedules()
        .await?
        .into_iter()
        .find(|s| s.name == job)
        .map(|s| s.time_zone))
}

/// The OUTCOME cell of `dlock runs`: the outcome, marked when the run ended while its lease was
/// suspect: `succeeded (lease suspect)`.
fn outcome_cell(r: &RunRecord) -> String {
    if r.finished_while_suspect {
        format!("{} (lease suspect)", r.outcome)
    } else {
        r.outcome.to_string()
    }
}

/// The ATTEMPT cell of `dlock runs`: the attempt's number, the earlier attempts' outcomes, and
/// the next attempt's time while one is pending: `2 (1 abandoned; next 12:00:05)`.
fn attempt_cell(r: &RunRecord, zone: Option<&str>, in_utc: bool) -> String {
    let mut cell = r.attempt.to_string();
    let earlier: Vec<String> = r
        .earlier_attempts
        .iter()
        .map(|a| format!("{} {}", a.attempt, outcome_json(&a.outcome).0))
        .collect();
    let next = r
        .next_retry
        .map(|t| format!("next {}", shown(utc(t), zone, in_utc)));
    let notes: Vec<String> = earlier.into_iter().chain(next).collect();
    if !notes.is_empty() {
        cell.push_str(&format!(" ({})", notes.join("; ")));
    }
    cell
}

/// What a control command changed.
#[derive(Debug, Serialize)]
struct Control<'a> {
    job: &'a str,
    action: &'static str,
    paused: bool,
    /// The ids of the replicas that registered the job and run it now, stalled ones left out
    /// (empty: no running replica has it).
    replicas: Vec<String>,
}

/// The control commands.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Action {
    Pause,
    Resume,
    RunNow,
}

/// `dlock pause|resume|run-now JOB [--force]`: a job that is not known (no running replica
/// registered it, no ledger entries, no pause record) is refused with close names, most likely
/// a typo; with `--force` it is done anyway (the state is kept in Redis), with a note when no
/// running replica has the job.
///
/// # Errors
/// A bad job name (usage); an unknown job without `--force` (nothing found); Redis unreachable
/// or erring.
pub(crate) async fn control(
    admin: &Scheduler,
    job: &str,
    action: Action,
    force: bool,
    json: bool,
) -> Result<Report, Failure> {
    let refused = |e: dlock_scheduler::Error| {
        if e.kind() == dlock_scheduler::ErrorKind::UnknownJob {
            Failure::new(
                Exit::NotFound,
                format!("{e}; check the name (`dlock jobs`), or pass --force to act on it anyway"),
            )
        } else {
            Failure::from(e)
        }
    };
    let replicas: Vec<String> = admin
        .registered_replicas()
        .await?
        .into_iter()
        .filter(|r| {
            // A replica runs the one-off jobs `once:<h>` of each handler `h` it registered.
            let one_offs = job
                .strip_prefix("once:")
                .is_some_and(|h| r.handlers.iter().any(|mine| mine == h));
            !r.stalled
                && (one_offs
                    || r.jobs
                        .iter()
                        .any(|j| j.name == job && j.loop_stalled_for.is_none()))
        })
        .map(|r| r.id)
        .collect();
    let (done, name) = match action {
        Action::Pause => {
            if force {
                admin.force_pause(job).await?;
            } else {
                admin.pause(job).await.map_err(refused)?;
            }
            (
                format!(
                    "paused `{job}`: no replica claims its occurrences until `dlock resume {job}` (runs going on finish)"
                ),
                "pause",
            )
        }
        Action::Resume => {
            if force {
                admin.force_resume(job).await?;
            } else {
                admin.resume(job).await.map_err(refused)?;
            }
            (format!("resumed `{job}`"), "resume")
        }
        Action::RunNow => {
            if force {
                admin.force_run_now(job).await?;
            } else {
                admin.run_now(job).await.map_err(refused)?;
            }
            (
                format!(
                    "asked for a run of `{job}` now; one replica takes it (see `dlock runs {job}`)"
                ),
                "run_now",
            )
        }
    };
    let paused = admin.is_paused(job).await?;
    let mut report = if json {
        Report::json(&Control {
            job,
            action: name,
            paused,
            replicas: replicas.clone(),
        })?
    } else {
        Report::new(format!("{done}\n"))
    };
    if replicas.is_empty() {
        report = report.note(format!(
            "no running replica has registered job `{job}`: the change is kept in Redis for when \
             one runs it"
        ));
    }
    if paused && matches!(action, Action::RunNow) {
        report = report.note(format!(
            "`{job}` is paused: the request waits until `dlock resume {job}`"
        ));
    }
    Ok(report)
}
