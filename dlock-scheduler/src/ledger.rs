//! The run ledger: the last N runs of each job, in Redis — which replica ran which occurrence,
//! when (server time), and how it ended — how it is written and read, and the keys of a job.
//!
//! A job's keys all share the hash tag of its run lock, `{sched:<job>}`, so the scheduler's
//! scripts touch one Redis Cluster slot. They are built on dlock-core's base key of the lock
//! name `sched:<job>` (`dlock_core::ext::base_key`: the client's prefix and the hash tag),
//! so they follow core's layout instead of copying it:
//!
//! | key | type | what |
//! |---|---|---|
//! | `<prefix>{sched:<job>}` (+ `:queue`) | dlock mutex | held while a run is going |
//! | `<prefix>{sched:<job>}:claims` | zset | claimed run ids, by claim time; kept for the retention |
//! | `<prefix>{sched:<job>}:runs` | zset | run ids of the ledger, by occurrence |
//! | `<prefix>{sched:<job>}:ledger` | hash | `<id>:claim`, `<id>:end` and `<id>:attempts` records (format version 1, `scripts/common.lua`); a one-off job's `<id>:args`, `<id>:trace` and (keyed) `<id>:key` |
//! | `<prefix>{sched:<job>}:retries` | zset | at-least-once runs not final yet, by when to look at them: the running attempt's lease deadline, or when the next attempt is due |
//! | `<prefix>{sched:<job>}:paused` | string | present while paused |
//! | `<prefix>{sched:<job>}:requests` | list | pending `run_now` requests |
//! | `<prefix>{sched:<job>}:replicas` | zset | live replicas of the job, by liveness deadline |
//! | `<prefix>{sched:<job>}:turn` | string | scheduled claims so far: whose turn the next one is |
//! | `<prefix>{sched:<job>}:wake` | channel | `run_now` wake-ups (message: the job's name); sharded pub/sub on a cluster |
//!
//! A handler's one-off jobs are runs of the hidden job `once:<handler>` (keys
//! `{sched:once:<handler>}:…`, see `once_loop.rs`): pending in its `retries` by due time.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chrono::{DateTime, TimeZone, Utc};
use dlock_core::{Client, FencingToken, ext};

use crate::error::Error;
use crate::scripts;

/// The lock name whose base key tags the keys that belong to no job: the job registry's and
/// the run-time schedules' (`{sched:}`: no job has an empty name).
pub(crate) const REGISTRY_TAG: &str = "sched:";

/// The Redis keys of one job.
#[derive(Clone, Debug)]
pub(crate) struct JobKeys {
    /// The dlock mutex held while a run is going.
    pub(crate) lock_name: String,
    pub(crate) claims: String,
    pub(crate) runs: String,
    pub(crate) ledger: String,
    pub(crate) paused: String,
    pub(crate) requests: String,
    pub(crate) replicas: String,
    pub(crate) turn: String,
    pub(crate) retries: String,
    /// The channel on which `run_now` wakes the job's replicas: it carries the job's hash tag,
    /// so that on a cluster `request.lua` may `SPUBLISH` on it and the message stays on the
    /// job's shard.
    pub(crate) wake: String,
}

