//! The at-most-once claim path of dlock-scheduler as a checked model (issue #46): one job with
//! two scheduled occurrences, two replicas that take turns and follow the misfire rule, an
//! operator that asks for a `run_now` and pauses and resumes the job, the job's group slot (a
//! semaphore of one permit, its lease counted by the holder), and an environment that kills
//! replicas (they may restart, with new tokens), stops them for as long as it likes, and loses
//! the replies of claims and request takes. Every Redis step is the [`super::steps`] function
//! of its script, on a [`JobRedis`] at the model's clock (ticks are milliseconds).
//!
//! A replica's run goes as the scheduler's does (`attempt.rs`): claim (`claim.lua`, or
//! `take_request.lua` for a request), record "running" (the end record that makes a claim no
//! longer withdrawable), take the group slot, start the handler while the slot's lease is
//! unexpired by the replica's own clock, finish a tick later and give the slot back. A claim
//! whose reply was lost is withdrawn (`withdraw.lua`) before the replica does anything else,
//! and the occurrence falls back to the misfire rule: tried again while on time, skipped after
//! [`MISS`] ticks. Every replica heartbeats (`heartbeat.lua`) at every tick while it runs, so a
//! killed or stopped one leaves the live set [`LIVENESS`] ticks after its last call. Time
//! passes only when no running replica has a step due, so the bounded-response property is
//! about the protocol, not a replica that idles.
//!
//! Properties and reachability checks: [`super::props`]. Not modelled here: the job's own
//! lock (the overlap guard; the attempt model has it), at-least-once attempts (the attempt
//! model), clock skew between replicas (claim.lua's "too early" path: the step tests), the
//! retention trimming a claim (retention and ledger are larger than this model's runs).

use stateright::{Model, Property};

use super::keys::{JobRedis, Ms, end_record};
use super::props;
use super::steps::{
    ClaimArgs, ClaimReply, TakeRequestArgs, TakeRequestReply, claim, heartbeat, pause, request,
    resume, take_request, withdraw,
};
use super::world::{
    EV_DEAD_TURN, EV_DIED_CLAIMED, EV_MISSED, EV_PAUSED_REFUSED, EV_PAUSED_REQUEST_RAN,
    EV_REQUEUED_RAN, EV_SLOT_LAPSED, EV_SLOT_WAIT, EV_WITHDRAWN,
};
pub use super::world::{
    FIRES, GRACE, Ghost, IDS, LIVENESS, MISS, REPLICAS, Replica, Run, SETTLE, SLOT_LEASE,
    SchedAction, SchedModel, SchedMutant, SchedState, Task, Used,
};

/// How long the `run_now` request list is kept (`request.lua`'s and `withdraw.lua`'s
/// `EXPIRE`), in seconds: the scheduler's day, past any clock the model explores.
const REQUEST_KEEP_SECS: i64 = 86_400;

impl SchedModel {
    /// The unit bounds on turns and deaths: a kill and a stop (the turn holder that died, the
    /// replica that died or stopped between its claim and its run, the misfire, the slot).
    pub fn turns(mutant: Option<SchedMutant>) -> Self {
        Self {
            mutant,
            budget: Used {
                kills: 1,
                stops: 1,
                ..Used::default()
            },
            until: 7,
        }
    }

    /// The unit bounds on requests: a lost reply, a pause and a `run_now` request.
    pub fn requests(mutant: Option<SchedMutant>) -> Self {
        Self {
            mutant,
            budget: Used {
                lost: 1,
                pauses: 1,
                requests: 1,
                ..Used::default()
            },
            until: 6,
        }
    }

    /// The deeper bounds (`make model`): [`SchedModel::requests`] with a kill as well (the
    /// replica that took a request dies). Every fault at once outgrows 20 GB at 7 ticks.
    pub fn deep() -> Self {
        Self {
            budget: Used {
                kills: 1,
                ..Self::requests(None).budget
            },
            ..Self::requests(None)
        }
    }

