//! Issue 47: `Client::builder(url).connect().await` fails at start-up — before a service says
//! "listening" — with a message that explains, for each way a Redis URL can be wrong: nothing
//! listens there, the password is refused (`ErrorKind::Authentication`), the port is not Redis
//! (an HTTP listener), and a TLS port reached with `redis://`. (The lazy `Client::open` finds
//! the same only on the first request: `error_hints.rs`.)

use std::time::Duration;

use dlock_core::{Client, ErrorKind};
use dlock_testkit::{RedisServer, ServerOptions};

/// `connect()` on `url`, which must fail; a hang fails the test instead of stalling it.
async fn connect_fails(url: &str) -> dlock_core::Error {
    let connect = Client::builder(url)
        .command_timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_secs(1))
        .connect();
    match tokio::time::timeout(Duration::from_secs(30), connect).await {
        Ok(Ok(_)) => panic!("connect() to {url} succeeded"),
        Ok(Err(err)) => err,
        Err(_) => panic!("connect() to {url} hung"),
    }
}

#[tokio::test]
async fn connect_fails_at_start_up_when_nothing_listens() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let err = connect_fails(&format!("redis://127.0.0.1:{port}/")).await;
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    let text = err.to_string();
    assert!(
        text.contains(&format!("cannot connect to 127.0.0.1:{port}")),
        "{text}"
    );
    assert!(text.contains("is Redis running there?"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_fails_at_start_up_on_a_wrong_password() {
    let server = RedisServer::start_with(ServerOptions::new().arg("requirepass", "right-Pa55"))
        .unwrap_or_else(|e| panic!("redis-server: {e}"));
    let err = connect_fails(&format!("redis://:wrong-Pa55@127.0.0.1:{}/", server.port())).await;
    assert_eq!(err.kind(), ErrorKind::Authentication, "{err}");
    let text = err.to_string();
    assert!(text.contains("user name or password"), "{text}");
    assert!(
        !text.contains("wrong-Pa55"),
        "the password is not repeated: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_fails_at_start_up_on_a_port_that_is_not_redis() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let http = tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut buf = [0u8; 512];
            let _ = socket.read(&mut buf).await;
            let _ = socket
                .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
                .await;
        }
    });
    let err = connect_fails(&format!("redis://127.0.0.1:{port}/")).await;
    let text = err.to_string();
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
    assert!(text.contains("not Redis"), "{text}");
    assert!(text.contains("HTTP/1.1 400"), "{text}");
    http.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_fails_at_start_up_on_a_tls_port_reached_with_redis_url() {
    if crate::support::skipped_without_tls(
        "connect_fails_at_start_up_on_a_tls_port_reached_with_redis_url",
    ) {
        return;
    }
    let server = RedisServer::start_with(ServerOptions::new().tls())
        .unwrap_or_else(|e| panic!("TLS redis-server: {e}"));
    let tls_port = server.tls_port().unwrap();
    let err = connect_fails(&format!("redis://127.0.0.1:{tls_port}/")).await;
    let text = err.to_string();
    assert!(text.contains("this port speaks TLS"), "{text}");
    assert!(
        text.contains(&format!("use rediss://127.0.0.1:{tls_port}")),
        "{text}"
    );
}
