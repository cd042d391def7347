//! The Lua scripts, one file each with its KEYS/ARGV/returns contract on top, hashed once.
//!
//! [`redis::Script`] sends `EVALSHA` and falls back to loading the script on `NOSCRIPT` (first
//! use, or after a Redis restart), on standalone servers and clusters alike.

use std::sync::LazyLock;

use redis::Script;

/// Takes a free mutex, or reports its remaining lease and queues the caller.
pub(crate) static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("acquire.lua")));

/// Owner-checked release that hands the lock to the oldest live waiter.
pub(crate) static RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("release.lua")));

/// Owner-checked lease extension of one or many locks (the watchdog's batches).
pub(crate) static EXTEND: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("extend.lua")));

/// Reads the holder and queue length of a lock.
pub(crate) static INSPECT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("inspect.lua")));
