//! The checked model: clients with their requests, the environment, and the server's steps
//! ([`crate::apply`]) under them, as a stateright [`Model`]. The properties are in
//! `properties.rs`; what a client does with each reply is in `client.rs`.

use stateright::{Model, Property};

use crate::client;
use crate::mutant::Mutant;
use crate::properties;
use crate::server::{
    ExtendItem, Key, Mode, Ms, Op, RW_LIMIT, ReleaseHow, Reply, Server, abstraction,
};
pub use crate::state::{
    Action, Client, Env, Ghost, Held, Kind, LEASE, LockModel, Phase, Req, State,
};
use crate::step::apply;

impl LockModel {
    /// Whether client `c` has something due now (the clock waits for it).
    fn due(&self, state: &State, c: &Client) -> bool {
        if c.paused || c.dead {
            return false;
        }
        match &c.phase {
            Phase::InFlight { .. } => true,
            Phase::Waiting { timer, .. } => {
                *timer <= state.now || c.deadline.is_some_and(|d| d <= state.now)
            }
            _ => false,
        }
    }

    fn start(&self, state: &mut State, c: u8) {
        let client = &mut state.clients[usize::from(c)];
        client.started += 1;
        client.held = None;
        client.stale = false;
        client.wrote = false;
        client.epoch = state.server.epoch;
        let req = self.req(c, client);
        client.deadline = req.timeout.map(|t| state.now + t);
        let token = Self::token(c, client.started - 1);
        match self.kind {
            Kind::Mutex | Kind::Election => {
                // The uncontended acquire: `SET NX PX GET` alone (issue #35: while callers
                // wait the lock key is kept, so it fails whenever anyone is queued).
                let before = state.server.clone();
                let op = Op::SetNxGet {
                    name: 0,
                    token,
                    lease: LEASE,
                };
                // The clients queued when the `SET` ran (for `queue head first`).
                let ahead: Vec<u8> = state
                    .server
                    .data
                    .queues
                    .get(&0)
                    .map(|q| q.iter().map(|e| e.client).collect())
                    .unwrap_or_default();
                let now = state.now;
                let kept = state
                    .server
                    .data
                    .locks
                    .get(&0)
                    .is_some_and(|h| !h.live(now) && now < h.expires);
                let reply = apply(&mut state.server, state.now, op.clone());
                properties::observe_step(self, state, &before, &op, &reply);
                let set = match reply {
                    Reply::SetNx(set) => set,
                    _ => Some(None),
                };
                if kept && matches!(set, Some(Some(_))) {
                    state.ghost.kept_refused = true;
                }
                client::fast(self, state, c, token, set, &ahead);
            }
            Kind::FencedMutex => {
                let incr = client.floored.is_some() || self.mutant == Some(Mutant::FenceNotFloored);
                client::send(
                    self,
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
            Kind::Semaphore | Kind::RwLock => client::attempt(self, state, c, Mode::Join),
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
        client::send(self, state, c, op);
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
        client::send(self, state, c, op);
    }

    fn change(&self, state: &mut State, c: u8) {
        let Phase::Holding { token, writer, .. } = state.clients[usize::from(c)].phase else {
            return;
        };
        client::send(
            self,
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

    /// The holder's guarded write, with the fence it knows; a mutex holder without one asks
    /// fence.lua first (`fencing_token()`), and writes at its next `Guard`.
    fn guard(&self, state: &mut State, c: u8) {
        let client = &mut state.clients[usize::from(c)];
        let Phase::Holding { token, fence, .. } = client.phase else {
            return;
        };
        let op = match fence {
            None => Op::Fence { name: 0, token },
            Some(fence) => {
                client.wrote = true;
                Op::Guarded {
                    lock: self.kind.lock(),
                    token,
                    fence,
                }
            }
        };
        client::send(self, state, c, op);
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
        client::send(self, state, c, Op::Extend { items });
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
                    wrote: false,
                    paused_since_ask: false,
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
                Phase::Holding { changed, until, .. } => {
                    actions.push(Action::Release(c));
                    // A holder that believes it holds: its lease has not run out by its own
                    // count, or it was paused (it cannot have noticed).
                    if req.is_some_and(|r| r.guard)
                        && !client.wrote
                        && (state.now < *until || client.stale)
                    {
                        actions.push(Action::Guard(c));
                    }
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
            // A grant that arrives while the request's own call is in flight waits in the
            // waiter's slot (wait.rs) until the reply is read: it stays in flight here.
            let current = client.started > 0
                && push.token == LockModel::token(push.client, client.started - 1);
            let reading = current && matches!(client.phase, Phase::InFlight { .. });
            if !client.paused && !reading {
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
        if state.budget.asks > 0 {
            actions.push(Action::Ask);
        }
        if state.budget.restarts > 0 || state.budget.rollbacks > 0 {
            actions.push(Action::Replicate);
        }
        if !due && state.now < self.max_time {
            if state.budget.restarts > 0 {
                actions.push(Action::Restart(false));
                actions.push(Action::Restart(true));
            }
            if state.budget.rollbacks > 0 {
                actions.push(Action::Rollback);
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
            Action::Retry(c) => {
                // A waiter whose last attempt made sure it is queued, and which nothing reached
                // since, re-asks without the queue scan (at most once in a row).
                let confirmed = matches!(
                    state.clients[usize::from(c)].phase,
                    Phase::Waiting {
                        confirmed: true,
                        ..
                    }
                );
                let mode = if confirmed { Mode::Again } else { Mode::Wait };
                client::attempt(self, &mut state, c, mode);
            }
            Action::GiveUp(c) => client::attempt(self, &mut state, c, Mode::Last),
            Action::Cancel(c) => self.cancel(&mut state, c),
            Action::Release(c) => self.release(&mut state, c),
            Action::Extend(c) => self.extend(&mut state, c),
            Action::Change(c) => self.change(&mut state, c),
            Action::Guard(c) => self.guard(&mut state, c),
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
                client.paused_since_ask = true;
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
            Action::Ask => {
                state.budget.asks -= 1;
                let before = state.server.clone();
                let op = Op::Ask {
                    lock: self.kind.lock(),
                };
                let reply = apply(&mut state.server, state.now, op.clone());
                properties::observe_step(self, &mut state, &before, &op, &reply);
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
            Action::Rollback => {
                state.budget.rollbacks -= 1;
                state.now += 1;
                // Not a step of the API: no connection notices it (the epoch stays).
                state.server.data = state.server.replica.clone().unwrap_or_default();
                properties::observe_lost_data(&mut state);
            }
            Action::Restart(from_replica) => {
                state.budget.restarts -= 1;
                // A restart or failover takes time: the clock moves past every fence issued
                // before it (common.lua next_fence's floor argument).
                state.now += 1;
                apply(&mut state.server, state.now, Op::Restart { from_replica });
                properties::observe_lost_data(&mut state);
                // Every connection dropped: a waiter retries right after a disconnect (wait.rs).
                let now = state.now;
                for client in &mut state.clients {
                    if let Phase::Waiting { timer, .. } = &mut client.phase {
                        *timer = now;
                    }
                }
            }
        }
        properties::observe_kept(&mut state);
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
                m = unit_crowd();
                m.env.lost_pushes = 1;
                m.env.lost_replies = 1;
            }
            Kind::FencedMutex => m.env.restarts = 2,
            Kind::Semaphore => {
                m.clients[0] = vec![Req::of(2).watchdog()];
                m.clients[2] = vec![Req::of(1).cancel()];
                m.env.lost_replies = 1;
            }
            Kind::RwLock => {
                m.clients[2] = vec![Req::of(1).cancel()];
                m.env.lost_replies = 1;
            }
            Kind::Election => {
                m.env.pauses = 1;
                m.max_time = 5;
            }
        }
        m
    }

    /// The guarded write's models for the unit run (issue 32): two requests that each make one
    /// guarded write while they hold, and the environment that makes a holder stale — one
    /// pause (a holder paused past its lease writes when it resumes; for a mutex, one lost
    /// reply too: a write sent again), or for the fenced mutex one restart (a hold lost by a
    /// restart, or brought back from the lagging replica). A semaphore of limit 2 (two holders
    /// with different deadlines: one past its lease while `K:exp` lives), a RwLock writer and
    /// a reader.
    pub fn unit_guarded(kind: Kind) -> LockModel {
        let two = vec![vec![Req::of(1).guard()], vec![Req::of(1).guard()]];
        let mut m = match kind {
            Kind::Semaphore => model(kind, 2, two, 4),
            Kind::RwLock => model(
                kind,
                RW_LIMIT,
                vec![vec![Req::of(RW_LIMIT).guard()], vec![Req::of(1).guard()]],
                4,
            ),
            _ => model(kind, 1, two, 4),
        };
        m.env = match kind {
            Kind::FencedMutex => Env {
                restarts: 1,
                ..Env::default()
            },
            Kind::Mutex | Kind::Election => Env {
                pauses: 1,
                lost_replies: 1,
                ..Env::default()
            },
            Kind::Semaphore | Kind::RwLock => Env {
                pauses: 1,
                ..Env::default()
            },
        };
        m
    }

    /// The guarded write's models at the deeper bounds of `make model`: [`unit_guarded()`] with
    /// more of the environment — a mutex with a lost push and a clock up to 5, the fenced mutex
    /// with 2 restarts and a lost reply, a semaphore with a request for both permits that
    /// waits (its queue keeps `K:exp` alive) and a lost reply, a RwLock with a second reader and
    /// a lost push.
    pub fn deep_guarded(kind: Kind) -> LockModel {
        let mut m = unit_guarded(kind);
        match kind {
            Kind::Mutex | Kind::Election => {
                m.env.lost_pushes = 1;
                m.max_time = 5;
            }
            Kind::FencedMutex => {
                m.env.restarts = 2;
                m.env.lost_replies = 1;
            }
            Kind::Semaphore => {
                m.clients.push(vec![Req::of(2)]);
                m.env.lost_replies = 1;
            }
            Kind::RwLock => {
                m.clients.push(vec![Req::of(1).guard()]);
                m.env.lost_pushes = 1;
            }
        }
        m
    }

    /// The release request's models for the unit run: holders renewed by a watchdog, one that
    /// ignores a request and one that gives the lock back when told, and a request by someone
    /// else at any time. A mutex with a lost reply (a renewal or an acquire sent again); a
    /// semaphore of limit 2 with a third request (it is admitted in the place of a holder that
    /// gave back, while the other holder's request keeps the ask key alive, and must not be
    /// told), clock up to 3; a RwLock writer that gives back when told or downgrades (a new
    /// token, which the request does not follow) and a reader that ignores it, two requests.
    pub fn unit_ask(kind: Kind) -> LockModel {
        let ignores = Req::of(1).watchdog();
        let yields = Req::of(1).watchdog().yields();
        let mut m = match kind {
            Kind::Semaphore => model(kind, 2, vec![vec![ignores], vec![yields], vec![ignores]], 3),
            Kind::RwLock => model(
                kind,
                RW_LIMIT,
                vec![
                    vec![Req::of(RW_LIMIT).watchdog().yields().change()],
                    vec![ignores],
                ],
                4,
            ),
            _ => model(kind, 1, vec![vec![ignores], vec![yields]], 4),
        };
        m.env = match kind {
            Kind::RwLock => Env {
                asks: 2,
                ..Env::default()
            },
            Kind::Semaphore => Env {
                asks: 1,
                ..Env::default()
            },
            _ => Env {
                asks: 1,
                lost_replies: 1,
                ..Env::default()
            },
        };
        m
    }

    /// The release request's models at the deeper bounds of `make model`: [`unit_ask()`] with
    /// a pause (a holder paused past its lease is not asked, and its late renewal is not
    /// told); for the mutex and the RwLock also a lost push, and for the mutex a second
    /// request.
    pub fn deep_ask(kind: Kind) -> LockModel {
        let mut m = unit_ask(kind);
        m.env.pauses = 1;
        if kind != Kind::Semaphore {
            m.env.lost_pushes = 1;
        }
        if !kind.shared() {
            m.env.asks = 2;
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
    let view = abstraction(&state.server, state.now);
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
    for asked in view.asked.values() {
        parts.push(format!("asked {asked:?}"));
    }
    if parts.is_empty() {
        parts.push("nothing held".into());
    }
    if state.ghost.broken != 0 {
        parts.push(format!("broken {:#b}", state.ghost.broken));
    }
    parts.join(", ")
}
