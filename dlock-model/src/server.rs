//! The state Redis holds for dlock, and the step API: [`apply`] runs one atomic step (one
//! script, or one plain command) over a [`Server`], and [`abstraction`] says what the state
//! means (holders, queue order, stored limit, fence order, live leases).
//!
//! The keys are abstracted (a lock value is a [`Hold`], not a string) but every field a script
//! reads or writes is there. Time is the server clock in ms, passed with each step; a key or a
//! holder with deadline `d` is alive while `now < d`. (Redis keeps a key alive at `now == d` and
//! purges a shared holder at `now >= d`; the conformance test never lands exactly on a deadline,
//! so the model uses one rule for both.)

use std::collections::{BTreeMap, BTreeSet};

use crate::mutant::Mutant;

/// Server clock in ms.
pub type Ms = u64;
/// An acquisition's owner token (one per acquire call, the same for its retries). The real
/// token is 32 hex digits; the model numbers them.
pub type Token = u32;
/// A client (a process with one connection and one subscription per lock).
pub type ClientId = u8;
/// A lock's name. The mutex, shared and election maps are separate namespaces.
pub type Name = u8;

/// The weight of a RwLock's writer, which is also its limit (rwlock.rs `WRITER`); a reader
/// weighs 1.
pub const RW_LIMIT: u32 = 1 << 30;

/// One Redis key the scripts touch, by role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    /// A mutex's lock key (a string with a lease).
    Lock(Name),
    /// A mutex's queue `<lock>:queue` (a list).
    Queue(Name),
    /// A shared lock's hash K.
    Shared(Name),
    /// A shared lock's deadlines `K:exp` (a zset).
    SharedExp(Name),
    /// A shared lock's queue `K:queue` (a list).
    SharedQueue(Name),
    /// The slot's fence counter (one slot in the model: every lock shares it).
    Counter,
    /// An election's leader record `<lock>:leader`.
    Leader(Name),
    /// A lock's release requests `<lock>:ask` (a hash; K`:ask` for a shared lock's hash K).
    Ask(LockRef),
}

/// The value of a mutex's lock key: `"<token>-1 <meta>[\x1f<fence>]"` with `PX` = the lease,
/// or while callers wait `"<token>w2 <deadline> <meta>[\x1f<fence>]"`, kept up to one lease past
/// the deadline (issue #35: a newcomer's plain `SET NX` fails whenever callers wait).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Hold {
    /// The owner token.
    pub token: Token,
    /// The `w` flag: callers wait in the queue (release must hand off), and the key is kept.
    pub waiting: bool,
    /// The fence kept with the hold (issued by a script), if any.
    pub fence: Option<u64>,
    /// End of the lease (server clock): the holder holds only before it.
    pub deadline: Ms,
    /// When Redis drops the key: the deadline, or while callers wait, later (`keep`).
    pub expires: Ms,
}

impl Hold {
    /// A hold of `token` for `lease` from `now`, nobody waiting: the key expires with it.
    pub(crate) fn new(token: Token, fence: Option<u64>, now: Ms, lease: Ms) -> Self {
        Self {
            token,
            waiting: false,
            fence,
            deadline: now + lease,
            expires: now + lease,
        }
    }

    /// Whether its lease runs at `now`. A key kept past its deadline is held by nobody: every
    /// script reads it as free (and the first to run hands it to the queue's head).
    pub fn live(&self, now: Ms) -> bool {
        now < self.deadline
    }
}

/// A mutex queue entry `"1 <token> <client> <lease_ms> <pub> <meta>"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Entry {
    /// The waiting acquisition.
    pub token: Token,
    /// Its client: grants are published on `<lock>:wake:<client>`.
    pub client: ClientId,
    /// The lease it asks for.
    pub lease: Ms,
}

/// A shared lock's queue entry `"1 <token> <client> <lease_ms> <pub> <weight> <meta>"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SharedEntry {
    /// The waiting acquisition.
    pub token: Token,
    /// Its client.
    pub client: ClientId,
    /// The lease it asks for.
    pub lease: Ms,
    /// Permits asked for.
    pub weight: u32,
}

/// Who stored a shared lock's limit (S3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Origin {
    /// An acquire stored its handle's limit: it lives while anyone holds or waits.
    Handle,
    /// `set_limit` stored it: it persists and wins over every handle's.
    Operator,
}

