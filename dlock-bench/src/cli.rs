//! Command line: the benchmark run (`dlock-bench [--quick] [--only …] [--json PATH]`) and the
//! subcommands the benchmark starts itself as child processes (their names come from `main`'s
//! table; every one takes `--url`, and some `--process`, `--subject`, `--runtime` …).

use std::path::PathBuf;

use crate::rt::{BoxError, Flavour};
use crate::spec::{Counts, SchedDelivery};
use crate::subject::Fence;
use crate::subjects::Kind;

pub(crate) const USAGE: &str = "\
dlock-bench: the WORKLOADS.md benchmark of dlock beside rslock and two raw-Redis floors, on its
own redis-server

usage: dlock-bench [--quick | --scale]
                   [--only w1,w2,w3,w4,w5,mem,w6,w7,w8,cluster,sched,sched-scale,
                           sched-oneoff,guarded,rate,web]
                   [--subjects LIST] [--json PATH]

  --quick          a smoke run with about a tenth of the work (labelled QUICK; not comparable)
  --scale          the scale workloads at their full sizes (make bench-scale; issue #29)
  --only LIST      run only these workloads (w1 = W1, W1 1-CPU and W1 1-CPU multi-thread;
                   w2 = W2 (multi-thread), W2 current-thread and W2-fence; w3 = W3 and its
                   hand-off floor; w4 = read-write lock beside the mutex, read-mostly; w5 =
                   semaphore of 4 permits (w4, w5: dlock only); mem; w6 = N locks held
                   under the watchdog (10,000 at a 3 s lease; --scale: 10k, 50k, 100k at 3 s
                   and 30 s); w7 = deep queue: 1,000 waiters on one lock (10,000 with
                   --scale); w8 = many contended locks (10,000 names, 100,000 with --scale;
                   dlock only); cluster = W2 and W8 on a 3-master cluster beside the single
                   server (dlock only); sched = 3 scheduler replicas on a 1-second cron,
                   then both delivery modes without faults and with replicas killed mid-run;
                   sched-scale = 100, 300 and 1,000 run-time schedules on a 1-second cron
                   across 3 replicas, 10 s each (--quick: 100, 3 s); sched-oneoff =
                   10,000 one-off jobs due at the same instant across 3 replicas
                   (--quick: 1,000); guarded = a guarded write and fenced_set beside a
                   plain SET, 20,000 writes each, one at a time (--quick: 2,000); rate =
                   W9, the rate limiter; web = W10 idempotent POST and W11 rate-limit layer,
                   dlock-tower's layers called in-process, 12,800 requests a subject
                   (--quick: 1,280))
  --subjects LIST  the subjects of W1, W2 and W3, in any order (default
                   floor,floor_nodelay,rslock,dlock,dlock_nodelay,dlock_fenced):
                     floor          raw SET NX + compare-and-delete, redis crate defaults
                                    (RESP2, Nagle on: rslock's connection)
                     floor_nodelay  the same on RESP3 with TCP_NODELAY (dlock's old setting)
                     rslock         rslock (pinned version), blocking acquire bounded to 30 s
                     dlock          dlock, default options (Nagle on)
                     dlock_nodelay  dlock, ClientBuilder::tcp_nodelay(true)
                     dlock_nagle    dlock, ClientBuilder::tcp_nodelay(false) (= the default)
                     dlock_fenced   dlock, MutexOptions::fenced()
  --json PATH      where to write the results as JSON (default target/bench/results.json)

Subcommands started by the benchmark itself: w1-pinned, w3-worker, w4-worker, w5-worker,
handoff-floor, mem, w6 (--locks N --ttl-s S), w7-worker, w8-worker, rate-worker, sched-replica
([--delivery at-most-once|at-least-once] [--faults]), sched-scale-replica (--process N).
For profiling one subject: dlock-bench w1-one --url URL --subject NAME [--quick]
[--runtime current_thread|multi_thread] (W1's runtime; current_thread unless given)
[--fence no|read|warm] (read each holder's fence; warm: with the window's fence counters set
first, as W2-fence, warm counters)";

/// Default path of the JSON results.
const DEFAULT_JSON: &str = "target/bench/results.json";

/// The names `--only` accepts, each selecting one or more stages of the run.
pub(crate) const WORKLOADS: [&str; 16] = [
    "w1",
    "w2",
    "w3",
    "w4",
    "w5",
    "mem",
    "w6",
    "w7",
    "w8",
    "cluster",
    "sched",
    "sched-scale",
    "sched-oneoff",
    "guarded",
    "rate",
    "web",
];

/// What to do.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Command {
    /// The benchmark run, with the `--only` names selected (all by default).
    Run {
        counts: Counts,
        only: Vec<String>,
        subjects: Vec<Kind>,
        json: PathBuf,
    },
    /// A child process of the benchmark (or `w1-one`, for profiling).
    Child(ChildArgs),
    Help,
}

/// A subcommand and its arguments.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ChildArgs {
    pub(crate) name: String,
    pub(crate) url: String,
    pub(crate) counts: Counts,
    /// `--skew-ms` (0 when absent).
    pub(crate) skew_ms: i64,
    /// `--subjects` ([`Kind::DEFAULT`] when absent).
    pub(crate) subjects: Vec<Kind>,
    /// `--runtime` (current-thread when absent).
    pub(crate) runtime: Flavour,
    /// `--fence` (`w1-one`; [`Fence::No`] when absent).
    pub(crate) fence: Fence,
    /// `--delivery` (`sched-replica`: the delivery comparison's job; absent: the default job).
    pub(crate) delivery: Option<SchedDelivery>,
    /// `--faults` (`sched-replica`: announce every run, make some long, for the kill phase).
    pub(crate) faults: bool,
    process: Option<u32>,
    subject: Option<Kind>,
    job: Option<String>,
    /// The one positional argument (`mem guards|waiters`).
    probe: Option<String>,
    /// `--locks N` (W6).
    locks: Option<u64>,
    /// `--ttl-s S` (W6: the lease, whole seconds).
    ttl_s: Option<u64>,
}

impl ChildArgs {
    fn needs(&self, what: &str) -> BoxError {
        format!("{} needs {what}", self.name).into()
    }

    /// `--process N`.
    pub(crate) fn process(&self) -> Result<u32, BoxError> {
        self.process.ok_or_else(|| self.needs("--process"))
    }

    /// `--subject NAME`.
    pub(crate) fn subject(&self) -> Result<Kind, BoxError> {
        self.subject.ok_or_else(|| self.needs("--subject"))
    }

    /// `--job NAME`.
    pub(crate) fn job(&self) -> Result<&str, BoxError> {
        self.job.as_deref().ok_or_else(|| self.needs("--job"))
    }

    /// `--locks N`.
    pub(crate) fn locks(&self) -> Result<u64, BoxError> {
        self.locks.ok_or_else(|| self.needs("--locks"))
    }

    /// `--ttl-s S`.
    pub(crate) fn ttl_s(&self) -> Result<u64, BoxError> {
        self.ttl_s.ok_or_else(|| self.needs("--ttl-s"))
    }

    /// The positional argument.
    pub(crate) fn probe(&self) -> Result<&str, BoxError> {
        self.probe
            .as_deref()
            .ok_or_else(|| self.needs("a probe name"))
    }
}

/// Parses the arguments after the program name; `subcommands` are the child processes' names.
pub(crate) fn parse(args: &[String], subcommands: &[&str]) -> Result<Command, BoxError> {
    let (name, rest) = match args.split_first() {
        Some((sub, rest)) if subcommands.contains(&sub.as_str()) => (Some(sub.clone()), rest),
        _ => (None, args),
    };
    let (mut counts, mut url, mut only, mut json) = (Counts::FULL, None, None, None);
    let mut subjects = Kind::DEFAULT.to_vec();
    let mut child = ChildArgs {
        name: name.clone().unwrap_or_default(),
        url: String::new(),
        counts,
        skew_ms: 0,
        subjects: Vec::new(),
        runtime: Flavour::CurrentThread,
        fence: Fence::No,
        delivery: None,
        faults: false,
        process: None,
        subject: None,
        job: None,
        probe: None,
        locks: None,
        ttl_s: None,
    };
    let mut it = rest.iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--quick" => counts = Counts::QUICK,
            "--scale" => counts = Counts::SCALE,
            "--help" | "-h" => return Ok(Command::Help),
            "--only" => only = Some(parse_only(value()?)?),
            "--subjects" => subjects = Kind::parse_list(value()?)?,
            "--json" => json = Some(PathBuf::from(value()?)),
            "--url" => url = Some(value()?.clone()),
            "--process" => child.process = Some(value()?.parse()?),
            "--skew-ms" => child.skew_ms = value()?.parse()?,
            "--job" => child.job = Some(value()?.clone()),
            "--locks" => child.locks = Some(value()?.parse()?),
            "--ttl-s" => child.ttl_s = Some(value()?.parse()?),
            "--subject" => child.subject = Some(Kind::parse(value()?)?),
            "--runtime" => child.runtime = Flavour::parse(value()?)?,
            "--fence" => child.fence = Fence::parse(value()?)?,
            "--delivery" => child.delivery = Some(SchedDelivery::parse(value()?)?),
            "--faults" => child.faults = true,
            p if name.is_some() && child.probe.is_none() && !p.starts_with('-') => {
                child.probe = Some(p.to_owned());
            }
            other => return Err(format!("unexpected argument `{other}`\n\n{USAGE}").into()),
        }
    }
    if name.is_none() {
        let only = only.unwrap_or_else(|| WORKLOADS.map(str::to_owned).to_vec());
        let json = json.unwrap_or_else(|| PathBuf::from(DEFAULT_JSON));
        return Ok(Command::Run {
            counts,
            only,
            subjects,
            json,
        });
    }
    child.url = url.ok_or_else(|| child.needs("--url"))?;
    child.counts = counts;
    child.subjects = subjects;
    Ok(Command::Child(child))
}

