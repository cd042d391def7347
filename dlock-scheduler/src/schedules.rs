//! Run-time schedules, the calls: [`Scheduler::add_schedule`] (and
//! [`Scheduler::add_schedule_json`], for operators' tools, with the same checks),
//! [`Scheduler::remove_schedule`], [`Scheduler::schedules`]. Stored by [`crate::schedule_store`], followed by every replica
//! ([`crate::follow`]).

use std::time::SystemTime;

use serde::Serialize;

use crate::error::Error;
use crate::schedule_store::{self, RuntimeSchedule};
use crate::scheduler::Scheduler;
use crate::validate;

impl Scheduler {
    /// Adds a schedule while the service runs, shared by every replica: `handler` (registered
    /// with [`crate::SchedulerBuilder::handler`]) runs on the `cron` schedule in time zone `tz`
    /// with `args` (any `Serialize` value, stored as JSON and handed to the handler,
    /// [`crate::JobContext::args`]; `&()` for none), as a job named `name` — its ledger, pause,
    /// `run_now` and turns are a job's. Each occurrence runs on exactly one replica that has
    /// the handler (the job's [`crate::HandlerOptions`] decide its overlap, lease, delivery);
    /// a replica without the handler says so in the job registry
    /// ([`crate::RegisteredReplica::unrunnable`]) and never claims it.
    ///
    /// Every replica picks the change up within a heartbeat ([`crate::DEFAULT_HEARTBEAT`]):
    /// at once over pub/sub, or at its next heartbeat if the announcement was lost. Occurrences
    /// from the time it was added on count (one due before a replica picked it up follows the
    /// handler's misfire policy). Adding a schedule of the same name again replaces it (its
    /// loops restart if the handler, cron expression, zone or arguments changed; the ledger is
    /// kept); adding it again unchanged changes nothing.
    ///
    /// ```no_run
    /// # async fn demo(scheduler: dlock_scheduler::Scheduler) -> Result<(), dlock_scheduler::Error> {
    /// #[derive(serde::Serialize)]
    /// struct Report<'a> { tenant: &'a str }
    ///
    /// scheduler
    ///     .add_schedule("report:acme", "send_report", "0 7 * * MON-FRI", "Europe/Berlin",
    ///         &Report { tenant: "acme" })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidSchedule`] for a bad cron expression or time zone (the rules
    /// of `#[scheduled]` and [`crate::Job::new`], with what is wrong and how to fix it);
    /// [`crate::ErrorKind::InvalidJob`] for a name no job can have, the name of a job in this
    /// scheduler's code, a handler not registered on this scheduler (with close names), or
    /// handler options that do not fit the schedule (a jitter as long as its interval);
    /// [`crate::ErrorKind::InvalidArgs`] when `args` do not serialize to JSON; a Redis error.
    /// Nothing is stored when it fails.
    ///
    /// # Cancel safety
    /// If the future is dropped the schedule may or may not have been stored; adding it again
    /// is safe (the same schedule twice is one).
    pub async fn add_schedule(
        &self,
        name: &str,
        handler: &str,
        cron: &str,
        tz: &str,
        args: &impl Serialize,
    ) -> Result<(), Error> {
        let args = serde_json::to_string(args).map_err(|e| {
            Error::invalid_args(format!(
                "schedule `{name}`: its arguments do not serialize to JSON: {e}"
            ))
        })?;
        self.store_schedule(name, handler, cron, tz, args, HandlerOn::ThisScheduler)
            .await
    }

    /// [`Scheduler::add_schedule`] from a process that does not run the handler — an
    /// operator's tool (`dlock schedule add`), an admin application: `handler` must be
    /// registered on this scheduler or on a live replica ([`Scheduler::replicas`]), and `args`
    /// is JSON text (`None`: no arguments). The checks are `add_schedule`'s: the name, the cron
    /// expression and zone, a clash with a job in code (this scheduler's or a live replica's),
    /// the arguments; only the handler's options are checked by each replica that has it (one
    /// that cannot run the schedule says why in the registry,
    /// [`crate::RegisteredReplica::unrunnable`]) unless this scheduler registered the handler.
    ///
    /// ```no_run
    /// # async fn demo(admin: dlock_scheduler::Scheduler) -> Result<(), dlock_scheduler::Error> {
    /// admin
    ///     .add_schedule_json("report:acme", "send_report", "0 7 * * MON-FRI", "Europe/Berlin",
    ///         Some(r#"{"tenant": "acme"}"#))
    ///     .await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Scheduler::add_schedule`]; [`crate::ErrorKind::InvalidJob`] when neither this
    /// scheduler nor a live replica registered `handler` (with close names);
    /// [`crate::ErrorKind::InvalidArgs`] when `args` is not JSON.
    ///
    /// # Cancel safety
    /// As [`Scheduler::add_schedule`].
    pub async fn add_schedule_json(
        &self,
        name: &str,
        handler: &str,
        cron: &str,
        tz: &str,
        args: Option<&str>,
    ) -> Result<(), Error> {
        let args = match args {
            None => "null".to_owned(),
            Some(text) => serde_json::from_str::<serde_json::Value>(text)
                .and_then(|value| serde_json::to_string(&value))
                .map_err(|e| {
                    Error::invalid_args(format!(
                        "schedule `{name}`: its arguments are not JSON ({e}): {text}"
                    ))
                })?,
        };
        self.store_schedule(name, handler, cron, tz, args, HandlerOn::ThisOrALiveReplica)
            .await
    }

