//! Whose budget a request spends: [`KeyBy`] (client IP behind trusted proxies, a header, the
//! principal, the route), and the key as the limiter stores it.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::ConnectInfo;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// The key of requests that have none (no peer address, no header, no principal): they share
/// one budget.
pub(crate) const NO_KEY: &str = "-";

/// A principal read from a request's parts.
pub(crate) type PrincipalFn = dyn Fn(&Parts) -> Option<String> + Send + Sync;

/// How the layer names the budget a request spends.
#[derive(Clone)]
#[non_exhaustive]
pub enum KeyBy {
    /// The client's IP address: the peer's (axum's `ConnectInfo<SocketAddr>`, from
    /// `into_make_service_with_connect_info`), or, when the peer is a trusted proxy, the
    /// `X-Forwarded-For` entry nearest to it that is not a trusted proxy. Entries a client
    /// wrote itself sit further left and are never reached: a client cannot choose its key.
    ClientIp(TrustedProxies),
    /// A request header's value (an API key): requests without it share one budget.
    Header(HeaderName),
    /// The authenticated principal, from the request's parts (put the layer after the
    /// authentication middleware); `None` shares one budget.
    Principal(Arc<PrincipalFn>),
    /// The route: one budget per route, shared by every client.
    Route,
}

impl fmt::Debug for KeyBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ClientIp(trusted) => f.debug_tuple("ClientIp").field(trusted).finish(),
            Self::Header(name) => f.debug_tuple("Header").field(name).finish(),
            Self::Principal(_) => f.write_str("Principal(..)"),
            Self::Route => f.write_str("Route"),
        }
    }
}

impl KeyBy {
    /// [`KeyBy::Principal`] from a function of the request's parts.
    pub fn principal(f: impl Fn(&Parts) -> Option<String> + Send + Sync + 'static) -> Self {
        Self::Principal(Arc::new(f))
    }

    /// The key of a request whose matched route is `route`.
    pub(crate) fn key(&self, parts: &Parts, route: &str) -> String {
        let raw = match self {
            Self::ClientIp(trusted) => {
                let peer = parts
                    .extensions
                    .get::<ConnectInfo<SocketAddr>>()
                    .map(|c| c.0.ip());
                client_ip(peer, &parts.headers, trusted).map(|ip| ip.to_string())
            }
            Self::Header(name) => parts
                .headers
                .get(name)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()),
            Self::Principal(f) => f(parts),
            Self::Route => Some(route.to_owned()),
        };
        storable(raw.as_deref().unwrap_or(NO_KEY))
    }
}

