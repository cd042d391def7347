//! The run ledger: the last N runs of each job, in Redis — which replica ran which occurrence,
//! when (server time), and how it ended — how it is written and read, and the keys of a job.
//!
//! A job's keys all share the hash tag of its run lock, `{sched:<job>}`, so the scheduler's
//! scripts touch one Redis Cluster slot. They are built on dlock-core's base key of the lock
//! name `sched:<job>` (`dlock_core::__private::base_key`: the client's prefix and the hash tag),
//! so they follow core's layout instead of copying it:
//!
//! | key | type | what |
//! |---|---|---|
//! | `<prefix>{sched:<job>}` (+ `:queue`) | dlock mutex | held while a run is going |
//! | `<prefix>{sched:<job>}:claims` | zset | claimed run ids, by claim time; kept for the retention |
//! | `<prefix>{sched:<job>}:runs` | zset | run ids of the ledger, by occurrence |
//! | `<prefix>{sched:<job>}:ledger` | hash | `<id>:claim` and `<id>:end` records |
//! | `<prefix>{sched:<job>}:paused` | string | present while paused |
//! | `<prefix>{sched:<job>}:requests` | list | pending `run_now` requests |
//! | `<prefix>{sched:<job>}:replicas` | zset | live replicas of the job, by liveness deadline |
//! | `<prefix>{sched:<job>}:turn` | string | scheduled claims so far: whose turn the next one is |
//! | `<prefix>{sched:<job>}:wake` | channel | `run_now` wake-ups (message: the job's name); sharded pub/sub on a cluster |

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chrono::{DateTime, TimeZone, Utc};
use dlock_core::{__private, Client, FencingToken};

