//! The lock/unlock workload under a half-open cut: two clients in namespaces of their own
//! take and release one lock in turn (`dlock-test-worker lock-history`), the link of one of
//! them to the master goes half-open until the other has been granted the lock across the
//! cut, then heals. The history is saved (`$CARGO_TARGET_TMPDIR/partition-histories/`) and
//! checked: no overlapping holds within their leases, fences rising in grant order, and the
//! window before the cut linearizable against a plain mutex (`history.rs`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dlock_testkit::{LineChild, Network, NodeId, ServerOptions};

use super::history::{History, Kind, Outcome};
use super::network;

const WORKER: &str = env!("CARGO_BIN_EXE_dlock-test-worker");
const TTL: Duration = Duration::from_millis(1_000);
const RUN: Duration = Duration::from_secs(8);

fn now_us() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_micros()
}

fn spawn(net: &Network, node: NodeId, master: NodeId, process: u32) -> LineChild {
    let mut cmd = net.command(node, WORKER);
    cmd.arg("lock-history")
        .arg(format!("url={}", net.server(master).expect("master").url()))
        .arg("name=history")
        .arg(format!("process={process}"))
        .arg(format!("ms={}", RUN.as_millis()))
        .arg(format!("ttl_ms={}", TTL.as_millis()))
        .args(["command_timeout_ms=300", "hold_ms=20"]);
    LineChild::spawn(cmd).expect("spawn the worker")
}

/// Collects the workers' lines until `done(history)` holds or every worker said `done`.
fn collect(
    workers: &[&LineChild],
    lines: &mut String,
    finished: &mut usize,
    limit: Duration,
    mut done: impl FnMut(&History) -> bool,
) {
    let deadline = Instant::now() + limit;
    loop {
        for worker in workers {
            while let Some(line) = worker.try_line() {
                if let Some(op) = line.strip_prefix("op ") {
                    lines.push_str(op);
                    lines.push('\n');
                } else if line.starts_with("done") {
                    *finished += 1;
                }
            }
        }
        let history = History::load(lines).expect("the workers' lines");
        if done(&history) || *finished == workers.len() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the workload stalled: {history:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn granted_after(history: &History, process: u32, after_us: u128) -> bool {
    history.ops.iter().any(|op| {
        op.process == process
            && op.kind == Kind::Acquire
            && op.invoked_us > after_us
            && matches!(op.outcome, Outcome::Granted { .. })
    })
}

#[test]
#[allow(clippy::print_stdout)] // where the history was saved, and its figures
fn holds_across_a_half_open_cut_never_overlap_within_their_leases() {
    let test =
        "partitions::lock_workload::holds_across_a_half_open_cut_never_overlap_within_their_leases";
    let Some(mut net) = network(test) else {
        return;
    };
    let master = net.add_node("master").expect("node");
    let (c1, c2) = (
        net.add_node("c1").expect("node"),
        net.add_node("c2").expect("node"),
    );
    net.start_server(master, ServerOptions::new())
        .expect("server");
    let (w1, w2) = (spawn(&net, c1, master, 1), spawn(&net, c2, master, 2));
    let (mut lines, mut finished) = (String::new(), 0);
    collect(&[&w1, &w2], &mut lines, &mut finished, RUN, |h| {
        granted_after(h, 1, 0) && granted_after(h, 2, 0)
    });
    let cut_at = now_us();
    net.half_open(c1, master).expect("half-open");
    // Contention across the cut: 2 is granted after 1's lease must have run out.
    collect(&[&w1, &w2], &mut lines, &mut finished, RUN, |h| {
        granted_after(h, 2, cut_at + TTL.as_micros())
    });
    net.heal().expect("heal");
    collect(&[&w1, &w2], &mut lines, &mut finished, RUN + RUN, |_| false);

    let history = History::load(&lines).expect("history");
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("partition-histories");
    std::fs::create_dir_all(&dir).expect("history dir");
    let path = dir.join(format!("lock_workload-{}.history", std::process::id()));
    std::fs::write(&path, history.save()).expect("save the history");
    let report = history.check_lease_mutex();
    let by_outcome = history.ops.iter().fold(BTreeMap::new(), |mut m, op| {
        *m.entry(
            format!("{:?}", op.outcome)
                .split(' ')
                .next()
                .unwrap_or("")
                .to_owned(),
        )
        .or_insert(0) += 1;
        m
    });
    println!(
        "history saved to {}: {report:?}, outcomes {by_outcome:?}",
        path.display()
    );
    assert!(
        report.overlaps.is_empty(),
        "overlapping holds: {report:?} ({})",
        path.display()
    );
    assert!(
        report.fence_inversions.is_empty(),
        "fences out of grant order: {report:?}"
    );
    assert!(
        report.holds >= 3,
        "too few holds to say anything: {report:?}"
    );
    assert!(
        history
            .ops
            .iter()
            .any(|op| op.process == 1 && op.outcome == Outcome::Unknown),
        "the cut never reached client 1"
    );
    assert_eq!(
        history.before(cut_at).lease_free_linearizable(),
        Some(true),
        "the window before the cut is not linearizable ({})",
        path.display()
    );
}
