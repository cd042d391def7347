//! Lock names and the Redis keys they map to.
//!
//! Every key and channel of one lock is in one Redis Cluster slot, so every script and `MULTI`
//! touches a single slot and runs unchanged on a cluster. The lock's own keys share the hash tag
//! `{name}`; the fence counter is shared by every lock of the slot, with a tag chosen to hash to
//! that slot:
//!
//! | key / channel                      | type   | lifetime                                  |
//! |------------------------------------|--------|-------------------------------------------|
//! | `<prefix>{<name>}`                 | string | while held; `PX` = the lease              |
//! | `<prefix>{<name>}:queue`           | list   | while someone waits; expires with the key kept for it, one lease past the holder's deadline unless a waiter asks again |
//! | `<prefix>{<name>}:joined:<token>`  | string | from a waiting acquire's first attempt until its entry leaves the queue (a minute at most): a resend of that attempt finds its entry instead of queueing twice (also `…:sem:joined:<token>`, `…:rw:joined:<token>`) |
//! | `<prefix>{<name>}:wake:<client>`   | channel| one per client process with local waiters |
//! | `<prefix>fence:{<tag>}`            | string | the slot's fence counter; no expiry       |
//! | `<prefix>quorum:since` (a cluster: `<prefix>quorum:since:{<tag>}`, per slot) | string | a quorum node's record of when its data began, by its clock (ms); no expiry (`fence_raise.lua`) |
//! | `<prefix>{<name>}:sem`             | hash   | a semaphore: limit, permits used, one field per holder (`scripts/shared.lua`); expires at its last holder's deadline, or later while requests wait |
//! | `<prefix>{<name>}:sem:limit`       | string | the limit set by `Semaphore::set_limit`; no expiry |
//! | `<prefix>{<name>}:sem:exp`         | zset   | the semaphore's holders by lease deadline; same lifetime |
//! | `<prefix>{<name>}:sem:queue`, `…:sem:wake:<client>` | list, channel | as the mutex's |
//! | `<prefix>{<name>}:rw`, `…:rw:exp`, `…:rw:queue`, `…:rw:wake:<client>` | hash, zset, list, channel | a read-write lock: the semaphore's layout, a reader weighing 1 and a writer the whole limit (`kinds/rwlock.rs`) |
//!
//! There is at most one counter per slot in use (16,384 at most, ~100 B each).
//!
//! Names may not contain `{` or `}` (they would change the hash tag) nor control characters.

use std::cell::RefCell;
use std::sync::{Arc, OnceLock};

use redis::{RedisWrite, ToRedisArgs};

use crate::error::{Error, Result};

/// Longest accepted lock name, in bytes.
pub const MAX_NAME_LEN: usize = 512;
/// Longest accepted key prefix, in bytes.
pub const MAX_PREFIX_LEN: usize = 128;

/// Checks a lock name; the error says what is wrong and how to fix it.
pub(crate) fn validate_name(name: &str) -> Result<()> {
    validate_named(
        "lock name",
        "give the lock a name such as \"order:42\"",
        name,
    )
}

/// Checks a name that goes inside a key's hash tag (`what` in the messages, `example` the fix
/// for an empty one): a lock name, a rate limiter's name or key.
pub(crate) fn validate_named(what: &str, example: &str, name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid(format!("{what} is empty; {example}")));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(Error::invalid(format!(
            "{what} is {} bytes long; the limit is {MAX_NAME_LEN} bytes (hash long identifiers)",
            name.len()
        )));
    }
    check_chars(what, name)
}

/// Checks a key prefix (it may be empty).
pub(crate) fn validate_prefix(prefix: &str) -> Result<()> {
    if prefix.len() > MAX_PREFIX_LEN {
        return Err(Error::invalid(format!(
            "key prefix is {} bytes long; the limit is {MAX_PREFIX_LEN} bytes",
            prefix.len()
        )));
    }
    check_chars("key prefix", prefix)
}

