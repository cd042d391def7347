//! Errors a user can act on (issue 28, items 5, 6 and 8), against real `redis-server`
//! processes: a connection error names `host:port` on every path (a lazily connecting
//! `Client::build`/`open`, `connect()`, cluster seeds, sentinels); a plain URL at a TLS port, a
//! `rediss://` URL at a plain port and a port that is not Redis say so on the lazy path too,
//! with at most one probe per address per failure streak; a refused permission names the
//! key and the client's key prefix (a forgotten `.key_prefix(…)`), the wake channel and the
//! `&<prefix>*` to grant, or the command (`TIME`, refused inside a script, where the server
//! does not name it).
//!
//! Standalone servers (and a seed list given to the cluster builder): what is checked is how
//! the client explains a failure, which does not depend on a working cluster.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use dlock_core::{Client, ClientBuilder, ErrorKind, MutexOptions};
use dlock_testkit::{RedisServer, ServerOptions};

use crate::security::acl::DLOCK_RULES;
use crate::support::{raw, redis};

/// A port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn builder(url: &str) -> ClientBuilder {
    Client::builder(url)
        .command_timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_secs(1))
}

#[tokio::test]
async fn connection_refused_names_the_address_on_every_path() {
    let port = closed_port();
    let url = format!("redis://127.0.0.1:{port}/");
    let addr = format!("127.0.0.1:{port}");

    // The README's quickstart: a lazily connecting client, the error at the first acquire.
    let lazy = Client::open(url.as_str()).unwrap();
    let err = lazy
        .mutex("order:42")
        .unwrap()
        .try_acquire()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    let text = err.to_string();
    assert!(text.contains("`order:42`"), "{text}");
    assert!(
        text.contains(&format!("cannot connect to {addr}")),
        "{text}"
    );
    assert!(text.contains("is Redis running there?"), "{text}");

    let err = builder(&url).connect().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    assert!(
        err.to_string()
            .contains(&format!("cannot connect to {addr}")),
        "{err}"
    );

    let err = Client::cluster_builder([url.as_str()])
        .command_timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_secs(1))
        .connect()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    let text = err.to_string();
    assert!(text.contains(&addr), "{text}");
    assert!(text.contains("is Redis running there?"), "{text}");

    let err = Client::sentinel_builder("m", [url.as_str()])
        .command_timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_secs(1))
        .connect()
        .await
        .unwrap_err();
    assert!(err.to_string().contains(&addr), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_and_plain_mixed_up_are_explained_on_the_lazy_path() {
    if crate::support::skipped_without_tls("tls_and_plain_mixed_up_are_explained_on_the_lazy_path")
    {
        return;
    }
    let server = RedisServer::start_with(ServerOptions::new().tls()).unwrap();
    let tls_port = server.tls_port().unwrap();

    // `redis://` at the TLS port: built (lazily), the first request explains it.
    let plain_to_tls = builder(&format!("redis://127.0.0.1:{tls_port}/"))
        .build()
        .unwrap();
    let err = plain_to_tls
        .mutex("order:42")
        .unwrap()
        .try_acquire()
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("this port speaks TLS"), "{text}");
    assert!(
        text.contains(&format!("use rediss://127.0.0.1:{tls_port}")),
        "{text}"
    );

    // `rediss://` at the plain port.
    let tls_to_plain = builder(&format!("rediss://127.0.0.1:{}/", server.port()))
        .tls_ca_pem(server.tls().unwrap().ca_pem.clone())
        .build()
        .unwrap();
    let err = tls_to_plain
        .mutex("order:42")
        .unwrap()
        .try_acquire()
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("this port speaks plain RESP"), "{text}");
    assert!(text.contains("use redis://"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_seed_at_a_tls_port_is_explained() {
    if crate::support::skipped_without_tls("a_cluster_seed_at_a_tls_port_is_explained") {
        return;
    }
    let server = RedisServer::start_with(ServerOptions::new().tls()).unwrap();
    let tls_port = server.tls_port().unwrap();
    let err = Client::cluster_builder([format!("redis://127.0.0.1:{tls_port}/")])
        .command_timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_secs(1))
        .connect()
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains(&format!("127.0.0.1:{tls_port}")), "{text}");
    assert!(text.contains("this port speaks TLS"), "{text}");
}

