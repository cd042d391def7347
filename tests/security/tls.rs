//! TLS (`rediss://`) against a real `redis-server` with a TLS port and certificates made at test
//! time: locks, waits and the watchdog over TLS; mutual TLS; a wrong CA, a plain URL to the TLS
//! port and `rediss://` to the plain port each end in an error within the connect timeout that
//! says what is wrong, never a hang; the development opt-out; TLS settings on a plain URL are
//! refused.
//!
//! And the same over the other deployments: a Sentinel deployment all over TLS (sentinels on
//! `tls-port`, nodes with `tls-replication yes`, mutual TLS required) where the client follows a
//! failover to the new master over TLS, and a wrong CA there; a 3-master Cluster over TLS
//! (`tls-cluster yes`).
//!
//! On a server built without TLS (the Valkey builds `make test-compat` runs on) each test that
//! needs a TLS server says `SKIPPED <test>: <why>` and returns.

use std::time::{Duration, Instant};

use dlock_core::{Client, ClientBuilder, ErrorKind, MutexOptions};
use dlock_testkit::{
    RedisCluster, RedisReplicaSet, RedisSentinels, RedisServer, ServerOptions, unrelated_ca_pem,
};

use crate::support::mutex_round;

fn tls_server(options: ServerOptions) -> RedisServer {
    RedisServer::start_with(options).unwrap_or_else(|e| panic!("TLS redis-server: {e}"))
}

fn builder(url: &str) -> ClientBuilder {
    Client::builder(url)
        .command_timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_secs(1))
}

/// Connects (PING) and returns the error, checking it came within the connect timeout.
async fn refused(builder: ClientBuilder) -> dlock_core::Error {
    let started = Instant::now();
    let err = builder.connect().await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}: {err}",
        started.elapsed()
    );
    err
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_waits_and_the_watchdog_work_over_tls() {
    if crate::support::skipped_without_tls("locks_waits_and_the_watchdog_work_over_tls") {
        return;
    }
    let server = tls_server(ServerOptions::new().tls());
    let tls = server.tls().unwrap();
    let url = server.tls_url().unwrap();
    let client = builder(&url)
        .tls_ca_pem(tls.ca_pem.clone())
        .connect()
        .await
        .unwrap();
    // Renewed over TLS past its lease, handed to a waiter woken over TLS pub/sub, inspected
    // and forced open.
    mutex_round(&client).await;
}

#[tokio::test]
async fn mutual_tls_needs_the_client_certificate() {
    if crate::support::skipped_without_tls("mutual_tls_needs_the_client_certificate") {
        return;
    }
    let server = tls_server(ServerOptions::new().tls_client_cert_required());
    let tls = server.tls().unwrap().clone();
    let url = server.tls_url().unwrap();
    let client = builder(&url)
        .tls_ca_pem(tls.ca_pem.clone())
        .tls_client_cert_pem(tls.client_cert_pem.clone(), tls.client_key_pem.clone())
        .connect()
        .await
        .unwrap();
    let guard = client.mutex("m").unwrap().acquire().await.unwrap();
    guard.release().await.unwrap();

    let err = refused(builder(&url).tls_ca_pem(tls.ca_pem.clone())).await;
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
}

#[tokio::test]
async fn a_wrong_ca_is_an_error_naming_the_certificate_problem() {
    if crate::support::skipped_without_tls("a_wrong_ca_is_an_error_naming_the_certificate_problem")
    {
        return;
    }
    let server = tls_server(ServerOptions::new().tls());
    let url = server.tls_url().unwrap();
    let err = refused(builder(&url).tls_ca_pem(unrelated_ca_pem().unwrap())).await;
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    let text = err.to_string();
    assert!(text.contains("certificate"), "{text}");

    // Without a CA, the system's roots do not know the test CA either.
    let err = refused(builder(&url)).await;
    assert!(err.to_string().contains("certificate"), "{err}");

    // The development opt-out accepts it.
    let client = builder(&url)
        .tls_insecure_dev_only()
        .connect()
        .await
        .unwrap();
    client
        .mutex("m")
        .unwrap()
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
}

