//! The protocol bugs the mutation check applies to the model, one at a time.

/// One protocol bug, applied to the model's steps (scripts or client) so that a test can show
/// that the property named in its doc catches it. `None` in [`Server::mutant`](crate::Server::mutant) is dlock's
/// protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mutant {
    /// A newcomer takes an expired lock although callers are queued (acquire.lua without its
    /// hand-off). Caught by `queue head first`.
    NewcomerTakesExpired,
    /// The scripts that queue a caller set the `w` flag but forget to keep the lock key past
    /// its holder's deadline (issue #35): the key expires with the lease, and a newcomer's
    /// plain `SET NX` takes it ahead of the queue. Caught by `queue head first`.
    EnqueueForgetsKeep,
    /// A request whose wait timed out leaves the queue without re-admitting what fits behind
    /// it (the old shared_acquire.lua "last"). Caught by `leaving re-admits`.
    NoReadmitOnLeave,
    /// A grant that ignores the permits already held. Caught by `within limit`.
    GrantAboveLimit,
    /// Fences not floored at the server clock (a plain INCR), and the fenced fast path's INCR
    /// trusted on a new connection. Caught by `fences increase` (with restarts).
    FenceNotFloored,
    /// A pushed grant taken as fresh whenever it arrives (its lease counted from its arrival).
    /// Caught by `no given-away grant`.
    StaleHandoffTrusted,
    /// A reader admitted while a writer waits in the queue. Caught by `queue head first`.
    ReaderPastWriter,
    /// The stored limit dropped when the last holder leaves, although requests are queued (the
    /// old set_expiry). Caught by `limit persists`.
    LimitDroppedWithWaiters,
    /// A head that does not fit blocks the queue although its client is gone (no S2). Caught
    /// by `fitting head admitted`.
    DeadHeadBlocks,
    /// election.lua overwrites another program's data at the leader record's key (the old
    /// E1 bug). Caught by `no foreign write`.
    ElectionOverwritesForeign,
    /// guarded.lua takes a shared holder's record in `K:exp` as its hold, whatever its
    /// deadline: a holder past its lease, not purged yet (no shared script ran since), writes.
    /// Caught by `guarded write by the holder`. (Not by `guarded fences never decrease`: while
    /// the record is unpurged no shared script ran, so no holder with a larger fence came in
    /// since; a late write, not one out of order.)
    GuardedIgnoresDeadline,
    /// guarded.lua finds the mutex held and does not compare the owner: a holder whose lock was
    /// taken over writes. Caught by `guarded write by the holder` (and, once the new holder
    /// wrote first, by `guarded fences never decrease`).
    GuardedSkipsOwner,
    /// ask.lua cuts the leases of the holders it asks to half what they had left (a hold with
    /// one tick left ends). Caught by `a release request changes no hold`.
    AskShortensLease,
    /// ask.lua records the first queued request's token beside the holder's (a mutex's next
    /// holder; a shared lock's next admitted): once the lock passes to it, its renewals are
    /// told of a request made to its predecessor. Caught by `only an asked holder is told`.
    AskRecordsNextWaiter,
    /// extend.lua answers "asked" to any holder while the ask key lives (`EXISTS` instead of
    /// `HEXISTS`): the next holder of a lock given back on request is told too. Caught by
    /// `only an asked holder is told`.
    ExtendAnswersAnyToken,
    /// ask.lua keeps the ask key for half the lease the holder had left: a holder that renews
    /// on time, in the second half, is never told. Caught by `an asked holder is told at its
    /// next renewal`.
    AskExpiresEarly,
    /// extend.lua answers an asked holder 2 without renewing its lease: the holder that
    /// ignores the request loses the lock at its old deadline. Caught by `an asked holder
    /// keeps its lease`.
    ExtendSkipsAskedRenewal,
    /// election.lua "publish" without its lead check (the lock's token and fence): a candidate
    /// that lost the lock while paused writes its record and announces it. Caught by `the
    /// leader record is written by its holder`.
    ElectionPublishSkipsLead,
    /// election_read.lua judges the lock by its key, not by the deadline in a kept key's value
    /// (the model's bug that seed 99 of the conformance test found): a leader whose lease
    /// ended while candidates wait is still reported. Caught by `a read shows only the live
    /// leader`.
    ReadIgnoresDeadline,
    /// The observer (election.rs `Observed`) takes every read as it comes, without keeping the
    /// highest fence seen: after a failover to a lagging replica it goes back to the leader
    /// before. Caught by `observers never go back`.
    ObserverTakesEveryRead,
    /// rw_change.lua's upgrade looks only at the holders, not at the queue: the sole reader
    /// becomes the writer ahead of a queued writer. Caught by `an upgrade with others fails at
    /// once`.
    UpgradePastQueue,
    /// common.lua `hand_off` passes over the oldest waiter, live as it is, when another waits
    /// behind it (its entry dropped as if its client were gone). Caught by `a hand-off goes to
    /// the oldest live waiter`.
    HandOffSkipsOldest,
    /// extend.lua renews a mutex whoever holds it (no owner check): a holder whose lease ran
    /// out moves its successor's deadline. Caught by `only the owner changes its hold`.
    ExtendSkipsOwner,
    /// fence.lua reads a lock key kept past its holder's deadline for the queue (issue #35) as
    /// a hold: the holder whose lease ended gets a fence. Caught by `a fence is its live
    /// hold's, issued once`.
    FenceIgnoresDeadline,
    /// fence.lua issues a new fence at every call, a hold that has one included: a retried
    /// request gets another fence than the first. Caught by `a fence is its live hold's, issued
    /// once`.
    FenceReissued,
    /// acquire.lua mode "join" appends the entry without looking for it: a join sent again
    /// after a lost reply queues the request twice. Caught by `one entry per request`.
    JoinScansNothing,
    /// shared_limit.lua stores the new limit but leaves the queued requests heavier than it
    /// waiting (no removal, no nudge). Caught by `set_limit takes effect at once`.
    SetLimitKeepsHeavy,
    /// The mutex queue is given no expiry (before issue #44): the entries of waiters that all
    /// died stay after the key kept for them is gone. Caught by `a mutex queue never outlives
    /// its kept key`.
    QueueNeverExpires,
    /// The native release (`DELIFEQ`, issue #48) compares the token only, not the whole value
    /// the caller's `SET` wrote: it deletes a key a waiter flagged and kept, and the queue is
    /// left behind a lock nobody hands on. Caught by `dead holder handed on` on `unit native
    /// mutex`.
    NativeTokenOnly,
    /// The client takes the native release's 0 as "released" and skips the fallback to
    /// release.lua: a hold flagged by a queued waiter stays until its lease (and the key's
    /// keep) runs out, and the waiter is served late. Caught by `a finished native release
    /// leaves no live hold of its caller` on `unit native mutex`.
    NativeZeroReleased,
}

