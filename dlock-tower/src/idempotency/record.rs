//! The idempotency record in Redis: its wire format, versioned, and the request fingerprint.
//!
//! One string value per key scope (principal, method, route, key):
//!
//! ```text
//! dlock-idempotency/1\n<metadata, one line of JSON>\n<the response body, raw bytes>
//! ```
//!
//! The first line names the format and its version; a reader refuses any other version
//! ([`ErrorKind::Format`], naming the key and the version) and never overwrites such a record,
//! so an older replica next to a newer one answers an error instead of misreading. The body is
//! kept raw after the metadata (no base64): a replay returns the exact bytes. Version 1's
//! metadata is [`Meta`]: `state` (`running` or `done`), the request's `fingerprint` (hex
//! SHA-256), the `fence` of the hold that wrote it, and for `done`, the `status`, the kept
//! `headers` and whether the body was `stored` or omitted (larger than the limit).

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderName, Method};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, ErrorKind, Result};

/// The first line's name; the version follows the slash.
const MAGIC: &str = "dlock-idempotency/";
/// The version this code writes and reads.
pub(crate) const VERSION: u32 = 1;

/// A record as read.
#[derive(Debug, PartialEq)]
pub(crate) enum Record {
    /// A request holds (or held, if its lock is free now: recoverable) the key.
    Running { fingerprint: String },
    /// The stored response.
    Done(Stored),
}

/// A completed request's response, as replayed.
#[derive(Debug, PartialEq)]
pub(crate) struct Stored {
    pub(crate) fingerprint: String,
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    /// `None` when the body was over the limit and not kept.
    pub(crate) body: Option<Bytes>,
    /// The body's length when it was not kept.
    pub(crate) omitted_len: u64,
}

/// Version 1's metadata line.
#[derive(Serialize, Deserialize)]
struct Meta {
    state: String,
    fingerprint: String,
    fence: u64,
    #[serde(default)]
    status: u16,
    #[serde(default)]
    headers: Vec<(String, String)>,
    #[serde(default)]
    stored: bool,
    #[serde(default)]
    omitted_len: u64,
}

impl Record {
    pub(crate) fn fingerprint(&self) -> &str {
        match self {
            Self::Running { fingerprint } => fingerprint,
            Self::Done(stored) => &stored.fingerprint,
        }
    }
}

/// The bytes of a running record.
pub(crate) fn encode_running(fingerprint: &str, fence: u64) -> Vec<u8> {
    encode(
        &Meta {
            state: "running".into(),
            fingerprint: fingerprint.into(),
            fence,
            status: 0,
            headers: Vec::new(),
            stored: false,
            omitted_len: 0,
        },
        &[],
    )
}

/// The bytes of a completed record.
pub(crate) fn encode_done(stored: &Stored, fence: u64) -> Vec<u8> {
    encode(
        &Meta {
            state: "done".into(),
            fingerprint: stored.fingerprint.clone(),
            fence,
            status: stored.status,
            headers: stored.headers.clone(),
            stored: stored.body.is_some(),
            omitted_len: stored.omitted_len,
        },
        stored.body.as_deref().unwrap_or_default(),
    )
}

fn encode(meta: &Meta, body: &[u8]) -> Vec<u8> {
    // serde_json escapes control characters in strings: the metadata never holds a newline.
    let json = serde_json::to_vec(meta).unwrap_or_default();
    let mut out = Vec::with_capacity(MAGIC.len() + 4 + json.len() + body.len());
    out.extend_from_slice(format!("{MAGIC}{VERSION}\n").as_bytes());
    out.extend_from_slice(&json);
    out.push(b'\n');
    out.extend_from_slice(body);
    out
}

/// Reads the record stored at `key` (named in errors).
///
/// # Errors
/// [`ErrorKind::Format`] for a value that is not a record of version 1.
pub(crate) fn decode(key: &str, bytes: &[u8]) -> Result<Record> {
    let format = |why: String| {
        Error::new(
            ErrorKind::Format,
            format!("idempotency record `{key}`: {why}; it is left as it is"),
        )
    };
    let Some(rest) = bytes.strip_prefix(MAGIC.as_bytes()) else {
        return Err(format(
            "not written by dlock-tower (no `dlock-idempotency/` line); another program uses the \
             key, give the layer another record prefix"
                .into(),
        ));
    };
    let line_end = rest.iter().position(|b| *b == b'\n').unwrap_or(rest.len());
    let version = String::from_utf8_lossy(&rest[..line_end]);
    if version.parse::<u32>().ok() != Some(VERSION) {
        return Err(format(format!(
            "format version {version:?}, and this dlock-tower reads version {VERSION} only (a \
             newer replica wrote it? upgrade every replica)"
        )));
    }
    let rest = rest.get(line_end + 1..).unwrap_or_default();
    let meta_end = rest
        .iter()
        .position(|b| *b == b'\n')
        .ok_or_else(|| format("the metadata line has no end".into()))?;
    let meta: Meta = serde_json::from_slice(&rest[..meta_end])
        .map_err(|e| format(format!("the metadata does not parse: {e}")))?;
    let body = &rest[meta_end + 1..];
    match meta.state.as_str() {
        "running" => Ok(Record::Running {
            fingerprint: meta.fingerprint,
        }),
        "done" => Ok(Record::Done(Stored {
            fingerprint: meta.fingerprint,
            status: meta.status,
            headers: meta.headers,
            body: meta.stored.then(|| Bytes::copy_from_slice(body)),
            omitted_len: meta.omitted_len,
        })),
        other => Err(format(format!("unknown state {other:?}"))),
    }
}

