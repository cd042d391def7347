//! The dashboard's cross-site request forgery rule for its POSTs: only a request the browser
//! says came from the dashboard's own origin changes anything.
//!
//! 1. With `Sec-Fetch-Site` (every current browser sends it): it must be `same-origin`.
//! 2. Without it, with `Origin`: its host and port must equal the request's `Host` (the
//!    scheme is not compared: behind a TLS-terminating proxy the server cannot know it).
//! 3. Neither header: refused. Browsers send at least one of them with every form POST, so a
//!    request with neither is not a form of the dashboard (a script can send the headers it
//!    likes, but a script is not what CSRF is about: authentication is).
//!
//! No token is needed: a cross-site page can make the browser send a POST with the user's
//! cookies, but it cannot choose these headers.

use axum::http::HeaderMap;
use axum::http::header::{HOST, ORIGIN};

/// Why a POST was refused, for the 403's body.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Refused(pub(crate) String);

/// Checks the rule above; `authority` is the request URI's (HTTP/2), used when there is no
/// `Host` header.
pub(crate) fn check(headers: &HeaderMap, authority: Option<&str>) -> Result<(), Refused> {
    if let Some(site) = headers.get("sec-fetch-site") {
        return if site.as_bytes().eq_ignore_ascii_case(b"same-origin") {
            Ok(())
        } else {
            Err(Refused(format!(
                "refused: a cross-origin request (Sec-Fetch-Site: {}) may not change jobs",
                String::from_utf8_lossy(site.as_bytes())
            )))
        };
    }
    let Some(origin) = headers.get(ORIGIN) else {
        return Err(Refused(
            "refused: a POST to the dashboard must carry an Origin or Sec-Fetch-Site header \
             (browsers send them); this one has neither"
                .to_owned(),
        ));
    };
    let origin = String::from_utf8_lossy(origin.as_bytes());
    let host = headers
        .get(HOST)
        .and_then(|h| h.to_str().ok())
        .or(authority);
    let origin_host = origin
        .strip_prefix("https://")
        .or_else(|| origin.strip_prefix("http://"));
    match (origin_host, host) {
        (Some(o), Some(h)) if o.eq_ignore_ascii_case(h) => Ok(()),
        _ => Err(Refused(format!(
            "refused: the request's Origin ({origin}) is not this host ({})",
            host.unwrap_or("no Host header")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn sec_fetch_site_decides_when_present() {
        assert!(check(&headers(&[("sec-fetch-site", "same-origin")]), None).is_ok());
        for site in ["cross-site", "same-site", "none"] {
            let h = headers(&[
                ("sec-fetch-site", site),
                ("origin", "http://a:1"),
                ("host", "a:1"),
            ]);
            assert!(check(&h, None).is_err(), "{site}");
        }
    }

    #[test]
    fn origin_must_match_the_host() {
        let ok = headers(&[
            ("origin", "http://127.0.0.1:8080"),
            ("host", "127.0.0.1:8080"),
        ]);
        assert!(check(&ok, None).is_ok());
        assert!(
            check(
                &headers(&[("origin", "https://Example.org")]),
                Some("example.org")
            )
            .is_ok()
        );
        for (origin, host) in [
            ("http://evil.example", "127.0.0.1:8080"),
            ("http://127.0.0.1:8081", "127.0.0.1:8080"),
            ("null", "127.0.0.1:8080"),
            ("http://127.0.0.1:8080.evil", "127.0.0.1:8080"),
        ] {
            assert!(check(&headers(&[("origin", origin), ("host", host)]), None).is_err());
        }
        assert!(check(&headers(&[("origin", "http://a")]), None).is_err());
    }

    #[test]
    fn neither_header_is_refused() {
        assert!(check(&headers(&[("host", "a")]), None).is_err());
    }
}
