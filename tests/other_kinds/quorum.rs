//! The quorum lock (Redlock) over independent masters: exclusion under contention, a minority
//! down still grants, a majority down gives a clear error and leaves nothing held, fences keep
//! increasing across holders when nodes restart empty, a node that restarted without its data is
//! kept out for one TTL (exclusion holds), one node's clock jump changes nothing to a holder that
//! committed on all three nodes (one granted by exactly two is not safe from it: dlock-model's
//! quorum model, `a_clock_jump_on_one_node_breaks_the_fence_order`), one node's pause changes
//! nothing, clocks jumping on a majority are caught by the fence, a grant without enough validity left is
//! refused, the guard is lost when a majority of its leases is, and `extend` renews by majority.
//!
//! New nodes count only one TTL after their first use (they cannot be told from nodes that lost
//! their data), so each test's first grant comes one TTL in.
//!
//! Standalone nodes only (`RedisNodes`), not `backend_tests!`: the algorithm runs over N
//! independent servers, each of which is one backend.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use dlock_core::{Client, ErrorKind, ExtendOutcome, MutexOptions, QuorumMutex};
use dlock_testkit::{RedisNodes, ServerOptions};

use crate::support::{client, eventually};

fn nodes(n: usize) -> RedisNodes {
    RedisNodes::start(n).unwrap_or_else(|e| panic!("could not start redis nodes: {e}"))
}

/// One client per node (lazy: a killed node fails its requests, not the build).
fn clients(nodes: &RedisNodes) -> Vec<Client> {
    nodes.nodes().iter().map(client).collect()
}

fn quorum(nodes: &RedisNodes, name: &str, ttl: Duration) -> QuorumMutex {
    QuorumMutex::new(clients(nodes), name, MutexOptions::new().ttl(ttl)).unwrap()
}

/// Whether `name` is free on node `i` (taken and given back by a fresh client there).
async fn free_on(nodes: &RedisNodes, i: usize, name: &str) -> bool {
    let lock = client(&nodes.nodes()[i]).mutex(name).unwrap();
    match lock.try_acquire().await {
        Ok(Some(guard)) => {
            guard.release().await.unwrap();
            true
        }
        _ => false,
    }
}