/// One holder of a shared lock: its field in K and its score in `K:exp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Holder {
    /// Permits held.
    pub weight: u32,
    /// Its fence.
    pub fence: u64,
    /// End of its lease.
    pub deadline: Ms,
}

/// A shared lock (semaphore, RwLock): K, `K:exp` and `K:queue` (shared.lua).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct SharedLock {
    /// The stored limit and who stored it; `None` when none is stored.
    pub limit: Option<(u32, Origin)>,
    /// Holders by token (`used` is their weights' sum).
    pub holders: BTreeMap<Token, Holder>,
    /// Waiters, oldest first.
    pub queue: Vec<SharedEntry>,
    /// The longest lease of a request that queued since the hash was made (its `qlease`).
    pub qlease: Ms,
    /// While requests are queued: when the hash and the queue expire (shared.lua `set_expiry`:
    /// the latest holder's deadline, or two `qlease` after the last script that ran), so a
    /// queue of dead waiters alone disappears. 0 while nobody waits.
    pub until: Ms,
}

impl SharedLock {
    /// Permits held (the hash's `used`).
    pub fn used(&self) -> u32 {
        self.holders.values().map(|h| h.weight).sum()
    }
}

/// An election's leader record `"1 <fence> <value>"` with its expiry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Record {
    /// The leader's fence.
    pub fence: u64,
    /// The leader's value (a small number in the model).
    pub value: u8,
    /// The record's expiry.
    pub deadline: Ms,
}

/// The hash `<lock>:ask` (ask.lua): the tokens of the holders asked to give the lock back, and
/// when the key expires. The server time of each request (the fields' values) is not kept:
/// no script reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Asked {
    /// The tokens asked (hash fields): a mutex holder's token, a shared holder's token as in
    /// `K:exp`.
    pub tokens: BTreeSet<Token>,
    /// When the key expires (`PEXPIRE` only ever moves it later): at the latest deadline of the
    /// holds it named when they were asked.
    pub until: Ms,
}

/// Every key's content (what a restart from an AOF or a replica's copy carries).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Data {
    /// Mutex lock keys.
    pub locks: BTreeMap<Name, Hold>,
    /// Mutex queues (absent when empty).
    pub queues: BTreeMap<Name, Vec<Entry>>,
    /// When each mutex queue expires (issue #44: with the key kept for it, never shortened but
    /// by a hand-off, which sets both anew), present exactly while its queue is.
    pub queue_expires: BTreeMap<Name, Ms>,
    /// Shared locks (absent when nothing is stored).
    pub shared: BTreeMap<Name, SharedLock>,
    /// Election leader records.
    pub leaders: BTreeMap<Name, Record>,
    /// The slot's fence counter (0: absent).
    pub counter: u64,
    /// Keys that hold data dlock could not have written (another program's).
    pub foreign: BTreeSet<Key>,
    /// The data guarded writes protect (guarded.lua's target keys, which no script of the
    /// protocol reads), per lock: every guarded write applied, oldest first, as the writer's
    /// token and the fence it wrote with its data (0: none known). Lost with the rest of the
    /// data (a restart without persistence), and as lagging as the rest on a replica.
    pub written: BTreeMap<LockRef, Vec<(Token, u64)>>,
    /// fenced.lua's data keys, by number: the stored fence (the companion key) and the value of
    /// the last write (the writer's token, in the model).
    pub fenced: BTreeMap<Name, (u64, Token)>,
    /// ask.lua's release requests, per lock with a live `<lock>:ask`: the tokens asked and the
    /// key's expiry. extend.lua reads it; no script of the protocol deletes it.
    pub asked: BTreeMap<LockRef, Asked>,
}

/// A message published on a client's wake channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Push {
    /// Which lock: a mutex name for a hand-off, a shared name for an admission.
    pub lock: LockRef,
    /// The receiving client.
    pub client: ClientId,
    /// The acquisition it is for.
    pub token: Token,
    /// `Some` for a grant `"<token> <fence> <now_ms> <lease_ms> 1"`; `None` for a nudge to
    /// retry now (a request `set_limit` removed from the queue).
    pub grant: Option<Grant>,
}

/// A grant's content.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Grant {
    /// The hold's fence.
    pub fence: u64,
    /// Server clock when granted.
    pub server_ms: Ms,
    /// The lease granted.
    pub lease: Ms,
}

