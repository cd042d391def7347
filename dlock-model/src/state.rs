//! The checked model's state: the configuration (`LockModel`), each client's request, the
//! ghost state of the properties, and the actions. The behaviour is in `model.rs` (the
//! environment) and `client.rs` (the clients).

use std::collections::BTreeSet;

use crate::mutant::Mutant;
use crate::server::{Entry, LockRef, Ms, Op, Push, Reply, Server, SharedEntry, Token};

/// Every lease in the model, in ticks of the model's clock (one tick = 1 ms of server clock,
/// so that fences floored at µs stay distinct per tick).
pub const LEASE: Ms = 2;

/// Which lock kind a model checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A mutex taken by the uncontended `SET NX PX GET` first, then by waiting (acquire.lua).
    Mutex,
    /// A mutex with `fenced()`: the uncontended `MULTI` with its connection epoch.
    FencedMutex,
    /// A semaphore (shared admission with weights; `set_limit` by an operator).
    Semaphore,
    /// A RwLock (shared admission with limit [`RW_LIMIT`](crate::RW_LIMIT); upgrade, downgrade).
    RwLock,
    /// An election (its mutex, the fence, the leader record).
    Election,
}

impl Kind {
    /// Whether the kind is a shared admission.
    pub fn shared(self) -> bool {
        matches!(self, Kind::Semaphore | Kind::RwLock)
    }

    /// The lock the model's requests take.
    pub fn lock(self) -> LockRef {
        if self.shared() {
            LockRef::Shared(0)
        } else {
            LockRef::Mutex(0)
        }
    }
}

/// One request of a client: an acquire, the hold, and the release.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Req {
    /// Permits (1 for a mutex and a reader, [`RW_LIMIT`](crate::RW_LIMIT) for a writer).
    pub weight: u32,
    /// `acquire_timeout`: the wait ends this many ticks after it began.
    pub timeout: Option<Ms>,
    /// The waiting future may be dropped (cancel, shutdown) at any time.
    pub cancel: bool,
    /// A RwLock holder may change its mode once (a reader upgrades, a writer downgrades).
    pub change: bool,
    /// A watchdog renews the lease (extend.lua) while it is held.
    pub watchdog: bool,
    /// The holder makes one guarded write (guarded.lua) while it believes it holds, a stale
    /// holder (paused past its lease, or granted before a restart) included; a mutex holder
    /// that knows no fence asks for it first (fence.lua), to write it with its data.
    pub guard: bool,
    /// Told by a renewal that someone asked it to give the lock back (extend.lua answers 2),
    /// the holder releases at once; without it, the holder ignores the request and keeps
    /// renewing.
    pub yields: bool,
}

impl Req {
    /// A plain request of `weight` that waits as long as it takes.
    pub const fn of(weight: u32) -> Self {
        Self {
            weight,
            timeout: None,
            cancel: false,
            change: false,
            watchdog: false,
            guard: false,
            yields: false,
        }
    }

    /// The same with a wait timeout.
    pub const fn timeout(self, ticks: Ms) -> Self {
        Self {
            timeout: Some(ticks),
            ..self
        }
    }

    /// The same, cancellable while it waits.
    pub const fn cancel(self) -> Self {
        Self {
            cancel: true,
            ..self
        }
    }

    /// The same, changing its mode once while held.
    pub const fn change(self) -> Self {
        Self {
            change: true,
            ..self
        }
    }

    /// The same, renewed by a watchdog.
    pub const fn watchdog(self) -> Self {
        Self {
            watchdog: true,
            ..self
        }
    }

    /// The same, making one guarded write while held.
    pub const fn guard(self) -> Self {
        Self {
            guard: true,
            ..self
        }
    }

    /// The same, giving the lock back once a renewal says it was asked to.
    pub const fn yields(self) -> Self {
        Self {
            yields: true,
            ..self
        }
    }
}

/// Which environment actions the checker may take, and how often (a budget per run keeps the
/// state space finite and small).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Env {
    /// Pauses of a client (it takes no steps; its leases keep running out).
    pub pauses: u8,
    /// Crashes of a client (its subscription ends; its holds and entries stay).
    pub crashes: u8,
    /// Replies lost after their script took effect (the client sends the same call again).
    pub lost_replies: u8,
    /// Pushes lost (pushes may always be delayed and reordered).
    pub lost_pushes: u8,
    /// Restarts: empty, or from the replica's (AOF's) lagging copy.
    pub restarts: u8,
    /// The server's data goes back to the replica's lagging copy while every connection stays
    /// open (`DEBUG RELOAD` of an old file, a master demoted and promoted again without the
    /// connection dropping): not promised by dlock, used only to show the counterexample.
    pub rollbacks: u8,
    /// An operator's `set_limit` to this value, once.
    pub set_limit: Option<u32>,
    /// Another program writes its data at the election's leader record key (once).
    pub foreign_record: bool,
    /// Release requests (ask.lua) by another client or an operator, at any time: one atomic
    /// step each, whose reply (a count) decides nothing.
    pub asks: u8,
    /// Reads of an election by an observer (election_read.lua, as `Election::observe` makes
    /// them), at any time: one atomic step each, whose reply the observer filters as
    /// election.rs `Observed` does.
    pub reads: u8,
    /// The server has `DELIFEQ` (Valkey 9, issue #48): a mutex hold taken by the plain `SET`
    /// is released with it first, and with release.lua after a 0 (native.rs).
    pub native: bool,
}

