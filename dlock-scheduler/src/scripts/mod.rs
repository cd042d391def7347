//! The scheduler's Lua scripts (one file each, contract on top; `common.lua`, the run records'
//! format and helpers, is prepended to the scripts that read or write run records). They are sent on dlock-core's request path
//! (`dlock_core::ext::invoke`: the client's own connection, its command timeout, `EVALSHA`
//! with a reload on `NOSCRIPT`, dlock-core's errors).

use std::sync::LazyLock;

use redis::Script;

/// Claims a scheduled occurrence (one replica wins; the replica whose turn it is first).
pub(crate) static CLAIM: LazyLock<Script> = LazyLock::new(|| Script::new(text::CLAIM));

/// Takes the oldest `run_now` request and claims its run, in one step.
pub(crate) static TAKE_REQUEST: LazyLock<Script> =
    LazyLock::new(|| Script::new(text::TAKE_REQUEST));

/// Queues a `run_now` request and wakes the replicas.
pub(crate) static REQUEST: LazyLock<Script> = LazyLock::new(|| Script::new(text::REQUEST));

/// Resumes a paused job and wakes the replicas when `run_now` requests wait for it.
pub(crate) static RESUME: LazyLock<Script> = LazyLock::new(|| Script::new(text::RESUME));

/// Withdraws a claim whose reply was lost, before anything ran.
pub(crate) static WITHDRAW: LazyLock<Script> = LazyLock::new(|| Script::new(text::WITHDRAW));

/// Records that an attempt runs, or how it ended (scheduling the next attempt when due).
pub(crate) static FINISH: LazyLock<Script> = LazyLock::new(|| Script::new(text::FINISH));

/// Renews the lease of a running at-least-once attempt.
pub(crate) static RENEW_ATTEMPT: LazyLock<Script> =
    LazyLock::new(|| Script::new(text::RENEW_ATTEMPT));

/// Settles abandoned at-least-once attempts and claims due retries.
pub(crate) static TAKE_RETRY: LazyLock<Script> = LazyLock::new(|| Script::new(text::TAKE_RETRY));

/// Adds, replaces or removes a run-time schedule and wakes the replicas.
pub(crate) static SCHEDULE: LazyLock<Script> = LazyLock::new(|| Script::new(text::SCHEDULE));
/// Enqueues a one-off job (a pending run of the handler's hidden job), waking the replicas.
pub(crate) static ONCE: LazyLock<Script> = LazyLock::new(|| Script::new(text::ONCE));

/// Cancels a one-off job that has not started.
pub(crate) static ONCE_CANCEL: LazyLock<Script> = LazyLock::new(|| Script::new(text::ONCE_CANCEL));

/// Trims the ledger of a handler's one-off jobs to the runs it keeps.
pub(crate) static ONCE_TRIM: LazyLock<Script> = LazyLock::new(|| Script::new(text::ONCE_TRIM));

/// Registers a replica as live for a job (or unregisters it).
pub(crate) static HEARTBEAT: LazyLock<Script> = LazyLock::new(|| Script::new(text::HEARTBEAT));

/// Publishes (or withdraws) a scheduler instance's entry in the job registry.
pub(crate) static REGISTER: LazyLock<Script> = LazyLock::new(|| Script::new(text::REGISTER));

/// The assembled texts (`common.lua` prepended where a script needs it): the statics above are
/// built from them, and the conformance test (`__private::conformance`, feature `__conformance`)
/// loads exactly these.
pub(crate) mod text {
    /// The text of [`super::CLAIM`].
    pub(crate) const CLAIM: &str = concat!(include_str!("common.lua"), include_str!("claim.lua"));
    /// The text of [`super::TAKE_REQUEST`].
    pub(crate) const TAKE_REQUEST: &str =
        concat!(include_str!("common.lua"), include_str!("take_request.lua"));
    /// The text of [`super::REQUEST`].
    pub(crate) const REQUEST: &str = include_str!("request.lua");
    /// The text of [`super::RESUME`].
    pub(crate) const RESUME: &str = include_str!("resume.lua");
    /// The text of [`super::WITHDRAW`].
    pub(crate) const WITHDRAW: &str =
        concat!(include_str!("common.lua"), include_str!("withdraw.lua"));
    /// The text of [`super::FINISH`].
    pub(crate) const FINISH: &str = concat!(include_str!("common.lua"), include_str!("finish.lua"));
    /// The text of [`super::RENEW_ATTEMPT`].
    pub(crate) const RENEW_ATTEMPT: &str = concat!(
        include_str!("common.lua"),
        include_str!("renew_attempt.lua")
    );
    /// The text of [`super::TAKE_RETRY`].
    pub(crate) const TAKE_RETRY: &str =
        concat!(include_str!("common.lua"), include_str!("take_retry.lua"));
    /// The text of [`super::SCHEDULE`].
    pub(crate) const SCHEDULE: &str = include_str!("schedule.lua");
    /// The text of [`super::ONCE`].
    pub(crate) const ONCE: &str = concat!(include_str!("common.lua"), include_str!("once.lua"));
    /// The text of [`super::ONCE_CANCEL`].
    pub(crate) const ONCE_CANCEL: &str =
        concat!(include_str!("common.lua"), include_str!("once_cancel.lua"));
    /// The text of [`super::ONCE_TRIM`].
    pub(crate) const ONCE_TRIM: &str = include_str!("once_trim.lua");
    /// The text of [`super::HEARTBEAT`].
    pub(crate) const HEARTBEAT: &str = include_str!("heartbeat.lua");
    /// The text of [`super::REGISTER`].
    pub(crate) const REGISTER: &str = include_str!("register.lua");
    /// `common.lua` alone (the conformance test tells its lines from a script's own).
    #[cfg(feature = "__conformance")]
    pub(crate) const COMMON: &str = include_str!("common.lua");
}

/// How long an unanswered `run_now` request is kept: a day. `request.lua` and `withdraw.lua`
/// (which queues a withdrawn request again) set the request list's expiry to it.
pub(crate) const REQUEST_TTL: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);

/// A duration in whole seconds, for a script argument (`EXPIRE`).
pub(crate) fn secs(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

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
