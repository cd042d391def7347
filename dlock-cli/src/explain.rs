//! Why connecting failed, in the operator's terms: a certificate problem (with what to pass),
//! a refused user name or password, a port that does not speak Redis, no answer — each its
//! own message, instead of one "cannot reach Redis … check that the server runs" for all.

use std::time::Duration;

use chrono::DateTime;
use dlock_core::ErrorKind;

use crate::failure::{Failure, PASSWORD_VAR};

/// `e`, from connecting to the Redis at `addresses` (`host:port, …`) within `timeout`, as the
/// failure `dlock` reports.
pub(crate) fn connect_failure(e: dlock_core::Error, addresses: &str, timeout: Duration) -> Failure {
    let text = e.to_string();
    if let Some(problem) = certificate_problem(&text) {
        return Failure::error(format!("{problem} (Redis at {addresses})"));
    }
    if text.contains("does not speak the Redis protocol") {
        // What the library's probe saw, if it says (a web server's status line, say).
        let answered = text
            .split_once("(it answered ")
            .and_then(|(_, rest)| rest.split_once(" to a PING)"))
            .map(|(seen, _)| format!(" (it answered {seen} to a PING)"))
            .unwrap_or_default();
        return Failure::error(format!(
            "the server at {addresses} does not speak the Redis protocol, so it is not \
             Redis{answered}: check the host and port of the URL (--url or DLOCK_REDIS_URL)"
        ));
    }
    if port_mix_up(&text) {
        // The library's probe found what the port speaks (plain and TLS mixed up, or not
        // Redis): its words say what to change.
        return Failure::error(format!("cannot reach Redis at {addresses}: {text}"));
    }
    match e.kind() {
        ErrorKind::Authentication => Failure::refused_login(format!(
            "Redis at {addresses} refused the user name or password (or none was given): check \
             the user in the URL and the password (in the URL, or {PASSWORD_VAR})"
        )),
        ErrorKind::Timeout => Failure::error(format!(
            "cannot reach Redis at {addresses}: no answer within {timeout:?}; check the URL \
             (--url or DLOCK_REDIS_URL), that the server runs, and --timeout"
        )),
        ErrorKind::Connection => Failure::error(format!(
            "cannot reach Redis at {addresses}: {text}; check the URL (--url or DLOCK_REDIS_URL) \
             and that the server runs"
        )),
        ErrorKind::InvalidInput => Failure::usage(text),
        _ => Failure::from(e),
    }
}

/// Whether `text` carries the library's finding that plain and TLS are mixed up (a plain URL
/// at a TLS port, `rediss://` at a plain one).
fn port_mix_up(text: &str) -> bool {
    text.contains("this port speaks")
}

/// What a TLS certificate error in `text` (rustls's words, inside the redis crate's or a
/// Sentinel's message) means, with what to pass; `None` when it holds none.
pub(crate) fn certificate_problem(text: &str) -> Option<String> {
    if text.contains("UnknownIssuer") {
        return Some(
            "the server's certificate is not signed by a trusted CA: pass --tls-ca FILE with the \
             CA that signed it (or --tls-insecure, for development only)"
                .to_owned(),
        );
    }
    if text.contains("certificate expired") {
        let until = unix_after(text, "not valid after ");
        let now = unix_after(text, "verification time ");
        return Some(format!(
            "the server's certificate expired{}{}: renew it on the server (or, for development \
             only, --tls-insecure)",
            until.map(|t| format!(" at {t}")).unwrap_or_default(),
            now.map(|t| format!(" (it is {t} now)")).unwrap_or_default(),
        ));
    }
    if text.contains("certificate not valid yet") {
        let from = unix_after(text, "not valid before ");
        return Some(format!(
            "the server's certificate is not valid yet{}: check the clocks of this machine and \
             of the CA",
            from.map(|t| format!(" (valid from {t})"))
                .unwrap_or_default(),
        ));
    }
    if text.contains("certificate not valid for name") {
        return Some(
            "the server's certificate does not name the host of the URL: connect with a host \
             name or address the certificate names"
                .to_owned(),
        );
    }
    if text.contains("CertificateRequired") || text.contains("peer sent no certificates") {
        return Some(
            "the server requires a client certificate: pass --tls-cert FILE and --tls-key FILE"
                .to_owned(),
        );
    }
    if text.contains("invalid peer certificate") {
        let detail = text
            .split_once("invalid peer certificate")
            .map_or("", |(_, rest)| rest);
        return Some(format!(
            "the server's TLS certificate was refused{detail}: check --tls-ca and the server's \
             certificate"
        ));
    }
    None
}

/// The UNIX time written after `label` in `text` (rustls writes `… 1700000000 (UNIX)`), as
/// RFC 3339 in UTC.
fn unix_after(text: &str, label: &str) -> Option<String> {
    let (_, rest) = text.split_once(label)?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let secs: i64 = digits.parse().ok()?;
    DateTime::from_timestamp(secs, 0).map(|t| t.to_rfc3339())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_ca_says_to_pass_tls_ca() {
        let text = "connection error: PING: invalid peer certificate: UnknownIssuer";
        let said = certificate_problem(text).unwrap_or_default();
        assert!(said.contains("not signed by a trusted CA"), "{said}");
        assert!(said.contains("--tls-ca FILE"), "{said}");
    }

    #[test]
    fn an_expired_certificate_shows_its_dates_in_rfc_3339() {
        // rustls's own wording of `CertificateError::ExpiredContext`.
        let text = "invalid peer certificate: certificate expired: verification time 1764158400 \
                    (UNIX), but certificate is not valid after 1700000000 (64158400 seconds ago)";
        let said = certificate_problem(text).unwrap_or_default();
        assert!(said.contains("2023-11-14T22:13:20+00:00"), "{said}");
        assert!(said.contains("2025-11-26T12:00:00+00:00"), "{said}");
        assert!(!said.contains("1700000000"), "{said}");
    }

    #[test]
    fn other_text_is_no_certificate_problem() {
        assert_eq!(
            certificate_problem("Connection refused (os error 111)"),
            None
        );
    }
}
