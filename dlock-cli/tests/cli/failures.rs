//! Bad input and an unreachable Redis: a one-line message and the documented exit code, within
//! the timeout — never a panic or a hang; and `DLOCK_REDIS_URL` stands in for `--url`.

use crate::support::{client, dlock, dlock_env, redis};

/// A port nothing listens on: bound, then released.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn one_error_line(stderr: &str) {
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {stderr:?}");
    assert!(lines[0].starts_with("dlock: error: "), "{stderr:?}");
    assert!(!stderr.contains("panicked"), "{stderr:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_a_usage_error() {
    let run = dlock(&["locks"]).await.expect(2);
    one_error_line(&run.stderr);
    assert!(run.stderr.contains("DLOCK_REDIS_URL"), "{run:?}");
    let run = dlock(&["--url", "localhost:6379", "locks"]).await.expect(2);
    one_error_line(&run.stderr);
    assert!(run.stderr.contains("redis://"), "{run:?}");
    // clap's own usage errors exit 2 as well.
    dlock(&["frobnicate"]).await.expect(2);
    dlock(&["--timeout", "soon", "locks"]).await.expect(2);
    dlock(&[
        "--url",
        "redis://127.0.0.1:1/",
        "runs",
        "job",
        "--limit",
        "0",
    ])
    .await
    .expect(2);
    let help = dlock(&["--help"]).await.expect(0);
    assert!(help.stdout.contains("Exit codes"), "{help:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_or_hung_is_an_error_within_the_timeout() {
    let url = format!("redis://127.0.0.1:{}/", closed_port());
    for args in [
        vec!["--url", url.as_str(), "locks"],
        vec!["--url", url.as_str(), "jobs"],
        vec!["--url", url.as_str(), "unlock", "x", "--yes"],
    ] {
        let run = dlock(&args).await.expect(1);
        one_error_line(&run.stderr);
        assert!(run.stderr.contains("cannot reach Redis"), "{run:?}");
    }

    // A server that accepts connections but never answers (stopped with SIGSTOP): the
    // timeout ends it.
    let server = redis();
    let url = server.url();
    server.pause().unwrap();
    let run = dlock(&["--url", &url, "--timeout", "300ms", "locks"])
        .await
        .expect(1);
    one_error_line(&run.stderr);
    assert!(run.stderr.contains("no answer within"), "{run:?}");
    server.resume().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_url_comes_from_dlock_redis_url_when_not_given() {
    let server = redis();
    let url = server.url();
    let holder = client(&url);
    let guard = holder
        .mutex("from-env")
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    let run = dlock_env(&["locks", "--json"], &[("DLOCK_REDIS_URL", &url)])
        .await
        .expect(0);
    assert_eq!(run.json()["locks"][0]["name"], "from-env");
    // --url wins over the environment.
    let elsewhere = format!("redis://127.0.0.1:{}/", closed_port());
    dlock_env(
        &["--url", &elsewhere, "locks"],
        &[("DLOCK_REDIS_URL", &url)],
    )
    .await
    .expect(1);
    guard.release().await.unwrap();
}

/// A plain URL at a TLS port, a `rediss://` URL at a plain port and a port that is not Redis
/// are each named for what they are (the library's probe), with the documented exit code 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_and_plain_mixed_up_or_not_redis_say_so() {
    let server = dlock_testkit::RedisServer::start_with(dlock_testkit::ServerOptions::new().tls())
        .unwrap_or_else(|e| panic!("TLS redis-server: {e}"));
    let tls_port = server.tls_port().unwrap();
    let url = format!("redis://127.0.0.1:{tls_port}/");
    let run = dlock(&["--url", &url, "--timeout", "1s", "locks"])
        .await
        .expect(1);
    one_error_line(&run.stderr);
    assert!(run.stderr.contains("this port speaks TLS"), "{run:?}");
    assert!(
        run.stderr
            .contains(&format!("use rediss://127.0.0.1:{tls_port}")),
        "{run:?}"
    );

    let url = format!("rediss://127.0.0.1:{}/#insecure", server.port());
    let run = dlock(&["--url", &url, "--timeout", "1s", "locks"])
        .await
        .expect(1);
    one_error_line(&run.stderr);
    assert!(
        run.stderr.contains("this port speaks plain RESP"),
        "{run:?}"
    );

    // An HTTP server where Redis was expected.
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
    let url = format!("redis://127.0.0.1:{port}/");
    let run = dlock(&["--url", &url, "--timeout", "1s", "locks"])
        .await
        .expect(1);
    one_error_line(&run.stderr);
    assert!(run.stderr.contains("not Redis"), "{run:?}");
    http.abort();
}
