//! Network faults: servers and clients in network namespaces of their own
//! (`dlock_testkit::Network`), cut apart by partitions, one-way cuts and half-open links.
//!
//! - `network.rs` checks the fixture itself (each nemesis cuts what it names and nothing else,
//!   nothing leads out of the network, dead tests' namespaces are swept);
//! - `half_open.rs` is the acceptance test of issue 50: a half-open link to the master is
//!   detected within one lease, and after the heal the same client takes the lock again
//!   within twice its command timeout (one case is dlock's open defect, ignored with why);
//! - `history.rs` is the checker of lock histories (a lease mutex, and stateright's
//!   linearizability tester where no lease matters), and `lock_workload.rs` runs two clients
//!   across a half-open cut, saves their history and checks it;
//! - `guarded_writes.rs`: writes a holder queued during a cut reach Redis after the heal and
//!   are refused (plain `RPUSH`es, the control, land after the new holder's).
//! - `set_workload.rs`: Jepsen's set under the lock, a client cut off between its read and its
//!   write: no acknowledged element lost or doubled.
//! - `matrix/`: the durability matrix under Sentinel failovers (dlock's three durabilities and
//!   a plain `SET NX PX` client, four nemeses, the three workloads), each cell checked against
//!   its stated promise; one smoke cell here, the whole matrix with `make partitions`.
//!
//! These tests need root and iproute2. Where namespaces cannot be made a test prints
//! `SKIPPED <test>: <why>` and passes, except under `CI=true` as root, where that is a failure
//! (CI runs as root and must run them).

mod guarded_writes;
mod half_open;
mod history;
mod lock_workload;
mod matrix;
mod network;
mod set_workload;

use dlock_testkit::Network;

/// A new network for the test `name`, or `None` (after `SKIPPED <name>: <why>`) where
/// namespaces cannot be made.
///
/// # Panics
///
/// When they cannot be made under `CI=true` as root, or the network does not start.
#[allow(clippy::print_stdout)] // the skip is said by name in the test's output
pub(crate) fn network(name: &str) -> Option<Network> {
    if let Err(why) = Network::check_requirements() {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(
            !(ci && nix::unistd::geteuid().is_root()),
            "{name}: CI=true as root, and network namespaces cannot be made: {why}"
        );
        println!("SKIPPED {name}: {why}");
        return None;
    }
    Some(Network::start().unwrap_or_else(|e| panic!("{name}: {e}")))
}
