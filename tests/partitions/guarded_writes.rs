//! Writes guarded by the lock across a half-open cut: a holder whose link to the master goes
//! half-open keeps appending its fence to a list with guarded writes; the requests it sends
//! during the cut wait in its socket and reach Redis after the heal, when another client holds
//! the lock and has written with a newer fence. Every late write must be refused: the list's
//! fences never go back (a stale write would put the old fence after the new one).

use std::time::{Duration, Instant};

use dlock_testkit::{LineChild, Network, NodeId, ServerOptions};

use super::network;

const WORKER: &str = env!("CARGO_BIN_EXE_dlock-test-worker");
const NAME: &str = "guarded";

fn spawn(net: &Network, node: NodeId, master: NodeId, ms: u64, guarded: bool) -> LineChild {
    let mut cmd = net.command(node, WORKER);
    cmd.arg("guarded-writer")
        .arg(format!("url={}", net.server(master).expect("master").url()))
        .arg(format!("name={NAME}"))
        .arg(format!("ms={ms}"))
        .args(["ttl_ms=1500", "command_timeout_ms=500", "period_ms=50"]);
    if !guarded {
        cmd.arg("unguarded=1");
    }
    LineChild::spawn(cmd).expect("spawn the worker")
}

/// The list's fences, read through the master's socket.
fn writes(net: &Network, master: NodeId) -> Vec<u64> {
    redis::cmd("LRANGE")
        .arg(format!("{{{NAME}}}:writes"))
        .arg(0)
        .arg(-1)
        .query(
            &mut net
                .server(master)
                .expect("master")
                .connection()
                .expect("socket"),
        )
        .expect("LRANGE")
}

/// The fence of what follows `acquired` on a worker's line (` fence=F`).
fn fence_of(line: &str) -> u64 {
    line.trim()
        .strip_prefix("fence=")
        .and_then(|f| f.parse().ok())
        .unwrap_or_else(|| panic!("no fence in {line:?}"))
}

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs the scenario with c1 writing `guarded` or not; returns the list, c1's and c2's fences
/// and c1's `done` line, or `None` where namespaces cannot be made.
fn run(test: &str, guarded: bool) -> Option<(Vec<u64>, u64, u64, String)> {
    let mut net = network(test)?;
    let master = net.add_node("master").expect("node");
    let (c1, c2) = (
        net.add_node("c1").expect("node"),
        net.add_node("c2").expect("node"),
    );
    net.start_server(master, ServerOptions::new())
        .expect("server");
    let mut w1 = spawn(&net, c1, master, 8_000, guarded);
    let old = fence_of(
        &w1.wait_for("acquired", Duration::from_secs(15))
            .expect("c1 holds"),
    );
    wait_until("c1's first writes", Duration::from_secs(10), || {
        writes(&net, master).len() >= 3
    });
    net.half_open(c1, master).expect("half-open");
    let cut = Instant::now();
    // c2 waits for the lock, takes it once c1's lease ran out, and writes with its fence.
    let w2 = spawn(&net, c2, master, 2_000, true);
    let new = fence_of(
        &w2.wait_for("acquired", Duration::from_secs(15))
            .expect("c2 holds"),
    );
    assert!(new > old, "fences rise: {old} then {new}");
    wait_until("c2's writes", Duration::from_secs(10), || {
        writes(&net, master).contains(&new)
    });
    // Heal inside c1's TCP back-off (see half_open.rs): its queued writes arrive late.
    while cut.elapsed() < Duration::from_millis(2_600) {
        std::thread::sleep(Duration::from_millis(20));
    }
    net.heal().expect("heal");
    let done1 = w1
        .wait_for("done", Duration::from_secs(30))
        .expect("c1 ends");
    w2.wait_for("done", Duration::from_secs(30))
        .expect("c2 ends");
    w1.wait(Duration::from_secs(10)).expect("c1 exits");
    Some((writes(&net, master), old, new, done1))
}

/// The old holder's writes that landed after the new holder's first.
fn stale_writes(list: &[u64], old: u64, new: u64) -> usize {
    let first_new = list.iter().position(|&f| f == new).expect("c2 wrote");
    list[first_new..].iter().filter(|&&f| f == old).count()
}

#[test]
fn writes_queued_during_a_half_open_cut_are_refused_after_the_heal() {
    let test = "partitions::guarded_writes::writes_queued_during_a_half_open_cut_are_refused_after_the_heal";
    let Some((list, old, new, done1)) = run(test, true) else {
        return;
    };
    assert_eq!(
        stale_writes(&list, old, new),
        0,
        "writes of the old holder landed after the new one's: {list:?}"
    );
    assert!(
        list.windows(2).all(|w| w[0] <= w[1]),
        "the fences in the list go back: {list:?}"
    );
    // c1 sent writes it got no answer to (queued during the cut).
    assert!(
        !done1.contains("unknown=0"),
        "c1 sent nothing during the cut: {done1}"
    );
}

/// The control: the same writes as plain `RPUSH`es land after the new holder's, so the case
/// above is reached and the guarded write is what keeps them out.
#[test]
fn unguarded_writes_queued_during_the_cut_land_after_the_new_holders() {
    let test = "partitions::guarded_writes::unguarded_writes_queued_during_the_cut_land_after_the_new_holders";
    let Some((list, old, new, _)) = run(test, false) else {
        return;
    };
    assert!(
        stale_writes(&list, old, new) > 0,
        "no late write landed: the scenario was not reached: {list:?}"
    );
}
