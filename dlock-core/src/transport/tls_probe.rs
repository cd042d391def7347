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
//! that is not RESP, or while one is close to its deadline without an answer; at most once per
//! address per failure streak ([`Diagnosis`] keeps what it found until a request succeeds),
//! within the connect timeout (at most [`PROBE_CAP`]); it sends nothing but `PING`, and
//! `transport/conn/explain.rs` adds what it found to the error's text without changing its kind.
//!
//! The probe never makes an error late: the request's command timeout bounds the error, probe
//! included. It runs in the background, and a failed request waits for its answer only while
//! its own command timeout lasts. A request that fails early (a reset: a plain URL at a TLS
//! port) has time left to wait for it. A request that is still unanswered shortly before its
//! deadline ([`PROBE_CAP`] before, at most half its timeout: `ConnSlot::within`) has its
//! server probed then, while it still waits, so that its timeout's error — which waits for
//! nothing — knows what the port speaks (a `rediss://` URL at a plain port, whose handshake
//! hangs, is explained in the first error). A hung server (paused: it accepts and says
//! nothing) keeps the probe waiting, not the request; the probe's answer, when it comes,
//! explains the next error of the streak, and is logged if an error went out without it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::runtime::lock;

/// The longest a probe waits for a port that accepts and says nothing (a port that answers
/// answers in one round trip; a paused server, which accepts and says nothing, keeps the probe
/// this long, in the background); never longer than the client's connect timeout. Also how
/// long before a request's deadline its server is probed if it has not answered by then.
pub(crate) const PROBE_CAP: Duration = Duration::from_millis(500);

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
    /// The probes since the last successful request, shared with the probes that run.
    probes: Arc<Mutex<Probes>>,
    /// Whether `probes` holds anything (read by every successful request: one atomic load).
    failing: AtomicBool,
    /// Set once, when the client is built.
    about: OnceLock<About>,
}

/// The probes of the current failure streak.
#[derive(Default)]
struct Probes {
    /// Per `host:port`: its answer, or the probe under way.
    by_addr: HashMap<String, Probe>,
    /// Counts the streaks: a probe of an earlier one, finishing late, records nothing.
    streak: u64,
}

/// One address's probe in a failure streak.
enum Probe {
    /// Under way: its answer comes on the channel. `missed` is set by a request that gave up
    /// waiting for it (its error went out without the answer): the probe then logs what it
    /// found.
    Running {
        answer: watch::Receiver<Option<Answer>>,
        missed: Arc<AtomicBool>,
    },
    Done(Answer),
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
            let mut probes = lock(&self.probes);
            probes.by_addr.clear();
            probes.streak = probes.streak.wrapping_add(1);
        }
    }

    /// What `endpoint` answers to a plain `PING`, probed at most once per failure streak, as
    /// far as it is known by `by` (the failed request's deadline): [`Answer::Unknown`] when the
    /// probe has not answered by then (it goes on in the background; see the module
    /// documentation).
    ///
    /// # Cancel safety
    /// Cancel safe: the probe runs in a task of its own, and waiting for it only reads.
    pub(crate) async fn answer(&self, endpoint: &Endpoint, by: Instant) -> Answer {
        let (mut answer, missed) = {
            let mut probes = lock(&self.probes);
            match probes.by_addr.get(&endpoint.addr()) {
                Some(Probe::Done(known)) => return known.clone(),
                Some(Probe::Running { answer, missed }) => (answer.clone(), missed.clone()),
                None => match self.start(&mut probes, endpoint) {
                    Some(running) => running,
                    None => return Answer::Unknown,
                },
            }
        };
        if let Some(known) = answer.borrow().clone() {
            return known;
        }
        if Instant::now() >= by {
            // No time left (a timed-out request): not even a timer's tick.
            missed.store(true, Ordering::Relaxed);
            return Answer::Unknown;
        }
        let waited = tokio::time::timeout_at(by.into(), answer.wait_for(Option::is_some)).await;
        match waited {
            Ok(Ok(answer)) => answer.clone().unwrap_or(Answer::Unknown),
            // Gone: its runtime ended, or a success began a new streak. Nothing to add.
            Ok(Err(_)) => Answer::Unknown,
            Err(_) => {
                missed.store(true, Ordering::Relaxed);
                Answer::Unknown
            }
        }
    }

    /// Starts probing `endpoint` now, unless it was probed in this failure streak already: a
    /// request to it is close to its deadline without an answer, and the error of its timeout
    /// takes only what is known by then (see the module documentation).
    pub(crate) fn probe_ahead(&self, endpoint: &Endpoint) {
        let mut probes = lock(&self.probes);
        if !probes.by_addr.contains_key(&endpoint.addr()) {
            self.start(&mut probes, endpoint);
        }
    }

    /// Starts the probe of `endpoint` for this streak in a task of its own (`None` outside a
    /// runtime: nothing is probed then): its answer channel and its "missed" flag.
    fn start(
        &self,
        probes: &mut Probes,
        endpoint: &Endpoint,
    ) -> Option<(watch::Receiver<Option<Answer>>, Arc<AtomicBool>)> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let (tx, rx) = watch::channel(None);
        let missed = Arc::new(AtomicBool::new(false));
        let running = Probe::Running {
            answer: rx.clone(),
            missed: missed.clone(),
        };
        probes.by_addr.insert(endpoint.addr(), running);
        self.failing.store(true, Ordering::Relaxed);
        let task = ProbeTask {
            endpoint: endpoint.clone(),
            limit: self.probe_limit(),
            probes: self.probes.clone(),
            streak: probes.streak,
            missed: missed.clone(),
        };
        drop(runtime.spawn(task.run(tx)));
        Some((rx, missed))
    }
}

