//! The quorum lock's two-round fence (`dlock-core/src/kinds/quorum/mod.rs` and
//! `fence_raise.lua`, issue #46) as a checked model: [`NODES`] independent Redis servers, a
//! majority of them, each with its lock key, its slot's fence counter and its "data since"
//! record, and [`CLIENTS`] quorum clients that take the lock as `QuorumMutex::attempt` does.
//!
//! One attempt: the client asks every node, in any order, for the lock with its fence (the
//! fenced acquire: `acquire.lua` with `next_fence`, one atomic step per node: round 1); when
//! every node has answered and a majority granted, `F` = the largest fence + 1; then round 2
//! (`fence_raise.lua`, one atomic step per node, [`raise`]) on each node that granted; when
//! every node has answered, the attempt is granted if a majority committed `F` and the validity
//! is left (the attempt began less than one TTL ago). A failed attempt gives back every hold it
//! took (owner-checked deletes, in the step that fails it) and the client tries again, up to
//! [`ATTEMPTS`] attempts (one at the unit bounds: an earlier holder's lease on the last node,
//! ending one tick after the start, gives the contention a second attempt would). A granted
//! client holds until its validity ends or it releases.
//!
//! Time is in ticks; the TTL is [`TTL`] ticks. Time may pass between any two steps, so every
//! delay of a client between its calls (a pause, a slow network) is explored. Fences are
//! `max(counter + 1, node time × SCALE)` as `next_fence` floors them at the server's clock,
//! with [`SCALE`] larger than the increments one tick can see.
//!
//! The environment (each at most once, on one node: a minority of three):
//! * **restart** a node empty ([`QuorumModel::restarts`]): its lock key, counter and "data
//!   since" record are gone; every lease it held is forgotten while its holder runs on;
//! * **jump** a node's clock forward by a tick, half a TTL ([`QuorumModel::jumps`]): its
//!   leases end early. Only [`QuorumModel::unit_jump`] has it, and there the checker finds
//!   both [`QUORUM_EXCLUSIVE`] and [`FENCES_RISE`] broken by a jump on **one** node: a holder
//!   granted by exactly a majority has no node to spare, so one node ending its lease early
//!   leaves it a minority while its validity still runs (the trace, in words, on the test
//!   `a_clock_jump_on_one_node_breaks_the_fence_order`). No step of the protocol can see a jump
//!   that comes after it, so this is a limit of Redlock's clock assumption (no node's clock
//!   steps forward), not a bug to fix here: the quorum module's docs state it as such, and the
//!   tests check that the checker reports it (the conformance test replays the trace on three
//!   real servers).
//!
//! Properties ([`QuorumModel::properties`]):
//! * [`FENCES_RISE`] — every grant's fence exceeds every earlier grant's;
//! * [`LOST_DATA_NO_BACK`] — the same, judged on the grants a restarted node took part in: a
//!   node that lost its data never lets a later grant's fence come out at or below an earlier
//!   one (it names the cause where the first property names the effect);
//! * [`QUORUM_EXCLUSIVE`] — never two clients holding a valid grant at once.
//!
//! Reachability ([`REACH_KEPT_OUT`], [`REACH_BACK_IN`], [`REACH_JUMP_LOST`]): a restarted node
//! was kept out of a round 2, a restarted node later committed a fence (it came back after its
//! TTL), a jumped node's lease ended under a client's round 2.
//!
//! Not modelled: lost replies and the per-node timeout (a timed-out acquire counts as refused
//! and is released in the background: here the step simply has not run yet), the watchdog's
//! extension of a grant, the drift term of the validity (one clock rate here, apart from the
//! jump), a cluster's per-slot record.

use stateright::{Checker, Expectation, Model, Property};

/// The servers.
pub const NODES: usize = 3;
/// How many must agree.
pub const MAJORITY: usize = NODES / 2 + 1;
/// The quorum clients.
pub const CLIENTS: usize = 2;
/// Attempts per client.
pub const ATTEMPTS: u8 = 1;
/// The lease, in ticks (every client uses the same, as the keep-out requires).
pub const TTL: u8 = 2;
/// Fence units per tick (`next_fence` floors at the server's clock in µs).
pub const SCALE: u16 = 10;
/// The first tick: every node's data is older than one TTL then.
pub const START: u8 = TTL;