fn check_chars(what: &str, s: &str) -> Result<()> {
    if let Some(c) = s.chars().find(|c| matches!(c, '{' | '}')) {
        return Err(Error::invalid(format!(
            "{what} {s:?} contains `{c}`; braces are reserved for the Redis Cluster hash tag \
             that dlock adds around the name, use another character such as `:`"
        )));
    }
    if let Some(c) = s.chars().find(|c| c.is_control()) {
        return Err(Error::invalid(format!(
            "{what} {s:?} contains the control character {c:?}; use printable characters"
        )));
    }
    Ok(())
}

/// What kind of lock a key is, told by what follows its hash tag: nothing for a mutex
/// (`<prefix>{<name>}`), `:sem` for a semaphore (`<prefix>{<name>}:sem`, see
/// `scripts/shared.lua`), `:rw` for a read-write lock. So locks of different kinds with the same
/// name never share a key, and a key found in a wake channel's name says which scripts release
/// it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LockKind {
    Mutex,
    Semaphore,
    RwLock,
}

impl LockKind {
    /// The `kind` label of this kind's metrics (`metrics.rs`).
    pub(crate) fn metric_name(self) -> &'static str {
        match self {
            Self::Mutex => "mutex",
            Self::Semaphore => "semaphore",
            Self::RwLock => "rwlock",
        }
    }

    /// The kinds whose keys carry a suffix.
    const SUFFIXED: [Self; 2] = [Self::Semaphore, Self::RwLock];

    /// What follows `}` in the kind's key.
    fn suffix(self) -> &'static str {
        match self {
            Self::Mutex => "",
            Self::Semaphore => ":sem",
            Self::RwLock => ":rw",
        }
    }

    /// Whether holders of this kind are members of a shared lock (`scripts/shared.lua`) rather
    /// than the one value of a mutex key.
    pub(crate) fn is_shared(self) -> bool {
        self != Self::Mutex
    }
}

/// The Redis keys of one lock: one shared string `<prefix>{<name>}` (a mutex; other kinds add a
/// suffix, see [`LockKind`]). The scripts derive the `:queue` key from it (same hash tag, so the
/// same cluster slot); the slot's fence counter is [`LockKeys::counter`]. Cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct LockKeys {
    /// `<prefix>{<name>}[<kind suffix>]`: the key holding the holder(s) while held.
    pub(crate) lock: Arc<str>,
    /// Where the name starts in `lock`.
    name_at: u32,
    kind: LockKind,
}

impl LockKeys {
    /// Builds the keys of a mutex; `name` and `prefix` must have been validated.
    pub(crate) fn new(prefix: &str, name: &str) -> Self {
        Self::of_kind(LockKind::Mutex, prefix, name)
    }

    /// Builds the keys of a lock of `kind`; `name` and `prefix` must have been validated.
    pub(crate) fn of_kind(kind: LockKind, prefix: &str, name: &str) -> Self {
        thread_local! {
            /// Where the key is put together before it is copied into its `Arc`: one allocation
            /// per handle instead of two (handles are often made per operation).
            static KEY: RefCell<String> = const { RefCell::new(String::new()) };
        }
        let build = |key: &mut String| {
            key.clear();
            key.push_str(prefix);
            key.push('{');
            key.push_str(name);
            key.push('}');
            key.push_str(kind.suffix());
            Arc::<str>::from(key.as_str())
        };
        // `try_with`: a handle made while the thread's locals are torn down (a destructor) still
        // gets its key, through a buffer of its own, instead of a panic.
        let lock = KEY
            .try_with(|key| build(&mut key.borrow_mut()))
            .unwrap_or_else(|_| build(&mut String::new()));
        Self {
            lock,
            // Prefixes and names are at most a few hundred bytes (MAX_PREFIX_LEN).
            name_at: (prefix.len() + 1) as u32,
            kind,
        }
    }