#[tokio::test]
async fn plain_and_tls_mixed_up_are_errors_that_name_tls() {
    if crate::support::skipped_without_tls("plain_and_tls_mixed_up_are_errors_that_name_tls") {
        return;
    }
    let server = tls_server(ServerOptions::new().tls());
    let tls_port = server.tls_port().unwrap();
    let plain_to_tls = format!("redis://127.0.0.1:{tls_port}/");
    let err = refused(builder(&plain_to_tls)).await;
    assert!(err.to_string().contains("rediss://"), "{err}");

    let tls_to_plain = format!("rediss://127.0.0.1:{}/", server.port());
    let err =
        refused(builder(&tls_to_plain).tls_ca_pem(server.tls().unwrap().ca_pem.clone())).await;
    assert!(err.to_string().contains("not TLS"), "{err}");
}

#[tokio::test]
async fn tls_settings_need_a_rediss_url() {
    let server = dlock_testkit::RedisServer::start().unwrap();
    let err = builder(&server.url())
        .tls_ca_pem(unrelated_ca_pem().unwrap())
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("rediss://"), "{err}");
}

/// A Sentinel client given the TLS sentinels' `rediss://` URLs, the CA and the client
/// certificate (every server requires one).
fn sentinel_tls_builder(sentinels: &RedisSentinels) -> ClientBuilder {
    let tls = sentinels.tls().unwrap().clone();
    Client::sentinel_builder(sentinels.master_name(), sentinels.tls_urls().unwrap())
        .tls_ca_pem(tls.ca_pem)
        .tls_client_cert_pem(tls.client_cert_pem, tls.client_key_pem)
        .connect_timeout(Duration::from_secs(1))
}

