//! W2: parallel throughput. 64 Tokio tasks share one client (the floor: one multiplexed
//! connection; dlock: one `Client`), distinct keys `w2:{task}:{i}`, 50,000 pairs in all (782 for
//! tasks 0–15, 781 for 16–63).
//!
//! Each task warms up with 10 pairs on `w2:{task}:0..9`, then every task waits at a barrier; the
//! window opens when all are through it, and its pairs use `w2:{task}:10..`. Runtime: a
//! multi-thread Tokio runtime with 2 worker threads (one per vCPU), the same for every subject.
//!
//! **W2 current-thread** (issue #13: both runtimes): the same on a current-thread runtime, where
//! the 64 tasks, the connections' driver tasks and the measuring future share one thread.
//!
//! **W2-fence** (issue #13): W2 (multi-thread), where every holder reads its fencing token between
//! acquire and release (warm-up included), for every subject that has fences; the floors, which
//! have none, run W2's plain pair again beside it, so that its ratios to the floors are taken
//! within one stage. rslock has no fence and does not run it.
//!
//! **W2-fence, warm counters**: the same, except that after the `FLUSHALL` the fence counters of
//! the slots the window's names fall in are set (to the server clock in µs, as dlock's
//! first fence in a slot sets them) before the tasks start, and each task's warm-up also takes
//! every name of its window once (acquire, fence, release). dlock keeps one counter per cluster
//! slot with no expiry, so a server that has served fenced locks has them, and its fenced fast
//! path floors each slot's counter once per connection (`fence.lua`, then plain `INCR`s), so a
//! client that has served fenced locks for a while has floored them; after the spec's
//! `FLUSHALL` and with a fresh client, W2-fence's 50,000 distinct names meet ~15,600 of the
//! 16,384 slots for the first time inside the window (one script call each). This stage shows
//! the steady state; W2-fence the cold start.

use std::sync::Arc;

use tokio::sync::Barrier;

use crate::control::Control;
use crate::pairs::{
    AT_LEAST_RSLOCK, PairResult, RateTarget, Shape, median_of_rounds, names, timed_pairs,
};
use crate::redis_stats::measure;
use crate::report::Entry;
use crate::rt::{BoxError, Flavour};
use crate::spec::Counts;
use crate::subject::{Fence, Subject, warm_up_with};
use crate::subjects::Setting;
use crate::subjects::{Kind, with_subject};

/// Runs W2 for every subject, each on a fresh multi-thread runtime.
pub(crate) fn run(s: &Setting) -> Result<Entry, BoxError> {
    W2.entry(
        "w2",
        run_all(s, &s.subjects, Fence::No, Flavour::MultiThread)?,
    )
}

/// Runs W2 current-thread for every subject, each on a fresh current-thread runtime.
pub(crate) fn run_current_thread(s: &Setting) -> Result<Entry, BoxError> {
    let results = run_all(s, &s.subjects, Fence::No, Flavour::CurrentThread)?;
    W2_CURRENT_THREAD.entry("w2_ct", results)
}

/// Runs W2-fence for every subject that has fences, and the floors.
pub(crate) fn run_fenced(s: &Setting) -> Result<Entry, BoxError> {
    W2_FENCE.entry("w2_fence", run_fence_stage(s, Fence::Read)?)
}

/// Runs W2-fence with warm counters for every subject that has fences, and the floors.
pub(crate) fn run_fenced_warm(s: &Setting) -> Result<Entry, BoxError> {
    W2_FENCE_WARM.entry("w2_fence_warm", run_fence_stage(s, Fence::ReadWarm)?)
}

/// A W2-fence stage (multi-thread): the subjects that have fences, and the floors beside them.
fn run_fence_stage(s: &Setting, fence: Fence) -> Result<Vec<PairResult>, BoxError> {
    let subjects: Vec<Kind> = s
        .subjects
        .iter()
        .copied()
        .filter(|k| k.fences() || k.is_floor())
        .collect();
    run_all(s, &subjects, fence, Flavour::MultiThread)
}

/// W2 for each of `subjects`, each on a fresh `flavour` runtime, in rounds (the median round of
/// each subject is its figure); its holders read their fence if `fence` says so.
fn run_all(
    s: &Setting,
    subjects: &[Kind],
    fence: Fence,
    flavour: Flavour,
) -> Result<Vec<PairResult>, BoxError> {
    median_of_rounds(subjects, s.counts.rate_rounds, |kind| {
        let runtime = flavour.runtime()?;
        let (url, counts) = (s.url.as_str(), &s.counts);
        with_subject!(kind, S => runtime.block_on(measure_one::<S>(kind, url, counts, fence)))
    })
}

/// W2 (multi-thread) in the report: its rate beside the other subjects', and issue #13's
/// targets: at least rslock's rate, and 0.8 × the floor on the `redis` crate's defaults.
const W2: Shape = Shape {
    label: "W2",
    latency: false,
    targets: &[
        AT_LEAST_RSLOCK,
        RateTarget {
            of: Kind::UNDER_TEST,
            to: Kind::REFERENCE,
            wanted: "≥ 0.8 × floor",
            least: 0.8,
        },
    ],
};

/// W2 current-thread in the report: the same as [`W2`], targets included.
const W2_CURRENT_THREAD: Shape = Shape {
    label: "W2 current-thread",
    ..W2
};

