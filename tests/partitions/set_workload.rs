//! Jepsen's set under a lock, across a half-open cut: two clients add unique elements to one
//! set by reading it and writing it back whole (guarded `SET`) while they hold the lock; one
//! client's link to the master goes half-open, and is healed inside TCP's back-off so that
//! what it queued reaches Redis late. Every acknowledged element must be in the final set
//! (none lost) and none twice.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use dlock_testkit::{LineChild, Network, NodeId, ServerOptions};

use super::network;

const WORKER: &str = env!("CARGO_BIN_EXE_dlock-test-worker");
const NAME: &str = "set";

fn spawn(net: &Network, node: NodeId, master: NodeId, process: u32) -> LineChild {
    let mut cmd = net.command(node, WORKER);
    cmd.arg("set-adder")
        .arg(format!("url={}", net.server(master).expect("master").url()))
        .arg(format!("name={NAME}"))
        .arg(format!("process={process}"))
        .args(["ms=7000", "limit=150", "think_ms=50"])
        .args(["ttl_ms=1500", "command_timeout_ms=500"]);
    LineChild::spawn(cmd).expect("spawn the worker")
}

/// Reads `worker`'s lines until one starts with `until` (returned), recording the elements
/// it was told were added in `added`.
fn read_until(worker: &LineChild, until: &str, added: &mut Vec<String>) -> String {
    loop {
        let line = worker.line(Duration::from_secs(30)).expect("a worker line");
        if let Some(element) = line.strip_prefix("added ") {
            added.push(element.to_owned());
        } else if line.starts_with(until) {
            return line;
        }
    }
}

/// What one run found: acknowledged elements lost, elements present twice, c1's `done` line.
type Found = (Vec<String>, Vec<String>, String);

/// Runs the workload; `None` where namespaces cannot be made.
#[allow(clippy::print_stdout)] // the run's figures
fn run(test: &str) -> Option<Found> {
    let mut net = network(test)?;
    let master = net.add_node("master").expect("node");
    let (c1, c2) = (
        net.add_node("c1").expect("node"),
        net.add_node("c2").expect("node"),
    );
    net.start_server(master, ServerOptions::new())
        .expect("server");
    let (w1, w2) = (spawn(&net, c1, master, 1), spawn(&net, c2, master, 2));
    let (mut added1, mut added2) = (Vec::new(), Vec::new());
    let read = || -> String {
        let value: Option<String> = redis::cmd("GET")
            .arg(format!("{{{NAME}}}:set"))
            .query(
                &mut net
                    .server(master)
                    .expect("master")
                    .connection()
                    .expect("socket"),
            )
            .expect("GET");
        value.unwrap_or_default()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !(read().contains("1-") && read().contains("2-")) {
        assert!(Instant::now() < deadline, "both clients add before the cut");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Cut c1 off between a read and its write: the write then waits in its socket. (Its
    // earlier lines are read first, so that the `holding` awaited is a new one.)
    while let Some(line) = w1.try_line() {
        if let Some(element) = line.strip_prefix("added ") {
            added1.push(element.to_owned());
        }
    }
    read_until(&w1, "holding", &mut added1);
    net.half_open(c1, master).expect("half-open");
    std::thread::sleep(Duration::from_millis(2_600)); // the cut's length is the fault itself
    net.heal().expect("heal");
    let done1 = read_until(&w1, "done", &mut added1);
    let done2 = read_until(&w2, "done", &mut added2);

    let value = read();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for element in value.split(',') {
        *counts.entry(element).or_insert(0) += 1;
    }
    let lost: Vec<String> = added1
        .iter()
        .chain(&added2)
        .filter(|e| !counts.contains_key(e.as_str()))
        .cloned()
        .collect();
    let doubled: Vec<String> = counts
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(e, _)| (*e).to_owned())
        .collect();
    println!(
        "set: {} elements; c1 {done1}, c2 {done2}; lost {lost:?}, doubled {doubled:?}",
        counts.len()
    );
    Some((lost, doubled, done1))
}

#[test]
fn no_acknowledged_element_is_lost_or_doubled_across_a_half_open_cut() {
    let test = "partitions::set_workload::no_acknowledged_element_is_lost_or_doubled_across_a_half_open_cut";
    let Some((lost, doubled, done1)) = run(test) else {
        return;
    };
    assert!(lost.is_empty(), "acknowledged elements lost: {lost:?}");
    assert!(doubled.is_empty(), "elements twice: {doubled:?}");
    assert!(
        !done1.contains("unknown=0"),
        "the cut never reached c1: {done1}"
    );
}
