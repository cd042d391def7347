//! Loop liveness (issue 30), with three replicas in separate processes on a real Redis, a job
//! every second: a replica whose scheduling stalls is shown stalled in the registry within
//! three heartbeats, and from then on the other two fire every occurrence with no-fault delay
//! (well under the turn grace they would wait for its turns).
//!
//! * A handler that blocks the only thread of its replica (a current-thread runtime): the whole
//!   process stops heartbeating, and its entry, which outlives the liveness, shows it stalled
//!   instead of vanishing; when the handler returns it is live again.
//! * A job loop that blocks its thread while the heartbeat goes on on another worker thread,
//!   and one whose task panicked: the heartbeat stops vouching for the job (before, it vouched
//!   for ever, and every third occurrence waited the turn grace), and the entry says that the
//!   job's loop stalled; a loop that runs again is vouched for again.
//!
//! The faults are the worker's `block_ms` and `loop_fault` (tests/worker/replica.rs; the loop
//! faults go through `dlock_scheduler::__private::on_loop_poll`). Standalone server only: the
//! registry and the turns are per-slot keys, nothing here is cluster-specific.

use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use dlock_core::Client;
use dlock_scheduler::{DEFAULT_TURN_GRACE, RegisteredReplica, RunRecord, Scheduler};

use crate::scheduler::scheduler_exactly_once::replica;
use crate::support::{Worker, eventually, redis};

const JOB: &str = "tick";
const EVERY_SECOND: &str = "* * * * * *";
/// The replicas' heartbeat (the default): a stall shows within three of them. A shorter one
/// would measure the machine more than the protocol: under CI's load (two test threads, each
/// with several processes) a 300 ms heartbeat's stall once showed after 2.2 s.
const HEARTBEAT: Duration = dlock_scheduler::DEFAULT_HEARTBEAT;
/// What the test allows on top of the three heartbeats: its own polling of the registry (every
/// 20 ms, one read each) and the processes' scheduling on a busy 2-core machine, where `make
/// test` runs multi-process scheduler tests beside this one (3.7 s was seen once with 500 ms).
const SLACK: Duration = Duration::from_millis(1000);
/// A no-fault fire delay is a few ms; a replica that waited for a stalled replica's turn starts
/// at the turn grace (500 ms) or later.
const NO_FAULT: Duration = Duration::from_millis(250);
/// How many occurrences after the stall was shown are checked.
const CHECKED: usize = 4;

/// Replicas `a` and `b`, and `c` with `fault` (worker options); all every second, overlapping
/// runs allowed (the claim alone decides who runs).
fn three_replicas(url: &str, fault: &[&str]) -> [Worker; 3] {
    let heartbeat = format!("heartbeat_ms={}", HEARTBEAT.as_millis());
    let common = ["run_ms=120000", "overlap=allow", heartbeat.as_str()];
    let with = |id: &str, extra: &[&str]| {
        let opts: Vec<&str> = common.iter().chain(extra).copied().collect();
        replica(url, JOB, EVERY_SECOND, id, &opts)
    };
    [with("a", &[]), with("b", &[]), with("c", fault)]
}

/// Reads `worker`'s lines until one starts with `prefix` (its `ran …` lines are skipped).
fn wait_line(worker: &Worker, prefix: &str, limit: Duration) -> String {
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = worker.line(left);
        if line.starts_with(prefix) {
            return line;
        }
    }
}

fn admin(url: &str) -> Scheduler {
    Scheduler::builder(Client::open(url).unwrap())
        .build()
        .unwrap()
}

/// Replica `c` as the registry shows it, once `shown` says so; fails if that takes longer
/// than three heartbeats (plus [`SLACK`]) from `stall_began`. Returns when it was shown.
/// Prints the time it took (seen with `--nocapture`).
#[allow(clippy::print_stdout)]
async fn shown_stalled(
    admin: &Scheduler,
    stall_began: Instant,
    what: &str,
    shown: impl Fn(&RegisteredReplica) -> bool,
) -> DateTime<Utc> {
    eventually(Duration::from_secs(15), what, || async {
        let replicas = admin.registered_replicas().await.unwrap();
        replicas.iter().find(|r| r.id == "c").filter(|r| shown(r))?;
        Some(())
    })
    .await;
    let took = stall_began.elapsed();
    println!("{what}: shown {took:?} after the stall began");
    assert!(
        took <= HEARTBEAT * 3 + SLACK,
        "{what}: shown {took:?} after the stall began, more than three heartbeats ({:?})",
        HEARTBEAT * 3
    );
    Utc::now()
}

