//! The quorum lock's two-round fence (`fence_raise.lua`, issue 46) held to its model
//! (`dlock_model::quorum`) on three real `redis-server`s, each with a movable clock.
//!
//! The model's steps are driven on both sides in lockstep: round 1 on a node is the fenced
//! acquire the quorum client sends there (`SET NX PX GET` and `fence.lua` in one `MULTI`: the
//! floor at the server clock that the model's fence follows), round 2 is `fence_raise.lua`, a
//! failed attempt and a release give the holds back with `release.lua` (owner-checked, as the
//! node guards do); a restart empties one server (`RedisServer::restart`: its keys gone, its
//! clock kept), a jump moves one server's clock a tick ahead, a tick moves every clock. A tick
//! is [`UNIT`] ms (and 2 ms, so that no deadline is met exactly), far longer than a walk runs,
//! so only the driver moves time across a deadline. Beside the model's steps: a round 2 sent
//! again (its reply lost: it must raise nothing more) and a data-since record ahead of the
//! node's clock (the clock went back after it was written).
//!
//! After every step the two sides are compared (`Both::compare`): each reply (granted or
//! refused; raised, kept out for so many ticks, lease gone, another owner), and per node the
//! live holder and its expiry tick, the data-since record's tick, and the fence counter where
//! its value is the protocol's (a node held by an attempt: the fence it issued that attempt,
//! then at least the quorum fence once raised). Fences are compared by what the protocol
//! decides on, not by value: the model floors at whole ticks, the server at microseconds. The
//! property the fence exists for is judged on the real fences too: a grant whose real quorum
//! fence is not above every earlier grant's must be one whose model fence went back as well.
//!
//! Fixed scenarios reach the hard states (`quorum/scenarios.rs`), then pseudo-random walks
//! over the model's enabled steps (a fixed seed: the same walks every run).

mod scenarios;

use std::time::Duration;

use dlock_core::__private::conformance::{
    KeyKind, RaiseAnswer, Source, fence_counter, lock_key, lock_value, quorum_since, raise_answer,
};
use dlock_model::quorum::{
    Answer as Said, CLIENTS, NODES, Phase, QuorumAction as Action, QuorumModel, QuorumState,
    Raised, START, TTL, raise,
};
use dlock_testkit::{RedisNodes, ServerOptions};
use redis::Value;

use crate::coverage::Phase as Counted;
use crate::redis_side::{Answer, Real, UNIT};

const PREFIX: &str = "cq:";
const NAME: &str = "q";
/// `<host>\x1f<pid>` of every lock value written here.
const HOLDER: &str = "conform\x1f1";
const TTL_MS: u64 = TTL as u64 * UNIT;

/// One step of a walk or a scenario.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Step {
    /// A step of the model.
    Model(Action),
    /// Client `.0`'s round 2 on node `.1` sent again (the reply of the first was lost): the
    /// counter is at least the quorum fence already.
    Resend(usize, usize),
    /// Node `.0`'s data-since record a tick ahead of its clock (the clock went back after the
    /// record was written).
    SinceAhead(usize),
}

/// What a run covered.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Seen {
    /// Steps compared.
    pub steps: usize,
    /// Scenarios and walks run.
    pub cases: usize,
    kept_out: usize,
    gone: usize,
    other: usize,
    resent: usize,
    grants: usize,
    restarts: usize,
}

impl Seen {
    fn add(&mut self, other: Seen) {
        self.steps += other.steps;
        self.cases += other.cases;
        self.kept_out += other.kept_out;
        self.gone += other.gone;
        self.other += other.other;
        self.resent += other.resent;
        self.grants += other.grants;
        self.restarts += other.restarts;
    }
}

/// The three servers and a connection to each.
pub(crate) struct Nodes {
    servers: RedisNodes,
    cons: Vec<redis::Connection>,
}

impl Nodes {
    fn start() -> Result<Self, String> {
        let servers = RedisNodes::start_with(NODES, ServerOptions::new().movable_clock())
            .map_err(|e| format!("redis nodes: {e}"))?;
        let cons = servers
            .nodes()
            .iter()
            .map(|s| s.connection().map_err(|e| format!("connect: {e}")))
            .collect::<Result<_, _>>()?;
        Ok(Self { servers, cons })
    }

