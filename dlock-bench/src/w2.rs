//! W2: parallel throughput. 64 Tokio tasks share one client (the floor: one multiplexed
//! connection; dlock: one `Client`), distinct keys `w2:{task}:{i}`, 50,000 pairs in all (782 for
//! tasks 0–15, 781 for 16–63).
//!
//! Each task warms up with 10 pairs on `w2:{task}:0..9`, then every task waits at a barrier; the
//! window opens when all are through it, and its pairs use `w2:{task}:10..`. Runtime: a
//! multi-thread Tokio runtime with 2 worker threads (one per vCPU), the same for both subjects.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::Barrier;

use crate::redis_stats::Control;
use crate::rt::{BoxError, elapsed_ns, multi_thread_runtime};
use crate::spec::Counts;
use crate::subject::{Kind, Subject};
use crate::w1::{PairResult, Subjects};
use crate::window::Snapshot;

/// Runs W2 for the floor, then for dlock.
pub(crate) fn run_both(url: &str, counts: &Counts) -> Result<Subjects, BoxError> {
    Ok(Subjects {
        floor: run(Kind::Floor, url, counts)?,
        dlock: run(Kind::Dlock, url, counts)?,
    })
}

/// Runs W2 for `kind` on a fresh multi-thread runtime.
fn run(kind: Kind, url: &str, counts: &Counts) -> Result<PairResult, BoxError> {
    multi_thread_runtime()?.block_on(measure(kind, url, counts))
}

/// The two barriers every task passes: warmed up, then go.
struct Gates {
    warmed: Barrier,
    go: Barrier,
}

async fn measure(kind: Kind, url: &str, counts: &Counts) -> Result<PairResult, BoxError> {
    let mut control = Control::connect(url).await?;
    control.flushall().await?;
    let subject = Arc::new(Subject::connect(kind, url).await?);
    let tasks = usize::try_from(counts.w2_tasks)?;
    let gates = Arc::new(Gates {
        warmed: Barrier::new(tasks + 1),
        go: Barrier::new(tasks + 1),
    });
    let mut handles = Vec::with_capacity(tasks);
    for task in 0..counts.w2_tasks {
        handles.push(tokio::spawn(run_task(
            subject.clone(),
            gates.clone(),
            task,
            counts.w2_warmup_per_task,
            counts.w2_pairs_of(task),
        )));
    }

    gates.warmed.wait().await;
    let before = Snapshot::take(&mut control).await?;
    let start = Instant::now();
    gates.go.wait().await;
    let mut latencies = Vec::with_capacity(usize::try_from(counts.w2_pairs)?);
    for handle in handles {
        latencies.extend(handle.await??);
    }
    let window = elapsed_ns(start);
    let delta = before.delta(&mut control).await?;
    Ok(PairResult::new(
        kind,
        &mut latencies,
        window,
        delta,
        subject.own_plain(),
    ))
}

/// One task: warm-up, both barriers (always, even after a failed warm-up, so that the other
/// tasks are not left waiting), then its measured pairs. Returns the per-pair latencies (ns).
async fn run_task(
    subject: Arc<Subject>,
    gates: Arc<Gates>,
    task: u64,
    warmup: u64,
    pairs: u64,
) -> Result<Vec<u64>, BoxError> {
    let mut warmed = Ok(());
    for i in 0..warmup {
        warmed = subject.pair(&format!("w2:{task}:{i}")).await;
        if warmed.is_err() {
            break;
        }
    }
    let names: Vec<String> = (warmup..warmup + pairs)
        .map(|i| format!("w2:{task}:{i}"))
        .collect();
    let mut latencies = Vec::with_capacity(names.len());
    gates.warmed.wait().await;
    gates.go.wait().await;
    warmed?;
    for name in &names {
        let t = Instant::now();
        subject.pair(name).await?;
        latencies.push(elapsed_ns(t));
    }
    Ok(latencies)
}