    /// The reachability checks this model's budgets must reach.
    pub fn reachable(&self) -> Vec<&'static str> {
        let b = self.budget;
        let deaths = b.kills + b.stops > 0;
        props::REACHABLE
            .iter()
            .filter(|(_, event)| match *event {
                EV_DEAD_TURN | EV_MISSED => deaths,
                EV_WITHDRAWN => b.lost > 0,
                EV_REQUEUED_RAN => b.lost > 0 && b.requests > 0,
                EV_DIED_CLAIMED => b.kills > 0,
                EV_PAUSED_REFUSED => b.pauses > 0,
                EV_PAUSED_REQUEST_RAN => b.pauses > 0 && b.requests > 0,
                _ => b.stops > 0,
            })
            .map(|(name, _)| *name)
            .collect()
    }

    pub(crate) fn is(&self, mutant: SchedMutant) -> bool {
        self.mutant == Some(mutant)
    }

    /// The names of the properties that must never be broken (not the reachability checks).
    pub fn must_hold(&self) -> Vec<&'static str> {
        self.properties()
            .iter()
            .filter(|p| p.expectation != stateright::Expectation::Sometimes)
            .map(|p| p.name)
            .collect()
    }

    /// The steps replica `r` has due now.
    fn due(&self, s: &SchedState, r: usize, out: &mut Vec<SchedAction>) {
        let rep = &s.replicas[r];
        if !rep.up || rep.stopped {
            return;
        }
        let lost = s.used.lost < self.budget.lost;
        match rep.task {
            Task::Idle => {
                if let Some(&fire) = FIRES.get(rep.next as usize) {
                    if s.now > fire + MISS {
                        out.push(SchedAction::Skip(r));
                    } else if s.now >= fire && s.now >= rep.retry_at {
                        out.push(SchedAction::Claim(r, false));
                        if lost {
                            out.push(SchedAction::Claim(r, true));
                        }
                    }
                }
                // The wake-up message or the fallback poll: a replica looks while requests
                // are queued.
                if !s.redis.requests.is_empty() {
                    out.push(SchedAction::Take(r, false));
                    if lost {
                        out.push(SchedAction::Take(r, true));
                    }
                }
            }
            Task::Unanswered { .. } => out.push(SchedAction::Withdraw(r)),
            Task::Claimed { .. } => out.push(SchedAction::Record(r)),
            Task::Recorded { .. } if slot_free(s) => out.push(SchedAction::Slot(r)),
            Task::Slotted { .. } => out.push(SchedAction::Start(r)),
            Task::Running { since, .. } if since < s.now => out.push(SchedAction::Finish(r)),
            _ => {}
        }
    }

    /// The environment's and the operator's steps.
    fn environment(&self, s: &SchedState, out: &mut Vec<SchedAction>) {
        for (r, rep) in s.replicas.iter().enumerate() {
            if rep.up && s.used.kills < self.budget.kills {
                out.push(SchedAction::Kill(r));
            }
            if !rep.up {
                out.push(SchedAction::Restart(r));
            }
            if rep.up && !rep.stopped && s.used.stops < self.budget.stops {
                out.push(SchedAction::Stop(r));
            }
            if rep.stopped {
                out.push(SchedAction::Go(r));
            }
        }
        if s.used.requests < self.budget.requests {
            out.push(SchedAction::Request);
        }
        if !s.redis.paused && s.used.pauses < self.budget.pauses {
            out.push(SchedAction::Pause);
        }
        if s.redis.paused {
            out.push(SchedAction::Resume);
        }
    }
}

/// The run id of `run` by replica `r`.
pub fn run_id(run: Run, r: usize) -> String {
    match run {
        Run::Occurrence(o) => FIRES[o as usize].to_string(),
        Run::Manual(n) => format!("m{}{n}", IDS[r]),
    }
}

fn token_str(token: u8) -> String {
    format!("t{token}")
}

fn slot_free(s: &SchedState) -> bool {
    s.slot.is_none_or(|(_, _, until)| until <= s.now)
}

fn claim_args(r: usize, o: u8, token: u8) -> ClaimArgs {
    let fire = FIRES[o as usize];
    ClaimArgs {
        run_id: fire.to_string(),
        occurrence: fire,
        replica: IDS[r].to_owned(),
        host: "h".to_owned(),
        pid: r.to_string(),
        token: token_str(token),
        retention: 1000,
        keep: 10,
        fire_at: fire,
        grace: GRACE,
        liveness: LIVENESS,
        lease: 0,
        offset: 0,
    }
}

