//! dlock's key layout, as far as "the lease is lost now" needs it: which keys hold a lock's
//! holders, and removing them ([`RedisServer::expire_lock`](crate::RedisServer::expire_lock),
//! [`RedisCluster::expire_lock`](crate::RedisCluster::expire_lock)).
//!
//! The harness does not depend on dlock-core (dlock-core's own tests use the harness), so the
//! layout is restated here from `dlock-core/src/key.rs`, and the workspace's integration tests
//! (`tests/repo/testkit_faults.rs`) hold the two together on real locks of every kind:
//!
//! | kind            | keys that say who holds it          |
//! |-----------------|-------------------------------------|
//! | mutex           | `<prefix>{<name>}`                  |
//! | semaphore       | `<prefix>{<name>}:sem`, `…:sem:exp` |
//! | read-write lock | `<prefix>{<name>}:rw`, `…:rw:exp`   |
//!
//! Only those keys go: a lease that runs out leaves the waiters' queues (`…:queue`) and a
//! semaphore's kept limit (`…:sem:limit`) in place, and so does this fault. Every key of one
//! name shares the hash tag `{<name>}`, so one `DEL` removes them all, on a cluster too.

use crate::HarnessError;

/// The key prefix of a dlock client that was not given one (`dlock_core::DEFAULT_KEY_PREFIX`).
/// [`RedisServer::expire_lock`](crate::RedisServer::expire_lock) assumes it; a client built with
/// `key_prefix(…)` needs
/// [`expire_lock_with_prefix`](crate::RedisServer::expire_lock_with_prefix).
pub const DEFAULT_KEY_PREFIX: &str = "dlock:";

/// What follows `{<name>}` in the keys that hold a lock's holders, for every kind of lock.
const HOLDER_SUFFIXES: [&str; 5] = ["", ":sem", ":sem:exp", ":rw", ":rw:exp"];

/// The holder keys of one lock name, of every kind, checked as dlock checks names.
#[derive(Debug)]
pub(crate) struct HolderKeys {
    keys: Vec<String>,
    name: String,
}

impl HolderKeys {
    /// The keys of `name` under `prefix`.
    ///
    /// # Errors
    ///
    /// When dlock would refuse the name or the prefix (then no lock of dlock can have them): an
    /// empty name, braces (they would move the hash tag), control characters.
    pub(crate) fn new(prefix: &str, name: &str) -> Result<HolderKeys, HarnessError> {
        if name.is_empty() {
            return Err(HarnessError::new("expire_lock: the lock name is empty"));
        }
        check("lock name", name)?;
        check("key prefix", prefix)?;
        Ok(HolderKeys {
            keys: HOLDER_SUFFIXES
                .iter()
                .map(|suffix| format!("{prefix}{{{name}}}{suffix}"))
                .collect(),
            name: name.to_owned(),
        })
    }

    /// The key a cluster routes by (every key of the name is in its slot).
    pub(crate) fn first(&self) -> &str {
        self.keys.first().map_or("", String::as_str)
    }

    /// `DEL` of every holder key, in one command (one slot: one hash tag).
    pub(crate) fn delete(&self) -> redis::Cmd {
        let mut cmd = redis::cmd("DEL");
        cmd.arg(&self.keys);
        cmd
    }

    /// `removed` keys were deleted on `server` (`127.0.0.1:<port>`): `Ok` if there were any,
    /// else the error that tells the test its fault did not land.
    pub(crate) fn outcome(&self, removed: usize, server: &str) -> Result<usize, HarnessError> {
        if removed > 0 {
            return Ok(removed);
        }
        Err(HarnessError::new(format!(
            "expire_lock: no lock named `{}` on redis-server {server}: none of {} exists (the \
             lock is not held, its lease already ran out, or the client uses another key \
             prefix: see expire_lock_with_prefix)",
            self.name,
            self.keys.join(", ")
        )))
    }
}

/// Refuses what dlock refuses in names and prefixes (`dlock-core/src/key.rs`).
fn check(what: &str, text: &str) -> Result<(), HarnessError> {
    if let Some(c) = text
        .chars()
        .find(|c| matches!(c, '{' | '}') || c.is_control())
    {
        return Err(HarnessError::new(format!(
            "expire_lock: the {what} {text:?} contains {c:?}, which dlock refuses in lock \
             names and key prefixes, so no lock of dlock has such keys"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keys_of_every_kind_share_the_names_hash_tag() {
        let keys = HolderKeys::new("billing:", "order:42").unwrap();
        assert_eq!(
            keys.keys,
            [
                "billing:{order:42}",
                "billing:{order:42}:sem",
                "billing:{order:42}:sem:exp",
                "billing:{order:42}:rw",
                "billing:{order:42}:rw:exp",
            ]
        );
        assert_eq!(keys.first(), "billing:{order:42}");
        assert_eq!(
            HolderKeys::new("", "n").unwrap().first(),
            "{n}",
            "an empty prefix is allowed"
        );
    }

    #[test]
    fn names_dlock_refuses_are_refused() {
        for (prefix, name) in [
            ("dlock:", ""),
            ("dlock:", "a{b}"),
            ("x}", "n"),
            ("dlock:", "a\n"),
        ] {
            let error = HolderKeys::new(prefix, name).unwrap_err().to_string();
            assert!(error.starts_with("expire_lock: "), "{error}");
        }
    }

    #[test]
    fn nothing_removed_is_an_error_that_names_the_keys() {
        let keys = HolderKeys::new(DEFAULT_KEY_PREFIX, "job").unwrap();
        assert_eq!(keys.outcome(2, "127.0.0.1:1").unwrap(), 2);
        let error = keys.outcome(0, "127.0.0.1:1").unwrap_err().to_string();
        assert!(error.contains("dlock:{job}, dlock:{job}:sem"), "{error}");
        assert!(error.contains("expire_lock_with_prefix"), "{error}");
    }
}