/// One probe running in the background for a failure streak.
struct ProbeTask {
    endpoint: Endpoint,
    limit: Duration,
    probes: Arc<Mutex<Probes>>,
    streak: u64,
    missed: Arc<AtomicBool>,
}

impl ProbeTask {
    /// Probes, records the answer for the rest of the streak (unless it has ended), logs it if
    /// an error went out without it and it says something, and hands it to the requests that
    /// wait.
    async fn run(self, tx: watch::Sender<Option<Answer>>) {
        let answer = probe(&self.endpoint, self.limit).await;
        {
            let mut probes = lock(&self.probes);
            if probes.streak == self.streak {
                probes
                    .by_addr
                    .insert(self.endpoint.addr(), Probe::Done(answer.clone()));
            }
        }
        if self.missed.load(Ordering::Relaxed)
            && let Some(hint) = hint(&self.endpoint, &answer)
        {
            tracing::warn!(
                server = %self.endpoint.addr(),
                "dlock: a request to this server failed: {hint}"
            );
        }
        tx.send_replace(Some(answer));
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

    /// A port that accepts and never answers, as a paused server does.
    async fn silent_port() -> u16 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        port
    }

    fn local(port: u16) -> Endpoint {
        Endpoint {
            host: "127.0.0.1".into(),
            port,
            tls: false,
        }
    }

    /// The probe never holds a failed request past its deadline: a request whose command
    /// timeout is spent gets what is known at once (checked in one poll, not by a clock), and
    /// the probe's answer, arriving later, serves the next error of the streak.
    #[tokio::test]
    async fn a_request_past_its_deadline_never_waits_for_the_probe() {
        use futures_util::FutureExt;
        let diagnosis = Diagnosis::default();
        diagnosis.describe("dlock:", Duration::from_secs(1));
        let silent = local(silent_port().await);
        let spent = Instant::now();
        assert_eq!(
            diagnosis.answer(&silent, spent).now_or_never(),
            Some(Answer::Unknown),
            "a request whose time is spent waited for the probe of a silent port"
        );
        let (port, probes) = http_port().await;
        let http = local(port);
        assert_eq!(
            diagnosis.answer(&http, spent).now_or_never(),
            Some(Answer::Unknown)
        );
        // The next error of the streak, with time left, gets the answer of the same probe.
        let later = Instant::now() + Duration::from_secs(5);
        let not_redis = Answer::NotRedis("HTTP/1.1 400 Bad Request".into());
        assert_eq!(diagnosis.answer(&http, later).await, not_redis);
        assert_eq!(probes.load(Ordering::SeqCst), 1, "one probe in a streak");
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
        let by = || Instant::now() + Duration::from_secs(5);
        assert_eq!(diagnosis.answer(&endpoint, by()).await, not_redis);
        assert_eq!(diagnosis.answer(&endpoint, by()).await, not_redis);
        assert_eq!(probes.load(Ordering::SeqCst), 1, "one probe in a streak");
        // A success ends the streak: the next failure probes again.
        diagnosis.succeeded();
        assert_eq!(diagnosis.answer(&endpoint, by()).await, not_redis);
        assert_eq!(probes.load(Ordering::SeqCst), 2);
        let hint = hint(&endpoint, &not_redis).unwrap();
        assert!(hint.contains("not Redis"), "{hint}");
        assert!(hint.contains(&format!("127.0.0.1:{port}")), "{hint}");
    }
}