    fn query(&mut self, n: usize, cmd: &redis::Cmd) -> Result<Value, String> {
        cmd.query(&mut self.cons[n])
            .map_err(|e| format!("node {n}: {e}"))
    }

    fn eval(
        &mut self,
        n: usize,
        text: &str,
        keys: &[&str],
        args: &[String],
    ) -> Result<Value, String> {
        let mut eval = redis::cmd("EVAL");
        eval.arg(text).arg(keys.len()).arg(keys).arg(args);
        self.query(n, &eval)
    }

    /// Node `n`'s clock in ms.
    fn time_ms(&mut self, n: usize) -> Result<i64, String> {
        let t: (i64, i64) = redis::cmd("TIME")
            .query(&mut self.cons[n])
            .map_err(|e| format!("node {n}: TIME: {e}"))?;
        Ok(t.0 * 1_000 + t.1 / 1_000)
    }

    /// Node `n`'s clock one tick on.
    fn tick(&mut self, n: usize) -> Result<(), String> {
        self.servers.nodes()[n]
            .jump_clock(Duration::from_millis(UNIT + 2))
            .map_err(|e| format!("node {n}: jump_clock: {e}"))
    }

    fn restart(&mut self, n: usize) -> Result<(), String> {
        let server = &mut self.servers.nodes_mut()[n];
        server
            .restart()
            .map_err(|e| format!("node {n}: restart: {e}"))?;
        self.cons[n] = server.connection().map_err(|e| format!("connect: {e}"))?;
        Ok(())
    }
}

/// The real token of a model token (the earlier holder's is 0).
fn token_hex(token: u8) -> String {
    format!("{:032x}", 0xa000 + u32::from(token))
}

fn token_of(value: &str) -> Option<u8> {
    let hex = value.get(..32)?;
    u32::from_str_radix(hex, 16)
        .ok()?
        .checked_sub(0xa000)
        .and_then(|t| u8::try_from(t).ok())
}

