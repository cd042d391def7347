//! What a port that failed a request speaks, when plain and TLS are mixed up or the address is
//! not Redis at all: a plain `redis://` URL pointed at a TLS port (the server resets the
//! connection), a `rediss://` URL at a plain port (the handshake waits for an answer that never
//! comes), or the port of another service. One short plain-text `PING` on a fresh TCP
//! connection tells them apart:
//! * `+PONG` (or any RESP reply, `-NOAUTH` included) — the port speaks plain Redis;
//! * the connection is closed or reset without a reply, or answered with a TLS alert record —
//!   the port most likely expects TLS;
//! * anything else (`HTTP/1.1 400 …`) — the port is not Redis.
//!
//! The probe runs only after a request failed with a connection error, a timeout or a reply
//! that is not RESP, at most once per address per failure streak ([`Diagnosis`] keeps what it
//! found until a request succeeds), within the connect timeout; it sends nothing but `PING`,
//! and `conn/explain.rs` adds what it found to the error's text without changing its kind.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::runtime::lock;

/// The longest a probe waits for a port that accepts and says nothing (a port that answers
/// answers in one round trip; a paused server, which accepts and says nothing, costs this once
/// per failure streak); never longer than the client's connect timeout.
const PROBE_CAP: Duration = Duration::from_millis(500);

/// A standalone server's address as the client was given it.
#[derive(Clone, Debug)]
pub(crate) struct Endpoint {
    pub(crate) host: String,
    pub(crate) port: u16,
    /// Given as `rediss://`.
    pub(crate) tls: bool,
}

impl Endpoint {
    /// The endpoint of a TCP address (`None` for a Unix socket).
    pub(crate) fn of(addr: &redis::ConnectionAddr) -> Option<Self> {
        match addr {
            redis::ConnectionAddr::Tcp(host, port) => Some(Self {
                host: host.clone(),
                port: *port,
                tls: false,
            }),
            redis::ConnectionAddr::TcpTls { host, port, .. } => Some(Self {
                host: host.clone(),
                port: *port,
                tls: true,
            }),
            _ => None,
        }
    }

    /// `host:port`.
    pub(crate) fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// What the port answered to a plain-text `PING`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    /// A RESP reply: plain Redis.
    Plain,
    /// Closed, reset, or a TLS record: most likely TLS.
    LikelyTls,
    /// Something that is neither RESP nor TLS: its first line, shortened.
    NotRedis(String),
    /// No answer, or the probe could not connect: nothing to add.
    Unknown,
}

/// Sends one plain `PING` to `endpoint` and reads the first bytes of the answer, within
/// `connect_timeout` (at most [`PROBE_CAP`]).
///
/// # Cancel safety
/// Cancel safe: its connection closes when dropped.
pub(crate) async fn probe(endpoint: &Endpoint, connect_timeout: Duration) -> Answer {
    let attempt = async {
        let mut stream = TcpStream::connect((endpoint.host.as_str(), endpoint.port)).await?;
        stream.write_all(b"PING\r\n").await?;
        let mut first = [0u8; 64];
        match stream.read(&mut first).await {
            Ok(0) => Ok(Answer::LikelyTls),
            // A TLS alert record (content type 21), as some TLS servers send to plain text.
            Ok(_) if first[0] == 0x15 => Ok(Answer::LikelyTls),
            Ok(_) if matches!(first[0], b'+' | b'-' | b':' | b'$' | b'*') => Ok(Answer::Plain),
            Ok(n) => Ok(Answer::NotRedis(shown(&first[..n]))),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Ok(Answer::LikelyTls),
            Err(e) => Err(e),
        }
    };
    match tokio::time::timeout(connect_timeout.min(PROBE_CAP), attempt).await {
        Ok(Ok(answer)) => answer,
        _ => Answer::Unknown,
    }
}

/// The first line of an answer that is not Redis, printable and short.
fn shown(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let line = text.lines().next().unwrap_or_default();
    line.chars().filter(|c| !c.is_control()).take(40).collect()
}

/// What to tell the user about `endpoint` given the probe's `answer`: `None` when the answer
/// matches the URL's scheme (or says nothing).
pub(crate) fn hint(endpoint: &Endpoint, answer: &Answer) -> Option<String> {
    let addr = endpoint.addr();
    match (endpoint.tls, answer) {
        (true, Answer::Plain) => Some(format!(
            "{addr}: this port speaks plain RESP, not TLS: use redis://{addr} (or the server's \
             TLS port, tls-port in its configuration)"
        )),
        (false, Answer::LikelyTls) => Some(format!(
            "{addr}: this port speaks TLS (it closes plain connections without answering): use \
             rediss://{addr}"
        )),
        (_, Answer::NotRedis(seen)) => Some(format!(
            "{addr} does not speak the Redis protocol, so it is not Redis (it answered `{seen}` \
             to a PING); check the host and port of the Redis URL"
        )),
        _ => None,
    }
}