/// A lock of either family, as named in pushes and extend batches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LockRef {
    /// A mutex (also an election's lock).
    Mutex(Name),
    /// A shared lock.
    Shared(Name),
}

/// What the server knows besides its data: connections and subscriptions, and what was
/// published. Also a record of protocol rules the scripts broke (for the properties).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Server {
    /// The keys.
    pub data: Data,
    /// The lagging copy a restart from AOF or a failover comes back with (`None`: none yet).
    pub replica: Option<Data>,
    /// The connection epoch: every restart or failover replaces the clients' connections
    /// (fence_epoch.rs names them; the name read back in a `MULTI` tells which one ran it).
    pub epoch: u32,
    /// Wake channels with a subscriber: `(lock, client)`.
    pub subscribed: BTreeSet<(LockRef, ClientId)>,
    /// Messages published and not yet taken by [`Server::drain_published`].
    pub published: Vec<Push>,
    /// Set when a script wrote to a key in [`Data::foreign`] (never, in dlock).
    pub wrote_foreign: bool,
    /// The protocol bug applied to the scripts, if any (the conformance test uses `None`).
    pub mutant: Option<Mutant>,
}

impl Server {
    /// An empty server running the scripts with `mutant` applied (`None`: the real protocol).
    pub fn new(mutant: Option<Mutant>) -> Self {
        Self {
            mutant,
            ..Self::default()
        }
    }

    /// Takes the messages published since the last call, in publish order.
    pub fn drain_published(&mut self) -> Vec<Push> {
        std::mem::take(&mut self.published)
    }

    pub(crate) fn is(&self, mutant: Mutant) -> bool {
        self.mutant == Some(mutant)
    }

    /// Marks a write to `key`; a foreign key makes [`Server::wrote_foreign`] true.
    pub(crate) fn write(&mut self, key: Key) {
        if self.data.foreign.contains(&key) {
            self.wrote_foreign = true;
            self.data.foreign.remove(&key);
        }
    }

    /// The first of `keys` that holds foreign data.
    pub(crate) fn foreign(&self, keys: &[Key]) -> Option<Key> {
        keys.iter().copied().find(|k| self.data.foreign.contains(k))
    }

    /// PUBLISH: the number of receivers (0 or 1: one subscription per client and lock).
    pub(crate) fn publish(&mut self, push: Push) -> i64 {
        if self.subscribed.contains(&(push.lock, push.client)) {
            self.published.push(push);
            1
        } else {
            0
        }
    }

    /// `next_fence` (common.lua): INCR of the slot's counter, floored at the server clock in
    /// µs.
    pub(crate) fn next_fence(&mut self, now: Ms) -> u64 {
        self.write(Key::Counter);
        let mut fence = self.data.counter + 1;
        if !self.is(Mutant::FenceNotFloored) {
            fence = fence.max(now.saturating_mul(1000));
        }
        self.data.counter = fence;
        fence
    }

    /// The live hold of mutex `name` at `now` (a kept key past its deadline is none).
    pub(crate) fn live_hold(&self, name: Name, now: Ms) -> Option<&Hold> {
        self.data.locks.get(&name).filter(|h| h.live(now))
    }

    /// Drops what expired by `now` (Redis's lazy and active expiry, seen from outside: the same).
    pub(crate) fn expire(&mut self, now: Ms) {
        self.data.locks.retain(|_, h| now < h.expires);
        let queues = &mut self.data.queues;
        self.data.queue_expires.retain(|name, &mut at| {
            let live = now < at;
            if !live {
                queues.remove(name);
            }
            live
        });
        self.data.leaders.retain(|_, r| now < r.deadline);
        self.data.asked.retain(|_, a| now < a.until);
        let mutant = self.mutant;
        for lock in self.data.shared.values_mut() {
            lock.holders.retain(|_, h| now < h.deadline);
            if lock.holders.is_empty() && !lock.queue.is_empty() && now >= lock.until {
                // The hash and the queue expire together (only dead waiters were left).
                lock.queue.clear();
                if matches!(lock.limit, Some((_, Origin::Handle))) {
                    lock.limit = None;
                }
            }
            if lock.holders.is_empty() && lock.queue.is_empty() {
                lock.qlease = 0;
                lock.until = 0;
            }
            if !limit_kept(lock, mutant) {
                lock.limit = None;
            }
        }
        self.data.shared.retain(|_, lock| {
            lock.limit.is_some() || !lock.queue.is_empty() || !lock.holders.is_empty()
        });
    }
}

