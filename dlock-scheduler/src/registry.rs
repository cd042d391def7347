//! The job registry: each running scheduler instance publishes, once per heartbeat, which jobs
//! it runs (name, cron expression, time zone) and who it is (replica id, host, pid), so that an
//! operator's tool (`dlock jobs`) can list the jobs and where they run without being one of the
//! replicas. Read with [`crate::Scheduler::registered_replicas`].
//!
//! | key | type | what |
//! |---|---|---|
//! | `<prefix>{sched:}:registry` | zset | instance tokens, by the server time (ms) their entry expires |
//! | `<prefix>{sched:}:registry:<instance>` | string | one instance's entry (below); expires with `PX` |
//!
//! The hash tag `{sched:}` is the base key of the lock name `sched:` (no job has an empty name,
//! so no job's keys share it), built by dlock-core like every job key (see [`crate::ledger`]).
//!
//! An entry is written by `register.lua` in one script call per heartbeat
//! ([`crate::SchedulerBuilder::heartbeat`], default 1 s) and lives three heartbeats unless
//! renewed: a replica that dies (killed, its host gone, cut off from Redis) vanishes from the
//! registry within three heartbeats, by its key's expiry. A scheduler that stops cleanly
//! ([`crate::Scheduler::run_until`]) withdraws its entry when it stops claiming. Entry format,
//! version 1 (fields separated by `\x1f`, lines by `\n`; none of the fields may contain either:
//! job names, cron expressions and replica ids are checked, host names are cleaned):
//!
//! ```text
//! 1 <heartbeat, server ms> <ttl ms>          written by the script
//! <replica id>␟<host>␟<pid>␟<heartbeat interval ms>
//! <job name>␟<cron>␟<time zone>              one line per job
//! ```

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dlock_core::{__private, Client};

use crate::error::Error;
use crate::scripts::{self, millis};
use crate::shared::Shared;

/// The lock name whose base key tags the registry's keys.
const REGISTRY_TAG: &str = "sched:";

/// The registry's keys under `client`'s prefix: the index and the stem of every entry.
fn index_key(client: &Client) -> Result<String, Error> {
    let base = __private::base_key(client, REGISTRY_TAG)?;
    Ok(format!("{base}:registry"))
}

/// A scheduler instance as the registry shows it: who it is, when it last told Redis, and which
/// jobs it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RegisteredReplica {
    /// The replica's id ([`crate::SchedulerBuilder::replica_id`], default `<host>:<pid>`).
    pub id: String,
    /// Host name of the replica's machine.
    pub host: String,
    /// Process id of the replica.
    pub pid: u32,
    /// How often it renews its entry ([`crate::SchedulerBuilder::heartbeat`]).
    pub heartbeat_every: Duration,
    /// Its last heartbeat, by the Redis server's clock.
    pub last_heartbeat: SystemTime,
    /// When its entry expires unless renewed (three heartbeats after the last), by the Redis
    /// server's clock.
    pub expires_at: SystemTime,
    /// The jobs it runs, in name order.
    pub jobs: Vec<RegisteredJob>,
}

/// A job as a replica registered it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RegisteredJob {
    /// The job's name.
    pub name: String,
    /// Its cron expression, as given.
    pub cron: String,
    /// Its IANA time zone.
    pub time_zone: String,
}

impl RegisteredJob {
    /// The job's schedule, to compute its next occurrences.
    ///
    /// # Errors
    /// [`crate::ScheduleError`] when this version of dlock-cron does not accept the expression
    /// or zone a replica registered (a replica of another version, or a newer time zone).
    pub fn schedule(&self) -> Result<crate::Schedule, crate::ScheduleError> {
        crate::Schedule::new(&self.cron, &self.time_zone)
    }
}

/// The replica and job lines of this scheduler's entry (what `register.lua` stores after its
/// own first line).
fn payload(shared: &Shared) -> String {
    let replica = &shared.replica;
    let mut out = format!(
        "{}\x1f{}\x1f{}\x1f{}",
        clean(&replica.id),
        clean(&replica.host),
        replica.pid,
        millis(shared.heartbeat)
    );
    let mut jobs: Vec<_> = shared.jobs.values().map(|entry| &entry.job).collect();
    jobs.sort_by(|a, b| a.name.cmp(&b.name));
    for job in jobs {
        let schedule = &job.schedule;
        out.push('\n');
        out.push_str(&clean(&job.name));
        out.push('\x1f');
        out.push_str(&clean(schedule.cron()));
        out.push('\x1f');
        out.push_str(schedule.time_zone().name());
    }
    out
}