    /// Rebuilds the keys from a lock key (as found in a wake channel's name).
    pub(crate) fn from_lock_key(lock: &str) -> Self {
        let name_at = lock.find('{').map_or(0, |open| open + 1);
        let kind = LockKind::SUFFIXED
            .into_iter()
            .find(|kind| {
                lock.strip_suffix(kind.suffix())
                    .is_some_and(|rest| rest.ends_with('}'))
            })
            .unwrap_or(LockKind::Mutex);
        Self {
            lock: lock.into(),
            name_at: u32::try_from(name_at).unwrap_or(0),
            kind,
        }
    }

    /// The kind of lock these keys are.
    pub(crate) fn kind(&self) -> LockKind {
        self.kind
    }

    /// The lock name as the user gave it.
    pub(crate) fn name(&self) -> &str {
        let name_at = self.name_at as usize;
        let end = self
            .lock
            .len()
            .saturating_sub(1 + self.kind.suffix().len())
            .max(name_at);
        self.lock.get(name_at..end).unwrap_or(&self.lock)
    }

    /// The client's key prefix, which every key of dlock starts with.
    pub(crate) fn prefix(&self) -> &str {
        self.lock
            .get(..(self.name_at as usize).saturating_sub(1))
            .unwrap_or_default()
    }

    /// Whether `key` is one that dlock keeps: anything under a non-empty key prefix; with an
    /// empty prefix, the keys of this lock's name (`{<name>}` and what follows it, of every
    /// kind) and the fence counter of its slot. A user's write must never change them.
    pub(crate) fn is_dlocks(&self, key: &[u8]) -> bool {
        let prefix = self.prefix();
        if !prefix.is_empty() {
            return key.starts_with(prefix.as_bytes());
        }
        let root = self
            .lock
            .get(..self.name_at as usize + self.name().len() + 1);
        root.is_some_and(|root| key.starts_with(root.as_bytes()))
            || key == self.counter().to_string().as_bytes()
    }

    /// The lock's Redis Cluster slot (that of its name: the hash tag).
    pub(crate) fn slot(&self) -> usize {
        slot(self.name())
    }

    /// The fence counter of the lock's cluster slot, written straight into a command: no
    /// allocation.
    pub(crate) fn counter(&self) -> FenceCounter<'_> {
        FenceCounter {
            prefix: self.prefix(),
            tag: slot_tag(slot(self.name())),
        }
    }
}

impl LockKeys {
    /// The key in which a quorum node records when its data began (`fence_raise.lua`): one per
    /// server, or one per slot on a cluster (a script may only touch its key's slot there).
    pub(crate) fn quorum_since(&self, cluster: bool) -> String {
        let counter = self.counter();
        if cluster {
            format!("{}quorum:since:{{{}}}", counter.prefix, counter.tag)
        } else {
            format!("{}quorum:since", counter.prefix)
        }
    }
}

/// Redis Cluster's number of hash slots.
const SLOTS: usize = 16384;

/// The cluster slot of a key whose hash tag is `tag` (CRC16-XMODEM, as Redis computes it).
fn slot(tag: &str) -> usize {
    usize::from(crc16::State::<crc16::XMODEM>::calculate(tag.as_bytes())) % SLOTS
}

/// The part of `key` that Redis Cluster hashes: what lies between the first `{` and the first
/// `}` after it, when that is not empty; otherwise the whole key.
pub(crate) fn hashed_part(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        let rest = &key[open + 1..];
        if let Some(close) = rest.iter().position(|&b| b == b'}')
            && close > 0
        {
            return &rest[..close];
        }
    }
    key
}

/// The cluster slot of any key (its hash tag, or the whole key without one).
pub(crate) fn key_slot(key: &[u8]) -> usize {
    usize::from(crc16::State::<crc16::XMODEM>::calculate(hashed_part(key))) % SLOTS
}