/// Whether a shared lock's stored limit is kept (S3/S4): while anyone holds or waits, or
/// when an operator set it.
pub(crate) fn limit_kept(lock: &SharedLock, mutant: Option<Mutant>) -> bool {
    if !lock.holders.is_empty() {
        return true;
    }
    if mutant == Some(Mutant::LimitDroppedWithWaiters) {
        // The old rule: the hash expires with its last holder, the queue stays.
        return false;
    }
    !lock.queue.is_empty() || matches!(lock.limit, Some((_, Origin::Operator)))
}

/// How a waiting attempt treats the caller's queue entry (acquire.lua / shared_acquire.lua
/// ARGV mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// A single attempt that does not wait: the queue is left alone.
    Single,
    /// On failure, queue the caller's entry unless it is queued already.
    Wait,
    /// A waiter's re-ask after its fallback timer, right after a `Wait` attempt found it queued
    /// and nothing reached it since: as `Wait`, but the entry is trusted to be queued still (no
    /// scan of the queue) and appended only when the queue is empty (acquire.lua and
    /// shared_acquire.lua mode "again").
    Again,
    /// A mutex waiter's first attempt: as `Wait`, but the entry (new) is looked for among the
    /// last 128 entries only (acquire.lua mode "join"), where a call sent twice finds it.
    Join,
    /// The last attempt (the wait timed out): drop the entry whatever the outcome.
    Last,
}

/// release.lua's `ARGV[4]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReleaseHow {
    /// The caller's own lock.
    Own,
    /// An operator's force_unlock: whoever holds it.
    Force,
    /// Hand the caller's lock to the queue even if not flagged (the uncontended acquire found
    /// a queue after taking an expired lock).
    Handoff,
}

/// One item of the watchdog's batched extend.lua.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExtendItem {
    /// Which lock.
    pub lock: LockRef,
    /// The holder's token.
    pub token: Token,
    /// The new lease, counted from now.
    pub lease: Ms,
}

