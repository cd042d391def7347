//! The checked model: clients with their requests, the environment, and the server's steps
//! ([`crate::apply`]) under them, as a stateright [`Model`]. The properties are in
//! `properties.rs`; what a client does with each reply is in `client.rs`.

use stateright::{Model, Property};

use crate::client;
use crate::mutant::Mutant;
use crate::properties;
use crate::properties::{ASK_TOLD, ASK_YIELDED, GUARDED_REFUSED, KEPT_REFUSED};
use crate::reach::{
    REACH_CRASH, REACH_LOST_PUSH, REACH_LOST_REPLY, REACH_OBSERVER_FILTERED, REACH_PAUSE,
    REACH_RESTART_LOST, REACH_RESTART_STALE,
};
use crate::server::{
    ExtendItem, Key, Mode, Ms, Op, RW_LIMIT, ReleaseHow, Reply, Server, Token, abstraction,
};
pub use crate::state::{
    Action, Client, Env, Ghost, Held, Kind, LEASE, LockModel, Observer, Phase, Req, State,
};
use crate::step::apply;
use crate::{native, reach, rules};

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
        state.ghost.lost_grant &= !(1 << c);
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
                // The entries queued when the `SET` ran (for `queue head first`).
                let ahead: Vec<(u8, Token)> = state
                    .server
                    .data
                    .queues
                    .get(&0)
                    .map(|q| q.iter().map(|e| (e.client, e.token)).collect())
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
            native::release_op(self, token, fence)
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

    /// The limit in force on `server`: an operator's stored limit, or the handles'.
    fn handle_limit(&self, server: &Server) -> u32 {
        match server.data.shared.get(&0).and_then(|l| l.limit) {
            Some((limit, crate::server::Origin::Operator)) => limit,
            _ if self.kind == Kind::RwLock => RW_LIMIT,
            _ => self.limit,
        }
    }

    /// The `sometimes` checks this model must discover: one per fault its environment injects
    /// (taken with an effect: `reach.rs`), and the examples its requests call for (a stale
    /// guarded write refused, a renewal answered "asked", a holder that gave the lock back, a
    /// newcomer refused by a kept key). tests/check.rs and tests/deep.rs fail without them.
    pub fn reachable(&self) -> Vec<&'static str> {
        let env = self.env;
        let reqs = || self.clients.iter().flatten();
        let mut out = Vec::new();
        let mut want = |yes: bool, name| {
            if yes {
                out.push(name);
            }
        };
        want(env.pauses > 0, REACH_PAUSE);
        want(env.lost_replies > 0, REACH_LOST_REPLY);
        want(env.lost_pushes > 0, REACH_LOST_PUSH);
        want(env.crashes > 0, REACH_CRASH);
        want(env.restarts > 0, REACH_RESTART_LOST);
        want(env.restarts > 0, REACH_RESTART_STALE);
        want(env.reads > 0 && env.restarts > 0, REACH_OBSERVER_FILTERED);
        // Guarded writes by holders that a pause or a restart can make stale: some must be
        // refused, or `guarded write by the holder` holds vacuously.
        let stale = env.pauses > 0 || env.restarts > 0;
        want(reqs().any(|r| r.guard) && stale, GUARDED_REFUSED);
        // Release requests to holders that renew: some renewal must answer "asked", and a holder
        // that yields must give the lock back.
        let asked = env.asks > 0 && reqs().any(|r| r.watchdog);
        want(asked, ASK_TOLD);
        want(asked && reqs().any(|r| r.yields), ASK_YIELDED);
        // A mutex with three requests or more: some newcomer must meet a key kept for a waiter.
        want(
            self.kind == Kind::Mutex && reqs().count() >= 3,
            KEPT_REFUSED,
        );
        out.extend(native::reachable(self));
        out
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
                    away_since_ask: false,
                    fallback: false,
                    lose_next: false,
                }
            })
            .collect();
        let limit = self.handle_limit(&server);
        vec![State {
            now: 0,
            server,
            clients,
            pushes: Vec::new(),
            budget: self.env,
            observer: Observer::default(),
            ghost: Ghost {
                limit,
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
                Phase::InFlight { .. } => actions.push(Action::Receive(c)),
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
        if state.budget.reads > 0 {
            actions.push(Action::Observe);
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
        if state.budget.lost_replies > 0 {
            // Any client's step that sends a call may lose that call's reply.
            let lossy: Vec<Action> = actions
                .iter()
                .filter_map(|a| {
                    let c = self.sender(state, a)?;
                    Some(Action::LoseReply(c, Box::new(a.clone())))
                })
                .collect();
            actions.extend(lossy);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut state = last.clone();
        state.ghost.events = 0;
        if let Action::LoseReply(c, inner) = action {
            // The first call the step sends loses its reply (client.rs `send`); a step that
            // sends none is no such step.
            state.clients[usize::from(c)].lose_next = true;
            self.act(&mut state, *inner);
            if state.clients[usize::from(c)].lose_next {
                return None;
            }
        } else {
            self.act(&mut state, action);
        }
        properties::observe_kept(&mut state);
        state.ghost.sends = 0;
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut all = properties::all();
        all.extend(rules::all());
        all.extend(reach::all());
        all.extend(native::all());
        all
    }
}

impl LockModel {
    /// The client whose call `action` may send (a client's own step, or a push that makes its
    /// waiter ask again).
    fn sender(&self, state: &State, action: &Action) -> Option<u8> {
        match *action {
            Action::Start(c)
            | Action::Receive(c)
            | Action::Retry(c)
            | Action::GiveUp(c)
            | Action::Cancel(c)
            | Action::Release(c)
            | Action::Extend(c)
            | Action::Change(c)
            | Action::Guard(c) => Some(c),
            Action::Deliver(i) => state.pushes.get(i).map(|p| p.client),
            _ => None,
        }
    }

    /// Takes one step of the system.
    fn act(&self, state: &mut State, action: Action) {
        match action {
            Action::Start(c) => self.start(state, c),
            Action::Receive(c) => client::receive(self, state, c),
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
                client::attempt(self, state, c, mode);
            }
            Action::GiveUp(c) => client::attempt(self, state, c, Mode::Last),
            Action::Cancel(c) => self.cancel(state, c),
            Action::Release(c) => self.release(state, c),
            Action::Extend(c) => self.extend(state, c),
            Action::Change(c) => self.change(state, c),
            Action::Guard(c) => self.guard(state, c),
            Action::Deliver(i) => {
                let push = state.pushes.remove(i);
                client::deliver(self, state, push);
            }
            Action::LosePush(i) => {
                let push = state.pushes.remove(i);
                state.budget.lost_pushes -= 1;
                let client = &state.clients[usize::from(push.client)];
                let current = client.started > 0
                    && push.token == LockModel::token(push.client, client.started - 1);
                if push.grant.is_some() && current {
                    state.ghost.lost_grant |= 1 << push.client;
                }
            }
            Action::LoseReply(_, inner) => self.act(state, *inner),
            Action::Tick => {
                properties::observe_tick(self, state);
                reach::observe_tick(state);
                state.now += 1;
            }
            Action::Pause(c) => {
                state.budget.pauses -= 1;
                let client = &mut state.clients[usize::from(c)];
                client.paused = true;
                client.stale = true;
                client.away_since_ask = true;
            }
            Action::Resume(c) => {
                state.clients[usize::from(c)].paused = false;
                reach::observe_resume(state, c);
            }
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
                properties::observe_step(self, state, &before, &op, &reply);
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
                properties::observe_step(self, state, &before, &op, &reply);
            }
            Action::Observe => {
                state.budget.reads -= 1;
                let before = state.server.clone();
                let reply = apply(&mut state.server, state.now, Op::ElectionRead { name: 0 });
                rules::observe_read(self, state, &before, &reply);
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
                properties::observe_lost_data(state);
                state.ghost.read_max = 0;
            }
            Action::Restart(from_replica) => {
                state.budget.restarts -= 1;
                // A restart or failover takes time: the clock moves past every fence issued
                // before it (common.lua next_fence's floor argument).
                state.now += 1;
                let mut kept = state.server.clone();
                kept.expire(state.now);
                apply(&mut state.server, state.now, Op::Restart { from_replica });
                properties::observe_lost_data(state);
                reach::observe_restart(state, &kept.data);
                // The limit in force is what the server now stores by an operator, or else the
                // handles' (an operator's limit lost with the data is an assumption: no
                // durability); reads may show older leaders again.
                state.ghost.limit = self.handle_limit(&state.server);
                state.ghost.read_max = 0;
                // Every connection dropped: a waiter retries right after a disconnect (wait.rs).
                // Until it has, the key kept for it may be gone (it expired during the
                // failover, or was lost with the data): a newcomer may overtake it.
                let now = state.now;
                for client in &mut state.clients {
                    if let Phase::Waiting { timer, .. } = &mut client.phase {
                        *timer = now;
                    }
                    client.away_since_ask = true;
                }
            }
        }
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
pub mod bounds;

/// The verdict of a finished check of `checker`'s model (no mutant): `Err` with the shortest
/// trace of the first property broken, or naming a reachability check the model requires
/// ([`LockModel::reachable`]) that was not reached. [`EXCLUSIVE_AS_SEEN`](crate::EXCLUSIVE_AS_SEEN)
/// is expected to be broken wherever pauses are on and the kind is exclusive (README's
/// "What dlock does not promise": a paused holder outliving its lease), and its absence there
/// is an error too: the checker would be vacuous.
///
/// # Errors
/// As above.
pub fn verdict(checker: &impl stateright::Checker<LockModel>) -> Result<(), String> {
    let model = checker.model();
    let kind = model.kind;
    let paused = model.env.pauses > 0 && !kind.shared();
    let reachable = model.reachable();
    for property in model.properties() {
        let name = property.name;
        let found = checker.discovery(name);
        if property.expectation == stateright::Expectation::Sometimes {
            if reachable.contains(&name) && found.is_none() {
                return Err(format!(
                    "{kind:?}: `{name}` not reached: the properties it stands for hold vacuously"
                ));
            }
        } else if name == crate::EXCLUSIVE_AS_SEEN && paused {
            if found.is_none() {
                return Err(format!(
                    "{kind:?}: a paused holder outliving its lease was not reported: the \
                     checker is vacuous"
                ));
            }
        } else if let Some(path) = found {
            return Err(format!("{kind:?}: `{name}` broken:\n{}", trace(path)));
        }
    }
    Ok(())
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