/// `fences rise in grant order across the quorum`.
pub const FENCES_RISE: &str = "quorum fences rise in grant order";
/// `a node that lost its data cannot make a fence go back`.
pub const LOST_DATA_NO_BACK: &str = "a node that lost its data cannot make a fence go back";
/// Never two valid grants at once.
pub const QUORUM_EXCLUSIVE: &str = "quorum exclusive";
/// A restarted node was kept out by round 2.
pub const REACH_KEPT_OUT: &str = "a restarted node was kept out";
/// A restarted node committed a fence again, after its keep-out.
pub const REACH_BACK_IN: &str = "a restarted node counts again";
/// A node's clock jump ended a lease before the client's round 2 there.
pub const REACH_JUMP_LOST: &str = "a jumped node lost a lease before round 2";

/// One protocol bug (its doc names the property that catches it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuorumMutant {
    /// fence_raise.lua without its "data since" check: a node restarted empty counts at once,
    /// while the lease it forgot still runs. Caught by [`QUORUM_EXCLUSIVE`] and
    /// [`LOST_DATA_NO_BACK`] (at [`QuorumModel::unit_restart`]).
    RaiseSkipsDataSince,
    /// The client counts a node that answered "kept out" ({2, ms}) as committed (the reply
    /// decoded as success). Caught by [`QUORUM_EXCLUSIVE`] (at [`QuorumModel::unit_restart`]).
    KeptOutCounted,
    /// The client grants without the validity check: an attempt whose leases may have run out
    /// (its client paused between the rounds) is granted after a later one, with a smaller
    /// fence. Caught by [`FENCES_RISE`] (at [`QuorumModel::unit_restart`]).
    ValidityUnchecked,
}

impl QuorumMutant {
    /// Every mutant.
    pub const ALL: [QuorumMutant; 3] = [
        QuorumMutant::RaiseSkipsDataSince,
        QuorumMutant::KeptOutCounted,
        QuorumMutant::ValidityUnchecked,
    ];

    /// The properties that must each catch it, and the bound they do it at.
    pub fn cases(self) -> (Vec<&'static str>, QuorumModel) {
        match self {
            QuorumMutant::RaiseSkipsDataSince => (
                vec![QUORUM_EXCLUSIVE, LOST_DATA_NO_BACK],
                QuorumModel::unit_restart(Some(self)),
            ),
            QuorumMutant::KeptOutCounted => (
                vec![QUORUM_EXCLUSIVE],
                QuorumModel::unit_restart(Some(self)),
            ),
            QuorumMutant::ValidityUnchecked => {
                (vec![FENCES_RISE], QuorumModel::unit_restart(Some(self)))
            }
        }
    }

    /// The mutation check: each property [`QuorumMutant::cases`] names is broken with the
    /// mutant applied (the same bound without it keeps them: the unit tests).
    ///
    /// # Errors
    /// Names the property that held, and what was broken instead.
    pub fn caught(self) -> Result<(), String> {
        let (named, model) = self.cases();
        let checker = model.clone().checker().spawn_bfs().join();
        let broken: Vec<&str> = model
            .must_hold()
            .into_iter()
            .filter(|name| checker.discovery(name).is_some())
            .collect();
        match named.iter().find(|p| !broken.contains(p)) {
            Some(missed) => Err(format!("{self:?}: `{missed}` held; broken {broken:?}")),
            None => Ok(()),
        }
    }
}

/// One server's state for the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    /// The lock key: (owner token, expiry in this node's time).
    pub lock: Option<(u8, u8)>,
    /// The slot's fence counter (0: missing).
    pub counter: u16,
    /// The "data since" record, in this node's time.
    pub since: Option<u8>,
    /// How far this node's clock is ahead of the true time.
    pub ahead: u8,
    /// Ghost: restarted empty.
    pub restarted: bool,
}

