//! Why the first request of [`crate::ClientBuilder::connect`] failed, when plain and TLS are
//! mixed up: a plain `redis://` URL pointed at a TLS port (the server resets the connection) or
//! a `rediss://` URL at a plain port (the handshake waits for an answer that never comes). One
//! short plain-text `PING` on a fresh TCP connection tells them apart:
//! * `+PONG` (or any RESP reply) — the port speaks plain Redis;
//! * the connection is closed or reset without a reply, or answered with a TLS alert record —
//!   the port most likely expects TLS.
//!
//! The probe runs only after `connect` failed with a connection error or a timeout, and only
//! for a standalone address; it sends nothing but `PING`, and adds to the error's text without
//! changing its kind.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::error::Error;

/// How long the probe may take, in all.
const PROBE_TIMEOUT: Duration = Duration::from_millis(300);

/// A standalone server's address as the client was given it.
pub(crate) struct Endpoint {
    pub(crate) host: String,
    pub(crate) port: u16,
    /// Given as `rediss://`.
    pub(crate) tls: bool,
}

/// What the port answered to a plain-text `PING`.
enum Answer {
    /// A RESP reply: plain Redis.
    Plain,
    /// Closed, reset, or a TLS record: most likely TLS.
    LikelyTls,
    /// No answer, or the probe could not connect: nothing to add.
    Unknown,
}

async fn probe(endpoint: &Endpoint) -> Answer {
    let attempt = async {
        let mut stream = TcpStream::connect((endpoint.host.as_str(), endpoint.port)).await?;
        stream.write_all(b"PING\r\n").await?;
        let mut first = [0u8; 1];
        match stream.read(&mut first).await {
            Ok(0) => Ok(Answer::LikelyTls),
            // A TLS alert record (content type 21), as some TLS servers send to plain text.
            Ok(_) if first[0] == 0x15 => Ok(Answer::LikelyTls),
            Ok(_) if matches!(first[0], b'+' | b'-' | b':' | b'$' | b'*') => Ok(Answer::Plain),
            Ok(_) => Ok(Answer::Unknown),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Ok(Answer::LikelyTls),
            Err(e) => Err(e),
        }
    };
    match tokio::time::timeout(PROBE_TIMEOUT, attempt).await {
        Ok(Ok(answer)) => answer,
        _ => Answer::Unknown,
    }
}

/// `error`, with a hint when the port's answer shows that plain and TLS were mixed up.
pub(crate) async fn explain(error: Error, endpoint: Endpoint) -> Error {
    let hint = match (endpoint.tls, probe(&endpoint).await) {
        (true, Answer::Plain) => format!(
            "{}:{} answers plain Redis, not TLS: use a redis:// URL for it (or the server's \
             TLS port, tls-port in its configuration)",
            endpoint.host, endpoint.port
        ),
        (false, Answer::LikelyTls) => format!(
            "{}:{} closes plain connections without answering, as a TLS port does: if the \
             server requires TLS, use a rediss:// URL",
            endpoint.host, endpoint.port
        ),
        _ => return error,
    };
    error.with_hint(&hint)
}
