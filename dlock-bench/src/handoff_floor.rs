//! The floor of W3's hand-off gap (an addition to WORKLOADS.md, reported beside W3): how long a
//! message takes from one process to another through Redis pub/sub on this machine, with no lock
//! library, in W3's rhythm.
//!
//! Two processes (`dlock-bench handoff-floor`, multi-thread runtime with 2 workers, connections
//! opened like dlock's) subscribe to their own channel through RESP3 push messages and play
//! ping-pong: on each message, pause 1 ms (`spawn_blocking(|| sleep(1 ms))`, as W3's holder
//! does), then take CLOCK_MONOTONIC and `PUBLISH` it to the other. The receiver takes the clock
//! as soon as the push reaches its task: `t_recv − t_sent` is the one-way latency. dlock's
//! cross-worker hand-off is the same trip plus its release script: a push-based lock cannot hand
//! over faster than this.

use redis::{PushInfo, PushKind, Value};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::child::{GO, Group, args, print_result, ready_then_wait_for_go};
use crate::cli::ChildArgs;
use crate::control::connection;
use crate::rt::{BoxError, monotonic_ns, multi_thread_runtime};
use crate::spec::{Counts, W3_PAUSE};
use crate::stats::{count, p50_p99_us};

/// Channel of process `p`.
fn channel(process: u32) -> String {
    format!("handoff-floor:{process}")
}

/// One-way latencies seen by one process (ns).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct FloorReport {
    pub(crate) latencies_ns: Vec<u64>,
}

/// The floor's figures.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct HandoffFloor {
    pub(crate) messages: u64,
    pub(crate) p50_us: f64,
    pub(crate) p99_us: f64,
}

/// Runs the ping-pong between two child processes: as many messages as W3 has acquisitions.
pub(crate) fn run(url: &str, counts: &Counts) -> Result<HandoffFloor, BoxError> {
    let mut players = Group::ready(
        ["0", "1"].map(|process| args("handoff-floor", url, counts, &["--process", process])),
    )?;
    players.send(GO)?;
    let reports = players.results::<FloorReport>()?;
    let mut latencies: Vec<u64> = reports.into_iter().flat_map(|r| r.latencies_ns).collect();
    let (p50_us, p99_us) = p50_p99_us(&mut latencies);
    Ok(HandoffFloor {
        messages: count(latencies.len()),
        p50_us,
        p99_us,
    })
}

/// Entry point of `dlock-bench handoff-floor --url URL --process 0|1`.
pub(crate) fn child_main(args: &ChildArgs) -> Result<(), BoxError> {
    let (url, process, counts) = (args.url.as_str(), args.process()?, &args.counts);
    let runtime = multi_thread_runtime()?;
    let (tx, rx) = mpsc::unbounded_channel();
    let conn = runtime.block_on(set_up(url, process, tx))?;
    ready_then_wait_for_go()?;
    let per_process = counts.w3_acquisitions / 2;
    let report = runtime.block_on(ping_pong(conn, rx, process, per_process))?;
    print_result(&report)
}

async fn set_up(
    url: &str,
    process: u32,
    pushes: mpsc::UnboundedSender<PushInfo>,
) -> Result<redis::aio::MultiplexedConnection, BoxError> {
    let mut conn = connection(url, Some(pushes)).await?;
    conn.subscribe(channel(process)).await?;
    // Both must listen before the first message: wait until the other side subscribed.
    let other = channel(1 - process);
    for _ in 0..500 {
        let reply: Vec<Value> = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(&other)
            .query_async(&mut conn)
            .await?;
        if matches!(reply.get(1), Some(Value::Int(n)) if *n > 0) {
            return Ok(conn);
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    Err(format!("{other} got no subscriber within 5 s").into())
}

async fn ping_pong(
    mut conn: redis::aio::MultiplexedConnection,
    mut pushes: mpsc::UnboundedReceiver<PushInfo>,
    process: u32,
    messages: u64,
) -> Result<FloorReport, BoxError> {
    let other = channel(1 - process);
    let mut report = FloorReport::default();
    if process == 0 {
        publish_now(&mut conn, &other).await?;
    }
    while count(report.latencies_ns.len()) < messages {
        let push = pushes
            .recv()
            .await
            .ok_or("the connection closed before the ping-pong ended")?;
        let now = monotonic_ns()?;
        let Some(sent) = sent_at(&push) else { continue };
        report.latencies_ns.push(now.saturating_sub(sent));
        tokio::task::spawn_blocking(|| std::thread::sleep(W3_PAUSE)).await?;
        publish_now(&mut conn, &other).await?;
    }
    Ok(report)
}

async fn publish_now(
    conn: &mut redis::aio::MultiplexedConnection,
    channel: &str,
) -> Result<(), BoxError> {
    let now = monotonic_ns()?;
    redis::cmd("PUBLISH")
        .arg(channel)
        .arg(now)
        .query_async::<i64>(conn)
        .await?;
    Ok(())
}

/// The send timestamp carried by a pub/sub message (`None` for other pushes).
fn sent_at(push: &PushInfo) -> Option<u64> {
    if push.kind != PushKind::Message {
        return None;
    }
    match push.data.get(1) {
        Some(Value::BulkString(bytes)) => std::str::from_utf8(bytes).ok()?.parse().ok(),
        _ => None,
    }
}
