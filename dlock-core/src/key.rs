//! Lock names and the Redis keys they map to.
//!
//! Every key and channel of one lock shares the hash tag `{name}`, so every script touches a single
//! Redis Cluster slot and runs unchanged on a cluster:
//!
//! | key / channel                      | type   | lifetime                                  |
//! |------------------------------------|--------|-------------------------------------------|
//! | `<prefix>{<name>}`                 | string | while held; `PX` = the lease              |
//! | `<prefix>{<name>}:fence`           | string | last fence issued; 7 days after last use  |
//! | `<prefix>{<name>}:queue`           | list   | while someone waits                       |
//! | `<prefix>{<name>}:wake:<client>`   | channel| one per client process with local waiters |
//!
//! Names may not contain `{` or `}` (they would change the hash tag) nor control characters.

use std::cell::RefCell;
use std::sync::Arc;

use crate::error::{Error, Result};

/// Longest accepted lock name, in bytes.
pub const MAX_NAME_LEN: usize = 512;
/// Longest accepted key prefix, in bytes.
pub const MAX_PREFIX_LEN: usize = 128;

/// Checks a lock name; the error says what is wrong and how to fix it.
pub(crate) fn validate_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid(
            "lock name is empty; give the lock a name such as \"order:42\"",
        ));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(Error::invalid(format!(
            "lock name is {} bytes long; the limit is {MAX_NAME_LEN} bytes (hash long identifiers)",
            name.len()
        )));
    }
    check_chars("lock name", name)
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

/// The Redis keys of one lock: one shared string `<prefix>{<name>}`. The scripts derive the
/// `:fence` and `:queue` keys from it (same hash tag, so the same cluster slot). Cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct LockKeys {
    /// `<prefix>{<name>}`: the key holding the owner token and holder metadata while held.
    pub(crate) lock: Arc<str>,
    /// Where the name starts in `lock`.
    name_at: usize,
}

impl LockKeys {
    /// Builds the keys; `name` and `prefix` must have been validated.
    pub(crate) fn new(prefix: &str, name: &str) -> Self {
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
            Arc::<str>::from(key.as_str())
        };
        // `try_with`: a handle made while the thread's locals are torn down (a destructor) still
        // gets its key, through a buffer of its own, instead of a panic.
        let lock = KEY
            .try_with(|key| build(&mut key.borrow_mut()))
            .unwrap_or_else(|_| build(&mut String::new()));
        Self {
            lock,
            name_at: prefix.len() + 1,
        }
    }

    /// Rebuilds the keys from a lock key (as found in a wake channel's name).
    pub(crate) fn from_lock_key(lock: &str) -> Self {
        let name_at = lock.find('{').map_or(0, |open| open + 1);
        Self {
            lock: lock.into(),
            name_at,
        }
    }

    /// The lock name as the user gave it.
    pub(crate) fn name(&self) -> &str {
        let end = self.lock.len().saturating_sub(1).max(self.name_at);
        self.lock.get(self.name_at..end).unwrap_or(&self.lock)
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