    /// The checks of a run-time schedule, then its record written (`args`: JSON text).
    async fn store_schedule(
        &self,
        name: &str,
        handler: &str,
        cron: &str,
        tz: &str,
        args: String,
        on: HandlerOn,
    ) -> Result<(), Error> {
        let shared = &self.shared;
        validate::job_name(name)?;
        let local = shared.handlers.get(handler);
        let live = match (local, on) {
            (None, HandlerOn::ThisOrALiveReplica) => self.replicas().await?,
            _ => Vec::new(),
        };
        let on_a_replica = live.iter().any(|r| r.handlers.iter().any(|h| h == handler));
        if local.is_none() && !on_a_replica {
            return Err(unknown_handler(name, handler, shared, &live, on));
        }
        let here = shared
            .jobs
            .get(name)
            .is_some_and(|entry| entry.job.handler_name.is_none());
        let there = live
            .iter()
            .any(|r| r.jobs.iter().any(|j| j.name == name && j.handler.is_none()));
        if here || there {
            return Err(Error::invalid_job(format!(
                "schedule `{name}`: a job in {} code has that name; name the schedule \
                 differently (e.g. `{name}:{handler}`)",
                if here {
                    "this scheduler's"
                } else {
                    "a live replica's"
                }
            )));
        }
        let schedule = RuntimeSchedule {
            name: name.to_owned(),
            handler: handler.to_owned(),
            cron: cron.to_owned(),
            time_zone: tz.to_owned(),
            args: (args != "null").then_some(args),
            added_at: SystemTime::from(shared.clock.now()),
        };
        match local {
            // The checks a replica makes before it runs it: cron, zone, name, options.
            Some(registered) => {
                crate::follow::entry_for(shared, registered, &schedule)?;
            }
            // The same cron and zone rules; the options are the replicas' to check.
            None => {
                validate::handler_name(handler)?;
                crate::Schedule::new(cron, tz)?;
            }
        }
        let record = schedule_store::encode(&schedule)?;
        schedule_store::put(&shared.client, &shared.schedule_keys, name, Some(&record)).await?;
        Ok(())
    }

    /// Removes the run-time schedule `name`: every replica stops claiming its occurrences
    /// within a heartbeat (a run going on finishes). Its ledger and pause record stay (read
    /// them with [`Scheduler::history`]). Returns whether there was one.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidJob`] for a name no job can have; a Redis error.
    ///
    /// # Cancel safety
    /// If the future is dropped it may or may not have been removed; removing twice is
    /// removing once.
    pub async fn remove_schedule(&self, name: &str) -> Result<bool, Error> {
        validate::job_name(name)?;
        let shared = &self.shared;
        let changed =
            schedule_store::put(&shared.client, &shared.schedule_keys, name, None).await?;
        Ok(changed.existed)
    }

    /// The run-time schedules under the client's prefix, by name.
    ///
    /// # Errors
    /// A Redis error; [`crate::ErrorKind::Redis`] naming the schedule when one is stored in a
    /// newer format (upgrade this program) or was not written by dlock-scheduler.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn schedules(&self) -> Result<Vec<RuntimeSchedule>, Error> {
        let shared = &self.shared;
        schedule_store::read_all(&shared.client, &shared.schedule_keys)
            .await?
            .into_iter()
            .map(|(name, read)| read.map_err(|refused| Error::protocol(refused.describe(&name))))
            .collect()
    }
}

/// Where the handler of a schedule being added must be registered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HandlerOn {
    /// On the scheduler that adds it ([`Scheduler::add_schedule`]).
    ThisScheduler,
    /// There or on a live replica ([`Scheduler::add_schedule_json`]).
    ThisOrALiveReplica,
}

/// The error for a handler registered nowhere it may be, with close names.
fn unknown_handler(
    name: &str,
    handler: &str,
    shared: &crate::replica_state::Shared,
    live: &[crate::RegisteredReplica],
    on: HandlerOn,
) -> Error {
    let names = shared
        .handlers
        .keys()
        .map(|h| h.to_string())
        .chain(live.iter().flat_map(|r| r.handlers.iter().cloned()))
        .collect();
    let close = crate::control::close_names(handler, names);
    let hint = if close.is_empty() {
        String::new()
    } else {
        format!("; did you mean {}?", close.join(", "))
    };
    let nowhere = match on {
        HandlerOn::ThisScheduler => "on this scheduler (SchedulerBuilder::handler)",
        HandlerOn::ThisOrALiveReplica => {
            "on this scheduler or on a live replica (SchedulerBuilder::handler)"
        }
    };
    Error::invalid_job(format!(
        "schedule `{name}`: no handler `{handler}` is registered {nowhere}{hint}"
    ))
}
