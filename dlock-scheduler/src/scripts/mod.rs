//! The scheduler's Lua scripts (one file each, contract on top; `common.lua`, the run records'
//! format and helpers, is prepended to the scripts that read or write run records). They are sent on dlock-core's request path
//! (`dlock_core::ext::invoke`: the client's own connection, its command timeout, `EVALSHA`
//! with a reload on `NOSCRIPT`, dlock-core's errors).

use std::sync::LazyLock;

use redis::Script;

/// Claims a scheduled occurrence (one replica wins; the replica whose turn it is first).
pub(crate) static CLAIM: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("common.lua"),
        include_str!("claim.lua")
    ))
});

/// Takes the oldest `run_now` request and claims its run, in one step.
pub(crate) static TAKE_REQUEST: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("common.lua"),
        include_str!("take_request.lua")
    ))
});

/// Queues a `run_now` request and wakes the replicas.
pub(crate) static REQUEST: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("request.lua")));

/// Resumes a paused job and wakes the replicas when `run_now` requests wait for it.
pub(crate) static RESUME: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("resume.lua")));

/// Withdraws a claim whose reply was lost, before anything ran.
pub(crate) static WITHDRAW: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("common.lua"),
        include_str!("withdraw.lua")
    ))
});

/// Records that an attempt runs, or how it ended (scheduling the next attempt when due).
pub(crate) static FINISH: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("common.lua"),
        include_str!("finish.lua")
    ))
});

/// Renews the lease of a running at-least-once attempt.
pub(crate) static RENEW_ATTEMPT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("common.lua"),
        include_str!("renew_attempt.lua")
    ))
});

/// Settles abandoned at-least-once attempts and claims due retries.
pub(crate) static TAKE_RETRY: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("common.lua"),
        include_str!("take_retry.lua")
    ))
});

/// Adds, replaces or removes a run-time schedule and wakes the replicas.
pub(crate) static SCHEDULE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("schedule.lua")));
/// Enqueues a one-off job (a pending run of the handler's hidden job), waking the replicas.
pub(crate) static ONCE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("common.lua"),
        include_str!("once.lua")
    ))
});

/// Cancels a one-off job that has not started.
pub(crate) static ONCE_CANCEL: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("common.lua"),
        include_str!("once_cancel.lua")
    ))
});

/// Trims the ledger of a handler's one-off jobs to the runs it keeps.
pub(crate) static ONCE_TRIM: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("once_trim.lua")));

/// Registers a replica as live for a job (or unregisters it).
pub(crate) static HEARTBEAT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("heartbeat.lua")));

/// Publishes (or withdraws) a scheduler instance's entry in the job registry.
pub(crate) static REGISTER: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("register.lua")));

/// A duration in whole milliseconds, for a script argument.
pub(crate) fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Every script above, with the file it is built from: for the test that each one loads on
/// every tested server (`tests/operate/server_texts.rs`, through `__private::scripts`).
pub(crate) fn all() -> [(&'static str, &'static Script); 14] {
    [
        ("claim.lua", &CLAIM),
        ("take_request.lua", &TAKE_REQUEST),
        ("request.lua", &REQUEST),
        ("resume.lua", &RESUME),
        ("withdraw.lua", &WITHDRAW),
        ("finish.lua", &FINISH),
        ("renew_attempt.lua", &RENEW_ATTEMPT),
        ("take_retry.lua", &TAKE_RETRY),
        ("schedule.lua", &SCHEDULE),
        ("once.lua", &ONCE),
        ("once_cancel.lua", &ONCE_CANCEL),
        ("once_trim.lua", &ONCE_TRIM),
        ("heartbeat.lua", &HEARTBEAT),
        ("register.lua", &REGISTER),
    ]
}