/// The request fingerprint: hex SHA-256 over the method, the path and query, the chosen
/// headers (name and every value, in the configured order) and the body's SHA-256. Each field
/// is length-prefixed, so no two different requests share an encoding.
pub(crate) fn fingerprint(
    method: &Method,
    path_and_query: &str,
    headers: &HeaderMap,
    chosen: &[HeaderName],
    body: &[u8],
) -> String {
    let mut hash = Sha256::new();
    let mut field = |bytes: &[u8]| {
        hash.update((bytes.len() as u64).to_be_bytes());
        hash.update(bytes);
    };
    field(method.as_str().as_bytes());
    field(path_and_query.as_bytes());
    for name in chosen {
        field(name.as_str().as_bytes());
        for value in headers.get_all(name) {
            field(value.as_bytes());
        }
        field(b"");
    }
    field(&Sha256::digest(body));
    hex(&hash.finalize())
}

/// The scope digest of a record: principal, method, route and key, length-prefixed.
pub(crate) fn scope(principal: &str, method: &Method, route: &str, key: &str) -> String {
    let mut hash = Sha256::new();
    for part in [principal, method.as_str(), route, key] {
        hash.update((part.len() as u64).to_be_bytes());
        hash.update(part.as_bytes());
    }
    hex(&hash.finalize())
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(body: Option<&'static [u8]>) -> Stored {
        Stored {
            fingerprint: "f".repeat(64),
            status: 201,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.map(Bytes::from_static),
            omitted_len: if body.is_some() { 0 } else { 9_000_000 },
        }
    }

    #[test]
    fn records_round_trip_with_raw_bodies() {
        let running = encode_running("ab", 7);
        assert!(running.starts_with(b"dlock-idempotency/1\n"));
        assert_eq!(
            decode("k", &running).unwrap(),
            Record::Running {
                fingerprint: "ab".into()
            }
        );
        // A body with newlines and bytes that are not UTF-8 comes back exactly.
        let body: &'static [u8] = b"{\"id\":1}\n\xff\x00\n";
        for stored in [done(Some(body)), done(None), done(Some(b""))] {
            let bytes = encode_done(&stored, 9);
            assert_eq!(decode("k", &bytes).unwrap(), Record::Done(stored));
        }
    }

    #[test]
    fn other_versions_and_foreign_values_are_refused_by_name() {
        let newer = b"dlock-idempotency/2\n{\"state\":\"done\"}\n";
        let e = decode("idem:{x}", newer).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Format);
        assert!(e.to_string().contains("version \"2\""), "{e}");
        assert!(e.to_string().contains("idem:{x}"), "{e}");
        for foreign in [
            &b"hello"[..],
            b"dlock-idempotency/1\n{not json\n",
            b"dlock-idempotency/1\n{}",
        ] {
            assert_eq!(decode("k", foreign).unwrap_err().kind(), ErrorKind::Format);
        }
    }

    #[test]
    fn fingerprints_see_method_path_chosen_headers_and_body() {
        let mut headers = HeaderMap::new();
        headers.insert("x-tenant", "a".parse().unwrap());
        headers.insert("x-ignored", "1".parse().unwrap());
        let chosen = [HeaderName::from_static("x-tenant")];
        let base = fingerprint(&Method::POST, "/pay", &headers, &chosen, b"{}");
        assert_eq!(
            base,
            fingerprint(&Method::POST, "/pay", &headers, &chosen, b"{}")
        );
        assert_ne!(
            base,
            fingerprint(&Method::PATCH, "/pay", &headers, &chosen, b"{}")
        );
        assert_ne!(
            base,
            fingerprint(&Method::POST, "/pay?x=1", &headers, &chosen, b"{}")
        );
        assert_ne!(
            base,
            fingerprint(&Method::POST, "/pay", &headers, &chosen, b"{ }")
        );
        let mut other = headers.clone();
        other.insert("x-tenant", "b".parse().unwrap());
        assert_ne!(
            base,
            fingerprint(&Method::POST, "/pay", &other, &chosen, b"{}")
        );
        other = headers.clone();
        other.insert("x-ignored", "2".parse().unwrap());
        assert_eq!(
            base,
            fingerprint(&Method::POST, "/pay", &other, &chosen, b"{}")
        );
    }

    #[test]
    fn scopes_do_not_collide_across_field_boundaries() {
        assert_ne!(
            scope("ab", &Method::POST, "/r", "k"),
            scope("a", &Method::POST, "b/r", "k")
        );
        assert_eq!(scope("u", &Method::POST, "/r", "k").len(), 64);
    }
}
