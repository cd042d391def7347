//! Reaching the Redis of production: `rediss://` with a private CA (`--tls-ca`), mutual TLS
//! (`--tls-cert`/`--tls-key`), `--tls-insecure`; a password kept out of the URL
//! (`DLOCK_REDIS_PASSWORD`); `--sentinel NAME` with the sentinels' URLs — and the messages when
//! it fails: a certificate problem says so and what to pass, a refused user name or password
//! says so, a port that is not Redis says so, instead of "cannot reach Redis … check that the
//! server runs".

use std::time::Duration;

use dlock_core::{Client, MutexOptions};
use dlock_testkit::{RedisReplicaSet, RedisSentinels, RedisServer, ServerOptions};
use tokio::io::AsyncWriteExt;

use crate::support::{Run, dlock, dlock_env};

fn one_error_line(run: &Run) -> &str {
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {run:?}");
    assert!(lines[0].starts_with("dlock: error: "), "{run:?}");
    lines[0]
}

/// Writes `pem` into the server's directory as `name`, and returns the path.
fn pem_file(server: &RedisServer, name: &str, pem: &str) -> String {
    let path = server.dir().join(name);
    std::fs::write(&path, pem).unwrap();
    path.to_string_lossy().into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_names_every_way_to_reach_redis() {
    let help = dlock(&["--help"]).await.expect(0);
    for option in [
        "--tls-ca <FILE>",
        "--tls-cert <FILE>",
        "--tls-key <FILE>",
        "--tls-insecure",
        "--sentinel <NAME>",
        "DLOCK_REDIS_PASSWORD",
    ] {
        assert!(help.stdout.contains(option), "{option} missing: {help:?}");
    }
    let help = dlock(&["pause", "--help"]).await.expect(0);
    assert!(help.stdout.contains("--force"), "{help:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_ca_is_trusted_with_tls_ca_and_its_absence_is_named() {
    let server = RedisServer::start_with(ServerOptions::new().tls()).unwrap();
    let tls = server.tls().unwrap().clone();
    let url = server.tls_url().unwrap();
    let ca = pem_file(&server, "ca.pem", &tls.ca_pem);
    let holder = Client::builder(url.as_str())
        .tls_ca_pem(tls.ca_pem.clone())
        .connect()
        .await
        .unwrap();
    let guard = holder
        .mutex_with("over-tls", MutexOptions::new().ttl(Duration::from_secs(30)))
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();

    let run = dlock(&["--url", &url, "--tls-ca", &ca, "locks", "--json"])
        .await
        .expect(0);
    assert_eq!(run.json()["locks"][0]["name"], "over-tls");

    // Without the CA: a certificate problem, and what to pass.
    let run = dlock(&["--url", &url, "locks"]).await.expect(1);
    let line = one_error_line(&run);
    assert!(line.contains("not signed by a trusted CA"), "{line}");
    assert!(line.contains("--tls-ca FILE"), "{line}");
    assert!(!line.contains("that the server runs"), "{line}");

    // The development opt-out.
    dlock(&["--url", &url, "--tls-insecure", "locks"])
        .await
        .expect(0);
    // A file that cannot be read is a usage error naming the option.
    let run = dlock(&["--url", &url, "--tls-ca", "/nonexistent.pem", "locks"])
        .await
        .expect(2);
    assert!(one_error_line(&run).contains("--tls-ca"), "{run:?}");
    // TLS settings on a plain URL are refused.
    let plain = format!("redis://127.0.0.1:{}/", server.port());
    let run = dlock(&["--url", &plain, "--tls-ca", &ca, "locks"])
        .await
        .expect(2);
    assert!(one_error_line(&run).contains("rediss://"), "{run:?}");
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_presents_tls_cert_and_tls_key() {
    let server = RedisServer::start_with(ServerOptions::new().tls_client_cert_required()).unwrap();
    let tls = server.tls().unwrap().clone();
    let url = server.tls_url().unwrap();
    let ca = pem_file(&server, "ca.pem", &tls.ca_pem);
    let cert = pem_file(&server, "client.pem", &tls.client_cert_pem);
    let key = pem_file(&server, "client.key", &tls.client_key_pem);
    let run = dlock(&[
        "--url",
        &url,
        "--tls-ca",
        &ca,
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
        "locks",
    ])
    .await
    .expect(3);
    assert!(run.stderr.contains("no lock"), "{run:?}");
    // Without the client certificate the server refuses the handshake.
    let run = dlock(&["--url", &url, "--tls-ca", &ca, "locks"])
        .await
        .expect(1);
    one_error_line(&run);
    // A certificate without its key is a usage error.
    let run = dlock(&["--url", &url, "--tls-cert", &cert, "locks"])
        .await
        .expect(2);
    assert!(one_error_line(&run).contains("--tls-key"), "{run:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_password_comes_from_dlock_redis_password_and_a_refusal_says_so() {
    const PASSWORD: &str = "env-Pa55word";
    let server =
        RedisServer::start_with(ServerOptions::new().arg("requirepass", PASSWORD)).unwrap();
    let bare = format!("redis://127.0.0.1:{}/", server.port());
    let run = dlock_env(
        &["--url", &bare, "locks"],
        &[("DLOCK_REDIS_PASSWORD", PASSWORD)],
    )
    .await
    .expect(3);
    assert!(!run.stderr.contains(PASSWORD), "{run:?}");

    // Wrong, or none: the credentials are named, not the server's health.
    for env in [vec![("DLOCK_REDIS_PASSWORD", "wrong-Pa55word")], vec![]] {
        let run = dlock_env(&["--url", &bare, "locks"], &env).await.expect(1);
        let line = one_error_line(&run);
        assert!(line.contains("refused the user name or password"), "{line}");
        assert!(line.contains("DLOCK_REDIS_PASSWORD"), "{line}");
        assert!(!line.contains("wrong-Pa55word"), "{line}");
    }
    // An unknown user.
    let unknown = format!("redis://nobody@127.0.0.1:{}/", server.port());
    let run = dlock_env(
        &["--url", &unknown, "locks"],
        &[("DLOCK_REDIS_PASSWORD", PASSWORD)],
    )
    .await
    .expect(1);
    assert!(
        one_error_line(&run).contains("refused the user name or password"),
        "{run:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_finds_the_master() {
    const PASSWORD: &str = "data-Pa55word";
    let options = ServerOptions::new().arg("requirepass", PASSWORD);
    let set = tokio::task::block_in_place(|| RedisReplicaSet::start_with(1, options)).unwrap();
    let sentinels = tokio::task::block_in_place(|| RedisSentinels::start_with(&set, 1)).unwrap();
    let holder = Client::sentinel_builder(sentinels.master_name(), sentinels.urls())
        .node_password(PASSWORD)
        .connect()
        .await
        .unwrap();
    let guard = holder
        .mutex("behind-sentinel")
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    let sentinel = &sentinels.urls()[0];
    let run = dlock_env(
        &[
            "--sentinel",
            sentinels.master_name(),
            "--url",
            sentinel,
            "inspect",
            "behind-sentinel",
            "--json",
        ],
        &[("DLOCK_REDIS_PASSWORD", PASSWORD)],
    )
    .await
    .expect(0);
    assert_eq!(run.json()["held"], true, "{run:?}");
    // Without the data nodes' password: the credentials are named.
    let run = dlock(&[
        "--sentinel",
        sentinels.master_name(),
        "--url",
        sentinel,
        "locks",
    ])
    .await
    .expect(1);
    assert!(
        one_error_line(&run).contains("refused the user name or password"),
        "{run:?}"
    );
    // A master name the sentinels do not know.
    let run = dlock_env(
        &["--sentinel", "nosuch", "--url", sentinel, "locks"],
        &[("DLOCK_REDIS_PASSWORD", PASSWORD)],
    )
    .await
    .expect(2);
    assert!(one_error_line(&run).contains("nosuch"), "{run:?}");
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_that_is_not_redis_is_named() {
    // Answers every connection with an HTTP error, as a web server on the wrong port would.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let serve = tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let _ = socket
                    .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                    .await;
                tokio::time::sleep(Duration::from_secs(5)).await;
            });
        }
    });
    let url = format!("redis://127.0.0.1:{port}/");
    let run = dlock(&["--url", &url, "locks"]).await.expect(1);
    let line = one_error_line(&run);
    assert!(
        line.contains(&format!(
            "the server at 127.0.0.1:{port} does not speak the Redis protocol"
        )),
        "{line}"
    );
    assert!(!line.contains("Unexpected"), "{line}");
    serve.abort();
}

/// A CA, and a server certificate for 127.0.0.1 it signed that expired on 2021-01-01, as PEM
/// files in a directory of their own: `(dir, ca, cert, key)`.
fn expired_certificate() -> (std::path::PathBuf, String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, date_time_ymd};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
    params.not_before = date_time_ymd(2020, 1, 1);
    params.not_after = date_time_ymd(2021, 1, 1);
    let cert = params.signed_by(&key, &issuer).unwrap();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let dir =
        std::env::temp_dir().join(format!("dlock-cli-expired-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, pem: String| {
        let path = dir.join(name);
        std::fs::write(&path, pem).unwrap();
        path.to_string_lossy().into_owned()
    };
    let ca = write("ca.pem", ca.pem());
    let cert = write("server.pem", cert.pem());
    let key = write("server.key", key.serialize_pem());
    (dir, ca, cert, key)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_certificate_is_named_with_its_dates_in_rfc_3339() {
    let (dir, ca, cert, key) = expired_certificate();
    let tls_port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let options = ServerOptions::new()
        .arg("tls-port", tls_port.to_string())
        .arg("tls-cert-file", cert.as_str())
        .arg("tls-key-file", key.as_str())
        .arg("tls-ca-cert-file", ca.as_str())
        .arg("tls-auth-clients", "no");
    let server = RedisServer::start_with(options).unwrap();
    let url = format!("rediss://127.0.0.1:{tls_port}/");
    let run = dlock(&["--url", &url, "--tls-ca", &ca, "locks"])
        .await
        .expect(1);
    let line = one_error_line(&run);
    assert!(line.contains("certificate expired"), "{line}");
    assert!(line.contains("2021-01-01T00:00:00+00:00"), "{line}");
    assert!(!line.contains("(UNIX)"), "{line}");
    drop(server);
    let _ = std::fs::remove_dir_all(dir);
}

/// Runs `dlock args` on a pseudo-terminal (util-linux's `script`) with `typed` typed ahead;
/// returns the exit code and what the terminal showed.
async fn on_a_terminal(args: &[&str], typed: &str) -> (i32, String) {
    let line = std::iter::once(env!("CARGO_BIN_EXE_dlock"))
        .chain(args.iter().copied())
        .map(|a| format!("'{a}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let typed = typed.to_owned();
    tokio::task::spawn_blocking(move || {
        let output = assert_cmd::Command::new("script")
            .args(["-qec", &line, "/dev/null"])
            .env_remove("DLOCK_REDIS_URL")
            .env_remove("DLOCK_REDIS_PASSWORD")
            .write_stdin(typed)
            .timeout(Duration::from_secs(60))
            .output()
            .expect("`script` (util-linux) runs dlock on a pseudo-terminal");
        let shown = String::from_utf8_lossy(&output.stdout).into_owned();
        (output.status.code().unwrap_or(-1), shown)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_terminal_the_password_is_asked_for_when_redis_wants_one() {
    const PASSWORD: &str = "typed-Pa55word";
    let server =
        RedisServer::start_with(ServerOptions::new().arg("requirepass", PASSWORD)).unwrap();
    let bare = format!("redis://127.0.0.1:{}/", server.port());
    let (code, shown) = on_a_terminal(&["--url", &bare, "locks"], &format!("{PASSWORD}\n")).await;
    assert_eq!(code, 3, "{shown}");
    assert!(
        shown.contains(&format!(
            "Password for Redis at 127.0.0.1:{}",
            server.port()
        )),
        "{shown}"
    );
    assert!(shown.contains("no lock"), "{shown}");
    // A wrong answer: refused, once.
    let (code, shown) = on_a_terminal(&["--url", &bare, "locks"], "wrong\n").await;
    assert_eq!(code, 1, "{shown}");
    assert!(
        shown.contains("refused the user name or password"),
        "{shown}"
    );
    // A server without a password is not asked.
    let open = RedisServer::start().unwrap();
    let (code, shown) = on_a_terminal(&["--url", &open.url(), "locks"], "").await;
    assert_eq!(code, 3, "{shown}");
    assert!(!shown.contains("Password for"), "{shown}");
}