use crate::error::Error;
use crate::scripts;

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
        let base = __private::base_key(client, &lock_name)?;
        Ok(Self {
            claims: format!("{base}:claims"),
            runs: format!("{base}:runs"),
            ledger: format!("{base}:ledger"),
            paused: format!("{base}:paused"),
            requests: format!("{base}:requests"),
            replicas: format!("{base}:replicas"),
            turn: format!("{base}:turn"),
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
    /// The replica that claimed the run disappeared (crashed, killed) before recording an end:
    /// its lease ran out. At most once: the occurrence is not run again.
    Abandoned,
}

impl RunOutcome {
    /// The outcome's code, as stored (and as the `outcome` metric label).
    pub(crate) fn code(&self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed(_) => "failed",
            Self::Cancelled(_) => "cancelled",
            Self::SkippedOverlap => "skipped_overlap",
            Self::Abandoned => "abandoned",
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
        // The record separator may not appear in the text.
        (self.code(), self.text().replace('\x1f', " "))
    }

    fn decode(code: &str, text: &str) -> Option<Self> {
        Some(match code {
            "running" => Self::Running,
            "succeeded" => Self::Succeeded,
            "failed" => Self::Failed(text.to_owned()),
            "cancelled" => Self::Cancelled(text.to_owned()),
            "skipped_overlap" => Self::SkippedOverlap,
            "abandoned" => Self::Abandoned,
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

/// One run of a job, as recorded in the ledger.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunRecord {
    /// The nominal occurrence (the scheduled instant), or the request time of a manual run.
    pub occurrence: DateTime<Utc>,
    /// Whether it was requested with `run_now` rather than scheduled.
    pub manual: bool,
    /// The replica that claimed it.
    pub replica: String,
    /// Host name of that replica.
    pub host: String,
    /// Process id of that replica.
    pub pid: u32,
    /// When it was claimed, by the Redis server's clock.
    pub started_at: SystemTime,
    /// When it ended, by the Redis server's clock (`None` while running or abandoned).
    pub ended_at: Option<SystemTime>,
    /// The fencing token of the run's lease (`None` when it never took the lease).
    pub fencing_token: Option<FencingToken>,
    /// How it ended.
    pub outcome: RunOutcome,
}

impl RunRecord {
    /// Parses the `<id>:claim` and `<id>:end` fields written by the scripts.
    pub(crate) fn parse(occurrence_ms: i64, claim: &str, end: Option<&str>) -> Option<Self> {
        let mut c = claim.split('\x1f');
        let replica = c.next()?.to_owned();
        let host = c.next()?.to_owned();
        let pid = c.next()?.parse().ok()?;
        let started_ms: u64 = c.next()?.parse().ok()?;
        let manual = c.next()? == "1";
        let (outcome, ended_at, fencing_token) = match end {
            None => (RunOutcome::Running, None, None),
            Some(end) => {
                let mut e = end.splitn(4, '\x1f');
                let code = e.next()?;
                let ended = e.next()?;
                let fence = e.next()?;
                let text = e.next().unwrap_or_default();
                (
                    RunOutcome::decode(code, text)?,
                    ended.parse().ok().map(millis),
                    fence.parse().ok().map(FencingToken::new),
                )
            }
        };
        let occurrence = Utc.timestamp_millis_opt(occurrence_ms).single()?;
        Some(Self {
            occurrence,
            manual,
            replica,
            host,
            pid,
            started_at: millis(started_ms),
            ended_at,
            fencing_token,
            outcome,
        })
    }

    /// How late the run started after its nominal occurrence (server clock vs. the schedule).
    pub fn start_delay(&self) -> Option<Duration> {
        let occurrence = UNIX_EPOCH
            + Duration::from_millis(u64::try_from(self.occurrence.timestamp_millis()).ok()?);
        self.started_at.duration_since(occurrence).ok()
    }
}

/// Records how run `run_id` of the job with `keys` ended — or that it is running, with its
/// fencing token — in the ledger (`finish.lua`). Only the replica that claimed the run can.
pub(crate) async fn record(
    client: &Client,
    keys: &JobKeys,
    run_id: &str,
    replica: &str,
    outcome: &RunOutcome,
    fence: Option<u64>,
) -> Result<(), Error> {
    let (code, text) = outcome.encode();
    let mut invocation = scripts::FINISH.prepare_invoke();
    invocation
        .key(&keys.ledger)
        .arg(run_id)
        .arg(replica)
        .arg(code)
        .arg(fence.map(|f| f.to_string()).unwrap_or_default())
        .arg(text);
    __private::invoke::<i64>(client, &invocation, "record a run").await?;
    Ok(())
}

/// Reads the ledger of `job` and works out which unfinished runs are still going.
pub(crate) async fn history(client: &Client, job: &str) -> Result<Vec<RunRecord>, Error> {
    let keys = JobKeys::new(client, job)?;
    let mut pipe = redis::pipe();
    pipe.cmd("ZRANGE")
        .arg(&keys.runs)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .cmd("HGETALL")
        .arg(&keys.ledger);
    let (runs, ledger): (
        Vec<(String, i64)>,
        std::collections::HashMap<String, String>,
    ) = __private::query_pipe(client, &pipe, &format!("read the ledger of `{job}`")).await?;
    let mut records = Vec::with_capacity(runs.len());
    for (id, occurrence_ms) in runs {
        let Some(claim) = ledger.get(&format!("{id}:claim")) else {
            continue;
        };
        let end = ledger.get(&format!("{id}:end")).map(String::as_str);
        let mut record = RunRecord::parse(occurrence_ms, claim, end).ok_or_else(|| {
            Error::protocol(format!(
                "the ledger of job `{job}` holds a record dlock did not write: {claim:?}"
            ))
        })?;
        if record.outcome == RunOutcome::Running
            && !still_running(client, &keys, &id, &record).await?
        {
            record.outcome = RunOutcome::Abandoned;
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
    let latest: Vec<(String, i64)> = __private::query(client, &cmd, "read the run ledger").await?;
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
            __private::base_key(&client, &keys.lock_name).unwrap(),
            "dlock:{sched:lottery}"
        );
    }

    #[test]
    fn records_round_trip_through_the_script_format() {
        let claim = "replica-a\x1fweb-1\x1f4242\x1f1700000000500\x1f0";
        let running = RunRecord::parse(1_700_000_000_000, claim, None).unwrap();
        assert_eq!(running.outcome, RunOutcome::Running);
        assert_eq!(running.start_delay(), Some(Duration::from_millis(500)));
        let (code, text) = RunOutcome::Failed("boom\x1fbang".into()).encode();
        let end = format!("{code}\x1f1700000001000\x1f17\x1f{text}");
        let failed = RunRecord::parse(1_700_000_000_000, claim, Some(&end)).unwrap();
        assert_eq!(failed.outcome, RunOutcome::Failed("boom bang".into()));
        assert_eq!(failed.fencing_token, Some(FencingToken::new(17)));
        assert_eq!(failed.replica, "replica-a");
        assert_eq!(failed.pid, 4242);
        assert!(!failed.manual);
        assert!(RunRecord::parse(0, "garbage", None).is_none());
    }
}
