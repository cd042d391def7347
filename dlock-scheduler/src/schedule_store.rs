//! Run-time schedules as data in Redis: their keys, their records (JSON, format version 1), and
//! the script that adds or removes one and tells every replica (`schedule.lua`). The replicas
//! follow them with [`crate::follow`]; the calls are on [`crate::Scheduler`] (`schedules.rs`).
//!
//! | key | type | what |
//! |---|---|---|
//! | `<prefix>{sched:}:schedules` | hash | schedule name → its record (below) |
//! | `<prefix>{sched:}:schedules:rev` | string | a counter moved by every change: replicas re-read the hash when it moved |
//! | `<prefix>{sched:}:schedules:wake` | channel | a change was made (message: the new counter); sharded pub/sub on a cluster |
//!
//! They share the job registry's hash tag `{sched:}` (no job's keys have it, see
//! [`crate::registry`]), so one script changes the hash and the counter and publishes.
//!
//! A record, format version 1: `{"v":1,"handler":"…","cron":"…","tz":"…","args":<JSON or
//! null>,"added_ms":<ms>}`. A record of a newer version is refused by name by the readers of
//! this version (the replicas do not run it; the listing says so), never rewritten.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dlock_core::{Client, ext};
use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::scripts;

/// The record format this version writes and reads.
const FORMAT: u32 = 1;

/// The keys of the run-time schedules under a client's prefix.
#[derive(Clone, Debug)]
pub(crate) struct ScheduleKeys {
    pub(crate) hash: String,
    pub(crate) rev: String,
    pub(crate) wake: String,
}

impl ScheduleKeys {
    pub(crate) fn new(client: &Client) -> Result<Self, Error> {
        let base = ext::base_key(client, crate::ledger::REGISTRY_TAG)
            .map_err(|e| Error::refused_by_core("the run-time schedules' keys", e))?;
        Ok(Self {
            hash: format!("{base}:schedules"),
            rev: format!("{base}:schedules:rev"),
            wake: format!("{base}:schedules:wake"),
        })
    }
}

/// A run-time schedule, as stored in Redis ([`crate::Scheduler::add_schedule`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RuntimeSchedule {
    /// Its name: the job's name in the ledger, the registry and the control calls.
    pub name: String,
    /// The registered handler it runs ([`crate::SchedulerBuilder::handler`]).
    pub handler: String,
    /// Its cron expression.
    pub cron: String,
    /// Its IANA time zone.
    pub time_zone: String,
    /// The JSON arguments handed to the handler ([`crate::JobContext::args`]); `None` for
    /// none.
    pub args: Option<String>,
    /// When it was added (or last changed), by the adding replica's estimate of the server's
    /// clock.
    pub added_at: SystemTime,
}

impl RuntimeSchedule {
    /// Whether `other` runs the same thing (handler, schedule and arguments): a schedule added
    /// again unchanged is not restarted.
    pub(crate) fn same_work(&self, other: &Self) -> bool {
        (&self.handler, &self.cron, &self.time_zone, &self.args)
            == (&other.handler, &other.cron, &other.time_zone, &other.args)
    }
}

/// A run-time schedule a replica does not run, as it says in the job registry
/// ([`crate::RegisteredReplica::unrunnable`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct UnrunnableSchedule {
    /// The schedule's name.
    pub name: String,
    /// The handler it names.
    pub handler: String,
    /// Why the replica does not run it: the handler is not registered on it, a job in its
    /// code has the same name, its cron expression or options are refused by this version, or
    /// its record is of a newer format.
    pub reason: String,
}

/// The stored form of a record.
#[derive(Serialize, Deserialize)]
struct Record {
    v: u32,
    handler: String,
    cron: String,
    tz: String,
    args: Option<Box<serde_json::value::RawValue>>,
    added_ms: i64,
}

/// Just the version of a record, read before the rest.
#[derive(Deserialize)]
struct Version {
    v: u32,
}

/// The record of `schedule`, format version 1.
pub(crate) fn encode(schedule: &RuntimeSchedule) -> Result<String, Error> {
    let args = schedule
        .args
        .as_deref()
        .map(|json| serde_json::value::RawValue::from_string(json.to_owned()))
        .transpose()
        .map_err(|e| {
            Error::invalid_args(format!(
                "schedule `{}`: its arguments are not JSON: {e}",
                schedule.name
            ))
        })?;
    let added_ms = schedule
        .added_at
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let record = Record {
        v: FORMAT,
        handler: schedule.handler.clone(),
        cron: schedule.cron.clone(),
        tz: schedule.time_zone.clone(),
        args,
        added_ms,
    };
    serde_json::to_string(&record)
        .map_err(|e| Error::invalid_args(format!("schedule `{}`: {e}", schedule.name)))
}

/// Why a stored record could not be read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Unreadable {
    /// Written by a newer dlock-scheduler, in this format version.
    Newer(u32),
    /// Not a record this crate wrote; the text says what is wrong.
    Malformed(String),
}

