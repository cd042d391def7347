//! The watchdog renews many locks per script call: holding 250 locks costs a handful of calls
//! per renewal interval, not 250 — on a cluster too, where the locks' keys spread over ~250
//! slots: there a call renews the locks of one shard (master). A slot that moves to another
//! master while its lock is held costs that lock nothing.

use std::time::Duration;

use dlock_core::MutexOptions;
use dlock_testkit::RedisServer;

use crate::support::{Backend, backend_tests};

backend_tests!(
    async fn renewals_are_batched(backend: Backend) {
        let c = backend.client();
        let options = MutexOptions::new()
            .ttl(Duration::from_millis(1_500))
            .watchdog();
        let mut guards = Vec::new();
        for i in 0..250 {
            let lock = c
                .mutex_with(&format!("batch:{i}"), options.clone())
                .unwrap();
            guards.push(lock.try_acquire().await.unwrap().expect("free"));
        }
        let before = backend.evalsha_calls().await;
        // Four renewal intervals (500 ms each).
        tokio::time::sleep(Duration::from_millis(2_000)).await;
        let renewals = backend.evalsha_calls().await - before;
        assert!(renewals >= 3, "the watchdog did renew: {renewals} calls");
        // 250 locks = 3 calls per interval when batched (one server: 100 locks per call; a
        // 3-master cluster: one call per master); ~1,000 if not, or batched only per slot.
        assert!(
            renewals <= 30,
            "{renewals} script calls for 250 locks over 4 intervals"
        );
        for guard in &guards {
            assert!(guard.remaining() > Duration::from_millis(500), "{guard:?}");
        }
        for guard in guards {
            assert!(guard.release().await.unwrap().was_held());
        }
    }
);

/// Moves `slot` from `from` to `to` with its keys (the steps `redis-cli --cluster reshard`
/// takes), and tells every node.
fn move_slot(nodes: &[RedisServer], slot: u16, from: usize, to: usize) {
    let id = |node: &RedisServer| -> String {
        redis::cmd("CLUSTER")
            .arg("MYID")
            .query(&mut node.connection().unwrap())
            .unwrap()
    };
    let (src, dst) = (&nodes[from], &nodes[to]);
    let (src_id, dst_id) = (id(src), id(dst));
    let mut src_con = src.connection().unwrap();
    let mut dst_con = dst.connection().unwrap();
    let setslot = |con: &mut redis::Connection, state: &str, node: &str| {
        let _: () = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg(state)
            .arg(node)
            .query(con)
            .unwrap();
    };
    setslot(&mut dst_con, "IMPORTING", &src_id);
    setslot(&mut src_con, "MIGRATING", &dst_id);
    let keys: Vec<String> = redis::cmd("CLUSTER")
        .arg("GETKEYSINSLOT")
        .arg(slot)
        .arg(1_000)
        .query(&mut src_con)
        .unwrap();
    if !keys.is_empty() {
        let port = dst
            .url()
            .rsplit(':')
            .next()
            .unwrap()
            .trim_end_matches('/')
            .to_owned();
        let _: () = redis::cmd("MIGRATE")
            .arg("127.0.0.1")
            .arg(port)
            .arg("")
            .arg(0)
            .arg(5_000)
            .arg("KEYS")
            .arg(&keys)
            .query(&mut src_con)
            .unwrap();
    }
    for node in nodes {
        setslot(&mut node.connection().unwrap(), "NODE", &dst_id);
    }
}

/// 30 watchdog locks on one master; the slot of one of them moves to another master while all
/// are held. The master's shard call then finds that key elsewhere (or, when it is the call's
/// first key, is redirected to the new master, where the others are elsewhere): those locks are
/// renewed in calls of their own slots next, and the map is read again. No lease is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_moved_while_its_lock_is_held_costs_no_lease() {
    let backend = Backend::cluster();
    let nodes = backend.servers();
    let c = backend.client();
    // 600 ms leases, renewed every 200 ms: a few lost renewals would lose them.
    let options = MutexOptions::new()
        .ttl(Duration::from_millis(600))
        .watchdog();
    let home = nodes
        .iter()
        .position(|n| n.url() == backend.server_of("dlock:{moving:0}").url())
        .unwrap();
    let names: Vec<String> = (0..)
        .map(|i| format!("moving:{i}"))
        .filter(|name| backend.server_of(&format!("dlock:{{{name}}}")).url() == nodes[home].url())
        .take(30)
        .collect();
    let mut guards = Vec::new();
    for name in &names {
        let lock = c.mutex_with(name, options.clone()).unwrap();
        guards.push(lock.try_acquire().await.unwrap().expect("free"));
    }
    let tokens: Vec<_> = guards.iter().map(|g| g.cancellation_token()).collect();
    let moved_key = format!("dlock:{{{}}}", names[0]);
    let slot: u16 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(&moved_key)
        .query(&mut nodes[home].connection().unwrap())
        .unwrap();
    let before = backend.evalsha_calls().await;
    move_slot(nodes, slot, home, (home + 1) % nodes.len());
    // Ten leases' worth of renewals after the move.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let calls = backend.evalsha_calls().await - before;
    let lost: Vec<_> = names
        .iter()
        .zip(&tokens)
        .filter(|(_, t)| t.is_cancelled())
        .map(|(n, _)| n.clone())
        .collect();
    assert!(
        lost.is_empty(),
        "leases lost after the slot moved: {lost:?}"
    );
    for guard in guards {
        assert!(guard.release().await.unwrap().was_held());
    }
    // Still batched: 30 locks renewed ~30 times in 6 s are ~900 renewals, sent in at most a
    // few calls per interval (one shard call, the moved lock's slot call, a redirected retry).
    assert!(calls < 300, "{calls} script calls for 30 locks over 6 s");
}
