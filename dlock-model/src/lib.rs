//! An executable model of dlock's Redis protocol, checked with [stateright].
//!
//! dlock's guarantees live in its Lua scripts. This crate states each script as **one atomic
//! step** over the state Redis holds ([`Server`]), written as a plain Rust function that
//! follows the Lua closely (each names its file), plus the steps that are not scripts with
//! their real atomicity: the uncontended acquire's `SET NX PX GET` (alone since issue #35: a
//! lock key is kept one lease past its holder's deadline while callers wait, so it fails
//! whenever anyone is queued), the fenced `MULTI` with its connection epoch, the watchdog's batched extend.lua, pub/sub
//! subscriptions and grants. The data a hold protects is modelled too: guarded.lua (a holder's
//! writes, applied only while its hold is still its own by the server's clock — a shared
//! holder judged by its deadline, not by its record's presence) records each applied write in
//! [`Data::written`]; fenced.lua's compare-and-set keeps [`Data::fenced`]. A polite release
//! request (ask.lua) records the holders it asks in [`Data::asked`] (an [`Asked`] per lock), and
//! extend.lua answers 2 instead of 1 to a renewed holder found there.
//!
//! # The step API (for the conformance test)
//!
//! * [`Server`]: every key's content ([`Data`]) plus the connection epoch, the wake channels
//!   with a subscriber and the messages published.
//! * [`Op`]: one atomic step; [`apply`]`(&mut server, now_ms, op)` runs it at server time
//!   `now_ms` and returns its [`Reply`] (the script's return, decoded); the grants it published
//!   are taken with [`Server::drain_published`].
//! * [`abstraction`]`(&server, now_ms)` says what the state means as an [`Abstract`]: holders,
//!   queue order, the stored limit and who stored it, the relative order of fences, which
//!   leases are alive, the writers of each lock's guarded writes, each fenced key's value and
//!   the tokens each lock's release requests name. The conformance test decodes real Redis
//!   into the same type and compares.
//!
//! Tokens, clients and names are small numbers ([`Token`], [`ClientId`], [`Name`]); the
//! conformance test maps them to the real 32-digit tokens and keys. Fences are real values
//! (`max(counter + 1, now in µs)`), but only their order is compared.
//!
//! ```
//! use dlock_model::{Entry, Mode, Op, Reply, Server, abstraction, apply};
//!
//! let mut server = Server::new(None);
//! let a = Entry { token: 1, client: 0, lease: 10 };
//! let b = Entry { token: 2, client: 1, lease: 10 };
//! assert!(matches!(apply(&mut server, 0, Op::Acquire { name: 0, entry: a, mode: Mode::Wait }), Reply::Holds { .. }));
//! assert_eq!(apply(&mut server, 1, Op::Acquire { name: 0, entry: b, mode: Mode::Wait }), Reply::Busy { wait: 9 });
//! assert_eq!(abstraction(&server, 1).mutexes[&0].queue, vec![2]);
//! ```
//!
//! # The checked model
//!
//! [`model::LockModel`] wraps the steps in a stateright [`Model`](stateright::Model): a few
//! clients with one or two requests each, their client-side states (idle, waiting,
//! granted-but-not-yet-returned, holding, lost, released; a holder's one guarded write, stale
//! holders included), an election's observer (election_read.lua, filtered as election.rs
//! `Observed` does), and the environment (the clock, pauses, crashes, lost and delayed pushes,
//! lost replies, restarts empty or from the replica's lagging copy — in every kind's models).
//! Its properties are in `properties` and `rules`: among them `guarded write by the holder`
//! and `guarded fences never decrease` (checked on `model::bounds::unit_guarded`), the release
//! request's four (on `model::bounds::unit_ask`, where holders renewed by a watchdog ignore a
//! request or give the lock back), and issue #44's [`LEADER_BY_HOLDER`], [`READ_LIVE_LEADER`],
//! [`OBSERVERS_NO_BACK`], [`UPGRADE_AT_ONCE`], [`HAND_OFF_OLDEST`], [`OWNER_ONLY`],
//! [`FENCE_LIVE_ONCE`], [`ONE_ENTRY`] and [`SET_LIMIT_AT_ONCE`]. Reachability checks
//! ([`REACH_PAUSE`], [`REACH_LOST_REPLY`], [`REACH_LOST_PUSH`], [`REACH_CRASH`],
//! [`REACH_RESTART_LOST`], [`REACH_RESTART_STALE`], [`REACH_OBSERVER_FILTERED`] and the
//! examples [`GUARDED_REFUSED`], [`ASK_TOLD`], [`ASK_YIELDED`], [`KEPT_REFUSED`]) make sure
//! each fault a model injects was taken with an effect: [`model::LockModel::reachable`] names
//! those a model requires and [`model::verdict`] judges a finished check. [`Mutant`] applies
//! one protocol bug at a time to show that each property catches the bug it names. The unique
//! states of every bound are documented in the crate's README and read back by the tests
//! ([`counts`]). ARCHITECTURE.md, section "The model", lists what is modelled and what is not,
//! and maps every README promise to its property or assumption.
//!
//! # The scheduler's attempts
//!
//! [`attempts::AttemptModel`] is a second, smaller model: dlock-scheduler's at-least-once
//! attempt protocol (its claim, retry, renewal and record scripts over one run, two replicas,
//! kills and pauses), with its own properties and mutants (module docs).
//!
//! # The scheduler's run-time schedules
//!
//! [`schedules::ScheduleModel`] checks how replicas follow run-time schedules (`schedule.lua`
//! and `follow.rs`: a revision read, then the hash; wake-up messages that may be lost; a poll
//! every heartbeat): a replica that has read the current revision runs exactly what is stored,
//! one without the handler never runs it, and every replica converges within a heartbeat of the
//! last change.
//!
//! # The scheduler's other scripts
//!
//! [`sched`] states the scheduler's scripts the models above leave out (claim.lua's turns and
//! misfire, run-now requests, withdrawal, pause and resume, heartbeat and register, one-off
//! keys, cancel and trim) as steps over one job's keys, for the conformance driver, and checks
//! them in [`sched::model::SchedModel`] (the at-most-once claim path) and
//! [`sched::once_model::OnceModel`] (one-off jobs with an idempotency key).
//!
//! # The quorum's fence
//!
//! [`quorum::QuorumModel`] checks the quorum lock's two-round fence (`fence_raise.lua` and the
//! client in dlock-core's `kinds/quorum`): three independent servers, a majority, a node
//! restarted empty and kept out for one TTL by its "data since" record. Grants' fences rise in
//! grant order, a node that lost its data cannot make a fence go back, and no two grants are
//! valid at once; its mutants are [`quorum::QuorumMutant`]. One node's clock stepping forward
//! breaks the first and the last (`QuorumModel::unit_jump`: the checker must find it), which
//! dlock-core's docs state as an operating requirement. The conformance test drives the same
//! steps on three real servers ([`quorum::QuorumModel::step`]).
//!
//! # The rate limiter
//!
//! [`rate`] states rate.lua (one GCRA decision on the server's clock) as a step over the one
//! key a limiter owns; [`rate_model::RateModel`] checks clients that try, reserve and refund
//! on one limiter across clock ticks and restarts, with its own properties (no window admits
//! more than rate x window + burst, a refused try changes nothing, a refilled bucket admits a
//! try, a refund keeps the TAT at or after now, a reservation waits at most its max wait) and
//! mutants ([`rate::RateMutant`]).
//!
//! # The transport
//!
//! [`conns::ConnModel`] checks what the lock models take for granted — a call runs when it is
//! sent — against connections that hold requests back (a half-open link, a paused server): a
//! `try_acquire` that timed out, its cleanup and the next request, with its properties (an
//! abandoned acquire holds nothing once every connection drained; a request sent after a
//! timeout is not queued behind the one that timed out) and mutants ([`conns::ConnMutant`]).

