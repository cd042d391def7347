//! W1: uncontended latency. One task, one connection, sequential: warm-up 1,000 pairs on
//! `w1:0..999`, then 20,000 measured pairs on `w1:1000..20999`.
//!
//! Runtime: a current-thread Tokio runtime for every subject (one task; the connection's driver
//! task runs on the same thread). Each subject gets a fresh runtime and connection after a
//! `FLUSHALL`.
//!
//! W1 1-CPU runs the same in a child process (`dlock-bench w1-pinned`) that pins itself to one CPU
//! before it starts any thread, while the parent pins every thread of redis-server to the same CPU.

use crate::affinity::{PinnedProcess, pin_current_thread};
use crate::child::{Child, args, print_result};
use crate::cli::ChildArgs;
use crate::control::Control;
use crate::pairs::{PairResult, RateTarget, Shape, names, timed_pairs};
use crate::redis_stats::measure;
use crate::report::Entry;
use crate::rt::{BoxError, current_thread_runtime};
use crate::spec::{Counts, PINNED_CPU};
use crate::subject::{Fence, Subject, warm_up};
use crate::subjects::Setting;
use crate::subjects::{Kind, with_subject};

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
        RateTarget {
            to: Kind::Rslock,
            wanted: "≥ 1 × rslock",
            least: 1.0,
        },
        RateTarget {
            to: Kind::REFERENCE,
            wanted: "aim ≥ 0.95 × floor",
            least: 0.95,
        },
    ],
};

/// W1, unpinned, as a stage of the run.
pub(crate) fn run(s: &Setting) -> Result<Entry, BoxError> {
    W1.entry("w1", run_unpinned(&s.url, &s.counts, &s.subjects)?)
}

/// W1 1-CPU as a stage of the run.
pub(crate) fn run_1cpu(s: &Setting) -> Result<Entry, BoxError> {
    W1_1CPU.entry("w1_pinned", run_pinned(s)?)
}

/// Runs W1 for every subject in this process (unpinned).
pub(crate) fn run_unpinned(
    url: &str,
    counts: &Counts,
    subjects: &[Kind],
) -> Result<Vec<PairResult>, BoxError> {
    subjects
        .iter()
        .map(|&kind| run_one(kind, url, counts))
        .collect()
}

/// W1 1-CPU: pins redis-server to the pinned CPU, runs every subject in a child process pinned
/// to it from its start, then unpins the server.
fn run_pinned(s: &Setting) -> Result<Vec<PairResult>, BoxError> {
    let pinned = PinnedProcess::pin(s.server_pid, PINNED_CPU)?;
    eprintln!(
        "  redis-server: {} threads pinned to CPU {PINNED_CPU}",
        pinned.threads()
    );
    let subjects = Kind::list(&s.subjects);
    let args = args(
        "w1-pinned",
        &s.url,
        s.counts.quick,
        &["--subjects", &subjects],
    );
    let result = Child::spawn(&args)?.result();
    drop(pinned);
    result
}

/// The `w1-pinned` child: pins itself before anything else, then runs W1 for every subject.
pub(crate) fn pinned_child(args: &ChildArgs) -> Result<(), BoxError> {
    pin_current_thread(PINNED_CPU)?;
    print_result(&run_unpinned(&args.url, &args.counts, &args.subjects)?)
}

/// The `w1-one` subcommand: W1 for one subject, unpinned, for profiling.
pub(crate) fn one_child(args: &ChildArgs) -> Result<(), BoxError> {
    print_result(&run_one(args.subject()?, &args.url, &args.counts)?)
}

/// W1 for one subject, on a fresh current-thread runtime.
fn run_one(kind: Kind, url: &str, counts: &Counts) -> Result<PairResult, BoxError> {
    let runtime = current_thread_runtime()?;
    with_subject!(kind, S => runtime.block_on(measure_one::<S>(kind, url, counts)))
}

async fn measure_one<S: Subject>(
    kind: Kind,
    url: &str,
    counts: &Counts,
) -> Result<PairResult, BoxError> {
    let mut control = Control::fresh(url).await?;
    let subject = S::connect(url).await?;
    warm_up(&subject, "w1:", 0..counts.w1_warmup).await?;
    let (names, latencies) = names("w1:", counts.w1_warmup..counts.w1_warmup + counts.w1_pairs);
    let pairs = timed_pairs(&subject, &names, Fence::No, latencies);
    let (mut latencies, window_ns, delta) = measure(&mut control, pairs).await?;
    Ok(PairResult::new(
        kind,
        S::OWN_PLAIN,
        &mut latencies,
        window_ns,
        delta,
    ))
}
