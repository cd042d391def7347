//! The checked model: clients with their requests, the environment, and the server's steps
//! ([`crate::apply`]) under them, as a stateright [`Model`]. The properties are in
//! `properties.rs`; what a client does with each reply is in `client.rs`.

use stateright::{Model, Property};

use crate::client;
use crate::properties;
use crate::server::{
    ExtendItem, Key, LockRef, Mode, Ms, Op, Push, RW_LIMIT, ReleaseHow, Reply, Server, Token,
};
use crate::{Mutant, apply};

/// Every lease in the model, in ticks of the model's clock (one tick = 1 ms of server clock,
/// so that fences floored at µs stay distinct per tick).
pub const LEASE: Ms = 2;

/// Which lock kind a model checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A mutex taken by the uncontended pipeline first (`SET NX PX GET`, `EXISTS`), then by
    /// waiting (acquire.lua).
    Mutex,
    /// A mutex with `fenced()`: the uncontended `MULTI` with its connection epoch.
    FencedMutex,
    /// A semaphore (shared admission with weights; `set_limit` by an operator).
    Semaphore,
    /// A RwLock (shared admission with limit [`RW_LIMIT`]; upgrade, downgrade).
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
    /// Permits (1 for a mutex and a reader, [`RW_LIMIT`] for a writer).
    pub weight: u32,
    /// `acquire_timeout`: the wait ends this many ticks after it began.
    pub timeout: Option<Ms>,
    /// The waiting future may be dropped (cancel, shutdown) at any time.
    pub cancel: bool,
    /// A RwLock holder may change its mode once (a reader upgrades, a writer downgrades).
    pub change: bool,
    /// A watchdog renews the lease (extend.lua) while it is held.
    pub watchdog: bool,
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
    /// An operator's `set_limit` to this value, once.
    pub set_limit: Option<u32>,
    /// Another program writes its data at the election's leader record key (once).
    pub foreign_record: bool,
}