pub use server::{
    Abstract, Asked, ClientId, Data, Entry, ExtendItem, Grant, Hold, Holder, Key, LockRef, Mode,
    Ms, MutexView, Name, Op, Origin, Push, RW_LIMIT, Record, ReleaseHow, Reply, ScriptError,
    Server, SharedEntry, SharedLock, SharedView, Token, abstraction,
};
pub use step::apply;

mod ask;
pub mod attempts;
mod client;
pub mod conns;
pub mod counts;
mod election;
mod guarded;
pub mod model;
mod mutant;
mod mutex;
mod native;
mod properties;
pub mod quorum;
pub mod rate;
pub mod rate_model;
mod reach;
mod rules;
pub mod sched;
pub mod schedules;
mod server;
mod shared;
mod state;
mod step;

pub use mutant::Mutant;
pub use native::{
    NATIVE_LEAVES_NOTHING, REACH_NATIVE_EXPIRED, REACH_NATIVE_HANDED, REACH_NATIVE_RELEASED,
    REACH_NATIVE_TAKEN,
};

pub use properties::{ASK_TOLD, ASK_YIELDED, EXCLUSIVE_AS_SEEN, GUARDED_REFUSED, KEPT_REFUSED};
pub use reach::{
    REACH_CRASH, REACH_LOST_PUSH, REACH_LOST_REPLY, REACH_OBSERVER_FILTERED, REACH_PAUSE,
    REACH_RESTART_LOST, REACH_RESTART_STALE,
};
pub use rules::{
    FENCE_LIVE_ONCE, HAND_OFF_OLDEST, LEADER_BY_HOLDER, OBSERVERS_NO_BACK, ONE_ENTRY, OWNER_ONLY,
    READ_LIVE_LEADER, SET_LIMIT_AT_ONCE, UPGRADE_AT_ONCE,
};
