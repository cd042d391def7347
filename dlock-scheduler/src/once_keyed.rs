//! Keyed one-off jobs as a builder: [`KeyedOneOff`], what [`Scheduler::run_at_keyed`] and
//! [`Scheduler::run_after_keyed`] return, with its [`KeyedOneOff::debounce`] and
//! [`KeyedOneOff::replace`] (issue #51), and [`Enqueued`], what one call did. Awaited as it is,
//! it enqueues as those methods always did; the two options act in the same `once.lua` call,
//! on the key's run while it is still pending, never on one a replica claimed. The call itself
//! (`Scheduler::enqueue_json`, every one-off's, keyed or not) is here too.

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::time::Duration;

use chrono::{DateTime, Utc};
use dlock_core::ext;
use redis::Value;
use serde::Serialize;

use crate::error::Error;
use crate::once::{Due, OneOffId, to_json, unknown_handler};
use crate::scheduler::Scheduler;
use crate::scripts::{self, millis};

/// What a keyed call asks of the key's pending run, besides enqueueing.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Update {
    /// Debounce: the longest wait from the key's first call.
    pub(crate) max_wait: Option<Duration>,
    /// Replace the pending run's arguments.
    pub(crate) replace: bool,
}

/// A one-off job with an idempotency key, not sent yet: [`Scheduler::run_at_keyed`] and
/// [`Scheduler::run_after_keyed`] return it. `.await` it for the job's id, or
/// [`KeyedOneOff::submit`] it to learn what the call did; before that, ask it to
/// [`debounce`](KeyedOneOff::debounce) or [`replace`](KeyedOneOff::replace) the key's job
/// while it is pending.
///
/// **Pending** means no replica has claimed the job yet (it is [`crate::RunOutcome::Scheduled`]);
/// a job a replica claimed — running, ended, cancelled or retried under
/// [`crate::Delivery::AtLeastOnce`] — is never changed: the call answers
/// [`Enqueued::Started`] and the job runs (or ran) as it was. Under at-least-once delivery its
/// later attempts run with the arguments its first attempt was claimed with.
///
/// **Rolling deploys.** Both options travel in the call's own script (`once.lua`), so they work
/// as soon as the process that calls is upgraded, whatever the replicas run; older replicas
/// claim and run a debounced or replaced job as any other (they read the same records, version
/// 1). A job whose records are of another version (a newer dlock's) is refused by it, never
/// misread: [`crate::ErrorKind::Redis`] (a protocol error), nothing changed.
#[must_use = "a keyed one-off does nothing until it is awaited or submitted"]
pub struct KeyedOneOff<'a> {
    scheduler: &'a Scheduler,
    handler: &'a str,
    key: &'a str,
    due: Due,
    args: Result<String, Error>,
    update: Update,
}

impl std::fmt::Debug for KeyedOneOff<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self {
            scheduler: _,
            handler,
            key,
            due: _,
            args,
            update,
        } = self;
        f.debug_struct("KeyedOneOff")
            .field("handler", handler)
            .field("key", key)
            .field("args", &args.as_ref().map(String::len))
            .field("max_wait", &update.max_wait)
            .field("replace", &update.replace)
            .finish_non_exhaustive()
    }
}

impl<'a> KeyedOneOff<'a> {
    pub(crate) fn new(
        scheduler: &'a Scheduler,
        handler: &'a str,
        key: &'a str,
        due: Due,
        args: Result<String, Error>,
    ) -> Self {
        Self {
            scheduler,
            handler,
            key,
            due,
            args,
            update: Update::default(),
        }
    }

    /// Debounce: if the key's job is still pending, move it to this call's due time, but never
    /// later than `max_wait` after the key's **first** call (the one that enqueued it); a new
    /// job is due no later than `max_wait` from now. So a burst of calls runs the job once,
    /// after the last call's delay — or at the latest `max_wait` after the first, however long
    /// the burst lasts. The job keeps its first call's arguments unless
    /// [`KeyedOneOff::replace`] is asked too.
    ///
    /// Each call caps by its own `max_wait` (give the same on every call). A cap already past
    /// leaves the job due at once. Times are the Redis server's.
    ///
    /// ```no_run
    /// # async fn demo(scheduler: dlock_scheduler::Scheduler) -> Result<(), dlock_scheduler::Error> {
    /// use std::time::Duration;
    ///
    /// let done = scheduler
    ///     .run_after_keyed("reindex", "doc-42", Duration::from_secs(2), &42)
    ///     .debounce(Duration::from_secs(30))
    ///     .replace()
    ///     .submit()
    ///     .await?;
    /// println!("{done:?}"); // Updated(reindex/o…): the newest arguments, 2 s from now
    /// # Ok(()) }
    /// ```
    pub fn debounce(mut self, max_wait: Duration) -> Self {
        self.update.max_wait = Some(max_wait);
        self
    }