/// A short hash tag of letters and digits that hashes to `slot`: for each slot, the first in
/// order of length, then of bytes. The table is built once per process (~250k hashes, a few
/// milliseconds; `ClientBuilder::build` builds it, off the request path).
pub(crate) fn slot_tag(wanted: usize) -> &'static str {
    static TAGS: OnceLock<Box<[Tag]>> = OnceLock::new();
    let tags = TAGS.get_or_init(|| {
        const ALPHABET: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
        let mut tags = vec![Tag::default(); SLOTS].into_boxed_slice();
        let mut missing = SLOTS;
        let mut len = 1;
        while missing > 0 {
            // Every tag of `len` bytes, as a number written in ALPHABET.
            let count = ALPHABET.len().pow(len as u32);
            for mut n in 0..count {
                let mut tag = Tag {
                    len: len as u8,
                    bytes: [0; 4],
                };
                for byte in tag.bytes[..len].iter_mut().rev() {
                    *byte = ALPHABET[n % ALPHABET.len()];
                    n /= ALPHABET.len();
                }
                let slot = slot(tag.as_str());
                if tags[slot].len == 0 {
                    tags[slot] = tag;
                    missing -= 1;
                }
            }
            len += 1;
        }
        tags
    });
    tags[wanted % SLOTS].as_str()
}

/// A hash tag of at most 4 ASCII letters and digits (4 are always enough: 62^4 tags).
#[derive(Clone, Copy, Default)]
struct Tag {
    len: u8,
    bytes: [u8; 4],
}

impl Tag {
    fn as_str(&self) -> &str {
        // Only ASCII letters and digits are ever stored.
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or_default()
    }
}

/// The key `<prefix>fence:{<tag>}` of the fence counter shared by the locks of one cluster slot
/// (see `next_fence` in `scripts/common.lua`).
pub(crate) struct FenceCounter<'a> {
    prefix: &'a str,
    tag: &'static str,
}

impl std::fmt::Display for FenceCounter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}fence:{{{}}}", self.prefix, self.tag)
    }
}

