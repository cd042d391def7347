//! Command line: the benchmark run (`dlock-bench [--quick] [--only …] [--json PATH]`) and the
//! subcommands the benchmark starts itself as child processes.

use std::path::PathBuf;

use crate::rt::BoxError;
use crate::spec::Counts;
use crate::subjects::Kind;

pub(crate) const USAGE: &str = "\
dlock-bench: the WORKLOADS.md benchmark of dlock beside a raw-Redis floor, on its own redis-server

usage: dlock-bench [--quick] [--only w1,w2,w3,mem,wd,sched] [--json PATH]

  --quick        a smoke run with about a tenth of the work (labelled QUICK; not comparable)
  --only LIST    run only these workloads (w1 = W1 and W1 1-CPU; w2; w3 = W3 and its
                 hand-off floor; mem; wd = 10,000 locks held under the watchdog;
                 sched = 3 scheduler replicas on a 1-second cron)
  --json PATH    where to write the results as JSON (default target/bench/results.json)

Subcommands started by the benchmark itself: w1-pinned, w3-worker, handoff-floor, mem, wd,
sched-replica.
For profiling one subject: dlock-bench w1-one --url URL --subject floor|dlock [--quick]";

/// Default path of the JSON results.
const DEFAULT_JSON: &str = "target/bench/results.json";

/// Which workloads a run includes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Workloads {
    pub(crate) w1: bool,
    pub(crate) w2: bool,
    pub(crate) w3: bool,
    pub(crate) mem: bool,
    pub(crate) wd: bool,
    pub(crate) sched: bool,
}

impl Workloads {
    const ALL: Workloads = Workloads {
        w1: true,
        w2: true,
        w3: true,
        mem: true,
        wd: true,
        sched: true,
    };

    const NONE: Workloads = Workloads {
        w1: false,
        w2: false,
        w3: false,
        mem: false,
        wd: false,
        sched: false,
    };

    /// Whether the workload named `name` (`w1`, `w2` …) runs.
    pub(crate) fn includes(&self, name: &str) -> bool {
        match name {
            "w1" => self.w1,
            "w2" => self.w2,
            "w3" => self.w3,
            "mem" => self.mem,
            "wd" => self.wd,
            "sched" => self.sched,
            _ => false,
        }
    }

    fn parse(list: &str) -> Result<Workloads, BoxError> {
        let mut only = Self::NONE;
        for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match item {
                "w1" => only.w1 = true,
                "w2" => only.w2 = true,
                "w3" => only.w3 = true,
                "mem" => only.mem = true,
                "wd" => only.wd = true,
                "sched" => only.sched = true,
                other => {
                    return Err(format!(
                        "--only: unknown workload `{other}`; use w1, w2, w3, mem, wd, sched"
                    )
                    .into());
                }
            }
        }
        if only == Self::NONE {
            return Err("--only needs at least one of w1, w2, w3, mem, wd, sched".into());
        }
        Ok(only)
    }
}

/// What to do.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Command {
    Run {
        counts: Counts,
        only: Workloads,
        json: PathBuf,
    },
    W1Pinned {
        url: String,
        counts: Counts,
    },
    /// W1 for one subject only, unpinned, printing its result: for profiling one subject
    /// (`valgrind --tool=callgrind dlock-bench w1-one --subject dlock --url …`).
    W1One {
        url: String,
        subject: Kind,
        counts: Counts,
    },
    W3Worker {
        url: String,
        process: u32,
        subject: Kind,
        counts: Counts,
    },
    HandoffFloor {
        url: String,
        process: u32,
        counts: Counts,
    },
    Memory {
        probe: String,
        url: String,
        counts: Counts,
    },
    Watchdog {
        url: String,
        counts: Counts,
    },
    SchedReplica {
        url: String,
        replica: u32,
        skew_ms: i64,
        job: String,
    },
    Help,
}

/// Parses the arguments after the program name.
pub(crate) fn parse(args: &[String]) -> Result<Command, BoxError> {
    let (sub, rest) = match args.first().map(String::as_str) {
        Some(
            sub @ ("w1-pinned" | "w1-one" | "w3-worker" | "handoff-floor" | "mem" | "wd"
            | "sched-replica"),
        ) => (Some(sub), &args[1..]),
        _ => (None, args),
    };
    let mut flags = Flags::default();
    let mut positional = Vec::new();
    let mut it = rest.iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match arg.as_str() {
            "--quick" => flags.quick = true,
            "--help" | "-h" => return Ok(Command::Help),
            "--only" => flags.only = Some(Workloads::parse(&value("--only")?)?),
            "--json" => flags.json = Some(PathBuf::from(value("--json")?)),
            "--url" => flags.url = Some(value("--url")?),
            "--process" => flags.process = Some(value("--process")?.parse()?),
            "--skew-ms" => flags.skew_ms = Some(value("--skew-ms")?.parse()?),
            "--job" => flags.job = Some(value("--job")?),
            "--subject" => {
                flags.subject = Some(Kind::parse(&value("--subject")?)?);
            }
            other if !other.starts_with('-') => positional.push(other.to_owned()),
            other => return Err(format!("unknown argument `{other}`\n\n{USAGE}").into()),
        }
    }
    flags.into_command(sub, positional)
}