    /// Replace: if the key's job is still pending, its arguments become this call's (one
    /// payload: the last replaced); its due time stays unless [`KeyedOneOff::debounce`] is
    /// asked too. A job a replica claimed is never changed ([`Enqueued::Started`]).
    pub fn replace(mut self) -> Self {
        self.update.replace = true;
        self
    }

    /// Sends the call (`once.lua`, one atomic script) and says what it did.
    ///
    /// # Errors
    /// As [`Scheduler::run_at_keyed`]; [`crate::ErrorKind::Redis`] (a protocol error) when the key's job has
    /// records of another format version (a newer dlock's: upgrade this process).
    ///
    /// # Cancel safety
    /// Cancel safe in effect: if the future is dropped the call may or may not have taken
    /// effect, and calling again is safe — the key enqueues at most once, a debounce again
    /// moves the due time to the same cap at most, a replace again writes the same arguments.
    pub async fn submit(self) -> Result<Enqueued, Error> {
        let args = self.args?;
        self.scheduler
            .enqueue_json(
                self.handler,
                Some(self.key),
                self.due,
                &args,
                self.update.max_wait,
                self.update.replace,
            )
            .await
    }
}

impl<'a> IntoFuture for KeyedOneOff<'a> {
    type Output = Result<OneOffId, Error>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send + 'a>>;

    /// [`KeyedOneOff::submit`], for the job's id alone.
    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move { Ok(self.submit().await?.id().clone()) })
    }
}

impl Scheduler {
    /// [`Scheduler::run_at`] with an idempotency key: the first call with `key` (for
    /// `handler`) enqueues the job; later calls with the same key enqueue nothing and return
    /// the first one's id, whatever their `when` and `args` (unless they ask to
    /// [`debounce`](KeyedOneOff::debounce) or [`replace`](KeyedOneOff::replace) the job while
    /// it is pending). So a caller that retries after an
    /// error or a timeout does not create duplicates. The key is remembered for the claim
    /// retention ([`crate::SchedulerBuilder::claim_retention`], a day by default) from the
    /// first call, and as long as the job is pending or in the ledger. Keys are per handler;
    /// any non-empty text (it is hashed into the run id).
    ///
    /// ```no_run
    /// # async fn demo(scheduler: dlock_scheduler::Scheduler) -> Result<(), dlock_scheduler::Error> {
    /// use chrono::Utc;
    ///
    /// let key = "invoice-4711-reminder";
    /// let first = scheduler.run_at_keyed("remind", key, Utc::now(), &4711).await?;
    /// let again = scheduler.run_at_keyed("remind", key, Utc::now(), &4711).await?;
    /// assert_eq!(first, again); // one job
    /// # Ok(()) }
    /// ```
    ///
    /// It returns a [`KeyedOneOff`]: await it for the id, or call
    /// [`KeyedOneOff::debounce`] (move the pending job's due time on each call, capped) or
    /// [`KeyedOneOff::replace`] (replace its arguments) first, and
    /// [`KeyedOneOff::submit`] to learn what the call did.
    ///
    /// # Errors
    /// As [`Scheduler::run_at`]; also [`crate::ErrorKind::InvalidJob`] for an empty key.
    ///
    /// # Cancel safety
    /// Cancel safe in effect: if the future is dropped the job may or may not have been
    /// enqueued, and calling again with the same key enqueues it at most once.
    pub fn run_at_keyed<'a>(
        &'a self,
        handler: &'a str,
        key: &'a str,
        when: DateTime<Utc>,
        args: &impl Serialize,
    ) -> KeyedOneOff<'a> {
        KeyedOneOff::new(self, handler, key, Due::At(when), to_json(handler, args))
    }

    /// [`Scheduler::run_after`] with an idempotency key, as [`Scheduler::run_at_keyed`]:
    /// with [`KeyedOneOff::debounce`] each call moves the pending job to `delay` after it,
    /// at most `max_wait` after the first call.
    ///
    /// ```no_run
    /// # async fn demo(scheduler: dlock_scheduler::Scheduler) -> Result<(), dlock_scheduler::Error> {
    /// use std::time::Duration;
    ///
    /// // Reindex 2 s after the last edit of the document, and at most 30 s after the first.
    /// let id = scheduler
    ///     .run_after_keyed("reindex", "doc-42", Duration::from_secs(2), &42)
    ///     .debounce(Duration::from_secs(30))
    ///     .await?;
    /// # let _ = id; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Scheduler::run_at_keyed`].
    ///
    /// # Cancel safety
    /// As [`Scheduler::run_at_keyed`].
    pub fn run_after_keyed<'a>(
        &'a self,
        handler: &'a str,
        key: &'a str,
        delay: Duration,
        args: &impl Serialize,
    ) -> KeyedOneOff<'a> {
        KeyedOneOff::new(
            self,
            handler,
            key,
            Due::After(delay),
            to_json(handler, args),
        )
    }

    /// Enqueues a one-off job of `handler` (`once.lua`), or updates the pending one of its key.
    pub(crate) async fn enqueue_json(
        &self,
        handler: &str,
        key: Option<&str>,
        due: Due,
        args: &str,
        max_wait: Option<Duration>,
        replace: bool,
    ) -> Result<Enqueued, Error> {
        let shared = &self.shared;
        let Some(entry) = shared.once.get(handler) else {
            return Err(unknown_handler(handler, shared.handlers.keys()));
        };
        if key == Some("") {
            return Err(Error::invalid_job(format!(
                "an empty idempotency key for a one-off job of `{handler}`; give a key that \
                 names the job (e.g. \"invoice-4711-reminder\"), or use run_at / run_after"
            )));
        }
        let (at, delay) = match due {
            Due::At(when) => (when.timestamp_millis().to_string(), 0),
            Due::After(delay) => (String::new(), millis(delay)),
        };
        let client = &shared.client;
        let keys = &entry.keys;
        let trace = shared
            .trace_hook
            .as_ref()
            .and_then(|hook| hook())
            .and_then(crate::trace::checked)
            .unwrap_or_default();
        // A run id is taken only if another process drew the same instance token (not
        // expected): then another is drawn.
        for _ in 0..3 {
            let run_id = match key {
                Some(_) => String::new(),
                None => format!("o{}", shared.attempt_token()),
            };
            let mut invocation = scripts::ONCE.prepare_invoke();
            invocation
                .key(&keys.claims)
                .key(&keys.runs)
                .key(&keys.ledger)
                .key(&keys.retries)
                .arg(&run_id)
                .arg(key.unwrap_or(""))
                .arg(&at)
                .arg(delay)
                .arg(&shared.replica.id)
                .arg(&shared.replica.host)
                .arg(shared.replica.pid)
                .arg(args)
                .arg(millis(shared.retention))
                .arg(&keys.wake)
                .arg(&*entry.job.name)
                .arg(ext::publish_command(client))
                .arg(max_wait.map_or(String::new(), |w| millis(w).to_string()))
                .arg(if replace { "1" } else { "" })
                .arg(&trace);
            let sent = shared.clock.local();
            let what = format!("enqueue a one-off job of `{handler}`");
            let reply: Vec<Value> = ext::invoke(client, &invocation, &what).await?;
            shared.heard(None, sent, reply.last());
            match reply.as_slice() {
                [Value::Int(2), ..] => continue,
                [Value::Int(status), Value::BulkString(id), ..] => {
                    let id = OneOffId::new(handler, String::from_utf8_lossy(id).into_owned());
                    return Enqueued::from_status(*status, id);
                }
                other => {
                    return Err(Error::protocol(format!(
                        "once.lua answered {other:?} for a one-off job of `{handler}`"
                    )));
                }
            }
        }
        Err(Error::protocol(format!(
            "three one-off run ids of `{handler}` in a row were taken"
        )))
    }
}