/// The checked model of one lock kind.
#[derive(Clone, Debug)]
pub struct LockModel {
    /// The kind.
    pub kind: Kind,
    /// The handles' limit (a semaphore's permits; [`RW_LIMIT`] for a RwLock; 1 otherwise).
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
    /// The uncontended pipeline's `SET` ran; its `EXISTS` runs next.
    Pipelined {
        /// When it was sent.
        sent: Ms,
        /// The oldest caller queued when the `SET` ran (for the property `queue head first`).
        ahead: Option<Token>,
        /// The `SET`'s reply.
        set: Option<Option<Token>>,
    },
    /// Waiting for a grant (queued), or for the fallback timer.
    Waiting {
        /// The fallback timer.
        timer: Ms,
        /// Server time of the latest attempt that found the lock held by others.
        seen: Ms,
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
    /// The uncontended pipeline's `EXISTS` runs.
    Exists(u8),
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
    /// A push reaches its client.
    Deliver(usize),
    /// A push is lost.
    LosePush(usize),
    /// A reply is lost (its script took effect).
    LoseReply(u8),
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

    /// Whether client `c` has something due now (the clock waits for it).
    fn due(&self, state: &State, c: &Client) -> bool {
        if c.paused || c.dead {
            return false;
        }
        match &c.phase {
            Phase::InFlight { .. } | Phase::Pipelined { .. } => true,
            Phase::Waiting { timer, .. } => {
                *timer <= state.now || c.deadline.is_some_and(|d| d <= state.now)
            }
            _ => false,
        }
    }

    /// Runs `op` on the server for client `c` and records what the step granted.
    pub(crate) fn send(&self, state: &mut State, c: u8, op: Op) {
        let before = state.server.clone();
        let reply = apply(&mut state.server, state.now, op.clone());
        let published = state.server.drain_published();
        properties::observe_step(self, state, &before, &op, &reply);
        for push in published {
            if let Err(at) = state.pushes.binary_search(&push) {
                state.pushes.insert(at, push);
            }
        }
        let client = &mut state.clients[usize::from(c)];
        let releasing = matches!(
            op,
            Op::Release { .. } | Op::SharedRelease { .. } | Op::ElectionResign { .. }
        );
        if let Phase::Holding {
            token,
            fence,
            until,
            writer,
            changed,
        } = client.phase
            && !releasing
        {
            client.held = Some(Held {
                token,
                fence,
                until,
                writer,
                changed,
            });
        }
        if releasing {
            client.held = None;
        }
        client.phase = Phase::InFlight {
            op,
            sent: state.now,
            reply: Some(reply),
        };
        if self.env.pauses == 0 && self.env.lost_replies == 0 {
            // Nothing can come between the step and its reply: take it at once.
            client::receive(self, state, c);
        }
    }

    /// The entry of client `c`'s current request in a mutex queue.
    pub(crate) fn entry(&self, c: u8, client: &Client) -> crate::Entry {
        crate::Entry {
            token: Self::token(c, client.started.saturating_sub(1)),
            client: c,
            lease: LEASE,
        }
    }

    /// The entry of client `c`'s current request in a shared queue.
    pub(crate) fn shared_entry(&self, c: u8, client: &Client) -> crate::SharedEntry {
        crate::SharedEntry {
            token: Self::token(c, client.started.saturating_sub(1)),
            client: c,
            lease: LEASE,
            weight: self.req(c, client).weight,
        }
    }

    /// The waiting attempt of client `c` (acquire.lua / shared_acquire.lua) in `mode`.
    pub(crate) fn attempt(&self, state: &mut State, c: u8, mode: Mode) {
        let client = &state.clients[usize::from(c)];
        let op = if self.kind.shared() {
            Op::SharedAcquire {
                name: 0,
                entry: self.shared_entry(c, client),
                limit: self.limit,
                mode,
            }
        } else {
            Op::Acquire {
                name: 0,
                entry: self.entry(c, client),
                mode,
            }
        };
        self.send(state, c, op);
    }

    fn start(&self, state: &mut State, c: u8) {
        let client = &mut state.clients[usize::from(c)];
        client.started += 1;
        client.held = None;
        client.stale = false;
        client.epoch = state.server.epoch;
        let req = self.req(c, client);
        client.deadline = req.timeout.map(|t| state.now + t);
        let token = Self::token(c, client.started - 1);
        match self.kind {
            Kind::Mutex | Kind::Election => {
                // The pipeline's first command; its second (EXISTS) is the client's next step,
                // and other clients' steps may come in between. (Its reply is not lost in the
                // model: a lost pipeline reply is an error the caller sees.)
                let before = state.server.clone();
                let op = Op::SetNxGet {
                    name: 0,
                    token,
                    lease: LEASE,
                };
                let reply = apply(&mut state.server, state.now, op.clone());
                properties::observe_step(self, state, &before, &op, &reply);
                let set = match reply {
                    Reply::SetNx(set) => set,
                    _ => Some(None),
                };
                state.clients[usize::from(c)].phase = Phase::Pipelined {
                    sent: state.now,
                    ahead: state
                        .server
                        .data
                        .queues
                        .get(&0)
                        .and_then(|q| q.first().map(|e| e.token)),
                    set,
                };
            }
            Kind::FencedMutex => {
                let incr = client.floored.is_some() || self.mutant == Some(Mutant::FenceNotFloored);
                self.send(
                    state,
                    c,
                    Op::FencedFast {
                        name: 0,
                        token,
                        lease: LEASE,
                        incr,
                    },
                );
            }
            Kind::Semaphore | Kind::RwLock => self.attempt(state, c, Mode::Wait),
        }
    }

    fn release(&self, state: &mut State, c: u8) {
        let Phase::Holding { token, fence, .. } = state.clients[usize::from(c)].phase else {
            return;
        };
        let op = if self.kind.shared() {
            Op::SharedRelease {
                name: 0,
                token,
                leaving: None,
            }
        } else if self.kind == Kind::Election && fence.is_some() {
            Op::ElectionResign {
                name: 0,
                token,
                fence: fence.unwrap_or(0),
            }
        } else {
            Op::Release {
                name: 0,
                token,
                leaving: None,
                how: ReleaseHow::Own,
            }
        };
        self.send(state, c, op);
    }

    fn cancel(&self, state: &mut State, c: u8) {
        let client = &state.clients[usize::from(c)];
        let op = if self.kind.shared() {
            let entry = self.shared_entry(c, client);
            Op::SharedRelease {
                name: 0,
                token: entry.token,
                leaving: Some(entry),
            }
        } else {
            let entry = self.entry(c, client);
            Op::Release {
                name: 0,
                token: entry.token,
                leaving: Some(entry),
                how: ReleaseHow::Own,
            }
        };
        // The caller has gone: whatever the reply, the request is over (client.rs).
        self.send(state, c, op);
    }

    fn change(&self, state: &mut State, c: u8) {
        let Phase::Holding { token, writer, .. } = state.clients[usize::from(c)].phase else {
            return;
        };
        self.send(
            state,
            c,
            Op::RwChange {
                name: 0,
                old: token,
                new: token + 256,
                up: !writer,
                lease: LEASE,
            },
        );
    }

    fn extend(&self, state: &mut State, c: u8) {
        let Phase::Holding { token, .. } = state.clients[usize::from(c)].phase else {
            return;
        };
        let items = vec![ExtendItem {
            lock: self.kind.lock(),
            token,
            lease: LEASE,
        }];
        self.send(state, c, Op::Extend { items });
    }
}

impl Model for LockModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let mut server = Server::new(self.mutant);
        let clients = (0..self.clients.len())
            .map(|c| {
                let c = u8::try_from(c).unwrap_or(u8::MAX);
                // wait.rs subscribes before the first attempt; the model keeps the
                // subscription for the client's life.
                apply(
                    &mut server,
                    0,
                    Op::Subscribe {
                        lock: self.kind.lock(),
                        client: c,
                    },
                );
                Client {
                    held: None,
                    started: 0,
                    phase: Phase::Idle,
                    deadline: None,
                    paused: false,
                    dead: false,
                    stale: false,
                    epoch: 0,
                    floored: None,
                }
            })
            .collect();
        vec![State {
            now: 0,
            server,
            clients,
            pushes: Vec::new(),
            budget: self.env,
            ghost: Ghost {
                limit: if self.kind == Kind::RwLock {
                    RW_LIMIT
                } else {
                    self.limit
                },
                ..Ghost::default()
            },
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        let mut due = false;
        for (i, client) in state.clients.iter().enumerate() {
            let c = u8::try_from(i).unwrap_or(u8::MAX);
            due |= self.due(state, client);
            if client.dead {
                continue;
            }
            if client.paused {
                actions.push(Action::Resume(c));
                continue;
            }
            if state.budget.pauses > 0 {
                actions.push(Action::Pause(c));
            }
            if state.budget.crashes > 0 {
                actions.push(Action::Crash(c));
            }
            let req = (client.started > 0).then(|| self.req(c, client));
            match &client.phase {
                Phase::Idle | Phase::Done => {
                    if usize::from(client.started) < self.clients[i].len() {
                        actions.push(Action::Start(c));
                    }
                }
                Phase::InFlight { reply, .. } => {
                    actions.push(Action::Receive(c));
                    if reply.is_some() && state.budget.lost_replies > 0 {
                        actions.push(Action::LoseReply(c));
                    }
                }
                Phase::Pipelined { .. } => actions.push(Action::Exists(c)),
                Phase::Waiting { timer, .. } => {
                    if client.deadline.is_some_and(|d| d <= state.now) {
                        actions.push(Action::GiveUp(c));
                    } else if *timer <= state.now {
                        actions.push(Action::Retry(c));
                    }
                    if req.is_some_and(|r| r.cancel) {
                        actions.push(Action::Cancel(c));
                    }
                }
                Phase::Holding { changed, .. } => {
                    actions.push(Action::Release(c));
                    if req.is_some_and(|r| r.watchdog) {
                        actions.push(Action::Extend(c));
                    }
                    if req.is_some_and(|r| r.change) && !changed {
                        actions.push(Action::Change(c));
                    }
                }
            }
        }
        for (i, push) in state.pushes.iter().enumerate() {
            let client = &state.clients[usize::from(push.client)];
            if !client.paused {
                actions.push(Action::Deliver(i));
            }
            if state.budget.lost_pushes > 0 {
                actions.push(Action::LosePush(i));
            }
        }
        if state.budget.set_limit.is_some() {
            actions.push(Action::SetLimit);
        }
        if state.budget.foreign_record {
            actions.push(Action::WriteForeign);
        }
        if state.budget.restarts > 0 {
            actions.push(Action::Replicate);
            if !due && state.now < self.max_time {
                actions.push(Action::Restart(false));
                actions.push(Action::Restart(true));
            }
        }
        if !due && state.now < self.max_time {
            actions.push(Action::Tick);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut state = last.clone();
        match action {
            Action::Start(c) => self.start(&mut state, c),
            Action::Receive(c) => client::receive(self, &mut state, c),
            Action::Exists(c) => client::exists(self, &mut state, c),
            Action::Retry(c) => self.attempt(&mut state, c, Mode::Wait),
            Action::GiveUp(c) => self.attempt(&mut state, c, Mode::Last),
            Action::Cancel(c) => self.cancel(&mut state, c),
            Action::Release(c) => self.release(&mut state, c),
            Action::Extend(c) => self.extend(&mut state, c),
            Action::Change(c) => self.change(&mut state, c),
            Action::Deliver(i) => {
                let push = state.pushes.remove(i);
                client::deliver(self, &mut state, push);
            }
            Action::LosePush(i) => {
                state.pushes.remove(i);
                state.budget.lost_pushes -= 1;
            }
            Action::LoseReply(c) => {
                if let Phase::InFlight { reply, .. } = &mut state.clients[usize::from(c)].phase {
                    *reply = None;
                }
                state.budget.lost_replies -= 1;
            }
            Action::Tick => {
                properties::observe_tick(self, &mut state);
                state.now += 1;
            }
            Action::Pause(c) => {
                state.budget.pauses -= 1;
                let client = &mut state.clients[usize::from(c)];
                client.paused = true;
                client.stale = true;
            }
            Action::Resume(c) => state.clients[usize::from(c)].paused = false,
            Action::Crash(c) => {
                state.budget.crashes -= 1;
                state.clients[usize::from(c)].dead = true;
                state.pushes.retain(|p| p.client != c);
                apply(
                    &mut state.server,
                    state.now,
                    Op::Unsubscribe {
                        lock: self.kind.lock(),
                        client: c,
                    },
                );
            }
            Action::SetLimit => {
                let limit = state.budget.set_limit.take().unwrap_or(1);
                state.ghost.limit = limit;
                let before = state.server.clone();
                let op = Op::SetLimit { name: 0, limit };
                let reply = apply(&mut state.server, state.now, op.clone());
                properties::observe_step(self, &mut state, &before, &op, &reply);
                for push in state.server.drain_published() {
                    if let Err(at) = state.pushes.binary_search(&push) {
                        state.pushes.insert(at, push);
                    }
                }
            }
            Action::WriteForeign => {
                state.budget.foreign_record = false;
                let op = Op::WriteForeign {
                    key: Key::Leader(0),
                };
                apply(&mut state.server, state.now, op);
            }
            Action::Replicate => {
                apply(&mut state.server, state.now, Op::Replicate);
            }
            Action::Restart(from_replica) => {
                state.budget.restarts -= 1;
                // A restart or failover takes time: the clock moves past every fence issued
                // before it (common.lua next_fence's floor argument).
                state.now += 1;
                apply(&mut state.server, state.now, Op::Restart { from_replica });
                // Every connection dropped: a waiter retries right after a disconnect (wait.rs).
                let now = state.now;
                for client in &mut state.clients {
                    if let Phase::Waiting { timer, .. } = &mut client.phase {
                        *timer = now;
                    }
                }
            }
        }
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        properties::all()
    }
}

/// Shorthand for a model of `kind` with `clients`, no environment actions and no mutant.
pub fn model(kind: Kind, limit: u32, clients: Vec<Vec<Req>>, max_time: Ms) -> LockModel {
    LockModel {
        kind,
        limit,
        clients,
        max_time,
        env: Env::default(),
        mutant: None,
    }
}

/// The bounds `cargo test` checks (small: each kind well under a minute on 2 cores) and the
/// deeper ones of `make model`.
pub mod bounds {
    use super::{Env, Kind, LockModel, Req, model};
    use crate::server::RW_LIMIT;

    /// The model of `kind` at the unit test's bounds.
    pub fn unit(kind: Kind) -> LockModel {
        let mut m = match kind {
            Kind::Mutex => model(
                kind,
                1,
                vec![vec![Req::of(1)], vec![Req::of(1).timeout(2)]],
                4,
            ),
            Kind::FencedMutex => model(
                kind,
                1,
                vec![vec![Req::of(1), Req::of(1)], vec![Req::of(1)]],
                4,
            ),
            Kind::Semaphore => model(
                kind,
                3,
                vec![
                    vec![Req::of(2)],
                    vec![Req::of(3).timeout(1)],
                    vec![Req::of(1)],
                ],
                4,
            ),
            Kind::RwLock => model(
                kind,
                RW_LIMIT,
                vec![
                    vec![Req::of(1).change()],
                    vec![Req::of(RW_LIMIT).timeout(1).change()],
                    vec![Req::of(1)],
                ],
                4,
            ),
            Kind::Election => model(
                kind,
                1,
                vec![vec![Req::of(1), Req::of(1)], vec![Req::of(1)]],
                4,
            ),
        };
        m.env = match kind {
            Kind::Mutex => Env {
                pauses: 1,
                lost_pushes: 1,
                lost_replies: 1,
                ..Env::default()
            },
            Kind::FencedMutex => Env {
                restarts: 1,
                lost_replies: 1,
                ..Env::default()
            },
            Kind::Semaphore => Env {
                crashes: 1,
                lost_pushes: 1,
                set_limit: Some(2),
                ..Env::default()
            },
            Kind::RwLock => Env {
                crashes: 1,
                lost_pushes: 1,
                ..Env::default()
            },
            Kind::Election => Env {
                crashes: 1,
                lost_pushes: 1,
                foreign_record: true,
                ..Env::default()
            },
        };
        m
    }

    /// The model of `kind` at the deeper bounds of `make model`: more clients or requests,
    /// more of the environment, a longer clock.
    pub fn deep(kind: Kind) -> LockModel {
        let mut m = unit(kind);
        match kind {
            Kind::Mutex => {
                m.clients = vec![
                    vec![Req::of(1).watchdog(), Req::of(1)],
                    vec![Req::of(1).timeout(2)],
                    vec![Req::of(1).cancel()],
                ];
                m.env.crashes = 1;
            }
            Kind::FencedMutex => {
                m.clients.push(vec![Req::of(1)]);
                m.env.restarts = 2;
            }
            Kind::Semaphore => {
                m.clients[0] = vec![Req::of(2).watchdog(), Req::of(1).cancel()];
                m.env.lost_replies = 1;
                m.max_time = 5;
            }
            Kind::RwLock => {
                m.clients[2] = vec![Req::of(1).cancel(), Req::of(RW_LIMIT)];
                m.env.lost_replies = 1;
                m.max_time = 5;
            }
            Kind::Election => {
                m.env.pauses = 1;
                m.max_time = 5;
            }
        }
        m
    }

    /// A second mutex model for the unit run: three clients, one of them crashing, one
    /// cancelling its wait, one renewed by a watchdog (no pauses or lost replies, which
    /// [`unit()`] covers with two clients).
    pub fn unit_crowd() -> LockModel {
        let mut m = model(
            Kind::Mutex,
            1,
            vec![
                vec![Req::of(1).watchdog()],
                vec![Req::of(1).timeout(2)],
                vec![Req::of(1).cancel()],
            ],
            4,
        );
        m.env = Env {
            crashes: 1,
            ..Env::default()
        };
        m
    }
}

/// A counterexample as a readable list of steps: each action (client `c`'s request `r` has
/// token `16c + r + 1`) with what the server holds after it, then each client's phase.
pub fn trace(path: stateright::Path<State, Action>) -> String {
    use std::fmt::Write as _;
    let steps = path.into_vec();
    let mut out = String::new();
    for pair in steps.windows(2) {
        let (before, after) = (&pair[0], &pair[1].0);
        if let Some(action) = &before.1 {
            let _ = writeln!(out, "  t={} {action:?} -> {}", before.0.now, summary(after));
        }
    }
    if let Some((last, _)) = steps.last() {
        for (c, client) in last.clients.iter().enumerate() {
            let _ = writeln!(out, "  client {c} ends {:?}", client.phase);
        }
        let _ = writeln!(out, "  pushes in flight: {:?}", last.pushes);
    }
    out
}

/// One line of what the server holds (live only) and the properties broken so far.
fn summary(state: &State) -> String {
    let view = crate::abstraction(&state.server, state.now);
    let mut parts = Vec::new();
    if let Some(m) = view.mutexes.get(&0) {
        parts.push(format!("holder {:?} queue {:?}", m.holder, m.queue));
    }
    if let Some(s) = view.shared.get(&0) {
        parts.push(format!(
            "limit {:?}{} holders {:?} queue {:?}",
            s.limit,
            if s.operator { " (operator)" } else { "" },
            s.holders,
            s.queue
        ));
    }
    if let Some(leader) = view.leaders.get(&0) {
        parts.push(format!("leader {leader:?}"));
    }
    if parts.is_empty() {
        parts.push("nothing held".into());
    }
    if state.ghost.broken != 0 {
        parts.push(format!("broken {:#b}", state.ghost.broken));
    }
    parts.join(", ")
}