/// The first [`CHECKED`] scheduled runs whose occurrence is more than a second after `shown`
/// (the occurrence right after may still follow the last claim's word on whose turn it is),
/// once they have started; each must be consecutive, by `a` or `b`, and started with
/// no-fault delay. Prints the delays (seen with `--nocapture`).
#[allow(clippy::print_stdout)]
async fn fired_without_waiting_for_c(admin: &Scheduler, shown: DateTime<Utc>) -> Vec<RunRecord> {
    let from = shown + TimeDelta::seconds(1);
    let runs = eventually(
        Duration::from_secs(20),
        "the occurrences after the stall was shown",
        || async {
            let history = admin.history(JOB).await.unwrap();
            let after: Vec<RunRecord> = history
                .into_iter()
                .filter(|r| !r.manual && r.occurrence > from)
                .collect();
            (after.len() >= CHECKED).then(|| after[..CHECKED].to_vec())
        },
    )
    .await;
    let delays: Vec<_> = runs.iter().map(|r| r.start_delay().unwrap()).collect();
    println!("fire delays after the stall was shown: {delays:?}");
    for (pair, run) in runs.windows(2).zip(&runs[1..]) {
        let step = pair[1].occurrence - pair[0].occurrence;
        assert_eq!(
            step,
            TimeDelta::seconds(1),
            "an occurrence is missing: {run:?}"
        );
    }
    for (run, delay) in runs.iter().zip(&delays) {
        assert_ne!(run.replica, "c", "the stalled replica ran {run:?}");
        assert!(
            *delay < NO_FAULT,
            "occurrence {} started {delay:?} late (turn grace {DEFAULT_TURN_GRACE:?}): the \
             others still waited for the stalled replica's turn; delays {delays:?}",
            run.occurrence
        );
    }
    runs
}

/// Waits until `c` runs an occurrence after `after` again.
async fn c_runs_again(admin: &Scheduler, after: DateTime<Utc>) {
    eventually(
        Duration::from_secs(20),
        "c runs an occurrence again",
        || async {
            let history = admin.history(JOB).await.unwrap();
            history
                .iter()
                .any(|r| r.replica == "c" && r.occurrence > after)
                .then_some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_blocks_its_replica_shows_it_stalled_and_the_others_fire_on_time() {
    let server = redis();
    let url = server.url();
    // c's first run blocks its only thread for 12 s: no heartbeat, no loop, nothing.
    let [_a, _b, c] = three_replicas(&url, &["threads=1", "block_ms=12000"]);
    let admin = admin(&url);
    wait_line(&c, "blocking", Duration::from_secs(30));
    let stall_began = Instant::now();

    let shown = shown_stalled(&admin, stall_began, "c stalled", |c| c.stalled).await;
    // Listed, not vanished: its entry outlives its liveness.
    let entry = admin.registered_replicas().await.unwrap();
    let c_entry = entry.iter().find(|r| r.id == "c").unwrap();
    assert!(c_entry.expires_at >= c_entry.last_heartbeat + Duration::from_secs(30));
    assert!(entry.iter().filter(|r| r.id != "c").all(|r| !r.stalled));
    fired_without_waiting_for_c(&admin, shown).await;

    // The handler returns: c heartbeats again, and takes turns again. Its loop was held up
    // with the rest of the process, not on its own: it is never reported stalled (the first
    // heartbeat after the block may run before the loop is polled again).
    eventually(Duration::from_secs(20), "c live again", || async {
        let replicas = admin.registered_replicas().await.unwrap();
        let c = replicas.iter().find(|r| r.id == "c")?;
        let loop_stall = c.jobs[0].loop_stalled_for;
        assert!(loop_stall.is_none(), "c's loop reported stalled: {c:?}");
        (!c.stalled).then_some(())
    })
    .await;
    c_runs_again(&admin, Utc::now()).await;
}

/// A loop fault of `kind` in c, 2 s after it starts, while its heartbeat goes on (two worker
/// threads); returns the admin, c and when the stall was shown.
async fn loop_fault(url: &str, fault: &[&str]) -> (Scheduler, [Worker; 3], DateTime<Utc>) {
    let opts: Vec<&str> = ["threads=2", "fault_after_ms=2000"]
        .iter()
        .chain(fault)
        .copied()
        .collect();
    let workers = three_replicas(url, &opts);
    let admin = admin(url);
    wait_line(&workers[2], "loop fault", Duration::from_secs(30));
    let stall_began = Instant::now();
    let shown = shown_stalled(&admin, stall_began, "c's loop stalled", |c| {
        // The process still heartbeats: c is live, its loop for the job is not.
        !c.stalled && c.jobs[0].loop_stalled_for.is_some()
    })
    .await;
    (admin, workers, shown)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_loop_is_shown_stalled_and_left_out_of_the_turns_until_it_runs_again() {
    let server = redis();
    let url = server.url();
    let (admin, workers, shown) = loop_fault(&url, &["loop_fault=block", "fault_ms=10000"]).await;
    fired_without_waiting_for_c(&admin, shown).await;

    // The loop runs again: vouched for again, c takes its turns again.
    wait_line(&workers[2], "loop fault over", Duration::from_secs(20));
    eventually(Duration::from_secs(10), "c's loop runs again", || async {
        let replicas = admin.registered_replicas().await.unwrap();
        let c = replicas.iter().find(|r| r.id == "c")?;
        (!c.stalled && c.jobs[0].loop_stalled_for.is_none()).then_some(())
    })
    .await;
    c_runs_again(&admin, Utc::now()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_whose_task_panicked_is_shown_stalled_and_left_out_of_the_turns() {
    let server = redis();
    let url = server.url();
    let (admin, _workers, shown) = loop_fault(&url, &["loop_fault=panic"]).await;
    fired_without_waiting_for_c(&admin, shown).await;
}