/// What a keyed call did ([`KeyedOneOff::submit`]); each names the key's job.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Enqueued {
    /// The key's first call (or the first after its retention): a new job.
    New(OneOffId),
    /// The key was used already and nothing else was asked: nothing changed.
    Duplicate(OneOffId),
    /// The key's job was pending and was debounced or replaced as asked.
    Updated(OneOffId),
    /// Debounce or replace was asked but the key's job is no longer pending (a replica claimed
    /// it: it runs or ran, or it was cancelled, or its record was trimmed): nothing changed.
    Started(OneOffId),
}

impl Enqueued {
    /// The key's job.
    pub fn id(&self) -> &OneOffId {
        match self {
            Enqueued::New(id)
            | Enqueued::Duplicate(id)
            | Enqueued::Updated(id)
            | Enqueued::Started(id) => id,
        }
    }

    /// once.lua's status (2, a run id taken, is the caller's to retry).
    pub(crate) fn from_status(status: i64, id: OneOffId) -> Result<Self, Error> {
        match status {
            1 => Ok(Enqueued::New(id)),
            0 => Ok(Enqueued::Duplicate(id)),
            3 => Ok(Enqueued::Updated(id)),
            4 => Ok(Enqueued::Started(id)),
            5 => Err(Error::protocol(format!(
                "the one-off job {id} has records of another format version, written by a newer \
                 dlock; this one reads version 1 and changed nothing: upgrade it"
            ))),
            other => Err(Error::protocol(format!(
                "once.lua answered status {other} for the one-off job {id}"
            ))),
        }
    }
}