/// What a client knows to explain a failure with (its key prefix and connect timeout), and
/// what the probes of the current failure streak found. One per connection slot.
#[derive(Default)]
pub(crate) struct Diagnosis {
    /// The probe's answer per `host:port` since the last successful request.
    probed: Mutex<HashMap<String, Answer>>,
    /// Whether `probed` holds anything (read by every successful request: one atomic load).
    failing: AtomicBool,
    /// Set once, when the client is built.
    about: OnceLock<About>,
}

struct About {
    key_prefix: String,
    connect_timeout: Duration,
}

/// How long a probe may take when the client did not say.
const DEFAULT_PROBE_LIMIT: Duration = Duration::from_secs(1);

impl Diagnosis {
    /// Records the client's key prefix and connect timeout (the first call wins).
    pub(crate) fn describe(&self, key_prefix: &str, connect_timeout: Duration) {
        let _ = self.about.set(About {
            key_prefix: key_prefix.to_owned(),
            connect_timeout,
        });
    }

    /// The client's key prefix (`dlock:` before [`Diagnosis::describe`]).
    pub(crate) fn key_prefix(&self) -> &str {
        self.about
            .get()
            .map_or("dlock:", |about| about.key_prefix.as_str())
    }

    /// The bound on a probe or a diagnosing request: the client's connect timeout.
    pub(crate) fn probe_limit(&self) -> Duration {
        self.about
            .get()
            .map_or(DEFAULT_PROBE_LIMIT, |about| about.connect_timeout)
    }

    /// A request succeeded: the failure streak, if any, is over.
    pub(crate) fn succeeded(&self) {
        if self.failing.load(Ordering::Relaxed) {
            self.failing.store(false, Ordering::Relaxed);
            lock(&self.probed).clear();
        }
    }

    /// What `endpoint` answers to a plain `PING`, probed at most once per failure streak.
    ///
    /// # Cancel safety
    /// Cancel safe: a probe dropped half-way is simply not remembered.
    pub(crate) async fn answer(&self, endpoint: &Endpoint) -> Answer {
        let addr = endpoint.addr();
        if let Some(known) = lock(&self.probed).get(&addr) {
            return known.clone();
        }
        let answer = probe(endpoint, self.probe_limit()).await;
        lock(&self.probed).insert(addr, answer.clone());
        self.failing.store(true, Ordering::Relaxed);
        answer
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;

    use super::*;

    /// A port that answers HTTP, counting the probes (the only client that sends an inline
    /// `PING`) it gets.
    async fn http_port() -> (u16, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let probes = Arc::new(AtomicUsize::new(0));
        let counted = probes.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut buf = [0u8; 64];
                let n = socket.read(&mut buf).await.unwrap_or(0);
                if buf[..n].starts_with(b"PING\r\n") {
                    counted.fetch_add(1, Ordering::SeqCst);
                }
                let _ = socket.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
            }
        });
        (port, probes)
    }

    #[tokio::test]
    async fn one_probe_per_address_per_failure_streak() {
        let (port, probes) = http_port().await;
        let endpoint = Endpoint {
            host: "127.0.0.1".into(),
            port,
            tls: false,
        };
        let diagnosis = Diagnosis::default();
        diagnosis.describe("dlock:", Duration::from_secs(1));
        let not_redis = Answer::NotRedis("HTTP/1.1 400 Bad Request".into());
        assert_eq!(diagnosis.answer(&endpoint).await, not_redis);
        assert_eq!(diagnosis.answer(&endpoint).await, not_redis);
        assert_eq!(probes.load(Ordering::SeqCst), 1, "one probe in a streak");
        // A success ends the streak: the next failure probes again.
        diagnosis.succeeded();
        assert_eq!(diagnosis.answer(&endpoint).await, not_redis);
        assert_eq!(probes.load(Ordering::SeqCst), 2);
        let hint = hint(&endpoint, &not_redis).unwrap();
        assert!(hint.contains("not Redis"), "{hint}");
        assert!(hint.contains(&format!("127.0.0.1:{port}")), "{hint}");
    }
}
