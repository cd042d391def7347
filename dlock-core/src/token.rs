//! Who holds a lock and which acquisition it is: owner tokens, client ids, the host name, and
//! fencing tokens.

use std::fmt;
use std::sync::Mutex;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::error::{Error, ErrorKind, Result};
use crate::key::LockKind;
use crate::runtime::lock;

/// Length of an owner token on the wire: 128 random bits as lowercase hex.
pub(crate) const OWNER_TOKEN_LEN: usize = 32;

/// A 128-bit owner token from a CSPRNG; on the wire, 32 lowercase hex digits.
///
/// One token is drawn per acquire call and reused by every retry of that call, which is what
/// makes a retried acquire idempotent. Kept as its 16 bytes, not as its 32 digits: every held
/// lease, waiting call and queued clean-up carries one (BENCHMARKS.md, "Memory"), and the digits
/// are written only into a request. (Bytes rather than a `u128`, whose 16-byte alignment would
/// pad every struct that holds one.)
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct OwnerToken([u8; OWNER_TOKEN_LEN / 2]);

/// An owner token's 32 hex digits, on the stack.
pub(crate) struct TokenHex([u8; OWNER_TOKEN_LEN]);

impl TokenHex {
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub(crate) fn as_str(&self) -> &str {
        // Only ASCII hex digits are ever stored.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

/// The owner tokens of one client: ChaCha12 (`rand`'s `StdRng`, a CSPRNG) seeded from the
/// operating system's generator when the client is built, so drawing a token costs no system
/// call. A client must not be carried across `fork()` (neither can its Tokio runtime); a client
/// built after a fork gets a fresh seed.
pub(crate) struct TokenSource(Mutex<StdRng>);

impl TokenSource {
    pub(crate) fn new() -> Result<Self> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(rng_error)?;
        Ok(Self(Mutex::new(StdRng::from_seed(seed))))
    }

    pub(crate) fn next(&self) -> OwnerToken {
        let mut raw = [0u8; OWNER_TOKEN_LEN / 2];
        lock(&self.0).fill_bytes(&mut raw);
        OwnerToken(raw)
    }
}

impl fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenSource(..)")
    }
}

impl OwnerToken {
    #[cfg(test)]
    pub(crate) fn generate() -> Result<Self> {
        Ok(TokenSource::new()?.next())
    }

    /// Parses a token received from Redis (a grant message): exactly 32 lowercase hex digits.
    pub(crate) fn parse(s: &[u8]) -> Option<Self> {
        let digits: &[u8; OWNER_TOKEN_LEN] = s.try_into().ok()?;
        digits
            .iter()
            .try_fold(0u128, |value, &digit| {
                let nibble = match digit {
                    b'0'..=b'9' => digit - b'0',
                    b'a'..=b'f' => digit - b'a' + 10,
                    _ => return None,
                };
                Some(value << 4 | u128::from(nibble))
            })
            .map(|value| Self(value.to_be_bytes()))
    }

    /// The token as it is written to Redis.
    pub(crate) fn hex(&self) -> TokenHex {
        TokenHex(hex(self.0))
    }
}

/// Written as its 32 hex digits.
impl redis::ToRedisArgs for OwnerToken {
    fn write_redis_args<W: ?Sized + redis::RedisWrite>(&self, out: &mut W) {
        out.write_arg(self.hex().as_bytes());
    }
}

/// The owner argument of `extend.lua` for a lease of `kind`: the token's 32 hex digits, after
/// an `S` for a holder of a shared lock (see the script).
pub(crate) struct ExtendOwner {
    pub(crate) token: OwnerToken,
    pub(crate) kind: LockKind,
}

impl redis::ToRedisArgs for ExtendOwner {
    fn write_redis_args<W: ?Sized + redis::RedisWrite>(&self, out: &mut W) {
        let hex = self.token.hex();
        if self.kind.is_shared() {
            let mut marked = [b'S'; 33];
            marked[1..].copy_from_slice(hex.as_bytes());
            out.write_arg(&marked);
        } else {
            out.write_arg(hex.as_bytes());
        }
    }
}

fn rng_error(e: getrandom::Error) -> Error {
    Error::new(
        ErrorKind::System,
        format!("the operating system's random number generator failed: {e}"),
    )
}

