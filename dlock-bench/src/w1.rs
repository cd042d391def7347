//! W1: uncontended latency. One task, one connection, sequential: warm-up 1,000 pairs on
//! `w1:0..999`, then 20,000 measured pairs on `w1:1000..20999`.
//!
//! Runtime: a current-thread Tokio runtime for every subject (one task; the connection's driver
//! task runs on the same thread). Each subject gets a fresh runtime and connection after a
//! `FLUSHALL`.
//!
//! W1 1-CPU runs the same in a child process per subject (`dlock-bench w1-pinned`) that pins itself
//! to one CPU before it starts any thread, while the parent pins every thread of redis-server to the same CPU.
//!
//! **W1 1-CPU multi-thread** (issue #13: both runtimes): the same pinned child on a multi-thread
//! runtime with 2 worker threads, which inherit the pin. The measured loop is unchanged and runs
//! in `block_on` on the child's main thread (as `#[tokio::main]`'s body does), the connections'
//! driver tasks on the workers: three threads share the one CPU with redis-server, so each round
//! trip also pays the wake-ups between them, as it does for every subject.

use crate::affinity::{PinnedProcess, pin_current_thread};
use crate::child::{Child, args, print_result};
use crate::cli::ChildArgs;
use crate::control::Control;
use crate::pairs::{
    AT_LEAST_RSLOCK, PairResult, RateTarget, Shape, median_of_rounds, names, timed_pairs,
};
use crate::redis_stats::measure;
use crate::report::Entry;
use crate::rt::{BoxError, Flavour};
use crate::spec::{Counts, PINNED_CPU};
use crate::subject::{Fence, Subject, warm_up_with};
use crate::subjects::Setting;
use crate::subjects::{Kind, with_subject};
use crate::w2::warm_counters_of;

/// W1 in the report: its rate and latency beside the floor's.
const W1: Shape = Shape {
    label: "W1",
    latency: true,
    targets: &[],
};

/// W1 1-CPU in the report: its rate beside the other subjects', issue #13's target (at least
/// rslock's rate) and its aim (0.95 × the floor on the `redis` crate's defaults).
const W1_1CPU: Shape = Shape {
    label: "W1 1-CPU",
    latency: false,
    targets: &[
        AT_LEAST_RSLOCK,
        RateTarget {
            of: Kind::UNDER_TEST,
            to: Kind::REFERENCE,
            wanted: "aim ≥ 0.95 × floor",
            least: 0.95,
        },
    ],
};

/// W1 1-CPU multi-thread in the report: the same as [`W1_1CPU`], targets included.
const W1_1CPU_MULTI_THREAD: Shape = Shape {
    label: "W1 1-CPU multi-thread",
    ..W1_1CPU
};

/// W1, unpinned, as a stage of the run.
pub(crate) fn run(s: &Setting) -> Result<Entry, BoxError> {
    let results = run_unpinned(&s.url, &s.counts, &s.subjects, Flavour::CurrentThread)?;
    W1.entry("w1", results)
}

/// W1 1-CPU as a stage of the run: current-thread runtime.
pub(crate) fn run_1cpu(s: &Setting) -> Result<Entry, BoxError> {
    W1_1CPU.entry("w1_pinned", run_pinned(s, Flavour::CurrentThread)?)
}

/// W1 1-CPU multi-thread as a stage of the run.
pub(crate) fn run_1cpu_multi_thread(s: &Setting) -> Result<Entry, BoxError> {
    let results = run_pinned(s, Flavour::MultiThread)?;
    W1_1CPU_MULTI_THREAD.entry("w1_pinned_mt", results)
}

/// Runs W1 for every subject in this process (unpinned), each on a fresh `flavour` runtime.
pub(crate) fn run_unpinned(
    url: &str,
    counts: &Counts,
    subjects: &[Kind],
    flavour: Flavour,
) -> Result<Vec<PairResult>, BoxError> {
    subjects
        .iter()
        .map(|&kind| run_one(kind, url, counts, flavour))
        .collect()
}

/// W1 1-CPU: pins redis-server to the pinned CPU, runs each subject on a `flavour` runtime in a
/// child process of its own, pinned to it from its start, in rounds (the median round of each
/// subject is its figure), then unpins the server.
///
/// One process per subject, so that no subject runs in a process that earlier subjects' runtimes,
/// connections and allocations have already shaped.
fn run_pinned(s: &Setting, flavour: Flavour) -> Result<Vec<PairResult>, BoxError> {
    let pinned = PinnedProcess::pin(s.server_pid, PINNED_CPU)?;
    eprintln!(
        "  redis-server: {} threads pinned to CPU {PINNED_CPU}",
        pinned.threads()
    );
    let result = median_of_rounds(&s.subjects, s.counts.rate_rounds, |kind| {
        let args = args(
            "w1-pinned",
            &s.url,
            &s.counts,
            &["--subjects", kind.name(), "--runtime", flavour.name()],
        );
        let mut one: Vec<PairResult> = Child::spawn(&args)?.result()?;
        one.pop()
            .ok_or_else(|| format!("`w1-pinned` for {} returned no result", kind.name()).into())
    });
    drop(pinned);
    result
}

/// The `w1-pinned` child: pins itself before anything else (the runtimes' threads inherit the
/// pin), then runs W1 for every subject on `--runtime`.
pub(crate) fn pinned_child(args: &ChildArgs) -> Result<(), BoxError> {
    pin_current_thread(PINNED_CPU)?;
    let (url, counts) = (&args.url, &args.counts);
    print_result(&run_unpinned(url, counts, &args.subjects, args.runtime)?)
}

/// The `w1-one` subcommand: W1 for one subject, unpinned, on `--runtime`, its holders reading
/// their fence as `--fence` says, for profiling.
pub(crate) fn one_child(args: &ChildArgs) -> Result<(), BoxError> {
    let kind = args.subject()?;
    let (url, counts) = (args.url.as_str(), &args.counts);
    let runtime = args.runtime.runtime()?;
    let fence = args.fence;
    print_result(
        &with_subject!(kind, S => runtime.block_on(measure_one::<S>(kind, url, counts, fence)))?,
    )
}

/// W1 for one subject, on a fresh `flavour` runtime.
fn run_one(
    kind: Kind,
    url: &str,
    counts: &Counts,
    flavour: Flavour,
) -> Result<PairResult, BoxError> {
    let runtime = flavour.runtime()?;
    with_subject!(kind, S => runtime.block_on(measure_one::<S>(kind, url, counts, Fence::No)))
}

async fn measure_one<S: Subject>(
    kind: Kind,
    url: &str,
    counts: &Counts,
    fence: Fence,
) -> Result<PairResult, BoxError> {
    let mut control = Control::fresh(url).await?;
    let (names, latencies) = names("w1:", counts.w1_warmup..counts.w1_warmup + counts.w1_pairs);
    if fence == Fence::ReadWarm {
        warm_counters_of(&mut control, &names).await?;
    }
    let subject = S::connect(url).await?;
    warm_up_with(&subject, "w1:", 0..counts.w1_warmup, fence).await?;
    let pairs = timed_pairs(&subject, &names, fence, latencies);
    let (mut latencies, window_ns, delta) = measure(&mut control, pairs).await?;
    Ok(PairResult::new(
        kind,
        S::OWN_PLAIN,
        &mut latencies,
        window_ns,
        delta,
    ))
}