impl Node {
    /// This node's clock at true time `now`.
    pub fn time(&self, now: u8) -> u8 {
        now + self.ahead
    }

    /// The holder of a live lease at true time `now`.
    pub fn holder(&self, now: u8) -> Option<u8> {
        self.lock
            .filter(|&(_, expiry)| expiry > self.time(now))
            .map(|(token, _)| token)
    }
}

/// What one node said to a client's attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Answer {
    /// Not asked yet (in this round).
    Pending,
    /// Round 1 refused (held by another).
    Refused,
    /// Round 1 granted with this fence; round 2 not answered yet.
    Fenced(u16),
    /// Round 2 committed `F` here.
    Committed,
    /// Round 2 failed here (kept out, lease gone, another owner): the hold is given back.
    Out,
}

/// A client's attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Round 1: asking every node.
    Acquiring,
    /// Round 2 with the quorum fence `F`.
    Raising(u16),
    /// Granted with this fence, until its validity ends.
    Holding(u16),
    /// Gave the lock back, or ran out of attempts.
    Done,
}

/// A quorum client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    /// Its attempt.
    pub phase: Phase,
    /// The attempt's owner token (one per attempt).
    pub token: u8,
    /// When the attempt began.
    pub started: u8,
    /// Attempts begun.
    pub attempts: u8,
    /// Each node's answer in this attempt.
    pub answers: [Answer; NODES],
}

impl Client {
    fn valid(&self, now: u8) -> bool {
        matches!(self.phase, Phase::Holding(_)) && now < self.started + TTL
    }
}

/// The model's state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct QuorumState {
    /// The true time, in ticks.
    pub now: u8,
    /// The servers.
    pub nodes: [Node; NODES],
    /// The clients.
    pub clients: [Client; CLIENTS],
    /// The last token handed out.
    pub tokens: u8,
    /// Restarts so far.
    pub restarts: u8,
    /// Clock jumps so far.
    pub jumps: u8,
    // Ghosts, for the properties.
    /// The largest fence granted so far.
    pub top: u16,
    /// A grant's fence was at or below an earlier grant's.
    pub back: bool,
    /// ... and a restarted node had committed it.
    pub back_by_lost_data: bool,
    /// A restarted node answered "kept out".
    pub kept_out: bool,
    /// A restarted node committed a fence.
    pub back_in: bool,
    /// A round 2 found its lease gone (or another's) on a jumped node.
    pub jump_lost: bool,
}

/// One step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuorumAction {
    /// Time passes.
    Tick,
    /// Round 1 on a node: the fenced acquire (client, node).
    Acquire(usize, usize),
    /// Round 2 on a node: fence_raise.lua (client, node).
    Raise(usize, usize),
    /// A holder gives the lock back (owner-checked, on every node).
    Release(usize),
    /// A client whose attempt failed tries again.
    Retry(usize),
    /// A node restarts empty.
    Restart(usize),
    /// A node's clock jumps one tick forward.
    Jump(usize),
}

/// fence_raise.lua's reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Raised {
    /// 1: the counter is at least F.
    Raised,
    /// {2, ms}: the node's data is younger than one TTL.
    KeptOut,
    /// 0: nobody holds the lock.
    Gone,
    /// -1: another owner holds it.
    Other,
}

/// fence_raise.lua on `node` at true time `now`, for `token` and the quorum fence `fence`
/// (`mutant` may drop one of its checks).
pub fn raise(
    node: &mut Node,
    now: u8,
    token: u8,
    fence: u16,
    mutant: Option<QuorumMutant>,
) -> Raised {
    let time = node.time(now);
    match node.holder(now) {
        None => return Raised::Gone,
        Some(holder) if holder != token => return Raised::Other,
        Some(_) => {}
    }
    if mutant != Some(QuorumMutant::RaiseSkipsDataSince) {
        let since = match node.since {
            Some(since) if since <= time => since,
            _ => {
                node.since = Some(time);
                time
            }
        };
        if since + TTL > time {
            return Raised::KeptOut;
        }
    }
    node.counter = node.counter.max(fence);
    Raised::Raised
}