impl SchedModel {
    /// claim.lua, or its mutants: [`SchedMutant::TurnIgnoresGrace`] (a replica whose turn it
    /// is not waits, a tick at a time, as long as the turn holder is in the live set: an
    /// endless grace), [`SchedMutant::ClaimIgnoresPause`].
    fn claim(&self, s: &mut SchedState, r: usize, o: u8, token: u8) -> ClaimReply {
        let mut args = claim_args(r, o, token);
        let endless = self.is(SchedMutant::TurnIgnoresGrace);
        if endless {
            args.grace = Ms::MAX / 4;
        }
        let paused = s.redis.paused;
        if self.is(SchedMutant::ClaimIgnoresPause) {
            s.redis.paused = false;
        }
        let reply = claim(&mut s.redis, s.now, &args);
        s.redis.paused = paused;
        match reply {
            ClaimReply::Wait { now, next, due, .. } if endless => ClaimReply::Wait {
                wait: 1,
                now,
                next,
                due,
            },
            reply => reply,
        }
    }

    /// take_request.lua, or the mutant [`SchedMutant::TakeIgnoresPause`].
    fn take(&self, s: &mut SchedState, r: usize, token: u8) -> TakeRequestReply {
        let n = s.replicas[r].takes;
        let args = TakeRequestArgs {
            run_id: run_id(Run::Manual(n), r),
            replica: IDS[r].to_owned(),
            host: "h".to_owned(),
            pid: r.to_string(),
            token: token_str(token),
            retention: 1000,
            keep: 10,
            lease: 0,
        };
        let paused = s.redis.paused;
        if self.is(SchedMutant::TakeIgnoresPause) {
            s.redis.paused = false;
        }
        let reply = take_request(&mut s.redis, s.now, &args);
        s.redis.paused = paused;
        reply
    }

    /// withdraw.lua, or its mutants.
    fn withdraw(&self, s: &mut SchedState, r: usize, run: Run, token: u8) -> bool {
        let id = run_id(run, r);
        let mut token = token_str(token);
        if self.is(SchedMutant::WithdrawIgnoresToken)
            && let Some(c) = s.redis.claim_of(&id)
        {
            token = c.get(6).map_or(token, |t| (*t).to_owned());
        }
        let expire = s.redis.requests_expire;
        let withdrawn = withdraw(&mut s.redis, s.now, &id, &token, REQUEST_KEEP_SECS);
        if withdrawn && self.is(SchedMutant::WithdrawDropsRequest) && id.starts_with('m') {
            s.redis.requests.remove(0);
            s.redis.drop_empty();
        }
        if withdrawn && self.is(SchedMutant::WithdrawWithoutExpiry) {
            // LPUSH alone: the list keeps the expiry it had, or none when it was gone.
            s.redis.requests_expire = expire;
        }
        withdrawn
    }
}

impl Model for SchedModel {
    type State = SchedState;
    type Action = SchedAction;

    fn init_states(&self) -> Vec<SchedState> {
        let idle = Replica {
            up: true,
            stopped: false,
            next: 0,
            retry_at: 0,
            takes: 0,
            task: Task::Idle,
        };
        let mut redis = JobRedis::default();
        for id in IDS {
            heartbeat(&mut redis, 0, id, LIVENESS, false);
        }
        vec![SchedState {
            now: 0,
            redis,
            slot: None,
            replicas: [idle; REPLICAS],
            tokens: 0,
            used: Used::default(),
            calm_since: 0,
            ghost: Ghost::default(),
        }]
    }

    fn actions(&self, s: &SchedState, actions: &mut Vec<SchedAction>) {
        for r in 0..REPLICAS {
            self.due(s, r, actions);
        }
        // A look that changes nothing (a take that finds the job paused) does not hold time.
        actions.retain(|a| {
            self.next_state(s, *a)
                .is_some_and(|next| (&next.redis, &next.replicas) != (&s.redis, &s.replicas))
        });
        if actions.is_empty() && s.now < self.until {
            actions.push(SchedAction::Tick);
        }
        self.environment(s, actions);
    }

