//! Bad input gets a clear error that says what is wrong and how to fix it, never a panic.
//! Most of it never reaches Redis and needs no backend (settings are checked for a server URL
//! and for cluster nodes alike); a key of another type runs on both backends.

use std::time::Duration;

use dlock_core::{Client, ClientBuilder, ErrorKind, MutexOptions};
use redis::AsyncCommands;

use crate::support::{Backend, acquired_within, backend_tests};

#[tokio::test]
async fn bad_names_ttls_and_labels_are_rejected_before_any_request() {
    // Nothing listens on port 1: a request would fail with a connection error instead.
    let c = Client::open("redis://127.0.0.1:1/").unwrap();
    for (name, hint) in [
        ("", "empty"),
        ("order:{42}", "hash tag"),
        ("line\nbreak", "control character"),
    ] {
        let err = c.mutex(name).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{name:?}");
        assert!(err.to_string().contains(hint), "{err}");
    }
    let long = "x".repeat(dlock_core::MAX_NAME_LEN + 1);
    assert!(c.mutex(&long).unwrap_err().to_string().contains("limit"));

    for ttl in [
        Duration::ZERO,
        Duration::from_millis(5),
        Duration::from_secs(2 * 86_400),
    ] {
        let err = c.mutex_with("n", MutexOptions::new().ttl(ttl)).unwrap_err();
        assert!(err.is_invalid_input());
        assert!(err.to_string().contains("accepted range"), "{err}");
    }
    let err = c
        .mutex_with("n", MutexOptions::new().label("tab\there"))
        .unwrap_err();
    assert!(err.is_invalid_input());
}

#[tokio::test]
async fn bad_client_settings_are_rejected() {
    let err = Client::open("http://127.0.0.1/").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    let err = Client::cluster_builder(Vec::<String>::new())
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    // The same settings are checked for a server and for a cluster.
    let builders: [fn() -> ClientBuilder; 2] = [
        || Client::builder("redis://127.0.0.1/"),
        || Client::cluster_builder(["redis://127.0.0.1/"]),
    ];
    for builder in builders {
        let err = builder().key_prefix("app{x}:").build().unwrap_err();
        assert!(err.to_string().contains("key prefix"), "{err}");
        let err = builder().default_ttl(Duration::ZERO).build().unwrap_err();
        assert!(err.is_invalid_input());
        let err = builder()
            .command_timeout(Duration::ZERO)
            .build()
            .unwrap_err();
        assert!(err.is_invalid_input());
    }
}

#[tokio::test]
async fn durability_that_cannot_be_honoured_is_refused_when_the_handle_is_made() {
    use dlock_core::Durability;
    let c = Client::open("redis://127.0.0.1:1/").unwrap();
    let ttl = Duration::from_secs(10);
    let durable = |d| MutexOptions::new().ttl(ttl).durability(d);
    let second = Duration::from_secs(1);
    for (durability, hint) in [
        (
            Durability::Replicas {
                n: 0,
                timeout: second,
            },
            "n = 0",
        ),
        (
            Durability::Aof {
                local: false,
                replicas: 0,
                timeout: second,
            },
            "waits for nothing",
        ),
        (
            Durability::Replicas {
                n: 1,
                timeout: Duration::from_secs(6),
            },
            "half the lock's TTL",
        ),
        (
            Durability::Replicas {
                n: 1,
                timeout: Duration::ZERO,
            },
            "from 1ms",
        ),
    ] {
        let err = c.mutex_with("n", durable(durability)).unwrap_err();
        assert!(err.is_invalid_input(), "{err}");
        assert!(err.to_string().contains(hint), "{hint}: {err}");
    }
    let ok = Durability::Replicas {
        n: 1,
        timeout: second,
    };
    c.mutex_with("n", durable(ok)).unwrap();
    // The kinds that do not wait for acknowledgements say so instead of ignoring it.
    let errors = [
        c.rw_lock_with("n", durable(ok)).unwrap_err(),
        c.semaphore_with("n", 2, durable(ok)).unwrap_err(),
        c.election_with("n", durable(ok)).unwrap_err(),
    ];
    for err in errors {
        assert!(err.is_invalid_input(), "{err}");
        assert!(err.to_string().contains("Mutex"), "{err}");
    }
    // A cluster: refused for now, saying what it is for.
    let cluster = Client::cluster_builder(["redis://127.0.0.1:1/"])
        .build()
        .unwrap();
    let err = cluster.mutex_with("n", durable(ok)).unwrap_err();
    assert!(err.is_invalid_input(), "{err}");
    assert!(err.to_string().contains("Sentinel"), "{err}");
    cluster.mutex_with("n", MutexOptions::new()).unwrap();
}