fn int(value: &Value) -> Option<i64> {
    match value {
        Value::Int(i) => Some(*i),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

/// The keys of the lock on every node.
struct Keys {
    lock: String,
    counter: String,
    since: String,
}

fn keys() -> Result<Keys, String> {
    Ok(Keys {
        lock: lock_key(KeyKind::Mutex, PREFIX, NAME).ok_or("bad name")?,
        counter: fence_counter(PREFIX, NAME).ok_or("bad name")?,
        since: quorum_since(PREFIX, NAME).ok_or("bad name")?,
    })
}

/// Both sides of one case.
struct Both<'r> {
    real: &'r mut Real,
    nodes: &'r mut Nodes,
    keys: Keys,
    model: QuorumModel,
    state: QuorumState,
    /// Each node's clock in ms at tick 0 of its own time.
    bases: [i64; NODES],
    /// The real round-1 fences of each client's attempt, per node.
    fences: [[Option<i64>; NODES]; CLIENTS],
    /// Each client's real quorum fence (round 2 on).
    quorum: [Option<i64>; CLIENTS],
    /// The largest real quorum fence granted so far.
    top: i64,
    /// A real grant's quorum fence was at or below an earlier one's.
    back: bool,
    seen: Seen,
}

impl<'r> Both<'r> {
    /// The model's first state on both sides: every node empty but for its data-since record
    /// (old enough to count) and, on the last node, an earlier holder's lease of one tick.
    fn start(real: &'r mut Real, nodes: &'r mut Nodes, model: QuorumModel) -> Result<Self, String> {
        let state = model.first();
        let keys = keys()?;
        let mut bases = [0; NODES];
        for (n, base) in bases.iter_mut().enumerate() {
            nodes.query(n, &redis::cmd("FLUSHALL"))?;
            *base = nodes.time_ms(n)? - i64::from(START) * UNIT as i64;
            let node = state.nodes[n];
            if let Some(since) = node.since {
                let at = *base + i64::from(since) * UNIT as i64;
                nodes.query(n, redis::cmd("SET").arg(&keys.since).arg(at))?;
            }
            if let Some((token, expiry)) = node.lock {
                let value = lock_value(&token_hex(token), HOLDER, "").ok_or("token")?;
                let ms = u64::from(expiry - state.now) * UNIT;
                nodes.query(
                    n,
                    redis::cmd("SET")
                        .arg(&keys.lock)
                        .arg(value)
                        .arg("PX")
                        .arg(ms),
                )?;
            }
        }
        let mut both = Self {
            real,
            nodes,
            keys,
            model,
            state,
            bases,
            fences: [[None; NODES]; CLIENTS],
            quorum: [None; CLIENTS],
            top: 0,
            back: false,
            seen: Seen {
                cases: 1,
                ..Seen::default()
            },
        };
        both.compare()?;
        Ok(both)
    }

    /// The steps, each compared; the first difference names its step.
    fn run(&mut self, steps: &[Step]) -> Result<(), String> {
        for (i, step) in steps.iter().enumerate() {
            self.step(*step)
                .map_err(|e| format!("at step {} ({step:?}): {e}", i + 1))?;
        }
        Ok(())
    }

    fn step(&mut self, step: Step) -> Result<(), String> {
        self.seen.steps += 1;
        match step {
            Step::Model(action) => {
                let after = self
                    .model
                    .step(&self.state, action)
                    .ok_or("not a step of the model's state")?;
                let before = std::mem::replace(&mut self.state, after);
                self.act(action, &before)?;
            }
            Step::Resend(c, n) => self.resend(c, n)?,
            Step::SinceAhead(n) => {
                let node = &mut self.state.nodes[n];
                let ahead = node.time(self.state.now) + 1;
                node.since = Some(ahead);
                let at = self.bases[n] + i64::from(ahead) * UNIT as i64;
                self.nodes
                    .query(n, redis::cmd("SET").arg(&self.keys.since).arg(at))?;
            }
        }
        self.compare()
    }

    /// The real side of the model's `action`, taken from `before`.
    fn act(&mut self, action: Action, before: &QuorumState) -> Result<(), String> {
        match action {
            Action::Tick => {
                for n in 0..NODES {
                    self.nodes.tick(n)?;
                }
            }
            Action::Jump(n) => self.nodes.tick(n)?,
            Action::Restart(n) => {
                self.seen.restarts += 1;
                self.nodes.restart(n)?;
            }
            Action::Retry(c) => {
                self.fences[c] = [None; NODES];
                self.quorum[c] = None;
            }
            Action::Acquire(c, n) => self.acquire(c, n, before)?,
            Action::Raise(c, n) => self.raise(c, n, before)?,
            Action::Release(c) => {
                let client = before.clients[c];
                for (n, node) in before.nodes.iter().enumerate() {
                    if client.answers[n] == Said::Committed {
                        self.release(n, client.token, node.holder(before.now))?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Round 1 on node `n`: the client's fenced `MULTI`.
    fn acquire(&mut self, c: usize, n: usize, before: &QuorumState) -> Result<(), String> {
        let token = before.clients[c].token;
        let value = lock_value(&token_hex(token), HOLDER, "").ok_or("token")?;
        let mut pipe = redis::pipe();
        pipe.atomic();
        pipe.cmd("SET")
            .arg(&self.keys.lock)
            .arg(value)
            .arg("NX")
            .arg("PX")
            .arg(TTL_MS)
            .arg("GET");
        pipe.cmd("EVAL")
            .arg(self.real.text(Source::Fence)?)
            .arg(1)
            .arg(&self.keys.lock)
            .arg(token_hex(token))
            .arg(&self.keys.counter);
        let replies: Vec<Value> = pipe
            .query(&mut self.nodes.cons[n])
            .map_err(|e| format!("node {n}: acquire: {e}"))?;
        let taken = match replies.as_slice() {
            [Value::Nil, fence] => Some(
                int(fence)
                    .filter(|f| *f > 0)
                    .ok_or_else(|| format!("node {n}: taken, but fence.lua answered {fence:?}"))?,
            ),
            [_, _] => None,
            other => return Err(format!("node {n}: acquire answered {other:?}")),
        };
        let said = self.state.clients[c].answers[n];
        match (said, taken) {
            (Said::Fenced(_), Some(fence)) => self.fences[c][n] = Some(fence),
            (Said::Refused, None) => {}
            (said, taken) => {
                return Err(format!(
                    "node {n}: the model says {said:?}, the server's fence {taken:?}"
                ));
            }
        }
        self.after_answer(c, n, before)
    }

    /// Round 2 on node `n`: fence_raise.lua, its reply compared with the model's.
    fn raise(&mut self, c: usize, n: usize, before: &QuorumState) -> Result<(), String> {
        let Phase::Raising(fence) = before.clients[c].phase else {
            return Err("round 2 outside round 2".into());
        };
        let token = before.clients[c].token;
        let expected = raise(&mut before.nodes[n].clone(), before.now, token, fence, None);
        self.compare_raise(c, n, expected)?;
        self.after_answer(c, n, before)
    }

    /// Sends client `c`'s round 2 on node `n` and compares its reply with `expected`.
    fn compare_raise(&mut self, c: usize, n: usize, expected: Raised) -> Result<(), String> {
        let token = self.state.clients[c].token;
        let quorum = self.quorum[c].ok_or("no real quorum fence")?;
        let k = &self.keys;
        let keys = [k.lock.as_str()];
        let args = [
            token_hex(token),
            k.counter.clone(),
            quorum.to_string(),
            k.since.clone(),
            TTL_MS.to_string(),
        ];
        let server = &self.nodes.servers.nodes()[n];
        let con = &mut self.nodes.cons[n];
        let answer: Answer = self
            .real
            .call_at((server, con), Source::FenceRaise, &keys, &args)?;
        let reply = answer.map_err(|(code, detail)| format!("node {n}: {code} {detail}"))?;
        let got = raise_answer(&reply).ok_or_else(|| format!("node {n}: undecodable {reply:?}"))?;
        let node = self.state.nodes[n];
        let same = match (expected, got) {
            (Raised::Raised, RaiseAnswer::Raised) => true,
            (Raised::Gone, RaiseAnswer::Gone) => {
                self.seen.gone += 1;
                true
            }
            (Raised::Other, RaiseAnswer::Other) => {
                self.seen.other += 1;
                true
            }
            (Raised::KeptOut, RaiseAnswer::KeptOut(left)) => {
                self.seen.kept_out += 1;
                // The ticks left by the model's record, the ms left by the server's.
                let ticks = node
                    .since
                    .map(|s| i64::from(s) + i64::from(TTL) - i64::from(node.time(self.state.now)));
                let real = (left.as_millis() as i64 + UNIT as i64 - 1) / UNIT as i64;
                ticks == Some(real)
            }
            _ => false,
        };
        if same {
            Ok(())
        } else {
            Err(format!(
                "node {n}: round 2 answered {got:?}, the model's {expected:?}"
            ))
        }
    }

    /// A round 2 sent again: the model's is the same step once more (no client state changes).
    fn resend(&mut self, c: usize, n: usize) -> Result<(), String> {
        let client = self.state.clients[c];
        let (Phase::Raising(fence) | Phase::Holding(fence)) = client.phase else {
            return Err("a resend without a quorum fence".into());
        };
        let now = self.state.now;
        let expected = raise(&mut self.state.nodes[n], now, client.token, fence, None);
        self.seen.resent += 1;
        self.compare_raise(c, n, expected)
    }

    /// What the client does once node `n` answered: into round 2 with the real quorum fence,
    /// a grant (the holds that did not commit given back), or a failure (every hold given
    /// back). The model takes the answer and the give-backs in one step.
    fn after_answer(&mut self, c: usize, n: usize, before: &QuorumState) -> Result<(), String> {
        let was = before.clients[c].phase;
        let client = self.state.clients[c];
        // Who holds each node once the answer's own script ran (an acquire may have taken `n`).
        let mut holders = before.nodes.map(|node| node.holder(before.now));
        if matches!(client.answers[n], Said::Fenced(_)) {
            holders[n] = Some(client.token);
        }
        match (was, client.phase) {
            (Phase::Acquiring, Phase::Raising(_)) => {
                let top = self.fences[c]
                    .iter()
                    .flatten()
                    .max()
                    .ok_or("no real fence")?;
                self.quorum[c] = Some(top + 1);
            }
            (Phase::Raising(fence), Phase::Holding(_)) => {
                self.seen.grants += 1;
                let quorum = self.quorum[c].ok_or("no real quorum fence")?;
                if quorum <= self.top {
                    self.back = true;
                    if !self.state.back {
                        return Err(format!(
                            "a real quorum fence went back ({quorum} after {}), the model's \
                             ({fence}) did not",
                            self.top
                        ));
                    }
                }
                self.top = self.top.max(quorum);
                self.give_back(c, &holders, |said| said == Said::Out)?;
            }
            (Phase::Acquiring | Phase::Raising(_), Phase::Done) => {
                self.give_back(c, &holders, |said| {
                    matches!(said, Said::Fenced(_) | Said::Committed | Said::Out)
                })?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Releases client `c`'s holds on the nodes whose answer `which` picks (as its node guards
    /// drop), each owner-checked; `holders` says who held each node then.
    fn give_back(
        &mut self,
        c: usize,
        holders: &[Option<u8>; NODES],
        which: impl Fn(Said) -> bool,
    ) -> Result<(), String> {
        let client = self.state.clients[c];
        for (n, holder) in holders.iter().enumerate() {
            if which(client.answers[n]) {
                self.release(n, client.token, *holder)?;
            }
        }
        Ok(())
    }

    /// release.lua for `token` on node `n`, which `holder` held: it must say released (1) when
    /// that is `token`, another owner's (-1) when someone else, not held (0) when nobody.
    fn release(&mut self, n: usize, token: u8, holder: Option<u8>) -> Result<(), String> {
        let text = self.real.text(Source::Release)?.to_owned();
        let lock = self.keys.lock.clone();
        let args = [token_hex(token), self.keys.counter.clone()];
        let reply = self.nodes.eval(n, &text, &[&lock], &args)?;
        let expected = match holder {
            Some(t) if t == token => 1,
            Some(_) => -1,
            None => 0,
        };
        match int(&reply) {
            Some(got) if got == expected => Ok(()),
            got => Err(format!(
                "node {n}: release of token {token} answered {got:?}, the model's holder \
                 {holder:?}"
            )),
        }
    }

    /// `ms` of node `n`'s clock as a tick of its own time.
    fn tick_of(&self, n: usize, ms: i64) -> i64 {
        (ms - self.bases[n]).div_euclid(UNIT as i64)
    }

    /// Every node's state on both sides, as the protocol reads it.
    fn compare(&mut self) -> Result<(), String> {
        for n in 0..NODES {
            self.compare_node(n).map_err(|e| format!("node {n}: {e}"))?;
        }
        Ok(())
    }

    fn compare_node(&mut self, n: usize) -> Result<(), String> {
        let s = &self.state;
        let node = s.nodes[n];
        let k = &self.keys;
        let value = self.nodes.query(n, redis::cmd("GET").arg(&k.lock))?;
        let holder = text(&value).map(|v| token_of(&v).ok_or(v)).transpose()?;
        let model_holder = node.holder(s.now);
        if holder != model_holder {
            return Err(format!("held by {holder:?}, the model's {model_holder:?}"));
        }
        if let (Some(_), Some((_, expiry))) = (holder, node.lock) {
            let at = int(&self
                .nodes
                .query(n, redis::cmd("PEXPIRETIME").arg(&k.lock))?);
            let tick = at.map(|ms| self.tick_of(n, ms));
            if tick != Some(i64::from(expiry)) {
                return Err(format!(
                    "the lease ends at tick {tick:?}, the model's {expiry}"
                ));
            }
        }
        let since = self.nodes.query(n, redis::cmd("GET").arg(&k.since))?;
        let since = int(&since).map(|ms| self.tick_of(n, ms));
        if since != node.since.map(i64::from) {
            return Err(format!(
                "data since tick {since:?}, the model's {:?}",
                node.since
            ));
        }
        let counter = int(&self.nodes.query(n, redis::cmd("GET").arg(&k.counter))?);
        if (node.counter == 0) != counter.is_none() {
            return Err(format!("counter {counter:?}, the model's {}", node.counter));
        }
        for (c, client) in s.clients.iter().enumerate() {
            if model_holder != Some(client.token) {
                continue;
            }
            // The node is this attempt's: its counter is what the attempt made it.
            let ok = match (client.answers[n], client.phase) {
                (Said::Fenced(_), _) => counter == self.fences[c][n],
                (Said::Committed, Phase::Raising(_) | Phase::Holding(_)) => {
                    counter >= self.quorum[c]
                }
                _ => true,
            };
            if !ok {
                return Err(format!(
                    "counter {counter:?} under client {c}'s hold (round-1 fence {:?}, quorum \
                     fence {:?}, answer {:?})",
                    self.fences[c][n], self.quorum[c], client.answers[n]
                ));
            }
        }
        Ok(())
    }
}

/// Runs `steps` from the first state of `model` on both sides: what they covered, the model's
/// last state, and whether a real grant's fence went back.
fn case(
    real: &mut Real,
    nodes: &mut Nodes,
    model: QuorumModel,
    steps: &[Step],
) -> Result<(Seen, QuorumState, bool), String> {
    let mut both = Both::start(real, nodes, model)?;
    both.run(steps)?;
    Ok((both.seen, both.state, both.back))
}

/// The walks' bounds: a restart, three attempts per client, four ticks; every fourth walk a
/// clock jump too.
fn walk_model(i: usize) -> QuorumModel {
    QuorumModel {
        mutant: None,
        restarts: 1,
        jumps: u8::from(i % 4 == 3),
        until: START + 4,
        attempts: 3,
    }
}

/// The walks run by default.
const WALKS: usize = 40;
/// The longest walk.
const WALK_STEPS: usize = 40;

/// Walk `i`: steps drawn from a linear congruential generator seeded with 46 and `i`, among
/// the model's enabled steps and the resends; a restart or jump one time in ten.
fn walk(real: &mut Real, nodes: &mut Nodes, i: usize) -> Result<Seen, String> {
    let model = walk_model(i);
    let mut both = Both::start(real, nodes, model.clone())?;
    let mut x: u64 = 46 + 1_000 * i as u64;
    let mut next = |m: usize| {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        ((x >> 33) % m as u64) as usize
    };
    let mut taken = Vec::new();
    for _ in 0..WALK_STEPS {
        let (faults, mut steps): (Vec<Step>, Vec<Step>) = model
            .enabled(&both.state)
            .into_iter()
            .map(Step::Model)
            .partition(|s| matches!(s, Step::Model(Action::Restart(_) | Action::Jump(_))));
        for (c, client) in both.state.clients.iter().enumerate() {
            if matches!(client.phase, Phase::Raising(_) | Phase::Holding(_)) {
                for n in 0..NODES {
                    if client.answers[n] == Said::Committed {
                        steps.push(Step::Resend(c, n));
                    }
                }
            }
        }
        let pool = if faults.is_empty() || (!steps.is_empty() && next(10) != 0) {
            steps
        } else {
            faults
        };
        if pool.is_empty() {
            break;
        }
        let step = pool[next(pool.len())];
        taken.push(step);
        both.step(step).map_err(|e| {
            format!(
                "walk {i} at step {} ({step:?}): {e}\nthe walk: {taken:?}",
                taken.len()
            )
        })?;
    }
    Ok(both.seen)
}

/// The scenarios, then the walks; what they covered. Every kind of round-2 answer, a resend,
/// a restart and a grant must be met, or the comparison is vacuous for it.
pub(crate) fn run(real: &mut Real) -> Result<Seen, String> {
    let mut nodes = Nodes::start()?;
    let mut total = scenarios::run(real, &mut nodes)?;
    real.count_as(Counted::Sequences);
    for i in 0..WALKS {
        total.add(walk(real, &mut nodes, i)?);
    }
    real.count_as(Counted::Fixed);
    let missing: Vec<&str> = [
        ("kept out", total.kept_out),
        ("lease gone", total.gone),
        ("another owner", total.other),
        ("a round 2 sent again", total.resent),
        ("a grant", total.grants),
        ("a restart", total.restarts),
    ]
    .into_iter()
    .filter(|(_, n)| *n == 0)
    .map(|(what, _)| what)
    .collect();
    if !missing.is_empty() {
        return Err(format!("quorum: never met {missing:?}"));
    }
    Ok(total)
}