    fn next_state(&self, last: &SchedState, action: SchedAction) -> Option<SchedState> {
        let mut s = last.clone();
        s.ghost.event = 0;
        s.redis.published.clear();
        match action {
            SchedAction::Tick => {
                s.now += 1;
                for (r, rep) in s.replicas.iter().enumerate() {
                    if rep.up && !rep.stopped {
                        heartbeat(&mut s.redis, s.now, IDS[r], LIVENESS, false);
                    }
                }
                let waits = |rep: &Replica| rep.up && matches!(rep.task, Task::Recorded { .. });
                if !slot_free(&s) && s.replicas.iter().any(waits) {
                    s.ghost.event |= EV_SLOT_WAIT;
                }
            }
            SchedAction::Claim(r, lost) => self.claim_step(&mut s, r, lost),
            SchedAction::Skip(r) => {
                let id = FIRES[s.replicas[r].next as usize].to_string();
                if !s.redis.claims.contains_key(&id) && !s.ghost.started.contains(&id) {
                    s.ghost.event |= EV_MISSED;
                }
                s.replicas[r].next += 1;
            }
            SchedAction::Take(r, lost) => self.take_step(&mut s, r, lost),
            SchedAction::Withdraw(r) => {
                let Task::Unanswered { run, token } = s.replicas[r].task else {
                    return None;
                };
                if self.withdraw(&mut s, r, run, token) {
                    s.ghost.event |= EV_WITHDRAWN;
                    if let Run::Manual(_) = run {
                        s.ghost.requeued += 1;
                    }
                }
                s.replicas[r].task = Task::Idle;
            }
            SchedAction::Record(r) => {
                let Task::Claimed { run, token } = s.replicas[r].task else {
                    return None;
                };
                let running = end_record("running", "", "0", "", "", "");
                s.redis
                    .ledger
                    .insert(format!("{}:end", run_id(run, r)), running);
                s.replicas[r].task = Task::Recorded { run, token };
            }
            SchedAction::Slot(r) => {
                let Task::Recorded { run, token } = s.replicas[r].task else {
                    return None;
                };
                s.slot = Some((r as u8, token, s.now + SLOT_LEASE));
                s.replicas[r].task = Task::Slotted {
                    run,
                    token,
                    at: s.now,
                };
            }
            SchedAction::Start(r) => self.start_step(&mut s, r),
            SchedAction::Finish(r) => {
                let Task::Running { run, token, .. } = s.replicas[r].task else {
                    return None;
                };
                let end = end_record("succeeded", &s.now.to_string(), "0", "", "", "");
                s.redis
                    .ledger
                    .insert(format!("{}:end", run_id(run, r)), end);
                if s.slot
                    .is_some_and(|(holder, t, _)| (holder, t) == (r as u8, token))
                {
                    s.slot = None;
                }
                s.replicas[r].task = Task::Idle;
            }
            _ => self.environment_step(&mut s, action),
        }
        s.redis.published.clear();
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        props::all()
    }

    fn within_boundary(&self, s: &SchedState) -> bool {
        s.now <= self.until
    }
}

impl SchedModel {
    /// The environment's and the operator's steps.
    fn environment_step(&self, s: &mut SchedState, action: SchedAction) {
        match action {
            SchedAction::Kill(r) => {
                s.used.kills += 1;
                if matches!(
                    s.replicas[r].task,
                    Task::Claimed { .. } | Task::Recorded { .. } | Task::Slotted { .. }
                ) {
                    s.ghost.event |= EV_DIED_CLAIMED;
                }
                s.replicas[r].up = false;
                s.replicas[r].stopped = false;
                s.replicas[r].task = Task::Idle;
            }
            SchedAction::Restart(r) => {
                // The job loop starts over: occurrences missed by more than MISS are skipped.
                let next = FIRES.iter().position(|f| s.now <= f + MISS);
                let rep = &mut s.replicas[r];
                rep.up = true;
                rep.next = next.map_or(FIRES.len() as u8, |n| n as u8).max(rep.next);
                rep.retry_at = 0;
                s.calm_since = s.now;
            }
            SchedAction::Stop(r) => {
                s.used.stops += 1;
                s.replicas[r].stopped = true;
            }
            SchedAction::Go(r) => {
                s.replicas[r].stopped = false;
                s.calm_since = s.now;
            }
            SchedAction::Request => {
                s.used.requests += 1;
                request(
                    &mut s.redis,
                    s.now,
                    s.now,
                    REQUEST_KEEP_SECS,
                    "wake",
                    "job",
                    false,
                );
                s.ghost.last_request = s.now;
                if s.redis.paused {
                    s.ghost.paused_requests += 1;
                }
            }
            SchedAction::Pause => {
                s.used.pauses += 1;
                pause(&mut s.redis, s.now);
            }
            SchedAction::Resume => {
                resume(&mut s.redis, s.now, "wake", "job", false);
                s.calm_since = s.now;
            }
            _ => {}
        }
    }

    fn new_token(s: &mut SchedState) -> u8 {
        s.tokens += 1;
        s.tokens
    }