#[test]
fn building_outside_a_runtime_is_an_error_not_a_panic() {
    let err = Client::open("redis://127.0.0.1/").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NoRuntime);
    assert!(err.to_string().contains("Tokio runtime"), "{err}");
}

backend_tests!(
    async fn a_key_of_another_type_is_a_wrongtype_error(backend: Backend) {
        let mut con = backend.raw().await;
        let () = con.hset("dlock:{typed}", "field", "value").await.unwrap();
        let err = backend
            .client()
            .mutex("typed")
            .unwrap()
            .try_acquire()
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
        assert!(err.to_string().contains("another program"), "{err}");
        assert!(
            err.to_string().contains("`dlock:{typed}`"),
            "names the key: {err}"
        );
        // The same with the fence taken in the acquire's own MULTI.
        let err = backend
            .client()
            .mutex_with("typed", MutexOptions::new().fenced())
            .unwrap()
            .try_acquire()
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
        assert!(err.to_string().contains("another program"), "{err}");
        assert!(
            err.to_string().contains("`dlock:{typed}`"),
            "names the key: {err}"
        );

        // The fence counter of another type: the lock is taken (fences are issued on demand),
        // and asking for the fence says what is wrong, naming the counter.
        let counter = dlock_core::ext::fence_counter_key("dlock:", "fence").unwrap();
        let _: usize = con.lpush(&counter, "x").await.unwrap();
        let client = backend.client();
        let guard = client
            .mutex("fence")
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .expect("free");
        let err = guard.fencing_token().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
        assert!(err.to_string().contains(&counter), "{err}");
        guard.release().await.unwrap();
        // Asked for with the acquisition: an error, and the lock is not left held.
        let fenced = client
            .mutex_with("fence", MutexOptions::new().fenced())
            .unwrap();
        let err = fenced.try_acquire().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
        let plain = client.mutex("fence").unwrap();
        let again = acquired_within(
            &plain,
            Duration::from_secs(5),
            "the failed acquisition let go",
        )
        .await;
        again.release().await.unwrap();
        // A waiting acquisition that takes a free lock issues a fence too: the same error.
        let err = fenced
            .acquire_timeout(Duration::from_secs(1))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
    }
);

#[tokio::test]
async fn an_address_that_is_not_redis_is_named_as_such() {
    named_not_redis(|url| Client::builder(url.as_str())).await;
}

#[tokio::test]
async fn a_cluster_node_that_is_not_redis_is_named_as_such() {
    named_not_redis(|url| Client::cluster_builder([url.as_str()])).await;
}

/// Builds a client with `builder` for the URL of an HTTP server: its errors name the problem.
async fn named_not_redis(builder: impl Fn(String) -> dlock_core::ClientBuilder) {
    // An HTTP-speaking server on the port the URL names.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut buf = [0u8; 512];
            let _ = socket.read(&mut buf).await;
            let _ = socket
                .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
                .await;
        }
    });
    let c = builder(format!("redis://127.0.0.1:{port}/"))
        .command_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let err = c.ping().await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("does not speak the Redis protocol"), "{text}");
    assert!(
        !text.contains("reconnects"),
        "no promise to reconnect: {text}"
    );
    let err = c.mutex("x").unwrap().try_acquire().await.unwrap_err();
    assert!(
        err.to_string()
            .contains("does not speak the Redis protocol"),
        "{err}"
    );
}

/// A standalone server given as a cluster node: the error says so and how to build the client
/// for it, instead of the cluster client's "no connections found".
#[tokio::test]
async fn a_standalone_server_given_as_a_cluster_node_is_named_as_such() {
    let server = crate::support::redis();
    let c = Client::cluster_builder([server.url().as_str()])
        .command_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let err = c.ping().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    let text = err.to_string();
    assert!(text.contains("standalone Redis server"), "{text}");
    assert!(text.contains("Client::builder"), "{text}");
    assert!(
        text.contains(&server.url().replace("redis://", "").replace('/', "")),
        "{text}"
    );
}

/// No cluster node listening: the error names each node and why it could not be reached.
#[tokio::test]
async fn cluster_nodes_that_cannot_be_reached_are_named() {
    let c = Client::cluster_builder(["redis://127.0.0.1:1/", "redis://127.0.0.1:2/"])
        .command_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let err = c.ping().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    let text = err.to_string();
    assert!(text.contains("no cluster node could be reached"), "{text}");
    assert!(
        text.contains("127.0.0.1:1") && text.contains("127.0.0.1:2"),
        "{text}"
    );
}