/// The checked model of one lock kind.
#[derive(Clone, Debug)]
pub struct LockModel {
    /// The kind.
    pub kind: Kind,
    /// The handles' limit (a semaphore's permits; [`RW_LIMIT`](crate::RW_LIMIT) for a RwLock; 1 otherwise).
    pub limit: u32,
    /// Each client's requests, in order.
    pub clients: Vec<Vec<Req>>,
    /// The clock stops here.
    pub max_time: Ms,
    /// The environment.
    pub env: Env,
    /// The protocol bug applied, if any.
    pub mutant: Option<Mutant>,
}

/// A client's current request.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Between requests.
    Idle,
    /// A call was sent; `reply` is what came back (`None`: lost, to be sent again).
    InFlight {
        /// The call.
        op: Op,
        /// When it was sent.
        sent: Ms,
        /// Its reply, once the server ran it (`None`: lost).
        reply: Option<Reply>,
    },
    /// Waiting for a grant (queued), or for the fallback timer.
    Waiting {
        /// The fallback timer.
        timer: Ms,
        /// Server time of the latest attempt that found the lock held by others.
        seen: Ms,
        /// That attempt was a `Wait` or a `Join` (it made sure the entry is queued): the next
        /// re-ask after the fallback timer may be an `Again`.
        confirmed: bool,
    },
    /// Holding (the grant was returned to the caller).
    Holding {
        /// The hold's token (a RwLock mode change gives a new one).
        token: Token,
        /// Its fence, if known.
        fence: Option<u64>,
        /// The caller's view of its lease's end.
        until: Ms,
        /// A writer (RwLock).
        writer: bool,
        /// The mode was changed already.
        changed: bool,
    },
    /// The request is over.
    Done,
}

/// A hold kept while a call about it is in flight (extend, mode change, the election's
/// fence and record): the client still holds meanwhile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Held {
    /// The hold's token.
    pub token: Token,
    /// Its fence, if known.
    pub fence: Option<u64>,
    /// The caller's view of its lease's end.
    pub until: Ms,
    /// A writer (RwLock).
    pub writer: bool,
    /// The mode was changed already.
    pub changed: bool,
}

/// One client.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    /// The hold while a call about it is in flight (see [`Held`]).
    pub held: Option<Held>,
    /// Requests started so far (the current one is `started - 1`).
    pub started: u8,
    /// The current request.
    pub phase: Phase,
    /// When the current wait ends (`acquire_timeout`).
    pub deadline: Option<Ms>,
    /// Paused by the environment.
    pub paused: bool,
    /// Crashed.
    pub dead: bool,
    /// Paused while a reply or a grant was on its way, or while holding: its view may be stale.
    pub stale: bool,
    /// The server epoch of the current request's grant (a restart loses it).
    pub epoch: u32,
    /// The connection epoch on which this client floored the slot's counter (fence_epoch.rs).
    pub floored: Option<u32>,
    /// The current request sent its guarded write (one per request: [`Req::guard`]).
    pub wrote: bool,
    /// The reply of the next call this client sends is lost (the step [`Action::LoseReply`]).
    pub lose_next: bool,
    /// Paused, or cut off by a restart, since its last waiting attempt ran on the server: a key
    /// kept for it may have expired meanwhile (or been lost with its entry), and a newcomer
    /// may overtake it (issue #35's trade-off; README's "FIFO for a waiter that was running"
    /// and "Failover can lose a lock").
    pub away_since_ask: bool,
    /// Its release runs release.lua after the native release answered 0 (native.rs).
    pub fallback: bool,
}

