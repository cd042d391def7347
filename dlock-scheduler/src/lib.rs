//! Distributed cron on dlock: every replica of a service runs a [`Scheduler`] with the same
//! jobs, and each occurrence of each job runs on **exactly one** replica — at most once, even
//! with skewed clocks, late replicas and restarts; or, for jobs that must happen, at least once
//! ([`Delivery::AtLeastOnce`]).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use dlock_scheduler::{Job, Scheduler};
//!
//! // Connects now: a wrong URL, password or port is an error here, not at the first claim.
//! let client = dlock_core::Client::builder("redis://127.0.0.1:6379/").connect().await?;
//! let lottery = Job::new("lottery", "0 12 * * *", "Europe/Berlin", |ctx| async move {
//!     println!("{} draws the winners of {}", ctx.replica().id(), ctx.occurrence());
//!     Ok::<(), std::io::Error>(())
//! })?;
//! let scheduler = Scheduler::builder(client).job(lottery).build()?;
//! scheduler
//!     .run_until(async { let _ = tokio::signal::ctrl_c().await; }, Duration::from_secs(30))
//!     .await;
//! # Ok(()) }
//! ```
//!
//! # Map
//! Every public item, by what it is for (all at the crate root).
//!
//! | for | items |
//! |---|---|
//! | running jobs | [`Scheduler`] ([`Scheduler::builder`], [`Scheduler::run_until`]), [`SchedulerBuilder`], [`ShutdownReport`]; defaults [`DEFAULT_CLAIM_RETENTION`], [`DEFAULT_HEARTBEAT`], [`DEFAULT_HISTORY`], [`DEFAULT_ONE_OFF_CONCURRENCY`], [`DEFAULT_REQUEST_POLL`], [`DEFAULT_TURN_GRACE`] |
//! | declaring a job | [`Job`], [`macro@scheduled`], [`Overlap`], [`Delivery`], [`MisfirePolicy`], [`HandlerOptions`]; bounds [`DEFAULT_RUN_LEASE`], [`MIN_RUN_LEASE`], [`MAX_ATTEMPTS`], [`MAX_BACKOFF`] |
//! | inside a run | [`JobContext`], [`Replica`] |
//! | the calendar | [`Schedule`], [`Occurrences`], [`ScheduleError`], [`ScheduleErrorKind`], [`jitter_for`]; the time types' crates [`chrono`], [`chrono_tz`] |
//! | run-time schedules and one-off jobs | [`Scheduler::add_schedule`], [`RuntimeSchedule`], [`UnrunnableSchedule`]; [`Scheduler::run_after`], [`OneOffId`], [`KeyedOneOff`] (debounce, replace), [`Enqueued`]; [`Scheduler::one_off_handlers`], [`OneOffHandler`], [`Scheduler::pending_one_offs`], [`PendingOneOff`] |
//! | the ledger and operators' views | [`RunRecord`], [`AttemptRecord`], [`RunOutcome`]; [`Scheduler::overview`], [`JobOverview`], [`JobReplica`], [`NotRunBy`]; [`Scheduler::replicas`], [`RegisteredReplica`], [`RegisteredJob`]; the dashboard `web` (feature `web`) |
//! | clocks (for tests) | [`Clock`], [`SystemClock`], [`SkewedClock`] |
//! | errors | [`Error`], [`ErrorKind`] |
//!
//! # The guide
//! The reference, chapter by chapter, in [`_guide`]: [jobs](_guide::jobs),
//! [delivery](_guide::delivery), [one-off jobs and groups](_guide::one_offs_and_groups),
//! [operating](_guide::operating). The locks underneath: [`dlock_core::_guide`].
//!
//! # How it works
//! * **Per-occurrence claims.** An occurrence is identified by (job name, nominal instant in
//!   UTC) — computed from the cron expression, so identical on every replica whatever its
//!   clock. When it is due, replicas race to claim it in Redis (`claim.lua`); one wins, the
//!   others find it claimed — also a replica whose clock is late, or that restarted. A claim is
//!   accepted only once the occurrence's time has come *by the Redis server's clock*, so a
//!   replica whose clock runs ahead waits instead of starting early. Lock-per-job
//!   schedulers (ShedLock and its ports) instead fire an occurrence twice when a short run ends
//!   before a skewed replica looks.
//! * **Replicas take turns.** The live replicas (each tells Redis so every second, or by
//!   claiming) take consecutive occurrences in turn: the replica whose turn it is claims at the
//!   fire time, the others only after a short grace ([`DEFAULT_TURN_GRACE`]) or when it is no
//!   longer live. Replicas time their requests by the Redis server's clock, corrected from the
//!   server times in the replies, so a replica whose clock runs late still asks on time.
//! * **Delivery** ([`Delivery`]). By default at most once: a claimed occurrence is never run
//!   again, even if its replica dies mid-run (the ledger then shows it
//!   [`RunOutcome::Abandoned`]) or its handler fails. [`Delivery::AtLeastOnce`] attempts it
//!   again on any live replica after a doubling backoff until an attempt succeeds or the
//!   attempts are spent: each attempt holds a lease of its own in the ledger (renewed with the
//!   run's lock; its lapse marks a killed or paused replica's attempt abandoned) and a fencing
//!   token larger than the previous attempt's ([`JobContext::attempt`],
//!   [`JobContext::fencing_token`]); a superseded attempt can no longer record its outcome and
//!   is stopped as soon as it runs again. The ledger keeps every attempt ([`AttemptRecord`]).
//! * **Leases.** The winner takes the job's dlock mutex with the watchdog: it guards against
//!   overlapping runs ([`Overlap`]), gives the handler a fencing token and cancels it if the
//!   lease is lost ([`dlock_core::OnLost`]). The lease is short ([`DEFAULT_RUN_LEASE`], 5 s)
//!   and renewed every third of it, so a replica killed mid-run holds the job up for at most
//!   one lease plus one renewal interval.
//! * **Job groups.** [`SchedulerBuilder::group`] declares a group of at most `max` runs at
//!   once across every replica, and [`Job::group`] puts a job in it (`max = 1`: the group's
//!   jobs never overlap each other). A run of a grouped job, once it holds its job's lock,
//!   waits for a slot — a permit of a dlock-core [`dlock_core::Semaphore`], FIFO across
//!   replicas, held with the watchdog under the job's lease and released with the job's lock
//!   — at most until its job's next occurrence's fire time; an occurrence that got none is
//!   recorded [`RunOutcome::SkippedGroup`].
//! * **Redis outages.** Occurrences that could not be claimed because Redis did not answer are
//!   *missed*, and follow the job's [`MisfirePolicy`] once it answers again (by default one
//!   catch-up run); a claim whose reply was lost is withdrawn first, so it is not lost either.
//!   Missed occurrences run in order, one at a time, each waiting for the previous run.
//! * **Ledger.** The last runs of each job — occurrence, replica (id, host, pid), start and end
//!   by the server's clock, outcome, error — readable with [`Scheduler::history`].
//! * **Loop liveness.** A replica vouches only for the jobs whose loop runs: one whose loop
//!   stalled (its task panicked, or a handler blocks its thread) takes itself out of that
//!   job's turns within three heartbeats and logs an error, until the loop runs again; the
//!   others then fire its turns without the turn grace.
//! * **Registry.** Each running instance publishes its jobs (name, cron, time zone, whether
//!   their loops run) and who it is (replica id, host, pid) in Redis once per heartbeat, and
//!   withdraws the entry when it stops. A replica that stops heartbeating (blocked, paused,
//!   cut off, dead) is shown **stalled** once its liveness (three heartbeats) has run out, and
//!   vanishes when its entry expires (ten heartbeats, at least 30 s): stalled is not gone.
//!   [`Scheduler::registered_replicas`] reads it (the `dlock jobs` command does).
//! * **Run-time schedules.** Handlers are registered by name in code
//!   ([`SchedulerBuilder::handler`], with [`HandlerOptions`]); schedules that name them are
//!   data in Redis, added and removed while the service runs ([`Scheduler::add_schedule`],
//!   [`Scheduler::remove_schedule`]; JSON arguments read with [`JobContext::args`]). Every
//!   replica follows them — told over pub/sub on its own connection, and polling a revision
//!   counter every heartbeat — and runs each one it has the handler for as a job like those in
//!   code (claims, turns, ledger, pause, `run_now`); one it cannot run is listed in its registry
//!   entry with the reason ([`RegisteredReplica::unrunnable`]) and never claimed.
//! * **Control.** [`Scheduler::pause`] / [`Scheduler::resume`] are stored in Redis and honoured
//!   by every replica's claim; [`Scheduler::run_now`] queues a request one replica takes and
//!   claims in one step — woken at once over pub/sub on the client's own connection (no extra
//!   connection), or at its next poll if the announcement was lost; requests made while the
//!   job was paused run as soon as it is resumed. A job that is not known (no replica
//!   registered it, no ledger entries, no pause record: a typo) is refused with close names
//!   ([`ErrorKind::UnknownJob`]); [`Scheduler::force_pause`] and the other `force_` calls act
//!   on any valid name.
//! * **One-off jobs.** [`Scheduler::run_at`] / [`Scheduler::run_after`] (idempotent with
//!   `_keyed`) store a job of a registered handler in Redis as a pending run of the hidden job
//!   `once:<handler>`, due by the server's clock; on each replica that has the handler a loop
//!   claims due ones (`take_retry.lua`, as a retry's first attempt) while the replica has a free
//!   slot ([`SchedulerBuilder::one_off_concurrency`]), and runs them with the handler's
//!   delivery. They survive the restart of every replica, wait while none has the handler, are
//!   cancellable until claimed ([`Scheduler::cancel_one_off`]) and readable by id
//!   ([`Scheduler::one_off`], [`OneOffId`]).
//! * **Shutdown.** [`Scheduler::run_until`] stops claiming when its shutdown future resolves,
//!   drains running jobs up to a deadline, then cancels and releases the rest, and shuts the
//!   client down ([`dlock_core::Client::shutdown`]): a replica's graceful exit leaves no lock
//!   or queue entry for the others to wait out. On by default; turn it off with
//!   [`SchedulerBuilder::shutdown_client`] when the rest of the application shares the client.
//! * **Calendar.** Cron (5 fields, or 6 with seconds) in an IANA time zone with a defined
//!   daylight-saving rule ([`Schedule`], from `dlock-cron`); misfire policy after downtime
//!   ([`MisfirePolicy`]); jitter decided per occurrence so that all replicas agree
//!   ([`jitter_for`]).
//! * **`#[scheduled]`** ([`macro@scheduled`]) declares a job on an `async fn`, with its cron
//!   expression and time zone checked at compile time; register `lottery::job()?`.
//!
//! * **Dashboard** (feature `web`): `web::router(scheduler)` is an axum `Router` the
//!   application mounts where it likes — one page of every job (schedule, next fire, paused,
//!   replicas, last runs, runs per replica) with pause / resume / run-now buttons.
//!
//! # Features
//! | feature | what |
//! |---|---|
//! | `web` | the `web` module: the dashboard (axum) |
//! | `opentelemetry` | [`SchedulerBuilder::trace_context_from_opentelemetry`]: a one-off job carries its submitter's OpenTelemetry span context, and its run's span links to it (`opentelemetry`, `tracing-opentelemetry`) |
//! | `__conformance` | not an API: the scripts' texts that dlock's own conformance test loads (hidden, may change in any release) |
//!
//! # Layout
//! Every import inside the crate points down (`scripts/check-module-cycles.py` fails the build
//! otherwise). From the ground up:
//!
//! | floor | module | what |
//! |---|---|---|
//! | ground | `error` | [`Error`], [`ErrorKind`] |
//! | | `clock` | [`Clock`], [`SystemClock`], [`SkewedClock`]; the server clock estimate |
//! | | `context`, `job`, `handler` | [`JobContext`], [`Replica`]; [`Job`], [`Overlap`], [`Delivery`]; handlers registered by name, [`HandlerOptions`] |
//! | | `misfire`, `jitter` | [`MisfirePolicy`] and which occurrences are due; [`jitter_for`] |
//! | | `validate` | job names and options, for `build()` and the control calls |
//! | | `group` | job groups: declared groups checked, a job's semaphore of its group, waiting for a slot |
//! | | `trace` | trace context: the hook's type, the `traceparent` check, the `<id>:trace` record; OpenTelemetry's side (feature `opentelemetry`) |
//! | | `scripts` | `claim.lua`, `take_request.lua`, `take_retry.lua`, `renew_attempt.lua`, `request.lua`, `withdraw.lua`, `finish.lua`, `resume.lua`, `heartbeat.lua`, `register.lua`, `schedule.lua`, `once.lua`, `once_cancel.lua`, `once_trim.lua`; `common.lua` (the run records' format) |
//! | | `ledger` | the job's keys; [`RunRecord`], [`AttemptRecord`], [`RunOutcome`]: writing and reading the ledger |
//! | | `schedule_store` | run-time schedules in Redis: keys, records ([`RuntimeSchedule`], format 1), `schedule.lua` |
//! | state | `replica_state` | what a scheduler's tasks share: client, replica, settings; each job's entry |
//! | requests | `claim`, `liveness`, `registry` | claim an occurrence, take a `run_now` request or a due retry, renew an attempt, withdraw; heartbeats; the job registry ([`RegisteredReplica`]: which instance runs which jobs, for operators' tools) |
//! | attempt | `attempt` | one attempt: claim, lock, handler, record, release |
//! | per job | `job_loop`, `wake` | one job's loop (what is due, in which order, recovery after an outage); its `run_now` wake-ups |
//! | | `follow` | following the run-time schedules: starting and stopping their jobs' loops |
//! | | `once_loop` | per handler, the hidden job `once:<handler>` and the loop that claims and runs its due one-off jobs |
//! | facade | `scheduler`, `builder`, `control`, `schedules` | [`Scheduler`]: run and shut down; [`SchedulerBuilder`]; pause, resume, `run_now` (refusing unknown jobs), history; adding and removing run-time schedules |
//! | | `once` | [`Scheduler::run_at`] and the other one-off calls; [`OneOffId`] |
//! | | `once_keyed` | [`Scheduler::run_at_keyed`], [`Scheduler::run_after_keyed`]: [`KeyedOneOff`] (debounce, replace), [`Enqueued`]; the `once.lua` call of every one-off |
//! | views | `overview` | [`Scheduler::overview`]: each job's schedule, next fire, state, replicas and ledger ([`JobOverview`]), for `dlock jobs` and the dashboard |
//! | | `one_offs` | [`Scheduler::one_off_handlers`] and [`Scheduler::pending_one_offs`]: the handlers of one-off jobs and their pending jobs, for `dlock jobs`, `dlock once` and the dashboard |
//! | | `web` (feature `web`) | the dashboard: an axum `Router` to mount (`web::router`), its page and its POSTs' cross-site rule |
//! | guide | `_guide` | [`_guide`]: the guide's chapters (`guide/*.md`), modules of documentation only |
//!
//! `schedule_props` (tests only) holds the property tests of the calendar, misfire and jitter
//! math.

