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
//! ([`crate::SchedulerBuilder::heartbeat`], default 1 s). The replica counts as live for three
//! heartbeats after each (its *liveness*, as for its jobs' turns), but its entry lives
//! [`lifetime`]: ten heartbeats, and at least [`MIN_LIFETIME`] (30 s). Readers call an entry
//! whose liveness has run out by the server's clock **stalled**
//! ([`RegisteredReplica::stalled`]); it vanishes when its key expires. A scheduler that stops
//! cleanly ([`crate::Scheduler::run_until`]) withdraws its entry when it stops claiming.
//!
//! **Why entries outlive the liveness.** A replica that stops heartbeating may be dead (killed,
//! its host gone) or only stalled: its process paused (SIGSTOP, a VM migration), its runtime
//! blocked by a handler, cut off from Redis. Either way the other replicas take its turns after
//! three heartbeats — but an operator asking "why did that run not happen, and where is
//! replica c?" needs to see it: had it vanished with its liveness, a stalled replica would look
//! exactly like one that was never there. So for a while it is listed as stalled, with its last
//! heartbeat, and a stalled one that comes back is simply live again. The price: a replica that
//! died is listed (as stalled) for up to [`lifetime`] instead of three heartbeats; a stalled
//! entry is not "gone", and tools that count running replicas skip stalled ones. The floor of
//! 30 s keeps a crash visible for a while under short heartbeats (10 × 200 ms would be 2 s).
//!
//! A replica whose process still heartbeats but whose loop for a job stalled (its task
//! panicked, or is stuck behind a blocked thread) says so itself in its entry
//! ([`RegisteredJob::loop_stalled_for`]; see [`crate::liveness`]).
//!
//! Entry format, version 3 (fields separated by `\x1f`, lines by `\n`; none of the fields may
//! contain either: job and handler names, cron expressions and replica ids are checked, host
//! names and reasons are cleaned):
//!
//! ```text
//! 3 <heartbeat, server ms> <ttl ms> <liveness ms>      written by the script
//! <replica id>␟<host>␟<pid>␟<heartbeat interval ms>
//! h␟<handler name>                                     one line per registered handler
//! j␟<job name>␟<cron>␟<time zone>␟<loop>␟<handler>␟<delivery>   one line per job
//! u␟<schedule name>␟<handler>␟<reason>                 one line per run-time schedule it does not run
//! ```
//!
//! `<loop>` is `-` while the job's loop runs, else how long (ms) it had not run at this
//! heartbeat. `<handler>` is `-` for a job in code, else the handler of the run-time schedule
//! the job is. `<delivery>` is `amo` (at most once) or `alo:<attempts>:<backoff ms>`. Readers
//! also take version 2 (job lines `<job name>␟<cron>␟<time zone>␟<loop>`, untagged) and
//! version 1 (the first line `1 <heartbeat> <ttl>`, where the ttl was the liveness, and job
//! lines without `<loop>`), written by earlier builds of this version, and refuse newer
//! versions by name.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dlock_core::{Client, ext};
use redis::Value;

use crate::error::Error;
use crate::job::Delivery;
use crate::replica_state::Shared;
use crate::schedule_store::UnrunnableSchedule;
use crate::scripts::{self, millis};

/// The entry format this version writes; it reads this one and [`OLDEST_FORMAT`].
const FORMAT: u32 = 3;
/// The oldest entry format this version reads.
const OLDEST_FORMAT: u32 = 1;

/// The shortest time an entry lives after its last heartbeat: long enough for an operator to
/// see a replica that stalled or died, whatever the heartbeat.
pub(crate) const MIN_LIFETIME: Duration = Duration::from_secs(30);

/// How long an entry lives after a heartbeat unless renewed: ten heartbeats, at least
/// [`MIN_LIFETIME`]; always longer than the liveness (three heartbeats), so a replica that
/// stops heartbeating shows as stalled before it vanishes.
pub(crate) fn lifetime(heartbeat: Duration) -> Duration {
    heartbeat.saturating_mul(10).max(MIN_LIFETIME)
}

/// The registry's keys under `client`'s prefix: the index and the stem of every entry.
fn index_key(client: &Client) -> Result<String, Error> {
    let base = ext::base_key(client, crate::ledger::REGISTRY_TAG)?;
    Ok(format!("{base}:registry"))
}

