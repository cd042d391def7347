//! The watchdog through trouble: an outage is logged once (not once per failed call) and
//! retried with backoff (not as fast as calls fail); a lease found gone after it could have run
//! out is reported as expired, not as removed by someone; one lock key of another type in a
//! renewal batch costs only that lock.

use std::time::Duration;

use dlock_core::{Client, LostReason, MutexOptions};

use crate::support::{LogCapture, client, raw, redis};

async fn evalsha_calls(con: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(con)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn an_outage_is_logged_once_and_retried_with_backoff() {
    const LOCKS: usize = 1_000;
    let logs = LogCapture::start();
    let server = redis();
    let c = Client::builder(server.url().as_str())
        .command_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    // Renewed every 1.5 s: a failed renewal is retried after 375 ms, then 750 ms, 1.5 s …
    let options = MutexOptions::new()
        .ttl(Duration::from_secs(4))
        .renew_every(Duration::from_millis(1_500));
    let mut guards = Vec::with_capacity(LOCKS);
    for i in 0..LOCKS {
        let lock = c.mutex_with(&format!("out:{i}"), options.clone()).unwrap();
        guards.push(lock.try_acquire().await.unwrap().expect("free"));
    }
    let mut con = raw(&server).await;
    let before = evalsha_calls(&mut con).await;
    // The fault: Redis frozen for 2.8 s, spanning the first renewal (due at 1.5 s), well
    // within the 4 s leases. Requests time out after 200 ms meanwhile.
    server.pause().unwrap();
    tokio::time::sleep(Duration::from_millis(2_800)).await;
    server.resume().unwrap();
    logs.wait_for("lease renewals work again", Duration::from_secs(10))
        .await;
    // Every request sent during the pause ran when Redis resumed: count them.
    let calls = evalsha_calls(&mut con).await - before;
    assert_eq!(
        logs.matching("lease renewals failing").len(),
        1,
        "one warning per outage"
    );
    // 1,000 locks are 10 calls per round; the backoff allows 3 failed rounds and the one that
    // worked in this window (retrying as fast as calls fail would be ~7 failed rounds).
    assert!(
        calls <= 4 * 10 + 10,
        "{calls} renewal calls during a 2.8 s outage"
    );
    for guard in guards {
        assert!(
            guard.release().await.unwrap().was_held(),
            "lease kept through the outage"
        );
    }
}

#[tokio::test]
async fn a_lease_found_gone_after_it_could_have_expired_is_reported_expired() {
    let server = redis();
    let c = Client::builder(server.url().as_str())
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
    // The fault: Redis frozen for more than three leases. A renewal sent in time reaches it only
    // after the lease ran out on the server's clock: nobody removed the lock.
    server.pause().unwrap();
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    server.resume().unwrap();
    tokio::time::timeout(Duration::from_secs(10), token.cancelled())
        .await
        .expect("the watchdog reports the loss");
    assert_eq!(guard.lost().await.reason(), LostReason::Expired);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_of_another_type_in_a_batch_costs_only_its_own_lock() {
    let server = redis();
    let c = client(&server);
    let options = MutexOptions::new()
        .ttl(Duration::from_millis(600))
        .watchdog();
    let mut guards = Vec::new();
    for name in ["batch-a", "batch-b", "batch-c"] {
        let lock = c.mutex_with(name, options.clone()).unwrap();
        guards.push(lock.try_acquire().await.unwrap().expect("free"));
    }
    // Another program replaces one lock key with a list.
    let mut con = raw(&server).await;
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