/// One atomic step: a script run, or one plain command of a pipeline.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// The uncontended acquire, `SET <lock> <value> NX PX <lease> GET` alone (mutex.rs
    /// `fast_attempt_once`): the lock key is kept while callers wait (issue #35), so it fails
    /// whenever anyone is queued.
    SetNxGet {
        /// The lock.
        name: Name,
        /// The caller's token.
        token: Token,
        /// The lease.
        lease: Ms,
    },
    /// `EXISTS <lock>:queue`: the uncontended pipeline's second command before issue #35; kept
    /// for the conformance test's reads.
    ExistsQueue {
        /// The lock.
        name: Name,
    },
    /// The fenced uncontended acquire: `MULTI; SET NX PX GET; INCR <counter>`
    /// (when `incr`, the slot was floored on this connection's epoch as the client believes)
    /// or `fence.lua` (otherwise); `CLIENT GETNAME; EXEC` — one atomic step (fence_epoch.rs).
    FencedFast {
        /// The lock.
        name: Name,
        /// The caller's token.
        token: Token,
        /// The lease.
        lease: Ms,
        /// Plain `INCR` instead of fence.lua.
        incr: bool,
    },
    /// acquire.lua.
    Acquire {
        /// The lock.
        name: Name,
        /// The caller's queue entry (its token is the caller's).
        entry: Entry,
        /// What to do with the entry.
        mode: Mode,
    },
    /// release.lua.
    Release {
        /// The lock.
        name: Name,
        /// The caller's token (ignored with [`ReleaseHow::Force`]).
        token: Token,
        /// The caller's own queue entry to drop first (an abandoned wait).
        leaving: Option<Entry>,
        /// Own, forced or hand-off.
        how: ReleaseHow,
    },
    /// `DELIFEQ <lock> <value>` (Valkey 9; issue #48): the native release of a hold taken by
    /// the caller's plain `SET` (mutex.rs `fast_attempt_once`), sent with the whole value that
    /// `SET` wrote. It deletes the key and answers 1 only while the value is unchanged — the
    /// caller's token, flag `-`, version 1, no fence — and answers 0 otherwise (a waiter
    /// flagged it, a fence was added, the key expired or another owner holds it): the client
    /// then runs release.lua ([`Op::Release`]) with the same arguments, whose answer it
    /// reports.
    NativeRelease {
        /// The lock.
        name: Name,
        /// The caller's token (the rest of the value is its meta, the same for every call).
        token: Token,
    },
    /// fence.lua.
    Fence {
        /// The lock.
        name: Name,
        /// The caller's token.
        token: Token,
    },
    /// extend.lua, batched (the watchdog renews many locks per call).
    Extend {
        /// The locks, in order.
        items: Vec<ExtendItem>,
    },
    /// shared_acquire.lua.
    SharedAcquire {
        /// The lock.
        name: Name,
        /// The caller's queue entry (token, client, lease, weight).
        entry: SharedEntry,
        /// The caller's handle's limit.
        limit: u32,
        /// What to do with the entry.
        mode: Mode,
    },
    /// shared_release.lua.
    SharedRelease {
        /// The lock.
        name: Name,
        /// The holder's token.
        token: Token,
        /// The caller's own queue entry to drop first (an abandoned wait).
        leaving: Option<SharedEntry>,
    },
    /// shared_limit.lua (`Semaphore::set_limit`).
    SetLimit {
        /// The lock.
        name: Name,
        /// The new limit, >= 1.
        limit: u32,
    },
    /// rw_change.lua.
    RwChange {
        /// The lock.
        name: Name,
        /// The holder's token now.
        old: Token,
        /// The token the hold passes to.
        new: Token,
        /// `true`: the sole reader becomes the writer; `false`: the writer becomes a reader.
        up: bool,
        /// The new lease.
        lease: Ms,
    },
    /// election.lua mode "publish".
    ElectionPublish {
        /// The election (its lock is the mutex of the same name).
        name: Name,
        /// The caller's token.
        token: Token,
        /// The fence of the caller's hold.
        fence: u64,
        /// The leader's value.
        value: u8,
    },
    /// election.lua mode "resign".
    ElectionResign {
        /// The election.
        name: Name,
        /// The caller's token.
        token: Token,
        /// The fence of the caller's hold.
        fence: u64,
    },
    /// election_read.lua.
    ElectionRead {
        /// The election.
        name: Name,
    },
    /// guarded.lua: a holder's batch of writes, applied only while its hold is still its own
    /// (a mutex's value starts with its token; a shared holder's deadline in `K:exp` is later
    /// than the server's clock, purged or not). The batch is abstracted to one write of the
    /// lock's protected data ([`Data::written`]); its target keys' types are not modelled.
    Guarded {
        /// The lock (`Shared`: the owner is sent as `"S<token>"`).
        lock: LockRef,
        /// The holder's token.
        token: Token,
        /// The fence the writer writes with its data (what it knows of its hold's; 0: none).
        /// Not read by the check: it is the batch's payload.
        fence: u64,
    },
    /// fenced.lua "set" (`Client::fenced_set`): `value` written to the data key `key` only if
    /// its stored fence is not larger than `fence`.
    FencedSet {
        /// Which data key.
        key: Name,
        /// The writer's fencing token.
        fence: u64,
        /// The value (the writer's token, in the model).
        value: Token,
    },
    /// ask.lua (`Client::request_release`, `Semaphore::request_release`,
    /// `RwLock::request_release`): the lock's live holders recorded as asked to give it back,
    /// in `<lock>:ask`; no hold changes. Replies [`Reply::Int`], the number of holders asked.
    Ask {
        /// The lock (`Mutex`: ARGV "M"; `Shared`: "S").
        lock: LockRef,
    },
    /// `SUBSCRIBE <lock>:wake:<client>` (wait.rs: before the first attempt).
    Subscribe {
        /// The lock.
        lock: LockRef,
        /// The client.
        client: ClientId,
    },
    /// `UNSUBSCRIBE` (the client's last waiter of that lock left, or the client died).
    Unsubscribe {
        /// The lock.
        lock: LockRef,
        /// The client.
        client: ClientId,
    },
    /// Another program writes data dlock could not have written at `key`.
    WriteForeign {
        /// The key.
        key: Key,
    },
    /// The replica (or the AOF on disk) catches up with the master.
    Replicate,
    /// The server restarts empty (no persistence), or from its AOF / fails over to its
    /// replica (`from_replica`: the lagging copy of [`Op::Replicate`], empty if none). Every
    /// connection is replaced: a new epoch.
    Restart {
        /// Come back with the replica's copy instead of nothing.
        from_replica: bool,
    },
}