/// `s` with control characters (the entry's separators among them) replaced: names and ids are
/// checked already, so only a host name could have any.
fn clean(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// Publishes this scheduler's entry for three heartbeats (`live`), or withdraws it (`!live`).
/// A scheduler without jobs (an admin tool's) publishes nothing.
pub(crate) async fn publish(shared: &Shared, live: bool) -> Result<(), Error> {
    if shared.jobs.is_empty() {
        return Ok(());
    }
    let client = &shared.client;
    let index = index_key(client)?;
    let entry = format!("{index}:{}", shared.instance);
    let ttl = if live { millis(shared.liveness()) } else { 0 };
    let mut invocation = scripts::REGISTER.prepare_invoke();
    invocation
        .key(&index)
        .key(&entry)
        .arg(&shared.instance)
        .arg(ttl)
        .arg(payload(shared));
    __private::invoke::<i64>(client, &invocation, "publish the job registry").await?;
    Ok(())
}

/// The live entries of the registry under `client`'s prefix, by replica id.
pub(crate) async fn read(client: &Client) -> Result<Vec<RegisteredReplica>, Error> {
    let index = index_key(client)?;
    let mut cmd = redis::cmd("ZRANGE");
    cmd.arg(&index).arg(0).arg(-1);
    let instances: Vec<String> =
        __private::query(client, &cmd, "read the job registry's index").await?;
    if instances.is_empty() {
        return Ok(Vec::new());
    }
    // Every entry shares the index's hash tag: one MGET, one slot.
    let mut cmd = redis::cmd("MGET");
    for instance in &instances {
        cmd.arg(format!("{index}:{instance}"));
    }
    let entries: Vec<Option<String>> =
        __private::query(client, &cmd, "read the job registry").await?;
    let mut replicas = Vec::with_capacity(entries.len());
    // An entry that expired since the index was read is gone: skip it.
    for (instance, entry) in instances.iter().zip(entries) {
        let Some(entry) = entry else { continue };
        let replica = parse(&entry).ok_or_else(|| {
            Error::protocol(format!(
                "the job registry entry `{index}:{instance}` holds {entry:?}, which this \
                 dlock-scheduler did not write (a newer version, or another program)"
            ))
        })?;
        replicas.push(replica);
    }
    replicas.sort_by(|a, b| a.id.cmp(&b.id).then(a.pid.cmp(&b.pid)));
    Ok(replicas)
}

/// Reads an entry of format version 1; `None` for anything else.
fn parse(entry: &str) -> Option<RegisteredReplica> {
    let mut lines = entry.split('\n');
    let mut head = lines.next()?.split(' ');
    if head.next()? != "1" {
        return None;
    }
    let beat_ms: u64 = head.next()?.parse().ok()?;
    let ttl_ms: u64 = head.next()?.parse().ok()?;
    let mut who = lines.next()?.split('\x1f');
    let id = who.next()?.to_owned();
    let host = who.next()?.to_owned();
    let pid = who.next()?.parse().ok()?;
    let every_ms = who.next()?.parse().ok()?;
    let jobs = lines
        .map(|line| {
            let mut fields = line.split('\x1f');
            Some(RegisteredJob {
                name: fields.next()?.to_owned(),
                cron: fields.next()?.to_owned(),
                time_zone: fields.next()?.to_owned(),
            })
        })
        .collect::<Option<Vec<_>>>()?;
    let last_heartbeat = UNIX_EPOCH + Duration::from_millis(beat_ms);
    Some(RegisteredReplica {
        id,
        host,
        pid,
        heartbeat_every: Duration::from_millis(every_ms),
        last_heartbeat,
        expires_at: last_heartbeat + Duration::from_millis(ttl_ms),
        jobs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_parse_in_the_format_the_script_writes() {
        let entry = "1 1700000000000 3000\nweb-1:42\x1fweb-1\x1f42\x1f1000\n\
                     lottery\x1f0 12 * * *\x1fEurope/Berlin\nreport\x1f* * * * * *\x1fUTC";
        let replica = parse(entry).unwrap();
        assert_eq!(replica.id, "web-1:42");
        assert_eq!((replica.host.as_str(), replica.pid), ("web-1", 42));
        assert_eq!(replica.heartbeat_every, Duration::from_secs(1));
        let beat = UNIX_EPOCH + Duration::from_millis(1_700_000_000_000);
        assert_eq!(replica.last_heartbeat, beat);
        assert_eq!(replica.expires_at, beat + Duration::from_secs(3));
        assert_eq!(replica.jobs.len(), 2);
        assert_eq!(replica.jobs[0].cron, "0 12 * * *");
        assert_eq!(replica.jobs[0].time_zone, "Europe/Berlin");
        assert!(replica.jobs[1].schedule().is_ok());
        // No job line is an entry without jobs; other versions and shapes are refused.
        assert!(parse("1 1 1\nr\x1fh\x1f1\x1f1000").unwrap().jobs.is_empty());
        assert!(parse("2 1 1\nr\x1fh\x1f1\x1f1000").is_none());
        assert!(parse("1 1 1\nr\x1fh\x1f1\x1f1000\nlottery").is_none());
        assert!(parse("garbage").is_none());
    }

    #[test]
    fn host_names_cannot_break_the_format() {
        assert_eq!(clean("we\nb\x1f1"), "we?b?1");
    }

    #[tokio::test]
    async fn the_registry_shares_one_slot_apart_from_every_job() {
        let client = Client::open("redis://127.0.0.1:1/").unwrap();
        let index = index_key(&client).unwrap();
        assert_eq!(index, "dlock:{sched:}:registry");
        let slot = |key: &str| redis::cluster_routing::Slot::for_key(key);
        assert_eq!(slot(&index), slot(&format!("{index}:0123456789abcdef")));
    }
}