impl JobKeys {
    /// The keys of job `job` under `client`'s prefix (a registered job or not).
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidJob`] when dlock-core refuses the lock name (the job name is
    /// checked before, so this does not happen).
    pub(crate) fn new(client: &Client, job: &str) -> Result<Self, Error> {
        let lock_name = format!("sched:{job}");
        let base = ext::base_key(client, &lock_name)?;
        Ok(Self {
            claims: format!("{base}:claims"),
            runs: format!("{base}:runs"),
            ledger: format!("{base}:ledger"),
            paused: format!("{base}:paused"),
            requests: format!("{base}:requests"),
            replicas: format!("{base}:replicas"),
            turn: format!("{base}:turn"),
            retries: format!("{base}:retries"),
            wake: format!("{base}:wake"),
            lock_name,
        })
    }
}

/// How a run ended (or that it has not).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunOutcome {
    /// Claimed and still going (its lease is held).
    Running,
    /// The handler returned `Ok`.
    Succeeded,
    /// The handler returned an error; its text is kept.
    Failed(String),
    /// The run was stopped: its lease was lost, or the scheduler shut down before it finished
    /// (or, for an occurrence caught up in order, while it waited for the previous run).
    Cancelled(String),
    /// The previous run of the job was still going, so this occurrence was skipped (overlap
    /// policy [`crate::Overlap::Skip`]).
    SkippedOverlap,
    /// The job's group ([`crate::Job::group`]) had no free slot until the job's next
    /// occurrence's fire time, so this run did not start. Not retried, also under at-least-once
    /// delivery: the next occurrence does the work.
    SkippedGroup,
    /// The replica that claimed the run disappeared (crashed, killed, paused past its lease)
    /// before recording an end. At most once, the occurrence is not run again; at least once,
    /// the next attempt follows ([`RunRecord::next_retry`]).
    Abandoned,
    /// A one-off job ([`crate::Scheduler::run_at`]) waiting for its first attempt: due at
    /// [`RunRecord::next_retry`]. Its record is attempt 0, claimed by the replica that
    /// enqueued it at [`RunRecord::started_at`] (the enqueue time).
    Scheduled,
}

impl RunOutcome {
    /// The outcome's code, as stored, as the `outcome` metric label and as `dlock runs --json`
    /// shows it: `running`, `succeeded`, `failed`, `cancelled`, `skipped_overlap`,
    /// `skipped_group`, `abandoned`, `scheduled`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed(_) => "failed",
            Self::Cancelled(_) => "cancelled",
            Self::SkippedOverlap => "skipped_overlap",
            Self::SkippedGroup => "skipped_group",
            Self::Abandoned => "abandoned",
            Self::Scheduled => "scheduled",
        }
    }

    fn text(&self) -> &str {
        match self {
            Self::Failed(text) | Self::Cancelled(text) => text,
            _ => "",
        }
    }

    /// The outcome code and error text as stored by `finish.lua`.
    pub(crate) fn encode(&self) -> (&'static str, String) {
        // The field and attempt separators may not appear in the text.
        (self.code(), self.text().replace(['\x1f', '\x1e'], " "))
    }

    fn decode(code: &str, text: &str) -> Option<Self> {
        Some(match code {
            "running" => Self::Running,
            "succeeded" => Self::Succeeded,
            "failed" => Self::Failed(text.to_owned()),
            "cancelled" => Self::Cancelled(text.to_owned()),
            "skipped_overlap" => Self::SkippedOverlap,
            "skipped_group" => Self::SkippedGroup,
            "abandoned" => Self::Abandoned,
            "scheduled" => Self::Scheduled,
            _ => return None,
        })
    }
}

impl fmt::Display for RunOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Failed(e) => write!(f, "failed: {e}"),
            Self::Cancelled(why) => write!(f, "cancelled: {why}"),
            other => f.write_str(other.code()),
        }
    }
}

/// The version of the run records this dlock writes and reads (`scripts/common.lua`).
pub(crate) const RECORD_VERSION: &str = "1";

/// One run of a job, as recorded in the ledger: its current (or last) attempt, and under
/// at-least-once delivery the attempts before it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunRecord {
    /// The nominal occurrence (the scheduled instant), or the request time of a manual run.
    pub occurrence: DateTime<Utc>,
    /// Whether it was requested with `run_now` rather than scheduled.
    pub manual: bool,
    /// The replica that claimed the current attempt.
    pub replica: String,
    /// Host name of that replica.
    pub host: String,
    /// Process id of that replica.
    pub pid: u32,
    /// When the current attempt was claimed, by the Redis server's clock.
    pub started_at: SystemTime,
    /// When it ended, by the Redis server's clock (`None` while running or abandoned).
    pub ended_at: Option<SystemTime>,
    /// The fencing token of the current attempt's lease (`None` when it never took the lease).
    pub fencing_token: Option<FencingToken>,
    /// How the current attempt ended.
    pub outcome: RunOutcome,
    /// The current attempt's number: 1 for the first (always 1 at most once).
    pub attempt: u32,
    /// When the next attempt is due, by the Redis server's clock: set while a retry of this run
    /// is pending (at-least-once delivery, [`crate::Delivery`]); `None` when the run is final
    /// or its current attempt runs.
    pub next_retry: Option<SystemTime>,
    /// The attempts before the current one, oldest first (at-least-once delivery).
    pub earlier_attempts: Vec<AttemptRecord>,
    /// The current attempt ended while its lease was suspect: a renewal had gone
    /// unacknowledged for a renewal interval (Redis slow, paused or cut off; see
    /// [`dlock_core::LeaseState::Suspect`]). The lease still stood by this replica's clock, but
    /// the run's effects deserve a look: check them against its fencing token.
    pub finished_while_suspect: bool,
}

/// An earlier attempt of a run (at-least-once delivery): who made it, when, how it ended.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AttemptRecord {
    /// Its number, from 1.
    pub attempt: u32,
    /// The replica that claimed it.
    pub replica: String,
    /// Host name of that replica.
    pub host: String,
    /// Process id of that replica.
    pub pid: u32,
    /// When it was claimed, by the Redis server's clock.
    pub started_at: SystemTime,
    /// When it ended (or was found abandoned), by the Redis server's clock.
    pub ended_at: Option<SystemTime>,
    /// The fencing token of its lease, if it took the lease.
    pub fencing_token: Option<FencingToken>,
    /// How it ended: failed, cancelled or abandoned.
    pub outcome: RunOutcome,
}

/// Why a ledger record could not be read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum RecordError {
    /// Written in another format version (a newer dlock): named, never guessed at.
    Version(String),
    /// Not a record dlock writes.
    Malformed,
}

/// The fields of a record of this version, or why not.
fn versioned(record: &str) -> Result<std::str::Split<'_, char>, RecordError> {
    let mut fields = record.split('\x1f');
    match fields.next() {
        Some(RECORD_VERSION) => Ok(fields),
        Some(v) if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) => {
            Err(RecordError::Version(v.to_owned()))
        }
        _ => Err(RecordError::Malformed),
    }
}

fn fence_of(field: &str) -> Option<FencingToken> {
    field.parse().ok().map(FencingToken::new)
}

impl RunRecord {
    /// Parses the `<id>:claim`, `<id>:end` and `<id>:attempts` fields written by the scripts.
    pub(crate) fn parse(
        occurrence_ms: i64,
        claim: &str,
        end: Option<&str>,
        attempts: Option<&str>,
    ) -> Result<Self, RecordError> {
        let bad = || RecordError::Malformed;
        let mut c = versioned(claim)?;
        let replica = c.next().ok_or_else(bad)?.to_owned();
        let host = c.next().ok_or_else(bad)?.to_owned();
        let pid = c.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
        let started_ms: u64 = c.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
        let manual = c.next().ok_or_else(bad)? == "1";
        let _token = c.next().ok_or_else(bad)?;
        let attempt = c.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
        let (outcome, ended_at, fencing_token, next_retry, suspect) = match end {
            None => (RunOutcome::Running, None, None, None, false),
            Some(end) => {
                let mut e = versioned(end)?;
                let code = e.next().ok_or_else(bad)?;
                let ended = e.next().ok_or_else(bad)?;
                let fence = e.next().ok_or_else(bad)?;
                let next = e.next().ok_or_else(bad)?;
                let text = e.next().ok_or_else(bad)?;
                let flags = e.next().unwrap_or_default();
                if e.next().is_some() {
                    return Err(bad());
                }
                (
                    RunOutcome::decode(code, text).ok_or_else(bad)?,
                    ended.parse().ok().map(millis),
                    fence_of(fence),
                    next.parse().ok().map(millis),
                    flags.contains('s'),
                )
            }
        };
        let earlier_attempts = match attempts {
            None => Vec::new(),
            Some(list) => list
                .split('\x1e')
                .map(AttemptRecord::parse)
                .collect::<Result<_, _>>()?,
        };
        let occurrence = Utc
            .timestamp_millis_opt(occurrence_ms)
            .single()
            .ok_or_else(bad)?;
        Ok(Self {
            occurrence,
            manual,
            replica,
            host,
            pid,
            started_at: millis(started_ms),
            ended_at,
            fencing_token,
            outcome,
            attempt,
            next_retry,
            earlier_attempts,
            finished_while_suspect: suspect,
        })
    }

    /// How late the run started after its nominal occurrence (server clock vs. the schedule):
    /// its first attempt's claim.
    pub fn start_delay(&self) -> Option<Duration> {
        let occurrence = UNIX_EPOCH
            + Duration::from_millis(u64::try_from(self.occurrence.timestamp_millis()).ok()?);
        let first = self
            .earlier_attempts
            .first()
            .map_or(self.started_at, |a| a.started_at);
        first.duration_since(occurrence).ok()
    }
}

impl AttemptRecord {
    fn parse(entry: &str) -> Result<Self, RecordError> {
        let bad = || RecordError::Malformed;
        let mut a = versioned(entry)?;
        let attempt = a.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
        let replica = a.next().ok_or_else(bad)?.to_owned();
        let host = a.next().ok_or_else(bad)?.to_owned();
        let pid = a.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
        let started_ms: u64 = a.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
        let ended = a.next().ok_or_else(bad)?;
        let code = a.next().ok_or_else(bad)?;
        let fence = a.next().ok_or_else(bad)?;
        let text = a.collect::<Vec<_>>().join(" ");
        Ok(Self {
            attempt,
            replica,
            host,
            pid,
            started_at: millis(started_ms),
            ended_at: ended.parse().ok().map(millis),
            fencing_token: fence_of(fence),
            outcome: RunOutcome::decode(code, &text).ok_or_else(bad)?,
        })
    }
}

/// What `finish.lua` did with an attempt's record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Recorded {
    /// Recorded (running, or a final outcome).
    Done,
    /// Recorded, and the run's next attempt is due then (server ms).
    Retry(i64),
    /// The run's current attempt is another one: this attempt was superseded.
    Superseded,
}

/// How an attempt's outcome is recorded: by which attempt, and whether a failure is retried.
pub(crate) struct Recording<'a> {
    pub(crate) run_id: &'a str,
    /// The attempt's token.
    pub(crate) token: &'a str,
    pub(crate) fence: Option<u64>,
    /// The job's delivery: under at least once a failed or cancelled attempt is retried.
    pub(crate) delivery: crate::job::Delivery,
    /// The wake channel and message, and the publish command (announces a retry).
    pub(crate) wake: (&'a str, &'a str, &'static str),
    /// The attempt's lease was suspect as it ended (kept with an end, not with "running").
    pub(crate) suspect: bool,
}

/// Records that an attempt of a run is running (with its fencing token), or how it ended, in
/// the ledger (`finish.lua`). Only the attempt that holds the run's claim can.
pub(crate) async fn record(
    client: &Client,
    keys: &JobKeys,
    how: &Recording<'_>,
    outcome: &RunOutcome,
) -> Result<Recorded, Error> {
    let (code, text) = outcome.encode();
    let retried = matches!(outcome, RunOutcome::Failed(_) | RunOutcome::Cancelled(_))
        && how.delivery.retries();
    let mut invocation = scripts::FINISH.prepare_invoke();
    invocation
        .key(&keys.ledger)
        .key(&keys.retries)
        .arg(how.run_id)
        .arg(how.token)
        .arg(code)
        .arg(how.fence.map(|f| f.to_string()).unwrap_or_default())
        .arg(text)
        .arg(if retried {
            crate::scripts::millis(how.delivery.backoff()).to_string()
        } else {
            String::new()
        })
        .arg(how.delivery.attempts())
        .arg(how.wake.0)
        .arg(how.wake.1)
        .arg(how.wake.2)
        .arg(if how.suspect { "s" } else { "" });
    let reply: Vec<i64> = ext::invoke(client, &invocation, "record a run").await?;
    Ok(match reply.as_slice() {
        [1, ..] => Recorded::Done,
        [2, due, ..] => Recorded::Retry(*due),
        _ => Recorded::Superseded,
    })
}

/// Reads the ledger of `job` and works out which unfinished runs are still going; `now` is the
/// caller's estimate of the server's time (the ledger's times are the server's; reading
/// `TIME` would need a right the README's read-only operator user does not have).
pub(crate) async fn history(
    client: &Client,
    job: &str,
    now: DateTime<Utc>,
) -> Result<Vec<RunRecord>, Error> {
    let keys = JobKeys::new(client, job)?;
    let mut pipe = redis::pipe();
    pipe.cmd("ZRANGE")
        .arg(&keys.runs)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .cmd("HGETALL")
        .arg(&keys.ledger)
        .cmd("ZRANGE")
        .arg(&keys.retries)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES");
    type Ledger = (
        Vec<(String, i64)>,
        std::collections::HashMap<String, String>,
        Vec<(String, f64)>,
    );
    let (runs, ledger, retries): Ledger =
        ext::query_pipe(client, &pipe, &format!("read the ledger of `{job}`")).await?;
    let now_ms = now.timestamp_millis();
    #[allow(clippy::cast_possible_truncation)]
    let retries: std::collections::HashMap<String, i64> = retries
        .into_iter()
        .map(|(id, deadline)| (id, deadline as i64))
        .collect();
    let mut records = Vec::with_capacity(runs.len());
    for (id, occurrence_ms) in runs {
        let Some(claim) = ledger.get(&format!("{id}:claim")) else {
            continue;
        };
        let end = ledger.get(&format!("{id}:end")).map(String::as_str);
        let attempts = ledger.get(&format!("{id}:attempts")).map(String::as_str);
        let parse = |end: Option<&str>, attempts: Option<&str>| {
            RunRecord::parse(occurrence_ms, claim, end, attempts).map_err(|e| match e {
                RecordError::Version(v) => Error::protocol(format!(
                    "the ledger of job `{job}` holds run records of format version {v}, written by \
                     a newer dlock; this one reads version {RECORD_VERSION}: upgrade this tool"
                )),
                RecordError::Malformed => Error::protocol(format!(
                    "the ledger of job `{job}` holds a record dlock did not write: {claim:?}"
                )),
            })
        };
        let mut record = parse(end, attempts)?;
        if record.outcome == RunOutcome::Running {
            let going = match retries.get(&id) {
                // At least once: the attempt's lease in the ledger says.
                Some(deadline) => *deadline >= now_ms,
                None => still_running(client, &keys, &id, &record).await?,
            };
            if !going {
                // A run records its end, then releases its lock: one that ended between the
                // read of the ledger above and the look at its lock has its end recorded now.
                // Only a run still recorded as running is abandoned.
                let mut cmd = redis::cmd("HMGET");
                cmd.arg(&keys.ledger)
                    .arg(format!("{id}:end"))
                    .arg(format!("{id}:attempts"));
                let (ended, attempts): (Option<String>, Option<String>) =
                    ext::query(client, &cmd, "read the run ledger").await?;
                if let Some(ended) = ended {
                    let now_recorded = parse(Some(&ended), attempts.as_deref())?;
                    if now_recorded.outcome != RunOutcome::Running {
                        record = now_recorded;
                    }
                }
                if record.outcome == RunOutcome::Running {
                    record.outcome = RunOutcome::Abandoned;
                }
            }
        }
        records.push(record);
    }
    Ok(records)
}

/// A run recorded as running is still going if its lock is held under its fencing token (or,
/// before it took the lock, if it was claimed a moment ago). A lock taken on the uncontended
/// fast path keeps its fence only with the holder (`MutexOptions::fenced`: inspect shows none);
/// then the holder's host and pid stand in for it: the replica process that recorded the run
/// holds the run's lock, and a process that died and came back has another pid.
async fn still_running(
    client: &Client,
    keys: &JobKeys,
    id: &str,
    record: &RunRecord,
) -> Result<bool, Error> {
    let Some(fence) = record.fencing_token else {
        let age = SystemTime::now()
            .duration_since(record.started_at)
            .unwrap_or_default();
        return Ok(age < Duration::from_secs(5));
    };
    for name in [keys.lock_name.clone(), format!("{}@{id}", keys.lock_name)] {
        let holder = client
            .inspect(&name)
            .await
            .map_err(|e| Error::core("inspect the run's lock", e))?;
        if let Some(holder) = holder {
            let same = match holder.fencing_token {
                Some(held) => held == fence,
                None => holder.host == record.host && holder.pid == record.pid,
            };
            if same {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// The latest scheduled (not manual) occurrence in the ledger of the job with `keys`.
pub(crate) async fn latest_scheduled(
    client: &Client,
    keys: &JobKeys,
) -> Result<Option<DateTime<Utc>>, Error> {
    let mut cmd = redis::cmd("ZRANGE");
    cmd.arg(&keys.runs)
        .arg("+inf")
        .arg("-inf")
        .arg("BYSCORE")
        .arg("REV")
        .arg("LIMIT")
        .arg(0)
        .arg(20)
        .arg("WITHSCORES");
    let latest: Vec<(String, i64)> = ext::query(client, &cmd, "read the run ledger").await?;
    Ok(latest
        .into_iter()
        .find(|(id, _)| !id.starts_with('m'))
        .and_then(|(_, ms)| Utc.timestamp_millis_opt(ms).single()))
}

fn millis(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn keys_share_the_run_locks_hash_tag() {
        let client = Client::open("redis://127.0.0.1:1/").unwrap();
        let keys = JobKeys::new(&client, "lottery").unwrap();
        assert_eq!(keys.ledger, "dlock:{sched:lottery}:ledger");
        // On a cluster the wake channel is sharded: it must hash to the slot of the keys of
        // the script that publishes on it (request.lua).
        assert_eq!(keys.wake, "dlock:{sched:lottery}:wake");
        let slot = |key: &str| redis::cluster_routing::Slot::for_key(key);
        for key in [&keys.requests, &keys.claims, &keys.ledger] {
            assert_eq!(slot(&keys.wake), slot(key), "{key}");
        }
        assert_eq!(
            ext::base_key(&client, &keys.lock_name).unwrap(),
            "dlock:{sched:lottery}"
        );
    }

    #[test]
    fn every_outcome_reads_back_from_its_code() {
        for outcome in [
            RunOutcome::Running,
            RunOutcome::Succeeded,
            RunOutcome::Failed("boom".into()),
            RunOutcome::Cancelled("lease lost".into()),
            RunOutcome::SkippedOverlap,
            RunOutcome::SkippedGroup,
            RunOutcome::Abandoned,
        ] {
            let (code, text) = outcome.encode();
            assert_eq!(RunOutcome::decode(code, &text), Some(outcome));
        }
        assert_eq!(RunOutcome::SkippedGroup.to_string(), "skipped_group");
    }

    #[test]
    fn records_round_trip_through_the_script_format() {
        let claim = "1\x1freplica-a\x1fweb-1\x1f4242\x1f1700000000500\x1f0\x1ftok.1\x1f2";
        let running = RunRecord::parse(1_700_000_000_000, claim, None, None).unwrap();
        assert_eq!(running.outcome, RunOutcome::Running);
        assert_eq!(running.attempt, 2);
        assert_eq!(running.start_delay(), Some(Duration::from_millis(500)));
        let (code, text) = RunOutcome::Failed("boom\x1fbang\x1ebong".into()).encode();
        let end = format!("1\x1f{code}\x1f1700000001000\x1f17\x1f1700000002000\x1f{text}");
        let earlier = "1\x1f1\x1freplica-b\x1fweb-2\x1f7\x1f1700000000100\x1f1700000000400\x1fabandoned\x1f16\x1fkilled";
        let failed = RunRecord::parse(1_700_000_000_000, claim, Some(&end), Some(earlier)).unwrap();
        assert_eq!(failed.outcome, RunOutcome::Failed("boom bang bong".into()));
        assert_eq!(failed.fencing_token, Some(FencingToken::new(17)));
        assert_eq!(failed.next_retry, Some(millis(1_700_000_002_000)));
        assert_eq!(failed.replica, "replica-a");
        assert_eq!(failed.pid, 4242);
        assert!(!failed.manual);
        let first = &failed.earlier_attempts[0];
        assert_eq!((first.attempt, first.replica.as_str()), (1, "replica-b"));
        assert_eq!(first.outcome, RunOutcome::Abandoned);
        assert_eq!(first.fencing_token, Some(FencingToken::new(16)));
        // The run started with its first attempt.
        assert_eq!(failed.start_delay(), Some(Duration::from_millis(100)));
        assert!(!failed.finished_while_suspect);
        // Flags follow the text: "s", the lease was suspect as the attempt ended.
        let suspect = "1\x1fsucceeded\x1f1700000001000\x1f17\x1f\x1f\x1fs";
        let record = RunRecord::parse(0, claim, Some(suspect), None).unwrap();
        assert_eq!(record.outcome, RunOutcome::Succeeded);
        assert!(record.finished_while_suspect);
        assert_eq!(
            RunRecord::parse(0, claim, Some(&format!("{suspect}\x1fmore")), None),
            Err(RecordError::Malformed),
            "a field after the flags is not this version's"
        );
        assert_eq!(
            RunRecord::parse(0, "garbage", None, None),
            Err(RecordError::Malformed)
        );
        let newer = claim.replacen('1', "2", 1);
        assert_eq!(
            RunRecord::parse(0, &newer, None, None),
            Err(RecordError::Version("2".into()))
        );
    }
}
