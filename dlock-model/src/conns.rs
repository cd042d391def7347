//! The transport's checked model (issue 50): a request that timed out on a silent connection,
//! its cleanup, and the requests that follow (`dlock-core/src/transport/conn/rotate.rs`).
//!
//! The lock models apply a call when it is sent: its reply may be lost, but the call never runs
//! later than a step that comes after it. On a real connection it can: a half-open link holds
//! what the client wrote until the link heals, a paused server reads it when it resumes. A
//! `try_acquire` that timed out is abandoned, and its background release (owner-checked) is
//! its cleanup; if the `SET` runs after the cleanup, the abandoned hold stays for its whole
//! lease — everyone waits behind a request that left. And a request sent after the timeout on
//! the same connection waits behind the silent one: it is heard only at TCP's next
//! retransmission, seconds after the heal.
//!
//! Here every connection is a FIFO queue that the server runs, one request at a time, from the
//! head of any queue (so queues interleave arbitrarily, and any request may run after its
//! client timed out). One client: a `try_acquire` (token 1) that may time out, its cleanup,
//! and one more `try_acquire` (token 2) after it. The server knows `release.lua` or not (a
//! first use, a restart): an `EVALSHA` it does not know answers `NOSCRIPT`, and a background
//! release that met it after its own timeout is never sent again (it changes nothing).
//!
//! # Properties
//!
//! * [`DRAINED_FREE`] `an abandoned acquire holds nothing once every connection drained`.
//! * [`NOT_BEHIND`] `a request sent after a timeout is not queued behind the request that
//!   timed out`.
//!
//! And three reached (`sometimes`): the abandoned `SET` ran after its timeout and took the
//! lock; a release on the kept connection freed it; the second acquire took the lock.
//!
//! # What the model leaves out
//!
//! A kept connection is kept here until it drains. dlock keeps it for its `TCP_USER_TIMEOUT`
//! and one command timeout more: by then the kernel delivered what it held, or aborted the
//! connection (a request never delivered never runs). A grant that arrives twice (the kept
//! connection is still subscribed) is `transport/wait.rs`'s, with its own test.

use std::collections::VecDeque;

use stateright::{Checker, Model, Property};

/// `an abandoned acquire holds nothing once every connection drained`.
pub const DRAINED_FREE: &str = "an abandoned acquire holds nothing once every connection drained";
/// `a request sent after a timeout is not queued behind the request that timed out`.
pub const NOT_BEHIND: &str =
    "a request sent after a timeout is not queued behind the request that timed out";

/// The checks that must be reached, so that neither property is vacuous.
pub const REACHABLE: [&str; 3] = [
    "the abandoned SET ran after its timeout and took the lock",
    "a release on the kept connection freed the lock",
    "the second acquire took the lock",
];

/// A request on a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Req {
    /// `SET key token NX PX`.
    Set(u8),
    /// release.lua for the token: by `EVAL` (`true`, runs whatever the script cache holds) or
    /// by `EVALSHA` (`false`, `NOSCRIPT` when the server does not know it).
    Release(u8, bool),
}

/// Where the client is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Nothing sent yet.
    Start,
    /// The first `try_acquire` waits for its reply.
    First,
    /// It was answered (the client goes on with its hold; not this model's concern).
    Answered,
    /// It timed out and was abandoned; the cleanup is sent.
    Abandoned,
    /// The second `try_acquire` was sent.
    Second,
}

/// A transport bug the model must catch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConnMutant {
    /// The connection is kept after a timeout (dlock before issue 50's fix): the next request
    /// waits behind the silent one.
    KeepSilent,
    /// The cleanup goes to the new connection only: it may run before the abandoned `SET`.
    CleanupOnNewOnly,
    /// The cleanup on the kept connection is an `EVALSHA`: on a server that does not know the
    /// script its `NOSCRIPT` comes after the cleanup's timeout, and nothing is sent again.
    KeptEvalsha,
}

impl ConnMutant {
    /// Every mutant.
    pub const ALL: [Self; 3] = [Self::KeepSilent, Self::CleanupOnNewOnly, Self::KeptEvalsha];

    /// The property that catches it.
    pub fn property(self) -> &'static str {
        match self {
            Self::KeepSilent => NOT_BEHIND,
            Self::CleanupOnNewOnly | Self::KeptEvalsha => DRAINED_FREE,
        }
    }

    /// Checks the model with this mutant: `Ok` when its property finds a counterexample.
    ///
    /// # Errors
    /// The property held: the mutant was not caught.
    pub fn caught(self) -> Result<(), String> {
        let checker = ConnModel { mutant: Some(self) }
            .checker()
            .spawn_bfs()
            .join();
        match checker.discovery(self.property()) {
            Some(_) => Ok(()),
            None => Err(format!("{self:?} not caught by `{}`", self.property())),
        }
    }
}

/// The model: one client, its connections, one lock.
#[derive(Clone, Debug, Default)]
pub struct ConnModel {
    /// The transport bug put in, if any.
    pub mutant: Option<ConnMutant>,
}

/// A state of [`ConnModel`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConnState {
    /// Each connection's requests the server has not run yet, oldest first.
    pub conns: Vec<VecDeque<Req>>,
    /// The connection new requests go to.
    pub live: usize,
    /// The connections replaced and kept.
    pub kept: Vec<usize>,
    /// The lock's holder (a token).
    pub holder: Option<u8>,
    /// Whether the server's script cache holds release.lua.
    pub loaded: bool,
    /// The client's progress.
    pub phase: Phase,
    /// The first acquire's connection, once it timed out with its `SET` not yet run.
    pub silent: Option<usize>,
    /// A request sent after the timeout went to [`ConnState::silent`] while the `SET` that
    /// timed out was still queued there.
    pub behind: bool,
    /// What the last step did, for the `sometimes` checks.
    pub event: Option<&'static str>,
}