/// A scheduler instance as the registry shows it: who it is, when it last told Redis, whether
/// it is stalled, and which jobs it runs.
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
    /// Until when it counts as live (three heartbeats after the last, as for its jobs' turns),
    /// by the Redis server's clock.
    pub live_until: SystemTime,
    /// Whether it is stalled: when the registry was read, the server's clock was past
    /// [`RegisteredReplica::live_until`]. Its process stopped heartbeating — blocked (a
    /// handler holding up a current-thread runtime), paused (SIGSTOP), cut off from Redis, or
    /// dead — and the other replicas take its turns without waiting for it. It is listed until
    /// [`RegisteredReplica::expires_at`] so that it shows as stalled instead of vanishing; if it
    /// comes back, its next heartbeat makes it live again.
    pub stalled: bool,
    /// When its entry expires unless renewed (ten heartbeats after the last, at least 30 s),
    /// by the Redis server's clock: it vanishes from the registry then.
    pub expires_at: SystemTime,
    /// The jobs it runs, in name order: those in its code and the run-time schedules it has
    /// the handler for.
    pub jobs: Vec<RegisteredJob>,
    /// The handlers it has registered for run-time schedules and one-off jobs
    /// ([`crate::SchedulerBuilder::handler`]), in name order (empty from replicas of an
    /// earlier version).
    pub handlers: Vec<String>,
    /// The run-time schedules it does not run, and why (the handler is not registered on it
    /// …), in name order.
    pub unrunnable: Vec<UnrunnableSchedule>,
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
    /// `Some(silence)` when the replica's loop for this job had not run for `silence` at the
    /// replica's last heartbeat (two heartbeats or more): its task panicked, or it is stuck
    /// behind a thread that a handler blocks, while the rest of the replica still heartbeats.
    /// The replica then takes itself out of the job's turns, so the other replicas fire the
    /// job without waiting for it, until the loop runs again. `None` while the loop runs (and
    /// from replicas of an earlier version, which do not report it).
    pub loop_stalled_for: Option<Duration>,
    /// The handler, when the job is a run-time schedule ([`crate::Scheduler::add_schedule`]);
    /// `None` for a job in code.
    pub handler: Option<String>,
    /// Its delivery ([`crate::Delivery`]); `None` from replicas of an earlier version, which
    /// do not report it.
    pub delivery: Option<Delivery>,
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
    let mut handlers: Vec<_> = shared.handlers.keys().collect();
    handlers.sort();
    for handler in handlers {
        out.push_str("\nh\x1f");
        out.push_str(&clean(handler));
    }
    let mut jobs: Vec<_> = shared.jobs.all();
    jobs.sort_by(|a, b| a.job.name.cmp(&b.job.name));
    for entry in jobs {
        let Some(schedule) = &entry.job.schedule else {
            continue;
        };
        out.push_str("\nj\x1f");
        out.push_str(&clean(&entry.job.name));
        out.push('\x1f');
        out.push_str(&clean(schedule.cron()));
        out.push('\x1f');
        out.push_str(schedule.time_zone().name());
        out.push('\x1f');
        if entry.loop_beat.is_stalled() {
            out.push_str(&millis(entry.loop_beat.silence()).to_string());
        } else {
            out.push('-');
        }
        out.push('\x1f');
        out.push_str(entry.job.handler_name.as_deref().map_or("-", |h| h));
        out.push('\x1f');
        match entry.job.delivery {
            Delivery::AtLeastOnce { attempts, backoff } => {
                out.push_str(&format!("alo:{attempts}:{}", millis(backoff)));
            }
            _ => out.push_str("amo"),
        }
    }
    for unrunnable in shared.unrunnable() {
        out.push_str("\nu\x1f");
        out.push_str(&clean(&unrunnable.name));
        out.push('\x1f');
        out.push_str(&clean(&unrunnable.handler));
        out.push('\x1f');
        out.push_str(&clean(&unrunnable.reason));
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

/// Publishes this scheduler's entry for its [`lifetime`] (`live`), or withdraws it (`!live`).
/// A scheduler without jobs or handlers (an admin tool's) publishes nothing.
pub(crate) async fn publish(shared: &Shared, live: bool) -> Result<(), Error> {
    if shared.jobs.is_empty() && shared.handlers.is_empty() {
        return Ok(());
    }
    let client = &shared.client;
    let index = index_key(client)?;
    let entry = format!("{index}:{}", shared.instance);
    let ttl = if live {
        millis(lifetime(shared.heartbeat))
    } else {
        0
    };
    let mut invocation = scripts::REGISTER.prepare_invoke();
    invocation
        .key(&index)
        .key(&entry)
        .arg(&shared.instance)
        .arg(ttl)
        .arg(payload(shared))
        .arg(millis(shared.liveness()));
    ext::invoke::<i64>(client, &invocation, "publish the job registry").await?;
    Ok(())
}

/// The entries of the registry under `client`'s prefix (stalled ones included), by replica id.
///
/// An entry's age is measured by the server without reading its clock: the entry was written
/// with a ttl (its first line) and `PTTL` says how much of it is left, so it was written
/// `ttl - PTTL` ago. (`TIME` would need a right the read-only operator user of the README does
/// not have.)
pub(crate) async fn read(client: &Client) -> Result<Vec<RegisteredReplica>, Error> {
    let index = index_key(client)?;
    let mut cmd = redis::cmd("ZRANGE");
    cmd.arg(&index).arg(0).arg(-1);
    let instances: Vec<String> = ext::query(client, &cmd, "read the job registry's index").await?;
    if instances.is_empty() {
        return Ok(Vec::new());
    }
    // Every entry shares the index's hash tag: one pipeline, one slot.
    let mut pipe = redis::pipe();
    for instance in &instances {
        let key = format!("{index}:{instance}");
        pipe.cmd("GET").arg(&key).cmd("PTTL").arg(&key);
    }
    let replies: Vec<Value> = ext::query_pipe(client, &pipe, "read the job registry").await?;
    let mut replicas = Vec::with_capacity(instances.len());
    for (instance, reply) in instances.iter().zip(replies.chunks(2)) {
        let key = format!("{index}:{instance}");
        let (entry, left) = match reply {
            // An entry that expired since the index was read is gone: skip it.
            [Value::Nil, _] | [_, Value::Int(..0)] => continue,
            [entry, Value::Int(left)] => (
                redis::from_redis_value::<String>(entry.clone())
                    .map_err(|e| Error::protocol(format!("the job registry entry `{key}`: {e}")))?,
                Duration::from_millis(u64::try_from(*left).unwrap_or(0)),
            ),
            other => {
                return Err(Error::protocol(format!(
                    "reading the job registry entry `{key}` gave {other:?}"
                )));
            }
        };
        let replica = parse(&entry, left).map_err(|refused| {
            Error::protocol(match refused {
                Refused::Newer(version) => format!(
                    "the job registry entry `{key}` is in format version {version}, written by \
                     a newer dlock-scheduler; this one reads versions {OLDEST_FORMAT} to \
                     {FORMAT}: upgrade this tool (dlock-cli, or the application showing the \
                     dashboard) to the replicas' version"
                ),
                Refused::Malformed => format!(
                    "the job registry entry `{key}` holds {entry:?}, which this \
                     dlock-scheduler did not write (another program?)"
                ),
            })
        })?;
        replicas.push(replica);
    }
    replicas.sort_by(|a, b| a.id.cmp(&b.id).then(a.pid.cmp(&b.pid)));
    Ok(replicas)
}

/// Why an entry could not be read.
#[derive(Debug, PartialEq, Eq)]
enum Refused {
    /// A format version newer than this one reads.
    Newer(u32),
    /// Not an entry of a version this one reads.
    Malformed,
}

/// Reads an entry of format version 1 to 3 that has `left` of its ttl to live.
fn parse(entry: &str, left: Duration) -> Result<RegisteredReplica, Refused> {
    let mut lines = entry.split('\n');
    let mut head = lines.next().ok_or(Refused::Malformed)?.split(' ');
    let version: u32 = field(head.next())?;
    if version > FORMAT {
        return Err(Refused::Newer(version));
    }
    if version < OLDEST_FORMAT {
        return Err(Refused::Malformed);
    }
    let beat_ms: u64 = field(head.next())?;
    let ttl_ms: u64 = field(head.next())?;
    // Version 1 entries lived as long as the replica's liveness.
    let liveness_ms: u64 = if version == 1 {
        ttl_ms
    } else {
        field(head.next())?
    };
    let mut who = lines.next().ok_or(Refused::Malformed)?.split('\x1f');
    let id = text(who.next())?;
    let host = text(who.next())?;
    let pid = field(who.next())?;
    let every_ms = field(who.next())?;
    let mut jobs = Vec::new();
    let mut handlers = Vec::new();
    let mut unrunnable = Vec::new();
    for line in lines {
        let mut fields = line.split('\x1f');
        if version < 3 {
            jobs.push(job_line(version, fields)?);
            continue;
        }
        match fields.next() {
            Some("h") => handlers.push(text(fields.next())?),
            Some("j") => jobs.push(job_line(version, fields)?),
            Some("u") => unrunnable.push(UnrunnableSchedule {
                name: text(fields.next())?,
                handler: text(fields.next())?,
                reason: text(fields.next())?,
            }),
            _ => return Err(Refused::Malformed),
        }
    }
    let last_heartbeat = UNIX_EPOCH + Duration::from_millis(beat_ms);
    let liveness = Duration::from_millis(liveness_ms);
    let ttl = Duration::from_millis(ttl_ms);
    Ok(RegisteredReplica {
        id,
        host,
        pid,
        heartbeat_every: Duration::from_millis(every_ms),
        last_heartbeat,
        live_until: last_heartbeat + liveness,
        // Written `ttl - left` ago, by the server's clock.
        stalled: ttl.saturating_sub(left) > liveness,
        expires_at: last_heartbeat + ttl,
        jobs,
        handlers,
        unrunnable,
    })
}

/// A job line of an entry of format `version`, after its tag.
fn job_line<'a>(
    version: u32,
    mut fields: impl Iterator<Item = &'a str>,
) -> Result<RegisteredJob, Refused> {
    let (name, cron, time_zone) = (
        text(fields.next())?,
        text(fields.next())?,
        text(fields.next())?,
    );
    let loop_stalled_for = match (version, fields.next()) {
        (1, _) | (_, Some("-")) => None,
        (_, ms) => Some(Duration::from_millis(field(ms)?)),
    };
    let (handler, delivery) = if version < 3 {
        (None, None)
    } else {
        let handler = match fields.next() {
            Some("-") => None,
            other => Some(text(other)?),
        };
        (handler, Some(delivery(fields.next())?))
    };
    Ok(RegisteredJob {
        name,
        cron,
        time_zone,
        loop_stalled_for,
        handler,
        delivery,
    })
}