/// An error reply of a script (`DLOCK…` codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScriptError {
    /// `DLOCKFOREIGN <key>`: the key holds data dlock did not write; nothing was modified.
    Foreign(Key),
    /// `DLOCKLIMIT <key> <stored>`: the stored limit (a handle's) differs from the caller's.
    Limit(u32),
    /// `DLOCKWEIGHT`: weight > the caller's limit.
    Weight,
    /// The request weighs more than the limit in force (set by an operator, or lowered below
    /// it while it waited): InvalidInput.
    AboveLimit(u32),
    /// `DLOCKMODE`: the holder does not hold in the mode it changes from.
    Mode,
    /// A plain `WRONGTYPE` error: a command of the script met a key of another type (ask.lua
    /// at a shared lock's `K:exp` or at the ask key) and the script stopped before any write.
    WrongType(Key),
}

/// A step's reply, per script (the Lua return values, decoded).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Reply {
    /// `SET … NX GET`: `None` the lock was free and is now the caller's; `Some(token)` held by
    /// that token (`Some(None)`: by a value dlock did not write).
    SetNx(Option<Option<Token>>),
    /// An integer reply: EXISTS, release.lua's 1/0/-1, fence.lua's 0/-1, election.lua's 1/0/-1,
    /// shared_release.lua's 1/0, shared_limit.lua's previous limit, ask.lua's count of holders
    /// asked.
    Int(i64),
    /// The caller holds the lock now or already: acquire.lua `fence` / `{1, fence, pttl}`,
    /// shared_acquire.lua and rw_change.lua `{1, fence, pttl}`, fence.lua `fence`.
    Holds {
        /// The hold's fence (0: none issued yet).
        fence: u64,
        /// Lease left.
        pttl: Ms,
    },
    /// `{0, wait_ms, now_ms}`: not now; the longest a waiter's fallback timer need sleep.
    Busy {
        /// Until the holder's (nearest holder's) lease ends.
        wait: Ms,
    },
    /// release.lua `{2, grant}`: released and handed to the next waiter.
    Handed(Push),
    /// The fenced uncontended acquire's `EXEC`.
    Multi {
        /// The `SET … NX GET` reply (see [`Reply::SetNx`]).
        set: Option<Option<Token>>,
        /// `INCR`'s value, or fence.lua's reply (a fence, 0 or -1).
        fence: i64,
        /// `CLIENT GETNAME`: the epoch of the connection it ran on.
        epoch: u32,
    },
    /// extend.lua: per item 2 (extended, and the holder was asked to give the lock back:
    /// ask.lua), 1 (extended), 0 (nobody holds it), -1 (another owner, or foreign data).
    Extended(Vec<i64>),
    /// rw_change.lua `{-1, used, waiting}`: an upgrade refused.
    Refused {
        /// Weight held by everyone.
        used: u32,
        /// Queue length.
        waiting: u32,
    },
    /// election_read.lua `{counter, lock_fence, leader_fence, value}`.
    Leader {
        /// The lock's fence now (0: free, or none issued).
        lock_fence: u64,
        /// The record's fence if it is the current holder's, else 0.
        leader_fence: u64,
        /// Its value (0 with no leader).
        value: u8,
    },
    /// guarded.lua `{1, …}`: the hold was the caller's; the writes ran.
    Applied,
    /// guarded.lua `{0, "taken"}` (`taken`: another owner holds the mutex) or `{0, "gone"}`
    /// (the hold ended, or a shared holder is past its deadline): nothing written.
    NotApplied {
        /// `"taken"` rather than `"gone"`.
        taken: bool,
    },
    /// fenced.lua `{1}`: written, and the writer's fence stored.
    Written,
    /// fenced.lua `{0, stored}`: a larger fence wrote before; nothing written.
    Stale {
        /// The stored fence.
        stored: u64,
    },
    /// OK of a plain command (SUBSCRIBE, a restart…).
    Ok,
    /// An error reply.
    Err(ScriptError),
}