/// A step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConnAction {
    /// The client sends its first `try_acquire`.
    Send,
    /// The client reads the first request's reply (it ran).
    Answer,
    /// The first request times out unanswered: abandoned, its cleanup sent.
    TimeOut,
    /// The client sends its second `try_acquire`.
    Again,
    /// The server runs the oldest request of a connection.
    Run(usize),
}

impl ConnModel {
    fn send(s: &mut ConnState, conn: usize, req: Req) {
        if let Some(queue) = s.conns.get_mut(conn) {
            queue.push_back(req);
        }
    }

    /// What dlock does when a request times out: replace the silent connection (kept), then
    /// release in the background on the live one and on every kept one.
    fn time_out(&self, s: &mut ConnState) {
        let old = s.live;
        if s.conns[old].contains(&Req::Set(1)) {
            s.silent = Some(old);
        }
        if self.mutant != Some(ConnMutant::KeepSilent) {
            s.conns.push(VecDeque::new());
            s.live = s.conns.len() - 1;
            s.kept.push(old);
        }
        let live = s.live;
        Self::send(s, live, Req::Release(1, false));
        if self.mutant != Some(ConnMutant::CleanupOnNewOnly) {
            let eval = self.mutant != Some(ConnMutant::KeptEvalsha);
            for kept in s.kept.clone() {
                Self::send(s, kept, Req::Release(1, eval));
            }
        }
        s.phase = Phase::Abandoned;
    }

    fn run(s: &mut ConnState, conn: usize) -> Option<()> {
        let req = s.conns.get_mut(conn)?.pop_front()?;
        match req {
            Req::Set(token) => {
                if s.holder.is_none() {
                    s.holder = Some(token);
                    s.event = match token {
                        1 if s.phase != Phase::First => Some(REACHABLE[0]),
                        2 => Some(REACHABLE[2]),
                        _ => None,
                    };
                }
            }
            Req::Release(token, eval) => {
                if eval {
                    s.loaded = true;
                }
                if (eval || s.loaded) && s.holder == Some(token) {
                    s.holder = None;
                    if s.kept.contains(&conn) {
                        s.event = Some(REACHABLE[1]);
                    }
                }
            }
        }
        Some(())
    }
}

impl Model for ConnModel {
    type State = ConnState;
    type Action = ConnAction;

    fn init_states(&self) -> Vec<ConnState> {
        [false, true]
            .map(|loaded| ConnState {
                conns: vec![VecDeque::new()],
                live: 0,
                kept: Vec::new(),
                holder: None,
                loaded,
                phase: Phase::Start,
                silent: None,
                behind: false,
                event: None,
            })
            .into()
    }

    fn actions(&self, s: &ConnState, actions: &mut Vec<ConnAction>) {
        match s.phase {
            Phase::Start => actions.push(ConnAction::Send),
            Phase::First => {
                if !s.conns.iter().any(|q| q.contains(&Req::Set(1))) {
                    actions.push(ConnAction::Answer);
                }
                actions.push(ConnAction::TimeOut);
            }
            Phase::Abandoned => actions.push(ConnAction::Again),
            Phase::Answered | Phase::Second => {}
        }
        for (conn, queue) in s.conns.iter().enumerate() {
            if !queue.is_empty() {
                actions.push(ConnAction::Run(conn));
            }
        }
    }

    fn next_state(&self, last: &ConnState, action: ConnAction) -> Option<ConnState> {
        let mut s = last.clone();
        s.event = None;
        match action {
            ConnAction::Send => {
                let live = s.live;
                Self::send(&mut s, live, Req::Set(1));
                s.phase = Phase::First;
            }
            ConnAction::Answer => s.phase = Phase::Answered,
            ConnAction::TimeOut => self.time_out(&mut s),
            ConnAction::Again => {
                let live = s.live;
                s.behind = s.silent == Some(live) && s.conns[live].contains(&Req::Set(1));
                Self::send(&mut s, live, Req::Set(2));
                s.phase = Phase::Second;
            }
            ConnAction::Run(conn) => Self::run(&mut s, conn)?,
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(DRAINED_FREE, |_, s: &ConnState| {
                let drained = s.conns.iter().all(VecDeque::is_empty);
                let abandoned = matches!(s.phase, Phase::Abandoned | Phase::Second);
                !(drained && abandoned && s.holder == Some(1))
            }),
            Property::always(NOT_BEHIND, |_, s: &ConnState| !s.behind),
            Property::sometimes(REACHABLE[0], |_, s: &ConnState| {
                s.event == Some(REACHABLE[0])
            }),
            Property::sometimes(REACHABLE[1], |_, s: &ConnState| {
                s.event == Some(REACHABLE[1])
            }),
            Property::sometimes(REACHABLE[2], |_, s: &ConnState| {
                s.event == Some(REACHABLE[2])
            }),
        ]
    }
}

/// The model's verdict: every `always` holds and every `sometimes` is reached.
///
/// # Errors
/// The first property broken (with its path), or left unreached.
pub fn verdict(checker: &impl Checker<ConnModel>) -> Result<(), String> {
    for property in checker.model().properties() {
        let found = checker.discovery(property.name);
        if REACHABLE.contains(&property.name) {
            if found.is_none() {
                return Err(format!("`{}` not reached: vacuous", property.name));
            }
        } else if let Some(path) = found {
            return Err(format!(
                "`{}` broken:\n{:#?}",
                property.name,
                path.into_actions()
            ));
        }
    }
    Ok(())
}