/// The two lowercase hex digits of every byte value.
const HEX_PAIRS: [[u8; 2]; 256] = {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut pairs = [[0u8; 2]; 256];
    let mut byte = 0;
    while byte < 256 {
        pairs[byte] = [DIGITS[byte >> 4], DIGITS[byte & 0xf]];
        byte += 1;
    }
    pairs
};

/// `raw` as `M = 2 × N` lowercase hex digits. A token is written twice per acquire/release pair
/// (the `SET`'s value, the release's): one table read per byte and no bounds checks keep that
/// at a third of a digit-by-digit loop (callgrind).
fn hex<const N: usize, const M: usize>(raw: [u8; N]) -> [u8; M] {
    let mut out = [0u8; M];
    for (digits, byte) in out.chunks_exact_mut(2).zip(raw) {
        digits.copy_from_slice(&HEX_PAIRS[usize::from(byte)]);
    }
    out
}

/// A random 64-bit identifier for one client (one connection) as 16 hex digits; it names the
/// client's wake-up channels.
pub(crate) fn client_id() -> Result<String> {
    let mut raw = [0u8; 8];
    getrandom::fill(&mut raw).map_err(rng_error)?;
    let digits: [u8; 16] = hex(raw);
    Ok(String::from_utf8_lossy(&digits).into_owned())
}

/// This machine's host name as stored with a lock (and in the scheduler's ledger): control
/// characters removed (they separate the fields of the lock value), `unknown-host` when the
/// operating system does not say.
pub(crate) fn host_name() -> String {
    let host = hostname::get()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "unknown-host".to_owned());
    host.chars().filter(|c| !c.is_control()).collect()
}

impl fmt::Debug for OwnerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Anyone who knows a token can release the lock: show only enough to correlate logs.
        write!(f, "OwnerToken({}…)", &self.hex().as_str()[..6])
    }
}

/// A fencing token: strictly increasing per lock name across acquisitions, releases, expiries,
/// processes and (as long as the Redis server clock does not step back) Redis restarts that lost
/// data.
///
/// Pass it to the storage you protect and have the storage reject writes that carry a token
/// smaller than the largest it has seen: a holder that was paused past its lease can then no
/// longer overwrite the work of the next holder.
///
/// Issued by an `INCR` of one counter per Redis Cluster slot, which a counter found lost starts
/// again at the server clock in µs: tokens of one name strictly increase, with gaps, and are not
/// timestamps. Compare tokens of the same lock name only.
///
/// ```
/// use dlock_core::FencingToken;
///
/// let older = FencingToken::new(1_763_000_000_000_000);
/// let newer = FencingToken::new(1_763_000_000_000_001);
/// assert!(newer > older);
/// assert_eq!(newer.get(), 1_763_000_000_000_001);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FencingToken(u64);

impl FencingToken {
    /// Wraps a raw value, e.g. one read back from your storage.
    pub const fn new(value: u64) -> Self {
        Self(value)
    }

    /// The raw value.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_hex_unique_and_redacted() {
        let a = OwnerToken::generate().unwrap();
        let b = OwnerToken::generate().unwrap();
        assert_ne!(a, b);
        let digits = a.hex();
        assert_eq!(digits.as_str().len(), OWNER_TOKEN_LEN);
        assert!(
            digits
                .as_str()
                .bytes()
                .all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
        );
        assert_eq!(OwnerToken::parse(digits.as_bytes()), Some(a));
        assert_eq!(OwnerToken::parse(b"zz"), None);
        let known = OwnerToken::parse(b"0123456789abcdef00000000000000ff").unwrap();
        assert_eq!(
            known,
            OwnerToken(0x0123_4567_89ab_cdef_0000_0000_0000_00ff_u128.to_be_bytes())
        );
        assert_eq!(known.hex().as_str(), "0123456789abcdef00000000000000ff");
        assert_eq!(OwnerToken::parse(b"0123456789ABCDEF00000000000000ff"), None);
        assert_eq!(OwnerToken::parse(b"0123456789abcdef00000000000000f"), None);
        let shown = format!("{a:?}");
        assert!(!shown.contains(digits.as_str()));
        assert_eq!(client_id().unwrap().len(), 16);
    }

    #[test]
    fn every_byte_value_is_written_as_its_two_digits() {
        for byte in 0..=u8::MAX {
            let token = OwnerToken([byte; OWNER_TOKEN_LEN / 2]);
            let digits = token.hex();
            assert_eq!(&digits.as_str()[..2], format!("{byte:02x}"));
            assert_eq!(OwnerToken::parse(digits.as_bytes()), Some(token));
        }
    }
}