impl Mutant {
    /// Every mutant.
    pub const ALL: [Mutant; 30] = [
        Mutant::NewcomerTakesExpired,
        Mutant::EnqueueForgetsKeep,
        Mutant::NoReadmitOnLeave,
        Mutant::GrantAboveLimit,
        Mutant::FenceNotFloored,
        Mutant::StaleHandoffTrusted,
        Mutant::ReaderPastWriter,
        Mutant::LimitDroppedWithWaiters,
        Mutant::DeadHeadBlocks,
        Mutant::ElectionOverwritesForeign,
        Mutant::GuardedIgnoresDeadline,
        Mutant::GuardedSkipsOwner,
        Mutant::AskShortensLease,
        Mutant::AskRecordsNextWaiter,
        Mutant::ExtendAnswersAnyToken,
        Mutant::AskExpiresEarly,
        Mutant::ExtendSkipsAskedRenewal,
        Mutant::ElectionPublishSkipsLead,
        Mutant::ReadIgnoresDeadline,
        Mutant::ObserverTakesEveryRead,
        Mutant::UpgradePastQueue,
        Mutant::HandOffSkipsOldest,
        Mutant::ExtendSkipsOwner,
        Mutant::FenceIgnoresDeadline,
        Mutant::FenceReissued,
        Mutant::JoinScansNothing,
        Mutant::SetLimitKeepsHeavy,
        Mutant::QueueNeverExpires,
        Mutant::NativeTokenOnly,
        Mutant::NativeZeroReleased,
    ];
}
