//! TLS (`rediss://`) against a real `redis-server` with a TLS port and certificates made at test
//! time: locks, waits and the watchdog over TLS; mutual TLS; a wrong CA, a plain URL to the TLS
//! port and `rediss://` to the plain port each end in an error within the connect timeout that
//! says what is wrong, never a hang; the development opt-out; TLS settings on a plain URL are
//! refused.
//!
//! Standalone server only: the test harness makes TLS servers, not TLS clusters (a cluster's
//! `rediss://` seeds take the same settings; not verified here).

use std::time::{Duration, Instant};

use dlock_core::{Client, ClientBuilder, ErrorKind, MutexOptions};
use dlock_testkit::{RedisServer, ServerOptions, unrelated_ca_pem};

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
    let server = tls_server(ServerOptions::new().tls());
    let tls = server.tls().unwrap();
    let url = server.tls_url().unwrap();
    let client = builder(&url)
        .tls_ca_pem(tls.ca_pem.clone())
        .connect()
        .await
        .unwrap();
    let lock = client
        .mutex_with(
            "order:1",
            MutexOptions::new()
                .ttl(Duration::from_millis(500))
                .watchdog(),
        )
        .unwrap();
    let guard = lock.acquire().await.unwrap();
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.acquire_timeout(Duration::from_secs(10)).await })
    };
    // Renewed over TLS past its lease, then handed to the waiter (woken over TLS pub/sub).
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(guard.lease().is_held());
    assert!(guard.fencing_token().await.unwrap().get() > 0);
    guard.release().await.unwrap();
    let second = waiter.await.unwrap().unwrap();
    second.release().await.unwrap();
}

#[tokio::test]
async fn mutual_tls_needs_the_client_certificate() {
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