impl ToRedisArgs for FenceCounter<'_> {
    fn write_redis_args<W: ?Sized + RedisWrite>(&self, out: &mut W) {
        use std::io::Write;
        let mut arg = out.writer_for_next_arg();
        // Writing into the command's buffer cannot fail. Bytes, not `write!`: every release
        // sends this key, and the formatting machinery costs more than the copy.
        for part in [self.prefix, "fence:{", self.tag, "}"] {
            let _ = arg.write_all(part.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_share_the_hash_tag() {
        let keys = LockKeys::new("app:", "order:42");
        assert_eq!(&*keys.lock, "app:{order:42}");
        assert_eq!(keys.name(), "order:42");
        let back = LockKeys::from_lock_key(&keys.lock);
        assert_eq!(back.name(), "order:42");
        assert_eq!(back.lock, keys.lock);
    }

    #[test]
    fn a_semaphore_has_its_own_key_in_the_slot_and_counter_of_its_name() {
        let sem = LockKeys::of_kind(LockKind::Semaphore, "dlock:", "jobs");
        assert_eq!(&*sem.lock, "dlock:{jobs}:sem");
        assert_eq!(sem.name(), "jobs");
        assert_eq!(sem.kind(), LockKind::Semaphore);
        let mutex_jobs = LockKeys::new("dlock:", "jobs");
        assert_ne!(sem.lock, mutex_jobs.lock);
        assert_eq!(sem.counter().to_string(), mutex_jobs.counter().to_string());
        // A key read back from a wake channel's name keeps its kind (which scripts release it).
        let back = LockKeys::from_lock_key(&sem.lock);
        assert_eq!((back.kind(), back.name()), (LockKind::Semaphore, "jobs"));
        let back = LockKeys::from_lock_key(&mutex_jobs.lock);
        assert_eq!(back.kind(), LockKind::Mutex);
        let rw = LockKeys::of_kind(LockKind::RwLock, "dlock:", "jobs");
        assert_eq!(&*rw.lock, "dlock:{jobs}:rw");
        assert_eq!(rw.counter().to_string(), mutex_jobs.counter().to_string());
        let back = LockKeys::from_lock_key(&rw.lock);
        assert_eq!((back.kind(), back.name()), (LockKind::RwLock, "jobs"));
        // A mutex whose name ends in ":rw" stays a mutex: the suffix follows the hash tag.
        let named = LockKeys::new("dlock:", "jobs:rw");
        assert_eq!(LockKeys::from_lock_key(&named.lock).kind(), LockKind::Mutex);
    }

    #[test]
    fn every_slot_has_a_counter_tag_that_hashes_to_it() {
        for slot in 0..SLOTS {
            let tag = slot_tag(slot);
            assert!((1..=4).contains(&tag.len()), "slot {slot}: {tag:?}");
            assert_eq!(super::slot(tag), slot, "tag {tag:?}");
        }
        // The counter shares the lock's slot, whatever the prefix.
        let keys = LockKeys::new("app:", "order:42");
        let counter = keys.counter().to_string();
        assert!(counter.starts_with("app:fence:{"), "{counter}");
        // What a command carries is what `Display` shows.
        let mut cmd = redis::Cmd::new();
        cmd.arg(keys.counter());
        let sent: Vec<&[u8]> = cmd
            .args_iter()
            .filter_map(|a| match a {
                redis::Arg::Simple(bytes) => Some(bytes),
                _ => None,
            })
            .collect();
        assert_eq!(sent, [counter.as_bytes()]);
        let tag = &counter["app:fence:{".len()..counter.len() - 1];
        assert_eq!(super::slot(tag), super::slot("order:42"));
        // Redis's own figure for this tag (`CLUSTER KEYSLOT order:42` is 8691).
        assert_eq!(super::slot("order:42"), 8691);
        // dlock's own keys: under the prefix; without one, the name's keys and its counter.
        let sem = LockKeys::of_kind(LockKind::Semaphore, "app:", "order:42");
        assert!(sem.is_dlocks(b"app:anything") && !sem.is_dlocks(b"balance:{order:42}"));
        let bare = LockKeys::of_kind(LockKind::Semaphore, "", "order:42");
        for key in ["{order:42}", "{order:42}:sem:exp", "{order:42}:queue"] {
            assert!(bare.is_dlocks(key.as_bytes()), "{key}");
        }
        assert!(bare.is_dlocks(bare.counter().to_string().as_bytes()));
        assert!(!bare.is_dlocks(b"balance:{order:42}") && !bare.is_dlocks(b"{order:4}"));
        // Any key, by Redis's hash-tag rule: the first `{…}` that is not empty.
        assert_eq!(super::key_slot(b"balance:{order:42}"), 8691);
        assert_eq!(super::key_slot(b"order:42"), 8691);
        assert_eq!(super::hashed_part(b"a{}b{c}"), b"a{}b{c}");
        assert_eq!(super::hashed_part(b"a{b}{c}"), b"b");
        assert_eq!(super::hashed_part(b"a{b"), b"a{b");
        assert_eq!(
            LockKeys::from_lock_key("{x}").counter().to_string(),
            LockKeys::new("", "x").counter().to_string()
        );
    }

    #[test]
    fn names_are_checked() {
        assert!(validate_name("order:42").is_ok());
        assert!(validate_name("nightly report").is_ok());
        let empty = validate_name("").unwrap_err();
        assert!(empty.to_string().contains("empty"));
        let brace = validate_name("a{b}").unwrap_err();
        assert!(brace.to_string().contains("hash tag"));
        assert!(validate_name("a\nb").is_err());
        assert!(validate_name(&"x".repeat(MAX_NAME_LEN)).is_ok());
        assert!(validate_name(&"x".repeat(MAX_NAME_LEN + 1)).is_err());
        assert!(validate_prefix("").is_ok());
        assert!(validate_prefix("{x}").is_err());
    }
}