/// A key the limiter accepts as it is (short, no braces or control characters), or its
/// SHA-256 (`h:<hex>`), so that any header value or principal works.
fn storable(key: &str) -> String {
    let plain = !key.is_empty()
        && key.len() <= 128
        && !key.starts_with("h:")
        && key.chars().all(|c| !c.is_control() && c != '{' && c != '}');
    if plain {
        return key.to_owned();
    }
    let digest = Sha256::digest(key.as_bytes());
    let mut out = String::from("h:");
    for b in digest.iter() {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// The proxies whose `X-Forwarded-For` is believed: address ranges in CIDR notation.
#[derive(Clone, Debug, Default)]
pub struct TrustedProxies {
    ranges: Vec<(IpAddr, u8)>,
}

impl TrustedProxies {
    /// No proxy is trusted: the key is the peer's address.
    pub fn none() -> Self {
        Self::default()
    }

    /// The proxies in `ranges` (`10.0.0.0/8`, `2001:db8::/32`, or a single address).
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidInput`] for a range that does not parse or whose prefix
    /// length is longer than its address.
    pub fn new<'a>(ranges: impl IntoIterator<Item = &'a str>) -> Result<Self> {
        let mut out = Vec::new();
        for range in ranges {
            let (addr, bits) = range.split_once('/').unwrap_or((range, ""));
            let addr: IpAddr = addr.trim().parse().map_err(|_| {
                Error::invalid(format!("trusted proxy range {range:?}: not an IP address"))
            })?;
            let max = if addr.is_ipv4() { 32 } else { 128 };
            let bits =
                if bits.is_empty() {
                    max
                } else {
                    bits.trim().parse::<u8>().ok().filter(|b| *b <= max).ok_or_else(|| {
                    Error::invalid(format!(
                        "trusted proxy range {range:?}: the prefix length must be 0 to {max}"
                    ))
                })?
                };
            out.push((addr, bits));
        }
        Ok(Self { ranges: out })
    }

    /// Whether `ip` is in one of the ranges.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.ranges.iter().any(|(net, bits)| match (net, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(*bits)).unwrap_or(0);
                u32::from(*net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(*bits)).unwrap_or(0);
                u128::from(*net) & mask == u128::from(ip) & mask
            }
            _ => false,
        })
    }
}

/// The client's address: the peer, unless it is a trusted proxy; then the `X-Forwarded-For`
/// entries from the right (the nearest hop first), the first one that is not trusted. An
/// entry that is not an address stops the walk at the last trusted hop (its proxy vouches for
/// nothing further).
pub(crate) fn client_ip(
    peer: Option<IpAddr>,
    headers: &HeaderMap,
    trusted: &TrustedProxies,
) -> Option<IpAddr> {
    let mut last = peer?.to_canonical();
    if !trusted.contains(last) {
        return Some(last);
    }
    let hops: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .collect();
    for hop in hops.iter().rev() {
        let Ok(ip) = hop.trim().parse::<IpAddr>() else {
            return Some(last);
        };
        let ip = ip.to_canonical();
        if !trusted.contains(ip) {
            return Some(ip);
        }
        last = ip;
    }
    Some(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xff(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append("x-forwarded-for", v.parse().unwrap());
        }
        headers
    }

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_forwards() {
        let trusted = TrustedProxies::new(["10.0.0.0/8"]).unwrap();
        let headers = xff(&["1.2.3.4"]);
        assert_eq!(
            client_ip(ip("203.0.113.9"), &headers, &trusted),
            ip("203.0.113.9")
        );
        assert_eq!(
            client_ip(ip("203.0.113.9"), &headers, &TrustedProxies::none()),
            ip("203.0.113.9")
        );
        assert_eq!(client_ip(None, &headers, &trusted), None);
    }

    #[test]
    fn behind_trusted_proxies_the_nearest_untrusted_hop_is_the_client() {
        let trusted = TrustedProxies::new(["10.0.0.0/8", "192.168.1.1"]).unwrap();
        // A client that forged "6.6.6.6" gets its own address as key, not the forgery.
        let headers = xff(&["6.6.6.6, 198.51.100.7", "192.168.1.1"]);
        assert_eq!(
            client_ip(ip("10.1.2.3"), &headers, &trusted),
            ip("198.51.100.7")
        );
        // Every hop trusted: the furthest one.
        assert_eq!(
            client_ip(ip("10.1.2.3"), &xff(&["10.9.9.9"]), &trusted),
            ip("10.9.9.9")
        );
        // Garbage stops the walk at the last trusted hop.
        assert_eq!(
            client_ip(ip("10.1.2.3"), &xff(&["1.1.1.1, junk"]), &trusted),
            ip("10.1.2.3")
        );
        // IPv4-mapped IPv6 peers are their IPv4 address.
        assert_eq!(
            client_ip(ip("::ffff:10.0.0.1"), &xff(&["198.51.100.7"]), &trusted),
            ip("198.51.100.7")
        );
    }

    #[test]
    fn ranges_parse_and_match() {
        let t = TrustedProxies::new(["2001:db8::/32", "0.0.0.0/0"]).unwrap();
        assert!(t.contains("2001:db8:1::1".parse().unwrap()));
        assert!(!t.contains("2001:db9::1".parse().unwrap()));
        assert!(t.contains("8.8.8.8".parse().unwrap()));
        for bad in ["10.0.0.0/33", "nope", "::/129", "10.0.0.0/x"] {
            assert!(TrustedProxies::new([bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn keys_that_the_limiter_would_refuse_are_hashed() {
        assert_eq!(storable("198.51.100.7"), "198.51.100.7");
        assert_eq!(storable("2001:db8::1"), "2001:db8::1");
        for odd in ["a{b}", "", "line\nbreak", &"k".repeat(129), "h:forged"] {
            let key = storable(odd);
            assert!(key.starts_with("h:") && key.len() == 66, "{odd:?} -> {key}");
        }
    }
}