/// A delivery field: `amo`, or `alo:<attempts>:<backoff ms>`.
fn delivery(raw: Option<&str>) -> Result<Delivery, Refused> {
    match raw {
        Some("amo") => Ok(Delivery::AtMostOnce),
        Some(alo) => {
            let mut parts = alo
                .strip_prefix("alo:")
                .ok_or(Refused::Malformed)?
                .split(':');
            let attempts = field(parts.next())?;
            let backoff = Duration::from_millis(field(parts.next())?);
            Ok(Delivery::at_least_once(attempts, backoff))
        }
        None => Err(Refused::Malformed),
    }
}

/// A number field of an entry.
fn field<T: std::str::FromStr>(raw: Option<&str>) -> Result<T, Refused> {
    raw.and_then(|raw| raw.parse().ok())
        .ok_or(Refused::Malformed)
}

/// A text field of an entry.
fn text(raw: Option<&str>) -> Result<String, Refused> {
    raw.map(str::to_owned).ok_or(Refused::Malformed)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEAT_MS: u64 = 1_700_000_000_000;

    fn at(ms_after_beat: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(BEAT_MS + ms_after_beat)
    }

    /// What `PTTL` says `ms` after the heartbeat of an entry of the test's 30 s ttl.
    fn after(ms: u64) -> Duration {
        Duration::from_millis(30_000 - ms)
    }

    #[test]
    fn entries_parse_in_the_format_the_script_writes() {
        let entry = "3 1700000000000 30000 3000\nweb-1:42\x1fweb-1\x1f42\x1f1000\n\
                     h\x1fsend_report\n\
                     j\x1flottery\x1f0 12 * * *\x1fEurope/Berlin\x1f-\x1f-\x1famo\n\
                     j\x1freport\x1f* * * * * *\x1fUTC\x1f2500\x1fsend_report\x1falo:3:1000\n\
                     u\x1fexport:acme\x1fexport\x1fthe handler `export` is not registered";
        let replica = parse(entry, after(10)).unwrap();
        assert_eq!(replica.id, "web-1:42");
        assert_eq!((replica.host.as_str(), replica.pid), ("web-1", 42));
        assert_eq!(replica.heartbeat_every, Duration::from_secs(1));
        assert_eq!(replica.last_heartbeat, at(0));
        assert_eq!(replica.live_until, at(3000));
        assert_eq!(replica.expires_at, at(30_000));
        assert!(!replica.stalled);
        assert_eq!(replica.jobs.len(), 2);
        assert_eq!(replica.jobs[0].cron, "0 12 * * *");
        assert_eq!(replica.jobs[0].time_zone, "Europe/Berlin");
        assert_eq!(replica.jobs[0].loop_stalled_for, None);
        assert_eq!(
            replica.jobs[1].loop_stalled_for,
            Some(Duration::from_millis(2500))
        );
        assert!(replica.jobs[1].schedule().is_ok());
        assert_eq!(
            (replica.jobs[0].handler.as_deref(), replica.jobs[0].delivery),
            (None, Some(Delivery::AtMostOnce))
        );
        assert_eq!(
            (replica.jobs[1].handler.as_deref(), replica.jobs[1].delivery),
            (
                Some("send_report"),
                Some(Delivery::at_least_once(3, Duration::from_secs(1)))
            )
        );
        assert_eq!(replica.handlers, ["send_report"]);
        assert_eq!(
            replica.unrunnable,
            [UnrunnableSchedule {
                name: "export:acme".into(),
                handler: "export".into(),
                reason: "the handler `export` is not registered".into(),
            }]
        );
        // Version 2 job lines (untagged) are read.
        let v2 = parse(
            "2 1 1 1\nr\x1fh\x1f1\x1f1000\nlottery\x1f0 12 * * *\x1fUTC\x1f-",
            Duration::ZERO,
        )
        .unwrap();
        assert_eq!(
            (v2.jobs[0].name.as_str(), v2.jobs[0].delivery),
            ("lottery", None)
        );
        // No job line is an entry without jobs; other shapes are refused.
        assert!(
            parse("3 1 1 1\nr\x1fh\x1f1\x1f1000", Duration::ZERO)
                .unwrap()
                .jobs
                .is_empty()
        );
        let malformed = [
            "3 1 1 1\nr\x1fh\x1f1\x1f1000\nlottery\x1f* * * * *\x1fUTC\x1f-",
            "3 1 1 1\nr\x1fh\x1f1\x1f1000\nj\x1flottery\x1f* * * * *\x1fUTC\x1f-\x1f-\x1fsometimes",
            "3 1 1 1\nr\x1fh\x1f1\x1f1000\nu\x1fname",
            "2 1 1 1\nr\x1fh\x1f1\x1f1000\nlottery",
            "2 1 1 1\nr\x1fh\x1f1\x1f1000\nlottery\x1f* * * * *\x1fUTC",
            "2 1 1 1\nr\x1fh\x1f1\x1f1000\nlottery\x1f* * * * *\x1fUTC\x1fsoon",
            "2 1 1\nr\x1fh\x1f1\x1f1000",
            "0 1 1\nr\x1fh\x1f1\x1f1000",
            "garbage",
        ];
        for entry in malformed {
            let parsed = parse(entry, Duration::ZERO);
            assert_eq!(parsed, Err(Refused::Malformed), "{entry:?}");
        }
    }

    #[test]
    fn an_entry_past_its_liveness_is_stalled_until_it_expires() {
        let entry = "2 1700000000000 30000 3000\nr\x1fh\x1f1\x1f1000";
        assert!(!parse(entry, after(3000)).unwrap().stalled);
        assert!(parse(entry, after(3001)).unwrap().stalled);
        assert!(parse(entry, after(29_999)).unwrap().stalled);
    }

    #[test]
    fn version_1_entries_are_read_and_newer_ones_refused_by_version() {
        let v1 = "1 1700000000000 3000\nweb-1:42\x1fweb-1\x1f42\x1f1000\n\
                  lottery\x1f0 12 * * *\x1fEurope/Berlin";
        let replica = parse(v1, Duration::from_millis(2990)).unwrap();
        assert!(
            !replica.stalled,
            "format 1 entries expire with their liveness"
        );
        assert_eq!(replica.live_until, at(3000));
        assert_eq!(replica.expires_at, at(3000));
        assert_eq!(replica.jobs[0].loop_stalled_for, None);
        assert_eq!(
            parse("4 1 1 1 1\nr\x1fh\x1f1\x1f1000\nanything", Duration::ZERO),
            Err(Refused::Newer(4))
        );
    }

    #[test]
    fn entries_outlive_the_liveness() {
        assert_eq!(lifetime(Duration::from_secs(1)), MIN_LIFETIME);
        assert_eq!(lifetime(Duration::from_millis(200)), MIN_LIFETIME);
        assert_eq!(lifetime(Duration::from_secs(5)), Duration::from_secs(50));
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