/// W2-fence in the report: its rate beside the floors', and issue #13's aim (0.65 × the floor on
/// the `redis` crate's defaults), for both ways a holder gets its fence: on demand (default
/// options) and with the acquisition (`fenced()`, meant for holders that always use it).
const W2_FENCE: Shape = Shape {
    label: "W2-fence",
    latency: false,
    targets: &[
        RateTarget {
            of: Kind::UNDER_TEST,
            to: Kind::REFERENCE,
            wanted: "aim ≥ 0.65 × floor",
            least: 0.65,
        },
        RateTarget {
            of: Kind::DlockFenced,
            to: Kind::REFERENCE,
            wanted: "aim ≥ 0.65 × floor",
            least: 0.65,
        },
    ],
};

/// W2-fence with warm counters in the report: the same aim as [`W2_FENCE`].
const W2_FENCE_WARM: Shape = Shape {
    label: "W2-fence, warm counters",
    ..W2_FENCE
};

/// Sets the fence counter of every slot that one of the window's names falls in, as a server
/// that served fenced locks before has it.
async fn warm_counters(control: &mut Control, counts: &Counts) -> Result<(), BoxError> {
    let mut all = Vec::new();
    for task in 0..counts.w2_tasks {
        let warmup = counts.w2_warmup_per_task;
        let (names, _) = names(&format!("w2:{task}:"), 0..warmup + counts.w2_pairs_of(task));
        all.extend(names);
    }
    warm_counters_of(control, &all).await
}

/// Sets the fence counter of every slot that one of `names` falls in: `SET <counter> <server
/// µs> NX`, pipelined by 1,000 (a pipeline of all ~16,000 outlasts the connection's response
/// timeout on a server under callgrind) (W2-fence, warm counters; `w1-one --fence warm`).
pub(crate) async fn warm_counters_of(
    control: &mut Control,
    names: &[String],
) -> Result<(), BoxError> {
    let mut counters = std::collections::BTreeSet::new();
    for name in names {
        counters.insert(dlock_core::ext::fence_counter_key("dlock:", name)?);
    }
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(control.conn()).await?;
    let now_us = secs * 1_000_000 + micros;
    let counters: Vec<_> = counters.into_iter().collect();
    for chunk in counters.chunks(1_000) {
        let mut pipe = redis::pipe();
        for counter in chunk {
            pipe.cmd("SET").arg(counter).arg(now_us).arg("NX").ignore();
        }
        pipe.query_async::<()>(control.conn()).await?;
    }
    Ok(())
}

/// The two barriers every task passes: warmed up, then go.
pub(crate) struct Gates {
    pub(crate) warmed: Barrier,
    pub(crate) go: Barrier,
}

impl Gates {
    /// Gates for `tasks` tasks and the one that measures.
    pub(crate) fn new(tasks: usize) -> Gates {
        Gates {
            warmed: Barrier::new(tasks + 1),
            go: Barrier::new(tasks + 1),
        }
    }
}

async fn measure_one<S: Subject>(
    kind: Kind,
    url: &str,
    counts: &Counts,
    fence: Fence,
) -> Result<PairResult, BoxError> {
    let mut control = Control::fresh(url).await?;
    if fence == Fence::ReadWarm {
        warm_counters(&mut control, counts).await?;
    }
    let subject = Arc::new(S::connect(url).await?);
    let tasks = usize::try_from(counts.w2_tasks)?;
    let gates = Arc::new(Gates::new(tasks));
    let mut handles = Vec::with_capacity(tasks);
    for task in 0..counts.w2_tasks {
        handles.push(tokio::spawn(run_task(
            subject.clone(),
            gates.clone(),
            task,
            fence,
            counts.w2_warmup_per_task,
            counts.w2_pairs_of(task),
        )));
    }

    gates.warmed.wait().await;
    let all_pairs = async {
        gates.go.wait().await;
        let mut latencies = Vec::with_capacity(usize::try_from(counts.w2_pairs)?);
        for handle in handles {
            latencies.extend(handle.await??);
        }
        Ok(latencies)
    };
    let (mut latencies, window_ns, delta) = measure(&mut control, all_pairs).await?;
    Ok(PairResult::new(
        kind,
        S::OWN_PLAIN,
        &mut latencies,
        window_ns,
        delta,
    ))
}

/// One task: warm-up, both barriers (always, even after a failed warm-up, so that the other
/// tasks are not left waiting), then its measured pairs. Returns the per-pair latencies (ns).
pub(crate) async fn run_task<S: Subject>(
    subject: Arc<S>,
    gates: Arc<Gates>,
    task: u64,
    fence: Fence,
    warmup: u64,
    pairs: u64,
) -> Result<Vec<u64>, BoxError> {
    let prefix = format!("w2:{task}:");
    // Warm counters: the warm-up also takes each of the window's names once, so that the
    // client has served fenced locks in every slot of the window, as a long-running one has.
    let warm_up_to = if fence == Fence::ReadWarm {
        warmup + pairs
    } else {
        warmup
    };
    let warmed = warm_up_with(&*subject, &prefix, 0..warm_up_to, fence).await;
    let (names, latencies) = names(&prefix, warmup..warmup + pairs);
    gates.warmed.wait().await;
    gates.go.wait().await;
    warmed?;
    timed_pairs(&*subject, &names, fence, latencies).await
}
