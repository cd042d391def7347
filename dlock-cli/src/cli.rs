//! The command line, as `clap` parses it: global options (where Redis is, the key prefix, the
//! timeout, `--json`) and one subcommand per question an operator asks.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Inspect and operate dlock's locks and scheduler jobs in Redis.
///
/// Exit codes: 0 done; 1 error (Redis unreachable or timed out, an error reply, data dlock did
/// not write); 2 usage (bad arguments, bad lock or job name, bad URL, `unlock` without `--yes`
/// where nobody can confirm, a schedule `schedule add` refuses, `run-now once:<handler>`); 3
/// nothing found (no lock held, no job, no pending one-off job, no run-time schedule, no run, a
/// job that is not known to `pause`/`resume`/`run-now` without `--force`); 4 aborted (the
/// confirmation was not given, or the holder changed meanwhile). A refused user name or
/// password, and a TLS certificate problem, are errors (1), each with its own message.
///
/// Environment: `DLOCK_REDIS_URL` stands in for `--url`; `DLOCK_REDIS_PASSWORD` is the password
/// for URLs that carry none (for `--sentinel`: the data nodes' password), which keeps it out of
/// the URL, the shell history and the process list. Without either, when Redis wants a
/// password and stdin is a terminal, it is asked for (not echoed).
#[derive(Debug, Parser)]
#[command(name = "dlock", version, propagate_version = true)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) global: Global,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Options every command takes.
#[derive(Debug, Args)]
pub(crate) struct Global {
    /// Redis URL, `redis://[user][:password@]host[:port][/db]`; repeat it to give several seed
    /// nodes of a cluster. Passwords are never printed.
    #[arg(
        long,
        global = true,
        env = "DLOCK_REDIS_URL",
        hide_env_values = true,
        value_name = "URL"
    )]
    pub(crate) url: Vec<String>,
    /// Treat the URLs as seed nodes of a Redis Cluster (detected by itself when one URL is
    /// given; several URLs always mean a cluster).
    #[arg(long, global = true)]
    pub(crate) cluster: bool,
    /// The URLs are Redis Sentinels, and NAME is the master they monitor (`sentinel monitor
    /// NAME …`): the master they name is used, and followed through a failover. The data
    /// nodes' password comes from `DLOCK_REDIS_PASSWORD`; the sentinels' own from their URLs.
    #[arg(long, global = true, value_name = "NAME", conflicts_with = "cluster")]
    pub(crate) sentinel: Option<String>,
    /// For `rediss://` URLs: trust the CA in this PEM file (the one that signed the server's
    /// certificate) instead of the system's roots. The URL's host must be a name or address
    /// the certificate names.
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) tls_ca: Option<PathBuf>,
    /// For `rediss://` URLs: present this client certificate (PEM), for a server that requires
    /// one (`tls-auth-clients yes`); give its key with `--tls-key`.
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) tls_cert: Option<PathBuf>,
    /// The private key (PEM) of `--tls-cert`.
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) tls_key: Option<PathBuf>,
    /// For `rediss://` URLs: accept any server certificate, unverified. Development only:
    /// anyone on the path can read and forge the traffic, passwords included.
    #[arg(long, global = true)]
    pub(crate) tls_insecure: bool,
    /// Key prefix of the locks and jobs (the application's `ClientBuilder::key_prefix`).
    #[arg(long, global = true, default_value = dlock_core::DEFAULT_KEY_PREFIX, value_name = "PREFIX")]
    pub(crate) prefix: String,
    /// Bound on connecting and on each Redis request, e.g. `500ms`, `2s`.
    #[arg(long, global = true, default_value = "2s", value_parser = parse_duration, value_name = "DURATION")]
    pub(crate) timeout: Duration,
    /// Print JSON (stable field names, documented in the README) instead of a table.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// Show times in UTC instead of each job's time zone (`jobs`, `runs`). JSON times are
    /// always UTC; one-off jobs, which have no zone, are shown in UTC.
    #[arg(long, global = true)]
    pub(crate) utc: bool,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// List the locks held now (mutexes, semaphores, read-write locks), found with SCAN on the
    /// server or on every master of a cluster.
    Locks {
        /// Only locks whose name matches this Redis glob (`*`, `?`, `[abc]`), e.g. `order:*`.
        pattern: Option<String>,
    },
    /// Show who holds one lock.
    Inspect {
        /// The lock's name.
        name: String,
        /// Which kind of lock; by default every kind of that name is shown.
        #[arg(long, value_enum, default_value_t = KindArg::Any)]
        kind: KindArg,
    },
    /// Force a mutex open whoever holds it; the oldest waiter, if any, gets it. With `--ask`,
    /// ask its holders to give it back instead (any kind of lock; nothing is forced).
    Unlock {
        /// The lock's name.
        name: String,
        /// Do not ask for confirmation (required when stdin is not a terminal).
        #[arg(long, short = 'y')]
        yes: bool,
        /// Ask the holders to give the lock back instead of forcing it: they decide, and a
        /// watchdog holder learns of it within one renewal interval. Asks the mutex of that
        /// name, or, when none is held, the holders of the semaphore and the read-write lock.
        #[arg(long)]
        ask: bool,
    },
    /// List the scheduler's jobs (schedule, next occurrence, last run, paused, replicas) and
    /// the handlers of one-off jobs (queued, next due, paused, replicas). Times in each job's
    /// zone (`--utc`: in UTC).
    Jobs,
    /// List pending one-off jobs (not started yet, or waiting for a retry), due first: of
    /// every handler the replicas registered, or of HANDLER.
    Once {
        /// Only this handler's (read even when no live replica registered it).
        handler: Option<String>,
        /// How many of each handler's queue to read (at least 1).
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
        limit: u64,
    },
    /// Run-time schedules (`Scheduler::add_schedule`): add, remove, list.
    Schedule {
        #[command(subcommand)]
        action: ScheduleAction,
    },
    /// Show a job's recent runs from the run ledger, times in the job's zone (`--utc`: in
    /// UTC; a handler's one-off jobs `once:<handler>`: in UTC).
    Runs {
        /// The job's name.
        job: String,
        /// How many of the latest runs to show (at least 1).
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
        limit: u64,
    },
    /// Pause a job on every replica (runs going on finish).
    Pause {
        /// The job's name. A job no running replica registered, without runs in the ledger
        /// or a pause record, is refused (exit 3) with close names, unless `--force`.
        job: String,
        /// Act on a job that is not known (one not deployed yet).
        #[arg(long)]
        force: bool,
    },
    /// Resume a paused job on every replica.
    Resume {
        /// The job's name. A job no running replica registered, without runs in the ledger
        /// or a pause record, is refused (exit 3) with close names, unless `--force`.
        job: String,
        /// Act on a job that is not known (one not deployed yet).
        #[arg(long)]
        force: bool,
    },
    /// Ask for one run of a job now, outside its schedule (one replica takes it).
    RunNow {
        /// The job's name. A job no running replica registered, without runs in the ledger
        /// or a pause record, is refused (exit 3) with close names, unless `--force`.
        job: String,
        /// Act on a job that is not known (one not deployed yet).
        #[arg(long)]
        force: bool,
    },
}