/// Ghost state for the properties: the rules broken so far (bits of `properties.rs`) and the
/// fence and limit the steps must respect.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ghost {
    /// Properties broken (one bit each).
    pub broken: u32,
    /// The largest fence granted so far.
    pub max_fence: u64,
    /// The limit in force (the handles', or the operator's once set).
    pub limit: u32,
    /// A guarded write was refused (the reachability check [`crate::GUARDED_REFUSED`]).
    pub refused_write: bool,
    /// Every token that held the lock on the server when a release request ran (the holders
    /// ask.lua must have recorded, judged by the model's state, not by the script).
    pub asked: BTreeSet<Token>,
    /// Of those, the holders asked and not told yet, whose hold has lasted since: their next
    /// renewal must answer "asked". A token leaves when it is told, when its hold ends, or
    /// when a restart or rollback may have lost the request.
    pub pending: BTreeSet<Token>,
    /// A renewal answered "asked" (the reachability check [`crate::ASK_TOLD`]).
    pub told: bool,
    /// A holder told it was asked gave the lock back (the reachability check
    /// [`crate::ASK_YIELDED`]).
    pub yielded: bool,
    /// A newcomer's `SET NX` was refused by a key kept past its holder's deadline for the
    /// queue (the reachability check [`crate::KEPT_REFUSED`], issue #35).
    pub kept_refused: bool,
    /// What the last step did that a reachability check looks for (bits of `reach.rs`):
    /// cleared at every step, so that a state is told apart only right after the event.
    pub events: u16,
    /// Clients (one bit each) paused while the clock moved: their resumption is the pause's
    /// effect (the reachability check [`crate::REACH_PAUSE`]).
    pub paused_ticked: u8,
    /// Clients (one bit each) whose current request's grant was pushed and lost: their next
    /// hold is the timer's work (the reachability check [`crate::REACH_LOST_PUSH`]).
    pub lost_grant: u8,
    /// The largest leader fence an election_read showed since the last restart (`observers
    /// never go back`, on the server's side).
    pub read_max: u64,
    /// The largest leader fence the observer reported (`observers never go back`, as the
    /// observer reports it).
    pub shown: u64,
    /// Calls sent in the step being taken (0 between steps): a reply whose handling sends
    /// none is taken with its call (client.rs `take_at_once`).
    pub sends: u8,
}

/// The observer of an election (election.rs `Observed`): the highest fence it has seen, and
/// the leader it reports (fence, value).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Observer {
    /// The highest leader fence seen.
    pub seen: u64,
    /// The leader reported: its fence and value.
    pub current: Option<(u64, u8)>,
}

/// The whole system.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// Server clock.
    pub now: Ms,
    /// Redis.
    pub server: Server,
    /// The clients.
    pub clients: Vec<Client>,
    /// Pushes published and not yet delivered (delayed, in any order).
    pub pushes: Vec<Push>,
    /// What is left of the environment's budget.
    pub budget: Env,
    /// The election's observer (its reads: [`Env::reads`]).
    pub observer: Observer,
    /// For the properties.
    pub ghost: Ghost,
}

/// One step of the system.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Client starts its next request.
    Start(u8),
    /// Client takes its reply (or sends a lost call again).
    Receive(u8),
    /// Client's fallback timer fires: it tries again.
    Retry(u8),
    /// Client's wait timed out: its last attempt.
    GiveUp(u8),
    /// Client drops its waiting future.
    Cancel(u8),
    /// Client releases what it holds.
    Release(u8),
    /// Client's watchdog renews its lease.
    Extend(u8),
    /// Client changes its RwLock mode.
    Change(u8),
    /// Client makes its guarded write (or first asks for the fence it writes).
    Guard(u8),
    /// A push reaches its client.
    Deliver(usize),
    /// A push is lost.
    LosePush(usize),
    /// Client `c` takes the step, and the reply of the first call it sends is lost (its script
    /// took effect; the client sends the same call again when it looks for the reply).
    LoseReply(u8, Box<Action>),
    /// The clock moves one tick (only when no client has something due now).
    Tick,
    /// Client is paused / resumes.
    Pause(u8),
    /// A paused client resumes.
    Resume(u8),
    /// Client crashes.
    Crash(u8),
    /// An operator's `set_limit`.
    SetLimit,
    /// The replica (AOF) catches up.
    Replicate,
    /// Another program writes at the election's leader record key.
    WriteForeign,
    /// The server restarts (a tick passes): empty, or from its replica/AOF.
    Restart(bool),
    /// The server's data goes back to the replica's copy under open connections (a tick
    /// passes; the connection epoch stays).
    Rollback,
    /// Someone asks the lock's holders to give it back (ask.lua).
    Ask,
    /// The election's observer reads who leads (election_read.lua).
    Observe,
}

impl LockModel {
    /// The token of client `c`'s request `r`.
    pub fn token(c: u8, r: u8) -> Token {
        u32::from(c) * 16 + u32::from(r) + 1
    }

    /// The request client `c` runs now.
    pub fn req(&self, c: u8, client: &Client) -> Req {
        self.clients[usize::from(c)][usize::from(client.started.saturating_sub(1))]
    }

    /// The entry of client `c`'s current request in a mutex queue.
    pub(crate) fn entry(&self, c: u8, client: &Client) -> Entry {
        Entry {
            token: Self::token(c, client.started.saturating_sub(1)),
            client: c,
            lease: LEASE,
        }
    }

    /// The entry of client `c`'s current request in a shared queue.
    pub(crate) fn shared_entry(&self, c: u8, client: &Client) -> SharedEntry {
        SharedEntry {
            token: Self::token(c, client.started.saturating_sub(1)),
            client: c,
            lease: LEASE,
            weight: self.req(c, client).weight,
        }
    }
}