/// The names of `--only`, each one of [`WORKLOADS`].
fn parse_only(list: &str) -> Result<Vec<String>, BoxError> {
    let names: Vec<String> = list
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    let all = WORKLOADS.join(", ");
    if let Some(bad) = names.iter().find(|n| !WORKLOADS.contains(&n.as_str())) {
        return Err(format!("--only: unknown workload `{bad}`; use {all}").into());
    }
    if names.is_empty() {
        return Err(format!("--only needs at least one of {all}").into());
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUBS: &[&str] = &["w3-worker", "mem", "w6", "sched-replica"];

    fn parsed(s: &str) -> Result<Command, BoxError> {
        let args: Vec<String> = s.split_whitespace().map(str::to_owned).collect();
        parse(&args, SUBS)
    }

    fn child(s: &str) -> ChildArgs {
        match parsed(s).unwrap() {
            Command::Child(args) => args,
            other => panic!("not a child: {other:?}"),
        }
    }

    #[test]
    fn parses_the_run_flags() {
        let Command::Run {
            counts,
            only,
            subjects,
            json,
        } = parsed("--quick --only w1,mem").unwrap()
        else {
            panic!("not a run");
        };
        assert!(counts.quick);
        assert_eq!(only, ["w1", "mem"]);
        assert_eq!(subjects, Kind::DEFAULT);
        assert_eq!(json, PathBuf::from(DEFAULT_JSON));
        let Command::Run {
            only,
            subjects,
            json,
            ..
        } = parsed("--json out.json --subjects dlock_nagle,floor").unwrap()
        else {
            panic!("not a run");
        };
        assert_eq!(only, WORKLOADS);
        assert_eq!(subjects, [Kind::Floor, Kind::DlockNagle]);
        assert_eq!(json, PathBuf::from("out.json"));
    }

    #[test]
    fn parses_subcommands() {
        let w3 = child("w3-worker --url redis://x/ --process 1 --subject dlock");
        assert_eq!((w3.url.as_str(), w3.counts), ("redis://x/", Counts::FULL));
        assert_eq!(
            (w3.process().unwrap(), w3.subject().unwrap()),
            (1, Kind::Dlock)
        );
        assert_eq!(w3.subjects, Kind::DEFAULT);
        assert_eq!(w3.runtime, Flavour::CurrentThread);
        let pinned = child("w3-worker --url u --subjects rslock,dlock --runtime multi_thread");
        assert_eq!(pinned.subjects, [Kind::Rslock, Kind::Dlock]);
        assert_eq!(pinned.runtime, Flavour::MultiThread);
        assert_eq!(pinned.fence, Fence::No);
        let fenced = child("w3-worker --url u --subject dlock_fenced --fence warm");
        assert_eq!(fenced.fence, Fence::ReadWarm);
        let mem = child("mem waiters --url u --quick");
        assert_eq!(mem.probe().unwrap(), "waiters");
        assert!(mem.counts.quick);
        let replica = child("sched-replica --url u --process 2 --skew-ms -300 --job tick0");
        assert_eq!((replica.process().unwrap(), replica.skew_ms), (2, -300));
        assert_eq!(replica.job().unwrap(), "tick0");
        assert_eq!((replica.delivery, replica.faults), (None, false));
        let retried = child("sched-replica --url u --delivery at-least-once --faults --job k");
        assert_eq!(retried.delivery, Some(SchedDelivery::AtLeastOnce));
        assert!(retried.faults);
        let w6 = child("w6 --url u --scale --locks 100000 --ttl-s 30");
        assert!(w6.counts.scale && w6.job().is_err() && w6.probe().is_err());
        assert_eq!((w6.locks().unwrap(), w6.ttl_s().unwrap()), (100_000, 30));
        assert!(child("w6 --url u").locks().is_err());
    }

    #[test]
    fn rejects_nonsense() {
        for bad in [
            "--only w9",
            "--only",
            "--only ,",
            "--subjects",
            "--subjects redlock",
            "--runtime",
            "--runtime multi",
            "--fence",
            "--fence maybe",
            "sched-replica --url u --delivery twice",
            "--frobnicate",
            "stray",
            "w6",
            "w6 --url u --locks many",
            "mem a b --url u",
        ] {
            assert!(parsed(bad).is_err(), "{bad}");
        }
        assert!(child("w3-worker --url u").process().is_err());
    }
}