/// What a mutex's state means.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct MutexView {
    /// The live holder's token.
    pub holder: Option<Token>,
    /// Whether its value carries the `w` flag.
    pub flagged: bool,
    /// Queued tokens, oldest first.
    pub queue: Vec<Token>,
}

/// What a shared lock's state means.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct SharedView {
    /// The stored limit.
    pub limit: Option<u32>,
    /// Whether `set_limit` stored it.
    pub operator: bool,
    /// Live holders and their weights.
    pub holders: BTreeMap<Token, u32>,
    /// Queued `(token, weight)`, oldest first.
    pub queue: Vec<(Token, u32)>,
}

/// What the whole state means, as the conformance test compares it with real Redis.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Abstract {
    /// Mutexes with a live holder or a queue.
    pub mutexes: BTreeMap<Name, MutexView>,
    /// Shared locks with anything stored.
    pub shared: BTreeMap<Name, SharedView>,
    /// Elections with a live record: `(fence rank, value)`, the rank as in `fence_order`.
    pub leaders: BTreeMap<Name, (usize, u8)>,
    /// Live holds that carry a fence on the server, by increasing fence (the relative order
    /// is what the model and Redis agree on; the values differ).
    pub fence_order: Vec<(LockRef, Token)>,
    /// Per lock with any, the writers of the guarded writes its data holds, oldest first.
    pub written: BTreeMap<LockRef, Vec<Token>>,
    /// Per fenced.lua data key written, the value of the last write (the writer's token).
    pub fenced: BTreeMap<Name, Token>,
    /// Per lock with a live `<lock>:ask`, the tokens asked to give it back.
    pub asked: BTreeMap<LockRef, BTreeSet<Token>>,
}

/// The meaning of `server`'s state at `now`: only what is alive then.
pub fn abstraction(server: &Server, now: Ms) -> Abstract {
    // What Redis shows at `now`: the keys that expired since the last step are gone.
    let mut expired = server.clone();
    expired.expire(now);
    let data = &expired.data;
    let mut out = Abstract::default();
    let mut fences: Vec<(u64, LockRef, Token)> = Vec::new();
    let names: BTreeSet<Name> = data
        .locks
        .keys()
        .chain(data.queues.keys())
        .copied()
        .collect();
    for name in names {
        let hold = data.locks.get(&name).filter(|h| now < h.deadline);
        if let Some(fence) = hold.and_then(|h| h.fence) {
            fences.push((fence, LockRef::Mutex(name), hold.map_or(0, |h| h.token)));
        }
        let queue: Vec<Token> = data
            .queues
            .get(&name)
            .map(|q| q.iter().map(|e| e.token).collect())
            .unwrap_or_default();
        if hold.is_some() || !queue.is_empty() {
            out.mutexes.insert(
                name,
                MutexView {
                    holder: hold.map(|h| h.token),
                    flagged: hold.is_some_and(|h| h.waiting),
                    queue,
                },
            );
        }
    }
    for (&name, lock) in &data.shared {
        let holders: BTreeMap<Token, u32> = lock
            .holders
            .iter()
            .filter(|(_, h)| now < h.deadline)
            .map(|(&t, h)| {
                fences.push((h.fence, LockRef::Shared(name), t));
                (t, h.weight)
            })
            .collect();
        out.shared.insert(
            name,
            SharedView {
                limit: lock.limit.map(|(l, _)| l),
                operator: matches!(lock.limit, Some((_, Origin::Operator))),
                holders,
                queue: lock.queue.iter().map(|e| (e.token, e.weight)).collect(),
            },
        );
    }
    fences.sort();
    for (&name, record) in data.leaders.iter().filter(|(_, r)| now < r.deadline) {
        let rank = fences.iter().filter(|(f, _, _)| *f < record.fence).count();
        out.leaders.insert(name, (rank, record.value));
    }
    out.fence_order = fences.into_iter().map(|(_, l, t)| (l, t)).collect();
    out.written = data
        .written
        .iter()
        .map(|(&lock, writes)| (lock, writes.iter().map(|w| w.0).collect()))
        .collect();
    out.fenced = data.fenced.iter().map(|(&k, v)| (k, v.1)).collect();
    out.asked = data
        .asked
        .iter()
        .map(|(&lock, asked)| (lock, asked.tokens.clone()))
        .collect();
    out
}