impl Unreadable {
    /// What to tell an operator about schedule `name`.
    pub(crate) fn describe(&self, name: &str) -> String {
        match self {
            Self::Newer(v) => format!(
                "the run-time schedule `{name}` is stored in format version {v}, written by a \
                 newer dlock-scheduler; this one reads version {FORMAT}: upgrade this replica"
            ),
            Self::Malformed(why) => format!(
                "the run-time schedule `{name}` holds a record this dlock-scheduler did not \
                 write ({why})"
            ),
        }
    }
}

/// Reads the record of schedule `name`.
pub(crate) fn decode(name: &str, raw: &str) -> Result<RuntimeSchedule, Unreadable> {
    let version: Version =
        serde_json::from_str(raw).map_err(|e| Unreadable::Malformed(e.to_string()))?;
    if version.v != FORMAT {
        return Err(if version.v > FORMAT {
            Unreadable::Newer(version.v)
        } else {
            Unreadable::Malformed(format!("format version {}", version.v))
        });
    }
    let record: Record =
        serde_json::from_str(raw).map_err(|e| Unreadable::Malformed(e.to_string()))?;
    Ok(RuntimeSchedule {
        name: name.to_owned(),
        handler: record.handler,
        cron: record.cron,
        time_zone: record.tz,
        args: record.args.map(|raw| raw.get().to_owned()),
        added_at: UNIX_EPOCH + Duration::from_millis(u64::try_from(record.added_ms).unwrap_or(0)),
    })
}

/// Every stored schedule by name, each read or refused.
pub(crate) async fn read_all(
    client: &Client,
    keys: &ScheduleKeys,
) -> Result<Vec<(String, Result<RuntimeSchedule, Unreadable>)>, Error> {
    let mut cmd = redis::cmd("HGETALL");
    cmd.arg(&keys.hash);
    let all: Vec<(String, String)> =
        ext::query(client, &cmd, "read the run-time schedules").await?;
    let mut out: Vec<_> = all
        .into_iter()
        .map(|(name, raw)| {
            let read = decode(&name, &raw);
            (name, read)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// The schedules' change counter (0 before the first change).
pub(crate) async fn revision(client: &Client, keys: &ScheduleKeys) -> Result<i64, Error> {
    let mut cmd = redis::cmd("GET");
    cmd.arg(&keys.rev);
    let rev: Option<i64> =
        ext::query(client, &cmd, "read the run-time schedules' revision").await?;
    Ok(rev.unwrap_or(0))
}

/// What `schedule.lua` did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Changed {
    /// Whether the stored record changed (and the replicas were told).
    pub(crate) changed: bool,
    /// Whether a schedule of that name was there before.
    pub(crate) existed: bool,
}

/// Stores `record` as schedule `name` (`None`: removes it), moves the counter and wakes the
/// replicas, in one script call.
pub(crate) async fn put(
    client: &Client,
    keys: &ScheduleKeys,
    name: &str,
    record: Option<&str>,
) -> Result<Changed, Error> {
    let mut invocation = scripts::SCHEDULE.prepare_invoke();
    invocation
        .key(&keys.hash)
        .key(&keys.rev)
        .arg(name)
        .arg(record.unwrap_or(""))
        .arg(&keys.wake)
        .arg(ext::publish_command(client));
    let what = if record.is_some() {
        "add a run-time schedule"
    } else {
        "remove a run-time schedule"
    };
    let (changed, existed): (i64, i64) = ext::invoke(client, &invocation, what).await?;
    Ok(Changed {
        changed: changed == 1,
        existed: existed == 1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(args: Option<&str>) -> RuntimeSchedule {
        RuntimeSchedule {
            name: "report:acme".into(),
            handler: "send_report".into(),
            cron: "0 7 * * *".into(),
            time_zone: "Europe/Berlin".into(),
            args: args.map(str::to_owned),
            added_at: UNIX_EPOCH + Duration::from_millis(1_700_000_000_123),
        }
    }

    #[test]
    fn records_read_back_as_written() {
        for args in [
            None,
            Some(r#"{"tenant":"acme","to":["a@b.c"]}"#),
            Some("42"),
        ] {
            let written = schedule(args);
            let raw = encode(&written).unwrap();
            assert!(raw.starts_with(r#"{"v":1,"#), "{raw}");
            assert_eq!(decode("report:acme", &raw).unwrap(), written);
        }
    }

    #[test]
    fn arguments_that_are_not_json_are_refused() {
        let err = encode(&schedule(Some("{tenant: acme"))).unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::InvalidArgs);
        assert!(err.to_string().contains("not JSON"), "{err}");
    }

    #[test]
    fn newer_versions_are_refused_by_name_and_junk_as_foreign() {
        let newer = r#"{"v":2,"handler":"h","something":"new"}"#;
        let refused = decode("n", newer).unwrap_err();
        assert_eq!(refused, Unreadable::Newer(2));
        assert!(refused.describe("n").contains("format version 2"));
        assert!(matches!(
            decode("n", "not json"),
            Err(Unreadable::Malformed(_))
        ));
        assert!(matches!(
            decode("n", r#"{"v":1,"handler":"h"}"#),
            Err(Unreadable::Malformed(_))
        ));
    }
}