/// The fenced acquire on `node`: the lock for `token` if no live lease holds it, with the fence
/// `next_fence` issues.
fn acquire(node: &mut Node, now: u8, token: u8) -> Option<u16> {
    if node.holder(now).is_some() {
        return None;
    }
    let time = node.time(now);
    node.lock = Some((token, time + TTL));
    node.counter = (node.counter + 1).max(u16::from(time) * SCALE);
    Some(node.counter)
}

/// The model: the protocol (or one mutant), the environment's budget and the time bound.
#[derive(Clone, Debug)]
pub struct QuorumModel {
    /// The bug applied, if any.
    pub mutant: Option<QuorumMutant>,
    /// Restarts allowed (each empties one node).
    pub restarts: u8,
    /// Clock jumps allowed.
    pub jumps: u8,
    /// The last tick explored.
    pub until: u8,
    /// Attempts per client ([`ATTEMPTS`] at the unit bounds; the conformance test's walks
    /// take more).
    pub attempts: u8,
}

impl QuorumModel {
    /// The unit bound with a node restarted empty: 2 clients, one attempt each, ticks
    /// [`START`] to `START + 2`.
    pub fn unit_restart(mutant: Option<QuorumMutant>) -> Self {
        Self {
            mutant,
            restarts: 1,
            jumps: 0,
            until: START + 2,
            attempts: ATTEMPTS,
        }
    }

    /// The bound with a node's clock jumping forward (no restart): outside the protocol's
    /// assumption, its checker finds the fence order broken (see the module docs).
    pub fn unit_jump(mutant: Option<QuorumMutant>) -> Self {
        Self {
            restarts: 0,
            jumps: 1,
            ..Self::unit_restart(mutant)
        }
    }

    /// The first state (the checker's only one): what the conformance test sets up on the
    /// real servers before a walk.
    pub fn first(&self) -> QuorumState {
        let mut states = self.init_states();
        states.swap_remove(0)
    }

    /// The steps enabled in `s` (the checker's choices), for a lockstep driver.
    pub fn enabled(&self, s: &QuorumState) -> Vec<QuorumAction> {
        let mut out = Vec::new();
        self.actions(s, &mut out);
        out
    }

    /// `s` after `action`, as the checker takes it (`None`: not a step of `s`).
    pub fn step(&self, s: &QuorumState, action: QuorumAction) -> Option<QuorumState> {
        self.next_state(s, action)
    }

    fn is(&self, mutant: QuorumMutant) -> bool {
        self.mutant == Some(mutant)
    }