/// A port that is not Redis (it answers HTTP) is said to be so on the lazy path, and probed
/// once for a streak of failures: the probe is the only client that sends an inline `PING`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_that_is_not_redis_is_probed_once_per_failure_streak() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let probes = Arc::new(AtomicUsize::new(0));
    let counted = probes.clone();
    let http = tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut buf = [0u8; 512];
            let n = socket.read(&mut buf).await.unwrap_or(0);
            if buf[..n].starts_with(b"PING\r\n") {
                counted.fetch_add(1, Ordering::SeqCst);
            }
            let _ = socket
                .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
                .await;
        }
    });
    let client = builder(&format!("redis://127.0.0.1:{port}/"))
        .build()
        .unwrap();
    for _ in 0..3 {
        let err = client.mutex("x").unwrap().try_acquire().await.unwrap_err();
        let text = err.to_string();
        assert!(text.contains("not Redis"), "{text}");
        assert!(text.contains("HTTP/1.1 400"), "{text}");
        assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
    }
    assert_eq!(
        probes.load(Ordering::SeqCst),
        1,
        "one probe per failure streak"
    );
    http.abort();
}

/// Creates `user` (password `pw`) with the README's rules plus `extra`, for keys and channels
/// under `prefix`.
async fn acl_user(server: &RedisServer, user: &str, prefix: &str, extra: &str) {
    let mut con = raw(server).await;
    let mut cmd = redis::cmd("ACL");
    cmd.arg("SETUSER")
        .arg(user)
        .arg("reset")
        .arg("on")
        .arg(">pw");
    for rule in DLOCK_RULES
        .split_whitespace()
        .chain(extra.split_whitespace())
    {
        cmd.arg(rule);
    }
    cmd.arg(format!("~{prefix}*")).arg(format!("&{prefix}*"));
    let () = cmd.query_async(&mut con).await.unwrap();
}

#[tokio::test]
async fn a_forgotten_key_prefix_names_the_prefix_in_use() {
    let server = redis();
    acl_user(&server, "billing", "billing:", "").await;
    // The README's billing user, but the client built without `.key_prefix("billing:")`.
    let client = builder(&format!("redis://billing:pw@127.0.0.1:{}/", server.port()))
        .build()
        .unwrap();
    let err = client.mutex("x").unwrap().try_acquire().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Permission, "{err}");
    let text = err.to_string();
    assert!(text.contains("no key `dlock:{x}`"), "{text}");
    assert!(text.contains("key prefix is `dlock:`"), "{text}");
    assert!(text.contains(".key_prefix(\"billing:\")"), "{text}");
}

#[tokio::test]
async fn a_missing_time_right_names_time() {
    let server = redis();
    acl_user(&server, "app", "app:", "-time").await;
    let client = builder(&format!("redis://app:pw@127.0.0.1:{}/", server.port()))
        .key_prefix("app:")
        .build()
        .unwrap();
    // The first fence is the first script to read the server clock.
    let err = client
        .mutex_with("order:1", MutexOptions::new().fenced())
        .unwrap()
        .try_acquire()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Permission, "{err}");
    let text = err.to_string();
    assert!(text.contains("`TIME`"), "{text}");
    assert!(text.contains("`+time`"), "{text}");
}

#[tokio::test]
async fn a_refused_wake_channel_names_it_and_the_pattern_to_grant() {
    let server = redis();
    // The README's rights and keys, but no channel pattern.
    let mut con = raw(&server).await;
    let mut cmd = redis::cmd("ACL");
    cmd.arg("SETUSER")
        .arg("app")
        .arg("reset")
        .arg("on")
        .arg(">pw");
    for rule in DLOCK_RULES.split_whitespace() {
        cmd.arg(rule);
    }
    let () = cmd.arg("~app:*").query_async(&mut con).await.unwrap();
    let client = builder(&format!("redis://app:pw@127.0.0.1:{}/", server.port()))
        .key_prefix("app:")
        .build()
        .unwrap();
    let lock = client.mutex("x").unwrap();
    let held = lock.acquire().await.unwrap();
    // Held: the second acquire waits, and subscribes to the wake channel first.
    let err = lock
        .acquire_timeout(Duration::from_secs(1))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Permission, "{err}");
    let text = err.to_string();
    assert!(text.contains("no channel `app:{x}"), "{text}");
    assert!(text.contains("`&app:*`"), "{text}");
    held.release().await.unwrap();
}

/// On a cluster too: the README's billing user (with the cluster rights) and a client built
/// without `.key_prefix("billing:")`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forgotten_key_prefix_is_named_on_a_cluster() {
    let cluster = tokio::task::block_in_place(dlock_testkit::RedisCluster::start).unwrap();
    for node in cluster.nodes() {
        acl_user(
            node,
            "billing",
            "billing:",
            "+cluster|slots +cluster|shards",
        )
        .await;
    }
    let urls = cluster
        .nodes()
        .iter()
        .map(|node| format!("redis://billing:pw@127.0.0.1:{}/", node.port()));
    let client = Client::cluster_builder(urls)
        .command_timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let err = client.mutex("x").unwrap().try_acquire().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Permission, "{err}");
    let text = err.to_string();
    assert!(text.contains("no key `dlock:{x}`"), "{text}");
    assert!(text.contains(".key_prefix(\"billing:\")"), "{text}");
}