#[derive(Default)]
struct Flags {
    quick: bool,
    only: Option<Workloads>,
    json: Option<PathBuf>,
    url: Option<String>,
    process: Option<u32>,
    subject: Option<Kind>,
    skew_ms: Option<i64>,
    job: Option<String>,
}

impl Flags {
    fn into_command(self, sub: Option<&str>, positional: Vec<String>) -> Result<Command, BoxError> {
        let counts = Counts::new(self.quick);
        let url = || self.url.clone().ok_or("this subcommand needs --url");
        match (sub, positional.as_slice()) {
            (None, []) => Ok(Command::Run {
                counts,
                only: self.only.unwrap_or(Workloads::ALL),
                json: self.json.unwrap_or_else(|| PathBuf::from(DEFAULT_JSON)),
            }),
            (Some("w1-pinned"), []) => Ok(Command::W1Pinned {
                url: url()?,
                counts,
            }),
            (Some("w1-one"), []) => Ok(Command::W1One {
                url: url()?,
                subject: self.subject.ok_or("w1-one needs --subject floor|dlock")?,
                counts,
            }),
            (Some("w3-worker"), []) => Ok(Command::W3Worker {
                url: url()?,
                process: self.process.ok_or("w3-worker needs --process")?,
                subject: self.subject.ok_or("w3-worker needs --subject")?,
                counts,
            }),
            (Some("handoff-floor"), []) => Ok(Command::HandoffFloor {
                url: url()?,
                process: self.process.ok_or("handoff-floor needs --process")?,
                counts,
            }),
            (Some("mem"), [probe]) => Ok(Command::Memory {
                probe: probe.clone(),
                url: url()?,
                counts,
            }),
            (Some("wd"), []) => Ok(Command::Watchdog {
                url: url()?,
                counts,
            }),
            (Some("sched-replica"), []) => Ok(Command::SchedReplica {
                url: url()?,
                replica: self.process.ok_or("sched-replica needs --process")?,
                skew_ms: self.skew_ms.unwrap_or(0),
                job: self.job.clone().ok_or("sched-replica needs --job")?,
            }),
            (_, extra) => Err(format!("unexpected arguments {extra:?}\n\n{USAGE}").into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn parses_the_run_flags() {
        let Command::Run { counts, only, json } = parse(&args("--quick --only w1,mem")).unwrap()
        else {
            panic!("not a run");
        };
        assert!(counts.quick);
        assert!(only.w1 && only.mem && !only.w2 && !only.w3 && !only.wd && !only.sched);
        let Command::Run { only, .. } = parse(&args("--only wd,sched")).unwrap() else {
            panic!("not a run");
        };
        assert!(only.wd && only.sched && !only.w1 && !only.mem);
        assert_eq!(json, PathBuf::from(DEFAULT_JSON));
        let Command::Run { only, json, .. } = parse(&args("--json out.json")).unwrap() else {
            panic!("not a run");
        };
        assert_eq!(only, Workloads::ALL);
        assert_eq!(json, PathBuf::from("out.json"));
    }

    #[test]
    fn parses_subcommands_and_rejects_nonsense() {
        assert_eq!(
            parse(&args(
                "w3-worker --url redis://x/ --process 1 --subject dlock"
            ))
            .unwrap(),
            Command::W3Worker {
                url: "redis://x/".into(),
                process: 1,
                subject: Kind::Dlock,
                counts: Counts::FULL
            }
        );
        assert!(matches!(
            parse(&args("mem waiters --url u --quick")).unwrap(),
            Command::Memory { ref probe, counts, .. } if probe == "waiters" && counts.quick
        ));
        assert_eq!(
            parse(&args(
                "sched-replica --url u --process 2 --skew-ms -300 --job tick0"
            ))
            .unwrap(),
            Command::SchedReplica {
                url: "u".into(),
                replica: 2,
                skew_ms: -300,
                job: "tick0".into()
            }
        );
        assert!(matches!(
            parse(&args("wd --url u")).unwrap(),
            Command::Watchdog { ref url, counts } if url == "u" && !counts.quick
        ));
        assert!(parse(&args("sched-replica --url u --process 0")).is_err());
        assert!(parse(&args("--only w9")).is_err());
        assert!(parse(&args("--only")).is_err());
        assert!(parse(&args("--frobnicate")).is_err());
        assert!(parse(&args("w3-worker --url u")).is_err());
        assert!(parse(&args("stray")).is_err());
    }
}
