//! single_flight on real Redis across three replicas (a client each): one computation for
//! many concurrent callers, a failed winner handing over to exactly one waiter, a winner that
//! lost its lease storing nothing, size limits, timeouts and Redis down.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use dlock_core::Client;
use dlock_testkit::RedisServer;
use dlock_tower::{ErrorKind, SingleFlightExt, SingleFlightOptions};
use futures_util::future::join_all;
use tokio::sync::Semaphore;

use crate::support::replica;

const KEY: &str = "prices:eu";
const CHANNEL: &str = "singleflight:{sf:prices:eu}:done";

/// Waits until `n` clients listen on the key's channel (each client subscribes once for all
/// its waiters): they are waiting for a result, not computing.
async fn until_listening(server: &RedisServer, n: i64) {
    let mut con = server.connection().unwrap();
    loop {
        let counts: Vec<(String, i64)> = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(CHANNEL)
            .query(&mut con)
            .unwrap();
        if counts.first().is_some_and(|(_, c)| *c >= n) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn replicas(server: &RedisServer, n: usize) -> Vec<Client> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(replica(&server.url()).await);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_callers_across_replicas_compute_once() {
    let server = RedisServer::start().unwrap();
    let clients = replicas(&server, 3).await;
    let computed = Arc::new(AtomicUsize::new(0));
    let calls = (0..30).map(|i| {
        let client = clients[i % 3].clone();
        let computed = computed.clone();
        let server = &server;
        async move {
            client
                .single_flight(KEY, Duration::from_secs(10), || async move {
                    // Hold the flight until every replica has a caller waiting for it.
                    until_listening(server, 3).await;
                    Ok::<_, std::io::Error>(vec![
                        100 + computed.fetch_add(1, Ordering::SeqCst) as u32,
                    ])
                })
                .await
        }
    });
    let results = join_all(calls).await;
    assert_eq!(computed.load(Ordering::SeqCst), 1);
    for result in results {
        assert_eq!(result.unwrap(), vec![100]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_winner_hands_over_to_exactly_one_waiter() {
    let server = RedisServer::start().unwrap();
    let clients = replicas(&server, 3).await;
    let computed = Arc::new(AtomicUsize::new(0));
    let calls = (0..12).map(|i| {
        let client = clients[i % 3].clone();
        let computed = computed.clone();
        let server = &server;
        async move {
            client
                .single_flight(KEY, Duration::from_secs(10), || async move {
                    let n = computed.fetch_add(1, Ordering::SeqCst);
                    if n == 0 {
                        until_listening(server, 3).await;
                        return Err(std::io::Error::other("upstream down"));
                    }
                    Ok(n as u32)
                })
                .await
        }
    });
    let results = join_all(calls).await;
    assert_eq!(
        computed.load(Ordering::SeqCst),
        2,
        "not exactly one successor computed"
    );
    let failed: Vec<_> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].kind(), ErrorKind::Compute);
    assert!(
        results
            .iter()
            .filter_map(|r| r.as_ref().ok())
            .all(|v| *v == 1)
    );
}

/// The winner's lease is lost while it computes (`expire_lock`); a waiter takes over and its
/// result is shared; the stale winner's result is refused (its caller gets LeaseLost) and
/// reaches nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_winner_that_lost_its_lease_shares_nothing() {
    let server = RedisServer::start().unwrap();
    let clients = replicas(&server, 2).await;
    let gate = Arc::new(Semaphore::new(0));
    let started = Arc::new(Semaphore::new(0));
    let options = SingleFlightOptions::default().recheck(Duration::from_millis(20));
    let stale = {
        let (client, gate, started, options) = (
            clients[0].clone(),
            gate.clone(),
            started.clone(),
            options.clone(),
        );
        tokio::spawn(async move {
            client
                .single_flight_with(KEY, Duration::from_secs(10), &options, || async move {
                    started.add_permits(1);
                    gate.acquire().await.unwrap().forget();
                    Ok::<_, std::io::Error>("stale".to_owned())
                })
                .await
        })
    };
    started.acquire().await.unwrap().forget();
    assert_eq!(server.expire_lock(&format!("sf:{KEY}")).unwrap(), 1);
    let successor = clients[1]
        .single_flight_with(KEY, Duration::from_secs(10), &options, || async {
            Ok::<_, std::io::Error>("fresh".to_owned())
        })
        .await
        .unwrap();
    assert_eq!(successor, "fresh");
    gate.add_permits(1);
    let e = stale.await.unwrap().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LeaseLost, "{e}");
    let later: String = clients[0]
        .single_flight(KEY, Duration::from_secs(10), || async {
            Ok::<_, std::io::Error>("again".to_owned())
        })
        .await
        .unwrap();
    assert_eq!(later, "fresh");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_timeouts_and_redis_down() {
    let mut server = RedisServer::start().unwrap();
    let client = replica(&server.url()).await;
    // Over the size limit: refused, nothing stored, the next caller computes.
    let small = SingleFlightOptions::default().max_size(16);
    let e = client
        .single_flight_with(KEY, Duration::from_secs(10), &small, || async {
            Ok::<_, std::io::Error>("x".repeat(64))
        })
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TooLarge);
    let spinning = SingleFlightOptions::default().recheck(Duration::ZERO);
    let e = client
        .single_flight_with(KEY, Duration::from_secs(1), &spinning, || async {
            Ok::<_, std::io::Error>(1u8)
        })
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    let v: u8 = client
        .single_flight(KEY, Duration::from_secs(10), || async {
            Ok::<_, std::io::Error>(7)
        })
        .await
        .unwrap();
    assert_eq!(v, 7);

    // A caller that waits for a flight that does not end gives up at its wait.
    let gate = Arc::new(Semaphore::new(0));
    let started = Arc::new(Semaphore::new(0));
    let holder = {
        let (client, gate, started) = (client.clone(), gate.clone(), started.clone());
        tokio::spawn(async move {
            client
                .single_flight("slow", Duration::from_secs(1), || async move {
                    started.add_permits(1);
                    gate.acquire().await.unwrap().forget();
                    Ok::<_, std::io::Error>(1u8)
                })
                .await
        })
    };
    started.acquire().await.unwrap().forget();
    let impatient = SingleFlightOptions::default()
        .wait(Duration::from_millis(200))
        .recheck(Duration::from_millis(20));
    let waited = client
        .single_flight_with("slow", Duration::from_secs(1), &impatient, || async {
            Ok::<_, std::io::Error>(2u8)
        })
        .await;
    assert_eq!(waited.unwrap_err().kind(), ErrorKind::Timeout);
    gate.add_permits(1);
    assert_eq!(holder.await.unwrap().unwrap(), 1);

    server.kill();
    let e = client
        .single_flight("k", Duration::from_secs(1), || async {
            Ok::<_, std::io::Error>(1u8)
        })
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Core);
    assert!(e.is_unavailable());
    let open = SingleFlightOptions::default().fail_open(true);
    let v = client
        .single_flight_with("k", Duration::from_secs(1), &open, || async {
            Ok::<_, std::io::Error>(3u8)
        })
        .await
        .unwrap();
    assert_eq!(v, 3);
}