/// Everything TLS: the sentinels are asked over TLS and name the master's TLS port, which the
/// client reaches over TLS with the same CA and client certificate (the servers refuse a client
/// without one); a waiter is handed the lock; after the master dies the client follows the
/// sentinels to the promoted replica (its TLS port) and acquires there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_deployment_over_tls_locks_waits_and_follows_a_failover() {
    if crate::support::skipped_without_tls(
        "a_sentinel_deployment_over_tls_locks_waits_and_follows_a_failover",
    ) {
        return;
    }
    let options = ServerOptions::new().tls_client_cert_required();
    let mut set = tokio::task::block_in_place(|| RedisReplicaSet::start_with(2, options)).unwrap();
    let sentinels = tokio::task::block_in_place(|| RedisSentinels::start(&set)).unwrap();
    let (_, named) = sentinels.master_addr(0).unwrap();
    assert_eq!(
        Some(named),
        set.master().tls_port(),
        "sentinels name TLS ports"
    );
    let client = sentinel_tls_builder(&sentinels)
        .command_timeout(Duration::from_secs(5))
        .connect()
        .await
        .unwrap();

    let lock = client
        .mutex_with(
            "tls-sentinel",
            MutexOptions::new()
                .ttl(Duration::from_millis(600))
                .watchdog(),
        )
        .unwrap();
    let guard = lock.acquire().await.unwrap();
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.acquire_timeout(Duration::from_secs(10)).await })
    };
    crate::support::eventually(Duration::from_secs(5), "a queued waiter", || async {
        client
            .inspect("tls-sentinel")
            .await
            .unwrap()
            .filter(|i| i.waiters == 1)
    })
    .await;
    assert!(guard.fencing_token().await.unwrap().get() > 0);
    guard.release().await.unwrap();
    let second = waiter.await.unwrap().unwrap();
    second.release().await.unwrap();
    tokio::task::block_in_place(|| set.wait_synced()).unwrap();

    crate::operate::sentinel::lose_the_master(&mut set, &sentinels, None);
    let (_, new) = sentinels.master_addr(0).unwrap();
    let promoted = set.replica_index(new).expect("a replica was promoted");
    assert_eq!(set.replicas()[promoted].tls_port(), Some(new));
    let after = lock.acquire_timeout(Duration::from_secs(30)).await.unwrap();
    // Taken on the promoted replica (looked at through its plain port).
    let held: bool = redis::cmd("EXISTS")
        .arg("dlock:{tls-sentinel}")
        .query(&mut set.replicas()[promoted].connection().unwrap())
        .unwrap();
    assert!(held, "the lock is held on the new master");
    after.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_ca_with_sentinel_tls_is_an_error_naming_the_certificate_problem() {
    if crate::support::skipped_without_tls(
        "a_wrong_ca_with_sentinel_tls_is_an_error_naming_the_certificate_problem",
    ) {
        return;
    }
    let options = ServerOptions::new().tls();
    let set = tokio::task::block_in_place(|| RedisReplicaSet::start_with(1, options)).unwrap();
    let sentinels = tokio::task::block_in_place(|| RedisSentinels::start_with(&set, 1)).unwrap();
    let err = refused(
        Client::sentinel_builder(sentinels.master_name(), sentinels.tls_urls().unwrap())
            .tls_ca_pem(unrelated_ca_pem().unwrap())
            .connect_timeout(Duration::from_secs(1)),
    )
    .await;
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    let text = err.to_string();
    assert!(text.contains("certificate"), "{text}");
    let addr = sentinels.tls_urls().unwrap()[0].clone();
    let addr = addr.trim_start_matches("rediss://").trim_end_matches('/');
    assert!(text.contains(addr), "names the sentinel {addr}: {text}");

    // The right CA connects (mutual TLS optional here).
    let client = Client::sentinel_builder(sentinels.master_name(), sentinels.tls_urls().unwrap())
        .tls_ca_pem(sentinels.tls().unwrap().ca_pem.clone())
        .connect()
        .await
        .unwrap();
    client.ping().await.unwrap();
}

#[tokio::test]
async fn sentinel_urls_mixing_plain_and_tls_are_refused() {
    let err = Client::sentinel_builder("m", ["rediss://127.0.0.1:1/", "redis://127.0.0.1:2/"])
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("rediss://"), "{err}");
    // TLS settings need rediss:// sentinels, as they need a rediss:// URL elsewhere.
    let err = Client::sentinel_builder("m", ["redis://127.0.0.1:1/"])
        .tls_ca_pem(unrelated_ca_pem().unwrap())
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
}

/// A 3-master cluster with `tls-cluster yes`, reached only through its TLS ports: discovery
/// (the nodes announce their TLS ports to a TLS client), locks on every master, a waiter
/// handed the lock over sharded pub/sub, and the watchdog.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_waits_and_the_watchdog_work_on_a_tls_cluster() {
    if crate::support::skipped_without_tls("locks_waits_and_the_watchdog_work_on_a_tls_cluster") {
        return;
    }
    let options = ServerOptions::new().tls_client_cert_required();
    let cluster = tokio::task::block_in_place(|| RedisCluster::start_with(3, options)).unwrap();
    let tls = cluster.tls().unwrap().clone();
    let client = Client::cluster_builder(cluster.tls_urls().unwrap())
        .tls_ca_pem(tls.ca_pem.clone())
        .tls_client_cert_pem(tls.client_cert_pem.clone(), tls.client_key_pem.clone())
        .command_timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_secs(1))
        .connect()
        .await
        .unwrap();
    // Names spread over the three masters' slots.
    for name in ["a", "b", "c", "d", "e", "f"] {
        client
            .mutex(name)
            .unwrap()
            .acquire()
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
    }
    // Renewed over TLS past its lease, then handed to a waiter woken over TLS.
    mutex_round(&client).await;
}