    /// The names of the properties that must never be broken (not the reachability checks).
    pub fn must_hold(&self) -> Vec<&'static str> {
        self.properties()
            .iter()
            .filter(|p| p.expectation != Expectation::Sometimes)
            .map(|p| p.name)
            .collect()
    }

    /// The reachability checks this bound must reach (its faults taken with an effect).
    pub fn reachable(&self) -> Vec<&'static str> {
        let mut names = Vec::new();
        if self.restarts > 0 {
            names.extend([REACH_KEPT_OUT, REACH_BACK_IN]);
        }
        if self.jumps > 0 {
            names.push(REACH_JUMP_LOST);
        }
        names
    }

    /// A failed attempt: every hold it took given back (owner-checked), the client idle.
    fn fail(s: &mut QuorumState, c: usize) {
        let client = &mut s.clients[c];
        let token = client.token;
        for node in &mut s.nodes {
            if node.lock.is_some_and(|(t, _)| t == token) {
                node.lock = None;
            }
        }
        client.phase = Phase::Done;
    }

    /// Round 1 answered everywhere: into round 2 with `F`, or failed.
    fn after_round1(s: &mut QuorumState, c: usize) {
        let answers = s.clients[c].answers;
        if answers.contains(&Answer::Pending) {
            return;
        }
        let fences: Vec<u16> = answers
            .iter()
            .filter_map(|a| match a {
                Answer::Fenced(f) => Some(*f),
                _ => None,
            })
            .collect();
        match fences.iter().max() {
            Some(top) if fences.len() >= MAJORITY => s.clients[c].phase = Phase::Raising(top + 1),
            _ => Self::fail(s, c),
        }
    }

    /// Round 2 answered everywhere: granted (majority and validity), or failed.
    fn after_round2(&self, s: &mut QuorumState, c: usize, fence: u16) {
        let client = s.clients[c];
        if client
            .answers
            .iter()
            .any(|a| matches!(a, Answer::Fenced(_)))
        {
            return;
        }
        let committed: Vec<usize> = (0..NODES)
            .filter(|&n| client.answers[n] == Answer::Committed)
            .collect();
        let late = s.now >= client.started + TTL && !self.is(QuorumMutant::ValidityUnchecked);
        if committed.len() < MAJORITY || late {
            Self::fail(s, c);
            return;
        }
        if fence <= s.top {
            s.back = true;
            if committed.iter().any(|&n| s.nodes[n].restarted) {
                s.back_by_lost_data = true;
            }
        }
        s.top = s.top.max(fence);
        for n in 0..NODES {
            if client.answers[n] == Answer::Out {
                // Its hold is given back (the guard drops it).
                if s.nodes[n].lock.is_some_and(|(t, _)| t == client.token) {
                    s.nodes[n].lock = None;
                }
            }
        }
        s.clients[c].phase = Phase::Holding(fence);
    }

    fn begin(s: &mut QuorumState, c: usize) {
        s.tokens += 1;
        s.clients[c] = Client {
            phase: Phase::Acquiring,
            token: s.tokens,
            started: s.now,
            attempts: s.clients[c].attempts + 1,
            answers: [Answer::Pending; NODES],
        };
    }
}

impl Model for QuorumModel {
    type State = QuorumState;
    type Action = QuorumAction;

    fn init_states(&self) -> Vec<QuorumState> {
        let node = Node {
            lock: None,
            counter: 0,
            since: Some(0),
            ahead: 0,
            restarted: false,
        };
        let mut s = QuorumState {
            now: START,
            nodes: [node; NODES],
            clients: [Client {
                phase: Phase::Done,
                token: 0,
                started: 0,
                attempts: 0,
                answers: [Answer::Pending; NODES],
            }; CLIENTS],
            tokens: 0,
            restarts: 0,
            jumps: 0,
            top: 0,
            back: false,
            back_by_lost_data: false,
            kept_out: false,
            back_in: false,
            jump_lost: false,
        };
        // An earlier holder's lease on the last node, ending a tick after the start: the
        // clients' first answers there differ with the time they ask (a majority of two, or
        // all three), without a second attempt per client (which multiplies the states).
        s.nodes[NODES - 1].lock = Some((0, START + 1));
        for c in 0..CLIENTS {
            Self::begin(&mut s, c);
        }
        vec![s]
    }

    fn actions(&self, s: &QuorumState, actions: &mut Vec<QuorumAction>) {
        if s.now < self.until {
            actions.push(QuorumAction::Tick);
        }
        for (c, client) in s.clients.iter().enumerate() {
            match client.phase {
                Phase::Acquiring => {
                    for n in 0..NODES {
                        if client.answers[n] == Answer::Pending {
                            actions.push(QuorumAction::Acquire(c, n));
                        }
                    }
                }
                Phase::Raising(_) => {
                    for n in 0..NODES {
                        if matches!(client.answers[n], Answer::Fenced(_)) {
                            actions.push(QuorumAction::Raise(c, n));
                        }
                    }
                }
                Phase::Holding(_) if client.valid(s.now) => {
                    actions.push(QuorumAction::Release(c));
                }
                Phase::Done if client.attempts < self.attempts => {
                    actions.push(QuorumAction::Retry(c));
                }
                _ => {}
            }
        }
        for n in 0..NODES {
            if s.restarts < self.restarts {
                actions.push(QuorumAction::Restart(n));
            }
            if s.jumps < self.jumps {
                actions.push(QuorumAction::Jump(n));
            }
        }
    }