#[tokio::test]
async fn only_an_odd_number_of_at_least_three_nodes() {
    let servers = nodes(4);
    let all = clients(&servers);
    for n in [0, 1, 2, 4] {
        let err = QuorumMutex::new(all[..n].to_vec(), "q", MutexOptions::new()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{n} nodes");
        assert!(err.to_string().contains("odd number"), "{err}");
    }
    assert!(QuorumMutex::new(all[..3].to_vec(), "q", MutexOptions::new()).is_ok());
}

/// Several tasks, each with its own clients, contend; an observer counter never sees two
/// inside, and the fences seen inside strictly increase.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exclusion_under_contention() {
    let servers = nodes(3);
    let inside = Arc::new(AtomicUsize::new(0));
    let fences = Arc::new(std::sync::Mutex::new(Vec::new()));
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let lock = quorum(&servers, "q:contended", Duration::from_secs(5));
            let (inside, fences) = (inside.clone(), fences.clone());
            tokio::spawn(async move {
                for _ in 0..8 {
                    let guard = lock.acquire_timeout(Duration::from_secs(60)).await.unwrap();
                    assert_eq!(
                        inside.fetch_add(1, Ordering::SeqCst),
                        0,
                        "two holders inside"
                    );
                    fences.lock().unwrap().push(guard.fencing_token());
                    tokio::task::yield_now().await;
                    inside.fetch_sub(1, Ordering::SeqCst);
                    assert!(guard.release().await.was_held());
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let fences = fences.lock().unwrap();
    assert_eq!(fences.len(), 32);
    assert!(
        fences.windows(2).all(|w| w[0] < w[1]),
        "fences out of order: {fences:?}"
    );
}

#[tokio::test]
async fn a_minority_down_still_grants() {
    let mut servers = nodes(3);
    servers.nodes_mut()[0].kill();
    let lock = quorum(&servers, "q:minority", Duration::from_secs(5));
    let guard = lock.acquire_timeout(Duration::from_secs(10)).await.unwrap();
    assert_eq!(guard.nodes().collect::<Vec<_>>(), [1, 2]);
    assert!(guard.remaining() > Duration::ZERO);
    assert!(!free_on(&servers, 1, "q:minority").await);
    let report = guard.release().await;
    assert!(report.was_held(), "{report:?}");
    assert!(free_on(&servers, 1, "q:minority").await);
    assert!(free_on(&servers, 2, "q:minority").await);
}

#[tokio::test]
async fn a_majority_down_is_a_clear_error_and_leaves_nothing_held() {
    let mut servers = nodes(3);
    servers.nodes_mut()[0].kill();
    servers.nodes_mut()[1].kill();
    let lock = quorum(&servers, "q:majority", Duration::from_secs(5));
    let err = lock
        .acquire_timeout(Duration::from_millis(500))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Busy);
    let text = err.to_string();
    for node in ["node 0:", "node 1:", "node 2: granted"] {
        assert!(text.contains(node), "`{node}` missing from: {text}");
    }
    assert!(
        free_on(&servers, 2, "q:majority").await,
        "left held on the live node"
    );
    // Without a wait limit: a connection error naming the nodes, not a wait that never ends.
    let err = tokio::time::timeout(Duration::from_secs(10), lock.acquire())
        .await
        .expect("an unbounded acquire ends when a majority is unreachable")
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    assert!(err.to_string().contains("node 0:"), "{err}");
    assert!(free_on(&servers, 2, "q:majority").await);
}

/// The counter key of a node's slot, read from the node (one lock name in use there).
fn counter_key(servers: &RedisNodes, i: usize) -> String {
    let mut con = servers.nodes()[i].connection().unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*fence:*").query(&mut con).unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
    keys[0].clone()
}

/// A node that issued far larger fences than the others is restarted empty: the next holder's
/// fences come from nodes that never issued such large ones, and still exceed the last holder's
/// (round 2 raised their counters). Fails when the quorum fence is only the round's maximum.
#[tokio::test]
async fn fences_increase_across_holders_and_empty_restarts() {
    let mut servers = nodes(3);
    let ttl = Duration::from_secs(5);
    let wait = Duration::from_secs(10);
    let first = quorum(&servers, "q:fence", ttl)
        .acquire_timeout(wait)
        .await
        .unwrap();
    let mut last = first.fencing_token();
    assert!(first.release().await.was_held());
    // Node 0 has issued many more fences than the others.
    let key = counter_key(&servers, 0);
    let mut con = servers.nodes()[0].connection().unwrap();
    let () = redis::cmd("SET")
        .arg(&key)
        .arg(5_000_000_000_000_000u64)
        .query(&mut con)
        .unwrap();
    for restart in [Some(0), Some(1), None, Some(2)] {
        let guard = quorum(&servers, "q:fence", ttl)
            .acquire_timeout(wait)
            .await
            .unwrap();
        let fence = guard.fencing_token();
        assert!(
            fence > last,
            "fence {fence} after {last} (restart {restart:?})"
        );
        last = fence;
        assert!(guard.release().await.was_held());
        if let Some(i) = restart {
            // Restarted empty; nobody holds the lock, so it may come back at once.
            servers.nodes_mut()[i].restart().unwrap();
        }
    }
    assert!(last.get() > 5_000_000_000_000_000);
}

/// Node 2 is paused: the attempt waits its whole per-node timeout, which leaves a majority
/// (nodes 0 and 1) granted but less than the minimum validity: refused, nothing held.
#[tokio::test]
async fn a_grant_without_enough_validity_is_refused() {
    let servers = nodes(3);
    let lock = quorum(&servers, "q:validity", Duration::from_secs(1))
        .node_timeout(Duration::from_millis(950));
    // Past the nodes' first TTL, and every connection warm, so the refusal is the pause's doing.
    let _ = lock
        .acquire_timeout(Duration::from_secs(5))
        .await
        .unwrap()
        .release()
        .await;
    servers.nodes()[2].pause().unwrap();
    let err = lock.acquire_timeout(Duration::ZERO).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Busy);
    let text = err.to_string();
    assert!(text.contains("lease was left"), "{text}");
    assert!(text.contains("node 2: no answer within"), "{text}");
    assert!(free_on(&servers, 0, "q:validity").await);
    assert!(free_on(&servers, 1, "q:validity").await);
    servers.nodes()[2].resume().unwrap();
    // The timed-out acquire on node 2 ran when it resumed and is released in the background.
    eventually(Duration::from_secs(10), "node 2 free again", || async {
        free_on(&servers, 2, "q:validity").await.then_some(())
    })
    .await;
    let guard = lock
        .try_acquire()
        .await
        .unwrap()
        .expect("granted once node 2 answers");
    assert!(guard.release().await.was_held());
}

/// With the watchdog, the guard survives as long as a majority of its leases is renewed, and
/// is lost when it is not.
#[tokio::test]
async fn the_guard_is_lost_with_its_majority() {
    let mut servers = nodes(3);
    let options = MutexOptions::new()
        .ttl(Duration::from_millis(300))
        .watchdog();
    let lock = QuorumMutex::new(clients(&servers), "q:lost", options).unwrap();
    let guard = lock.acquire_timeout(Duration::from_secs(10)).await.unwrap();
    let cancel = guard.cancellation_token();
    servers.nodes_mut()[0].kill();
    assert!(!guard.is_lost());
    servers.nodes_mut()[1].kill();
    let lost = tokio::time::timeout(Duration::from_secs(10), guard.lost())
        .await
        .expect("lost within the lease");
    assert!(guard.is_lost(), "{lost}");
    assert!(cancel.is_cancelled());
    assert_eq!(guard.remaining(), Duration::ZERO);
}

/// One grant and release, waiting out the nodes' first TTL (new nodes count only after it).
async fn past_first_use(lock: &QuorumMutex) {
    let guard = lock.acquire_timeout(lock.ttl() * 4).await.unwrap();
    assert!(guard.release().await.was_held());
}

/// A holds nodes 0 and 1 (node 2 is down); node 1 restarts without its data and node 2 comes
/// back empty. B could then take nodes 1 and 2 at once while A's lease runs; instead both are
/// kept out for one TTL, and B is granted only once A's lease has certainly ended. Fails when
/// a node that lost its data counts at once.
#[tokio::test]
async fn a_node_restarted_empty_is_kept_out_for_one_ttl() {
    let mut servers = nodes(3);
    let ttl = Duration::from_secs(2);
    let lock = quorum(&servers, "q:restart", ttl);
    past_first_use(&lock).await;
    servers.nodes_mut()[2].kill();
    let a = lock.acquire_timeout(Duration::from_secs(10)).await.unwrap();
    assert_eq!(a.nodes().collect::<Vec<_>>(), [0, 1]);
    servers.nodes_mut()[1].restart().unwrap();
    servers.nodes_mut()[2].restart().unwrap();

    let b_lock = quorum(&servers, "q:restart", ttl);
    let err = b_lock.acquire_timeout(Duration::ZERO).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Busy);
    let text = err.to_string();
    assert!(text.contains("node 1: kept out for"), "{text}");
    assert!(text.contains("node 2: kept out for"), "{text}");
    assert!(
        a.remaining() > Duration::ZERO,
        "the test ran too slowly for its TTL"
    );

    let b = b_lock
        .acquire_timeout(Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(
        a.remaining(),
        Duration::ZERO,
        "B was granted while A's lease could still run"
    );
    assert!(b.fencing_token() > a.fencing_token());
    assert!(b.release().await.was_held());
}

fn clock_nodes() -> RedisNodes {
    RedisNodes::start_with(3, ServerOptions::new().movable_clock())
        .unwrap_or_else(|e| panic!("could not start redis nodes: {e}"))
}

/// One node's clock jumps past A's lease while A holds all three nodes: A's hold there is gone,
/// but B still finds nodes 1 and 2 held and is refused, and A's release finds a majority. (Had A
/// been granted by two nodes only, the jump could have let B in: see the module docs.) Then clocks jump on a majority:
/// Redlock's timing assumption is broken and B is granted while A's validity still runs — and
/// B's fence is larger, so a store that checks fences refuses A's writes.
#[tokio::test]
async fn a_clock_jump_on_one_of_three_held_nodes_changes_nothing_and_on_a_majority_the_fence_orders()
 {
    let servers = clock_nodes();
    let ttl = Duration::from_secs(5);
    let lock = quorum(&servers, "q:clock", ttl);
    past_first_use(&lock).await;

    let a = lock.acquire_timeout(Duration::from_secs(10)).await.unwrap();
    servers.nodes()[0].jump_clock(ttl * 2).unwrap();
    assert!(
        free_on(&servers, 0, "q:clock").await,
        "the jump kept A's hold on node 0"
    );
    let err = lock.acquire_timeout(Duration::ZERO).await.unwrap_err();
    assert!(
        err.to_string().contains("node 1: held by another owner"),
        "{err}"
    );
    let report = a.release().await;
    assert!(report.was_held(), "{report:?}");

    let a = lock.acquire_timeout(Duration::from_secs(10)).await.unwrap();
    servers.nodes()[1].jump_clock(ttl * 2).unwrap();
    servers.nodes()[2].jump_clock(ttl * 2).unwrap();
    let b = lock.acquire_timeout(Duration::from_secs(10)).await.unwrap();
    assert!(
        a.remaining() > Duration::ZERO,
        "A's validity ran out: the jump was not what let B in"
    );
    assert!(
        b.fencing_token() > a.fencing_token(),
        "fence {} after {}",
        b.fencing_token(),
        a.fencing_token()
    );
    assert!(b.release().await.was_held());
}

/// A node paused (SIGSTOP) under a watchdog-renewed guard: the other two keep the majority,
/// the guard is not lost, and nobody else is granted; after it resumes the release finds a
/// majority.
#[tokio::test]
async fn a_paused_node_does_not_lose_the_guard() {
    let servers = nodes(3);
    let ttl = Duration::from_millis(600);
    let options = MutexOptions::new().ttl(ttl).watchdog();
    let lock = QuorumMutex::new(clients(&servers), "q:paused", options).unwrap();
    past_first_use(&lock).await;
    let guard = lock.acquire_timeout(Duration::from_secs(10)).await.unwrap();
    servers.nodes()[2].pause().unwrap();
    // Several leases' worth of renewals with node 2 silent (no event to await: the guard must
    // *not* be lost).
    let lost = tokio::time::timeout(ttl * 4, guard.lost()).await;
    assert!(
        lost.is_err(),
        "lost with a majority still renewed: {lost:?}"
    );
    let other = quorum(&servers, "q:paused", ttl);
    let err = other.acquire_timeout(Duration::ZERO).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Busy, "{err}");
    servers.nodes()[2].resume().unwrap();
    let report = guard.release().await;
    assert!(report.was_held(), "{report:?}");
}

/// `extend` renews every node at once: a longer lease when a majority took it, and not
/// `Extended` once a majority is gone.
#[tokio::test]
async fn extend_renews_by_majority() {
    let mut servers = nodes(3);
    let ttl = Duration::from_secs(2);
    let lock = quorum(&servers, "q:extend", ttl);
    past_first_use(&lock).await;
    let mut guard = lock.acquire_timeout(Duration::from_secs(10)).await.unwrap();
    assert!(guard.remaining() <= ttl);
    let outcome = guard.extend(Duration::from_secs(20)).await.unwrap();
    assert_eq!(outcome, ExtendOutcome::Extended);
    assert!(guard.remaining() > ttl, "{:?}", guard.remaining());
    servers.nodes_mut()[0].kill();
    assert_eq!(
        guard.extend(Duration::from_secs(20)).await.unwrap(),
        ExtendOutcome::Extended,
        "two of three nodes still extend"
    );
    servers.nodes_mut()[1].kill();
    let outcome = guard.extend(Duration::from_secs(20)).await.unwrap();
    assert_ne!(outcome, ExtendOutcome::Extended);
}
