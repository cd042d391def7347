//! The limits of the crates the macros expand to, checked at compile time: lease lengths, label
//! and lock-name sizes, and the one message about a lease above the longest.
//!
//! Duplicated because a proc-macro crate cannot depend on the crate it expands to (dlock-core
//! depends on this one). `tests::limits_match_dlock_core` compares each with the original
//! (dlock-core is a dev-dependency). This module is the floor of the crate: it imports nothing
//! of it, so that both the grammars (`duration`, `template`) and the checks (`validate`) can
//! use it.

use std::time::Duration;

/// Shortest lease dlock-core accepts (`dlock_core::MIN_TTL`).
pub(crate) const MIN_TTL: Duration = Duration::from_millis(10);
/// Shortest lease dlock-core lets the watchdog renew (`dlock_core::MIN_WATCHDOG_TTL`).
pub(crate) const MIN_WATCHDOG_TTL: Duration = Duration::from_millis(100);
/// Longest lease dlock-core accepts (`dlock_core::MAX_TTL`).
pub(crate) const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// Longest label dlock-core accepts (`dlock_core::MAX_LABEL_LEN`).
pub(crate) const MAX_LABEL_LEN: usize = 256;
/// The longest lock name dlock-core accepts, in bytes (`dlock_core::MAX_NAME_LEN`).
pub(crate) const MAX_NAME_LEN: usize = 512;

/// The message for a `ttl` or `lease` above dlock-core's [`MAX_TTL`], also when it is too large
/// to parse at all.
pub(crate) fn above_max_ttl(option: &str, text: &str) -> String {
    let advice = if option == "lease" {
        "for long runs keep a short lease: the watchdog renews it while the job runs (cap the \
         run with `max_run`)"
    } else {
        "for long work keep a short ttl: the watchdog renews it, capped by `max_hold`"
    };
    format!("`{option} = {text:?}` is above the longest lease, 24h (dlock_core::MAX_TTL); {advice}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// If dlock-core changes a limit, change it here: dlock-core's `MIN_TTL`,
    /// `MIN_WATCHDOG_TTL` and `MAX_TTL` (lease.rs), `MAX_LABEL_LEN` (client.rs) and
    /// `MAX_NAME_LEN` (key.rs).
    #[test]
    fn limits_match_dlock_core() {
        assert_eq!(MIN_TTL, dlock_core::MIN_TTL);
        assert_eq!(MIN_WATCHDOG_TTL, dlock_core::MIN_WATCHDOG_TTL);
        assert_eq!(MAX_TTL, dlock_core::MAX_TTL);
        assert_eq!(MAX_LABEL_LEN, dlock_core::MAX_LABEL_LEN);
        assert_eq!(MAX_NAME_LEN, dlock_core::MAX_NAME_LEN);
        // As quoted in the messages (`validate::ranges`, `above_max_ttl`).
        assert_eq!(crate::duration::parse("10ms"), Ok(MIN_TTL));
        assert_eq!(crate::duration::parse("100ms"), Ok(MIN_WATCHDOG_TTL));
        assert_eq!(crate::duration::parse("24h"), Ok(MAX_TTL));
    }
}
