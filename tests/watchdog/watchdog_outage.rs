//! The watchdog through trouble: an outage is logged once (not once per failed call) and
//! retried with backoff (not as fast as calls fail); a lease whose Redis hangs past its
//! safe-until is lost then, as unreachable, not later as removed by someone; one lock key of
//! another type in a renewal batch costs only that lock.

use std::collections::HashMap;
use std::time::Duration;

use dlock_core::{LostReason, MutexOptions};

use crate::support::{Backend, LogCapture, backend_tests};

/// How many script calls renew all of `names` once: 100 locks per call, and on a cluster only
/// locks of one master (shard) together.
fn calls_per_round(backend: &Backend, names: &[String]) -> usize {
    let mut per_node = HashMap::new();
    for name in names {
        let node = backend.server_of(&format!("dlock:{{{name}}}")).url();
        *per_node.entry(node).or_insert(0usize) += 1;
    }
    per_node.values().map(|n| n.div_ceil(100)).sum()
}

backend_tests!(
    #[flavor = "current_thread"]
    async fn an_outage_is_logged_once_and_retried_with_backoff(backend: Backend) {
        const LOCKS: usize = 1_000;
        let logs = LogCapture::start();
        let c = backend
            .builder()
            .command_timeout(Duration::from_millis(200))
            .build()
            .unwrap();
        // Renewed every 1.5 s: a failed renewal is retried after 375 ms, then 750 ms, 1.5 s …
        let options = MutexOptions::new()
            .ttl(Duration::from_secs(4))
            .renew_every(Duration::from_millis(1_500));
        let names: Vec<String> = (0..LOCKS).map(|i| format!("out:{i}")).collect();
        let mut guards = Vec::with_capacity(LOCKS);
        for name in &names {
            let lock = c.mutex_with(name, options.clone()).unwrap();
            guards.push(lock.try_acquire().await.unwrap().expect("free"));
        }
        let before = backend.evalsha_calls().await;
        // The fault: Redis (every node of a cluster) frozen for 2.8 s, spanning the first
        // renewal (due at 1.5 s), well within the 4 s leases. Requests time out after 200 ms
        // meanwhile.
        for server in backend.servers() {
            server.pause().unwrap();
        }
        tokio::time::sleep(Duration::from_millis(2_800)).await;
        for server in backend.servers() {
            server.resume().unwrap();
        }
        logs.wait_for("lease renewals work again", Duration::from_secs(10))
            .await;
        // Every request sent during the pause ran when Redis resumed: count them.
        let calls = backend.evalsha_calls().await - before;
        assert_eq!(
            logs.matching("lease renewals failing").len(),
            1,
            "one warning per outage"
        );
        // 1,000 locks are 10 calls per round (on a 3-master cluster 12: 100 per call, calls
        // per master); the backoff allows 3 failed rounds and the one that worked in
        // this window, plus one round of slack (retrying as fast as calls fail would be ~7
        // failed rounds).
        let round = calls_per_round(&backend, &names);
        assert!(
            calls <= u64::try_from(5 * round).unwrap(),
            "{calls} renewal calls during a 2.8 s outage, {round} per round"
        );
        for guard in guards {
            assert!(
                guard.release().await.unwrap().was_held(),
                "lease kept through the outage"
            );
        }
    }

    /// Redis frozen for more than three leases, with a command timeout longer still: the lease
    /// is declared lost at its safe-until, as unreachable, while its renewal is still awaited.
    /// When Redis thaws, that renewal finds the key gone (it ran out on the server's clock):
    /// nobody removed the lock, and the reason stays what was declared first.
    async fn a_lease_past_its_safe_until_while_redis_hangs_is_unreachable_not_removed(
        backend: Backend,
    ) {
        let c = backend
            .builder()
            .command_timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        let lock = c
            .mutex_with(
                "gone",
                MutexOptions::new()
                    .ttl(Duration::from_millis(300))
                    .watchdog(),
            )
            .unwrap();
        let guard = lock.try_acquire().await.unwrap().expect("free");
        let token = guard.cancellation_token();
        let server = backend.server_of("dlock:{gone}");
        server.pause().unwrap();
        let paused_at = std::time::Instant::now();
        let declared = tokio::time::timeout(Duration::from_secs(3), token.cancelled()).await;
        // Frozen past the lock's expiry on the server's clock (its lease is 300 ms), so that the
        // awaited renewal finds the key gone: nothing to await inside a frozen server.
        tokio::time::sleep_until((paused_at + Duration::from_secs(1)).into()).await;
        server.resume().unwrap();
        declared.expect("the watchdog declares the loss while the renewal is awaited");
        assert_eq!(guard.lost().await.reason(), LostReason::Unreachable);
        // The late renewal's answer (the key gone) arrives now: it changes nothing.
        let mut con = backend.raw().await;
        let _: () = redis::cmd("PING").query_async(&mut con).await.unwrap();
        assert_eq!(guard.lost().await.reason(), LostReason::Unreachable);
        assert!(!guard.release().await.unwrap().was_held());
    }

    async fn a_key_of_another_type_in_a_batch_costs_only_its_own_lock(backend: Backend) {
        let c = backend.client();
        let options = MutexOptions::new()
            .ttl(Duration::from_millis(600))
            .watchdog();
        let mut guards = Vec::new();
        for name in ["batch-a", "batch-b", "batch-c"] {
            let lock = c.mutex_with(name, options.clone()).unwrap();
            guards.push(lock.try_acquire().await.unwrap().expect("free"));
        }
        // Another program replaces one lock key with a list.
        let mut con = backend.raw().await;
        let _: () = redis::pipe()
            .atomic()
            .del("dlock:{batch-b}")
            .rpush("dlock:{batch-b}", "x")
            .query_async(&mut con)
            .await
            .unwrap();
        let lost = tokio::time::timeout(Duration::from_secs(5), guards[1].lost())
            .await
            .expect("the replaced lock is reported");
        assert_eq!(lost.reason(), LostReason::TakenOver);
        // The others keep being renewed: held three leases on.
        let tokens = [
            guards[0].cancellation_token(),
            guards[2].cancellation_token(),
        ];
        let cancelled = tokio::time::timeout(Duration::from_millis(1_800), async {
            tokio::select! {
                () = tokens[0].cancelled() => {}
                () = tokens[1].cancelled() => {}
            }
        })
        .await;
        assert!(
            cancelled.is_err(),
            "a healthy lock was lost with the bad one"
        );
        let kind: String = redis::cmd("TYPE")
            .arg("dlock:{batch-b}")
            .query_async(&mut con)
            .await
            .unwrap();
        assert_eq!(kind, "list", "the foreign key is left as it was");
        let c_guard = guards.pop().unwrap();
        let b_guard = guards.pop().unwrap();
        let a_guard = guards.pop().unwrap();
        assert!(a_guard.release().await.unwrap().was_held());
        assert!(c_guard.release().await.unwrap().was_held());
        drop(b_guard);
    }
);