    fn next_state(&self, last: &QuorumState, action: QuorumAction) -> Option<QuorumState> {
        let mut s = last.clone();
        let now = s.now;
        match action {
            QuorumAction::Tick => s.now += 1,
            QuorumAction::Acquire(c, n) => {
                let token = s.clients[c].token;
                s.clients[c].answers[n] = match acquire(&mut s.nodes[n], now, token) {
                    Some(fence) => Answer::Fenced(fence),
                    None => Answer::Refused,
                };
                Self::after_round1(&mut s, c);
            }
            QuorumAction::Raise(c, n) => {
                let Phase::Raising(fence) = s.clients[c].phase else {
                    return None;
                };
                let token = s.clients[c].token;
                let node = &mut s.nodes[n];
                let reply = raise(node, now, token, fence, self.mutant);
                match reply {
                    Raised::KeptOut if node.restarted => s.kept_out = true,
                    Raised::Raised if node.restarted => s.back_in = true,
                    Raised::Gone | Raised::Other if node.ahead > 0 => s.jump_lost = true,
                    _ => {}
                }
                let counted = reply == Raised::Raised
                    || (reply == Raised::KeptOut && self.is(QuorumMutant::KeptOutCounted));
                s.clients[c].answers[n] = if counted {
                    Answer::Committed
                } else {
                    Answer::Out
                };
                self.after_round2(&mut s, c, fence);
            }
            QuorumAction::Release(c) => Self::fail(&mut s, c),
            QuorumAction::Retry(c) => Self::begin(&mut s, c),
            QuorumAction::Restart(n) => {
                s.restarts += 1;
                let node = &mut s.nodes[n];
                node.lock = None;
                node.counter = 0;
                node.since = None;
                node.restarted = true;
            }
            QuorumAction::Jump(n) => {
                s.jumps += 1;
                s.nodes[n].ahead += 1;
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(FENCES_RISE, |_, s: &QuorumState| !s.back),
            Property::always(LOST_DATA_NO_BACK, |_, s: &QuorumState| !s.back_by_lost_data),
            Property::always(QUORUM_EXCLUSIVE, |_, s: &QuorumState| {
                s.clients.iter().filter(|c| c.valid(s.now)).count() <= 1
            }),
            Property::sometimes(REACH_KEPT_OUT, |_, s: &QuorumState| s.kept_out),
            Property::sometimes(REACH_BACK_IN, |_, s: &QuorumState| s.back_in),
            Property::sometimes(REACH_JUMP_LOST, |_, s: &QuorumState| s.jump_lost),
        ]
    }

    fn within_boundary(&self, s: &QuorumState) -> bool {
        s.now <= self.until
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every property holds at `model`, its faults are reached with an effect, and its unique
    /// states are the README's row `id`.
    fn keeps_every_property(id: &str, model: QuorumModel) {
        let started = std::time::Instant::now();
        let checker = model.clone().checker().spawn_bfs().join();
        for name in model.must_hold() {
            if let Some(path) = checker.discovery(name) {
                panic!("`{name}` broken: {:#?}", path.into_actions());
            }
        }
        for name in model.reachable() {
            assert!(checker.discovery(name).is_some(), "never reached: {name}");
        }
        let unique = checker.unique_state_count();
        println!("{id}: {unique} unique states in {:?}", started.elapsed());
        if let Err(why) = crate::counts::compare(id, unique) {
            panic!("{why}");
        }
    }

    #[test]
    fn a_restarted_node_breaks_no_property() {
        keeps_every_property("unit quorum restart", QuorumModel::unit_restart(None));
    }

    /// A forward jump of half a TTL on ONE node breaks both the exclusion and the fence
    /// order; the checker must find it (the model's jump is not vacuous). Its shortest trace:
    /// 1. tick 2: client 1 takes node 1 (round-1 fence 20);
    /// 2. tick 3: client 0 takes node 2 (the earlier lease there is over, fence 30), client 1
    ///    takes node 0 (30); client 0 is refused on node 0, client 1 on node 2. Client 1's
    ///    round 1 is over: nodes 0 and 1, F = 31;
    /// 3. client 1 commits 31 on node 1 (while it holds node 1: the counter is 31);
    /// 4. node 1's clock jumps a tick: client 1's lease there, due to end at 4, ends now;
    /// 5. client 0 takes node 1 (its fence floors at node 1's clock: 40): round 1 over, nodes 1
    ///    and 2, F = 41; it commits 41 on both and is granted, valid until 4;
    /// 6. client 1 commits 31 on node 0: with node 1 that is a majority, and by its own clock
    ///    its validity runs until 4, so it is granted too — after client 0, with a smaller
    ///    fence, and both grants are valid at once.
    ///
    /// The argument that a later holder's fence is larger needs the earlier holder to hold
    /// every node of its majority while its guard is valid; step 4 takes that away, after the
    /// round 2 on node 1 that could have noticed. A jump after a grant breaks the exclusion
    /// alone (`a_clock_jump_after_a_grant_lets_a_second_holder_in`).
    #[test]
    fn a_clock_jump_on_one_node_breaks_the_fence_order() {
        let checker = QuorumModel::unit_jump(None).checker().spawn_bfs().join();
        assert!(checker.discovery(REACH_JUMP_LOST).is_some());
        assert!(checker.discovery(FENCES_RISE).is_some());
        assert!(checker.discovery(QUORUM_EXCLUSIVE).is_some());
        assert!(checker.discovery(LOST_DATA_NO_BACK).is_none());
    }

    /// Runs `actions` from the first state of `model`; the last state.
    fn replay(model: &QuorumModel, actions: &[QuorumAction]) -> QuorumState {
        actions.iter().fold(model.first(), |s, a| {
            model
                .step(&s, *a)
                .unwrap_or_else(|| panic!("{a:?} is not a step of {s:?}"))
        })
    }

    /// The jump at any time of a hold granted by exactly a majority lets another client in:
    /// client 1 is granted on nodes 0 and 1 (fence 21); a tick later node 1's clock jumps and
    /// ends client 1's lease there while its validity runs; client 0 takes nodes 1 and 2 and is
    /// granted too. Its fence (41) is larger: the fence order holds here, the exclusion not.
    #[test]
    fn a_clock_jump_after_a_grant_lets_a_second_holder_in() {
        use QuorumAction::{Acquire, Jump, Raise, Tick};
        let model = QuorumModel::unit_jump(None);
        let s = replay(
            &model,
            &[
                Acquire(1, 0),
                Acquire(1, 1),
                Acquire(1, 2),
                Raise(1, 0),
                Raise(1, 1),
                Tick,
                Jump(1),
                Acquire(0, 0),
                Acquire(0, 1),
                Acquire(0, 2),
                Raise(0, 1),
                Raise(0, 2),
            ],
        );
        assert_eq!(s.clients[1].phase, Phase::Holding(21));
        assert_eq!(s.clients[0].phase, Phase::Holding(41));
        assert!(s.clients.iter().all(|c| c.valid(s.now)));
        assert!(!s.back);
    }

    #[test]
    fn each_mutant_is_caught_by_its_properties() {
        for mutant in QuorumMutant::ALL {
            if let Err(why) = mutant.caught() {
                panic!("{why}");
            }
        }
    }

    #[test]
    fn a_restarted_node_is_kept_out_for_one_ttl() {
        let mut node = Node {
            lock: Some((1, 10)),
            counter: 0,
            since: None,
            ahead: 0,
            restarted: true,
        };
        assert_eq!(raise(&mut node, 5, 1, 7, None), Raised::KeptOut);
        assert_eq!(node.since, Some(5));
        assert_eq!(raise(&mut node, 6, 1, 7, None), Raised::KeptOut);
        assert_eq!(raise(&mut node, 7, 1, 7, None), Raised::Raised);
        assert_eq!(node.counter, 7);
        assert_eq!(raise(&mut node, 7, 2, 9, None), Raised::Other);
        assert_eq!(raise(&mut node, 12, 1, 9, None), Raised::Gone);
        assert_eq!(node.counter, 7);
    }
}