/// What `dlock schedule` does.
#[derive(Debug, Subcommand)]
pub(crate) enum ScheduleAction {
    /// Add a run-time schedule (or replace the one of that name): a live replica's handler
    /// runs on a cron schedule, on exactly one replica per occurrence. Checked as the API
    /// checks it (name, cron expression, zone, arguments, a handler some live replica
    /// registered); refused with exit 2 otherwise.
    Add {
        /// The schedule's name: its job's name in `jobs`, `runs`, `pause`.
        name: String,
        /// The handler it runs (registered by the replicas with `SchedulerBuilder::handler`).
        #[arg(long)]
        handler: String,
        /// Its cron expression (5 fields, or 6 with seconds), e.g. `"0 7 * * MON-FRI"`.
        #[arg(long)]
        cron: String,
        /// Its IANA time zone, e.g. `Europe/Berlin`, `UTC`.
        #[arg(long, value_name = "ZONE")]
        tz: String,
        /// The handler's arguments, as JSON (`JobContext::args`).
        #[arg(long, value_name = "JSON")]
        args: Option<String>,
    },
    /// Remove a run-time schedule (exit 3 if there is none); its ledger stays.
    Remove {
        /// The schedule's name.
        name: String,
    },
    /// List the run-time schedules (exit 3 if there is none).
    List,
}

/// The kind of lock `inspect` looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum KindArg {
    /// Every kind of that name.
    Any,
    /// A mutex.
    Mutex,
    /// A semaphore.
    Semaphore,
    /// A read-write lock.
    RwLock,
}

/// `500ms`, `2s`, `1m`: a positive duration.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{s}` is not a duration; write e.g. 500ms, 2s or 1m"))?;
    let d = match unit {
        "ms" => Duration::from_millis(n),
        "s" | "" => Duration::from_secs(n),
        "m" => Duration::from_secs(n.saturating_mul(60)),
        other => return Err(format!("unknown unit `{other}` in `{s}`; use ms, s or m")),
    };
    if d.is_zero() {
        return Err("the timeout must be greater than zero".into());
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("2h").is_err());
        assert!(parse_duration("fast").is_err());
    }

    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