#![cfg_attr(docsrs, feature(doc_cfg))]

#[doc(hidden)]
pub mod __private;
// Documentation only. Its `rust` blocks are the programs of `examples/readme/`, which dlock's
// tests hold to the text and run against Redis: left out of doctests, not compiled twice.
#[cfg(not(doctest))]
pub mod _guide;
mod attempt;
mod builder;
mod claim;
mod clock;
mod context;
mod control;
mod error;
mod follow;
mod group;
mod handler;
mod jitter;
mod job;
mod job_loop;
mod ledger;
mod liveness;
mod metrics;
mod misfire;
mod once;
mod once_keyed;
mod once_loop;
mod one_offs;
mod overview;
mod registry;
mod replica_state;
#[cfg(test)]
mod schedule_props;
mod schedule_store;
mod scheduler;
mod schedules;
mod scripts;
mod trace;
mod validate;
mod wake;
#[cfg(feature = "web")]
pub mod web;

pub use builder::{
    DEFAULT_CLAIM_RETENTION, DEFAULT_HEARTBEAT, DEFAULT_HISTORY, DEFAULT_ONE_OFF_CONCURRENCY,
    DEFAULT_REQUEST_POLL, DEFAULT_TURN_GRACE, SchedulerBuilder,
};
pub use clock::{Clock, SkewedClock, SystemClock};
pub use context::{JobContext, Replica};
pub use dlock_cron::{Occurrences, Schedule, ScheduleError, ScheduleErrorKind};
pub use dlock_macros::scheduled;
pub use error::{Error, ErrorKind};
pub use handler::HandlerOptions;
pub use jitter::jitter_for;
pub use job::{
    DEFAULT_RUN_LEASE, Delivery, Job, MAX_ATTEMPTS, MAX_BACKOFF, MIN_RUN_LEASE, Overlap,
};
pub use ledger::{AttemptRecord, RunOutcome, RunRecord};
pub use misfire::MisfirePolicy;
pub use once::OneOffId;
pub use once_keyed::{Enqueued, KeyedOneOff};
pub use one_offs::{OneOffHandler, PendingOneOff};
pub use overview::{JobOverview, JobReplica, NotRunBy};
pub use registry::{RegisteredJob, RegisteredReplica};
pub use schedule_store::{RuntimeSchedule, UnrunnableSchedule};
pub use scheduler::{Scheduler, ShutdownReport};

/// The `chrono` version this crate's API uses (`DateTime<Utc>`), re-exported.
pub use chrono;
/// The `chrono-tz` version this crate's API uses, re-exported.
pub use chrono_tz;