    fn claim_step(&self, s: &mut SchedState, r: usize, lost: bool) {
        let o = s.replicas[r].next;
        let token = Self::new_token(s);
        let paused = s.redis.paused;
        let turn_dead = self.turn_holder_dead(s, r);
        let reply = self.claim(s, r, o, token);
        let fire = FIRES[o as usize];
        if !lost && !matches!(reply, ClaimReply::Won { .. }) {
            // The token was not written anywhere: not spent.
            s.tokens -= 1;
        }
        if lost {
            s.used.lost += 1;
            s.replicas[r].task = Task::Unanswered {
                run: Run::Occurrence(o),
                token,
            };
            return;
        }
        let rep = &mut s.replicas[r];
        match reply {
            ClaimReply::Won { .. } => {
                if paused {
                    s.ghost.opened_while_paused = true;
                }
                if turn_dead {
                    s.ghost.event |= EV_DEAD_TURN;
                }
                rep.task = Task::Claimed {
                    run: Run::Occurrence(o),
                    token,
                };
                rep.next += 1;
            }
            ClaimReply::Claimed { .. } => rep.next += 1,
            ClaimReply::Paused { .. } => {
                s.ghost.event |= EV_PAUSED_REFUSED;
                rep.next += 1;
            }
            ClaimReply::Wait { wait, .. } => {
                if s.now >= fire + GRACE {
                    s.ghost.waited_past_grace = true;
                }
                rep.retry_at = s.now + wait;
            }
        }
    }

    /// Whether the replica whose turn it is (as claim.lua would compute it now) is dead or
    /// stopped.
    fn turn_holder_dead(&self, s: &SchedState, r: usize) -> bool {
        // The live set as the claim sees it: the caller refreshed, the expired left out.
        let mut replicas = s.redis.replicas.clone();
        replicas.insert(IDS[r].to_owned(), s.now + LIVENESS);
        let live: Vec<&String> = replicas
            .iter()
            .filter(|(_, until)| **until > s.now)
            .map(|(id, _)| id)
            .collect();
        if live.is_empty() {
            return false;
        }
        let turn = s.redis.turn.unwrap_or(0);
        let holder = live[turn.rem_euclid(live.len() as i64) as usize];
        IDS.iter()
            .position(|id| *id == holder.as_str())
            .is_some_and(|r| !s.replicas[r].up || s.replicas[r].stopped)
    }

    fn take_step(&self, s: &mut SchedState, r: usize, lost: bool) {
        let token = Self::new_token(s);
        let paused = s.redis.paused;
        let n = s.replicas[r].takes;
        let reply = self.take(s, r, token);
        if !lost && !matches!(reply, TakeRequestReply::Took { .. }) {
            s.tokens -= 1;
        }
        if let TakeRequestReply::Took { .. } = reply {
            s.replicas[r].takes += 1;
            if paused {
                s.ghost.opened_while_paused = true;
            }
        }
        let run = Run::Manual(n);
        if lost {
            s.used.lost += 1;
            s.replicas[r].task = Task::Unanswered { run, token };
        } else if let TakeRequestReply::Took { .. } = reply {
            s.replicas[r].task = Task::Claimed { run, token };
        }
    }

    fn start_step(&self, s: &mut SchedState, r: usize) {
        let Task::Slotted { run, token, at } = s.replicas[r].task else {
            return;
        };
        // The slot's lease as its holder counts it (dlock's lease: lost once it ran out).
        let believed = s.now < at + SLOT_LEASE;
        if !believed && !self.is(SchedMutant::StartsWithLapsedSlot) {
            s.ghost.event |= EV_SLOT_LAPSED;
            s.replicas[r].task = Task::Idle;
            return;
        }
        let held = s
            .slot
            .is_some_and(|(holder, t, until)| (holder, t) == (r as u8, token) && until > s.now);
        if !held {
            s.ghost.started_without_slot = true;
        }
        let id = run_id(run, r);
        if let Run::Manual(_) = run {
            if s.ghost.requeued > 0 {
                s.ghost.requeued -= 1;
                s.ghost.event |= EV_REQUEUED_RAN;
            }
            if s.ghost.paused_requests > 0 {
                s.ghost.paused_requests -= 1;
                s.ghost.event |= EV_PAUSED_REQUEST_RAN;
            }
        }
        s.ghost.started.push(id);
        s.replicas[r].task = Task::Running {
            run,
            token,
            since: s.now,
        };
    }
}
