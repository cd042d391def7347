//! The scheduler's at-least-once attempt protocol (dlock-scheduler, issue #30) as a checked
//! model: one run of a job, two replicas, the scripts that touch the run's records as atomic
//! steps — `claim.lua` (the first attempt), `take_retry.lua` (settle a lapsed attempt, claim the
//! next), `renew_attempt.lua` (with the watchdog's renewal of the run's lock), `finish.lua`
//! (record running, record the end and schedule the next attempt) — the run's dlock mutex
//! (lease, fence counter), and an adversary that kills a replica (it restarts at once, with new
//! tokens) or pauses one for as long as it likes.
//!
//! Time is in ticks: a lease is [`LEASE`] ticks, renewed every tick while the replica runs;
//! the retry backoff is [`BACKOFF`]; a handler works one tick and then succeeds or fails. A
//! replica acts as soon as it can (time does not pass while a live replica has a step due:
//! a claim, a due retry, its lock, its renewal, its record), so that the bounded-response
//! property below is about the protocol, not about a replica that chose to idle.
//!
//! Properties ([`AttemptModel::properties`]):
//! * `superseded never records` — every record written (running, or an end) is written by the
//!   run's current attempt (the one whose token is in the claim record).
//! * `final stays final` — once a run is final (an end without a next attempt), nothing changes
//!   its records.
//! * `handlers in attempt order` — handlers start in increasing attempt order, each with a
//!   larger fence than the one before: a store that keeps the largest fence refuses the writes
//!   of every attempt that was superseded once its successor wrote.
//! * `within attempts` — no run has more than [`MAX_ATTEMPTS`] attempts.
//! * `no run left behind` — once the faults are over, the run is final within
//!   [`settle_bound`] ticks: an attempt whose replica died or paused is settled and retried.
//!
//! **One-off jobs** (issue #31, `once.lua`) are the same protocol from another start:
//! [`AttemptModel::one_off`] begins with the run pending — attempt 0, recorded `scheduled` with
//! no token, due at tick [`ONE_OFF_DUE`] in `retries` — and `take_retry.lua` claims its first
//! attempt when it is due (`claim.lua` has no part in it). Every property above holds from that
//! start too.
//!
//! [`AttemptMutant`] applies one protocol bug at a time; tests/check.rs shows each caught by
//! the property its doc names. Not modelled: several runs and the ledger's trimming, the claim
//! retention, `run_now`, pause/resume of the job, Redis restarts and lost replies (the claim
//! path's `withdraw.lua` is the at-most-once model's business), the wake-up messages (a
//! replica here looks whenever a retry is due, which the poll and the wake-up approximate).

use stateright::{Checker, Model, Property};

/// Attempts in all per run.
pub const MAX_ATTEMPTS: u8 = 2;
/// The lease of an attempt (in the ledger) and of the run's lock, in ticks.
pub const LEASE: u8 = 2;
/// The delay before the next attempt, in ticks.
pub const BACKOFF: u8 = 1;
/// The replicas.
pub const REPLICAS: usize = 2;
/// When a one-off job is due ([`AttemptModel::one_off`]).
pub const ONE_OFF_DUE: u8 = 1;

/// How many ticks after the last fault the run must be final by: per attempt, at most a lapse
/// of the attempt's lease, the backoff, a lock held by a dead attempt running out, the lock
/// and the record steps, and the handler's tick.
pub const fn settle_bound() -> u8 {
    MAX_ATTEMPTS * (LEASE + BACKOFF + LEASE + 2)
}

/// One protocol bug (see the module docs for the property that catches each).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AttemptMutant {
    /// finish.lua checks only that the run is not final, not the attempt's token: a superseded
    /// attempt overwrites its successor's running record. Caught by `superseded never records`.
    FinishWithoutToken,
    /// The attempt starts its handler although its running record was refused (the scheduler
    /// not checking `Recorded::Superseded` after taking the lock). Caught by `handlers in
    /// attempt order`.
    RunsWhenRefused,
    /// take_retry.lua only claims due retries and never settles a lapsed attempt: a killed
    /// replica's run is stranded. Caught by `no run left behind`.
    NoLapseSettling,
    /// finish.lua and take_retry.lua schedule a next attempt without checking the attempts
    /// left. Caught by `within attempts`.
    UnboundedAttempts,
}

impl AttemptMutant {
    /// Every mutant.
    pub const ALL: [AttemptMutant; 4] = [
        AttemptMutant::FinishWithoutToken,
        AttemptMutant::RunsWhenRefused,
        AttemptMutant::NoLapseSettling,
        AttemptMutant::UnboundedAttempts,
    ];

    /// The property that catches it.
    pub fn property(self) -> &'static str {
        match self {
            AttemptMutant::FinishWithoutToken => "superseded never records",
            AttemptMutant::RunsWhenRefused => "handlers in attempt order",
            AttemptMutant::NoLapseSettling => "no run left behind",
            AttemptMutant::UnboundedAttempts => "within attempts",
        }
    }

    /// The mutation check: its property is broken with the mutant applied, from a scheduled
    /// run's start and from a one-off job's (the unit tests and `make model-mutants`).
    ///
    /// # Errors
    /// Names the start the property held from, and what was broken there.
    pub fn caught(self) -> Result<(), String> {
        for mut model in [
            AttemptModel::new(Some(self)),
            AttemptModel::one_off(Some(self)),
        ] {
            if self == AttemptMutant::UnboundedAttempts {
                // Attempts without end blow the state space up; a third attempt comes early.
                model.until = settle_bound() + model.start();
            }
            let one_off = model.one_off;
            let names = model.must_hold();
            let checker = model.checker().spawn_bfs().join();
            let broken: Vec<&str> = names
                .into_iter()
                .filter(|name| checker.discovery(name).is_some())
                .collect();
            if !broken.contains(&self.property()) {
                return Err(format!("{self:?} (one-off {one_off}): broken {broken:?}"));
            }
        }
        Ok(())
    }
}

/// How an attempt ended, as recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The handler returned `Ok`.
    Succeeded,
    /// The handler failed, or the attempt's lock lease was lost.
    Failed,
    /// The attempt's lease lapsed (its replica was killed or paused).
    Abandoned,
    /// A one-off job's attempt 0: waiting for its due time (`once.lua`); it never runs.
    Scheduled,
}

/// The run's end record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum End {
    /// None yet: claimed, lock not taken.
    None,
    /// The attempt runs under this fence.
    Running,
    /// Ended; `next`: when the next attempt is due (`None`: final).
    Ended {
        /// How it ended.
        outcome: Outcome,
        /// When the next attempt is due.
        next: Option<u8>,
    },
}

/// What Redis holds of the run.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Records {
    /// The current attempt: (number, token); `None` before the first claim.
    pub claim: Option<(u8, u8)>,
    /// The end record.
    pub end: End,
    /// The run's score in `retries`: the attempt's lease deadline or the next attempt's time.
    pub retries: Option<u8>,
    /// The run's lock: (holder token, expiry).
    pub lock: Option<(u8, u8)>,
    /// The slot's fence counter.
    pub fence: u8,
}

/// A replica's attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Task {
    /// No attempt.
    Idle,
    /// Claimed attempt `attempt` with `token`; waits for the lock.
    #[allow(missing_docs)]
    Claimed { token: u8, attempt: u8 },
    /// Holds the lock under `fence`; about to record "running".
    #[allow(missing_docs)]
    Locked { token: u8, attempt: u8, fence: u8 },
    /// Its handler runs since tick `since`.
    #[allow(missing_docs)]
    Running {
        token: u8,
        attempt: u8,
        fence: u8,
        since: u8,
    },
}

impl Task {
    fn token(self) -> Option<u8> {
        match self {
            Task::Idle => None,
            Task::Claimed { token, .. }
            | Task::Locked { token, .. }
            | Task::Running { token, .. } => Some(token),
        }
    }
}

/// A replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Replica {
    /// Its attempt at the run.
    pub task: Task,
    /// Stopped by the adversary.
    pub paused: bool,
    /// When its attempt renews next.
    pub next_renew: u8,
}

/// The model's state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AttemptState {
    /// The server's clock, in ticks.
    pub now: u8,
    /// What Redis holds.
    pub redis: Records,
    /// The replicas.
    pub replicas: [Replica; REPLICAS],
    /// The last token handed out.
    pub next_token: u8,
    /// Kills so far.
    pub kills: u8,
    /// Pauses so far.
    pub pauses: u8,
    /// When the last fault ended (a kill, a resume).
    pub calm_since: u8,
    // Ghosts, for the properties.
    /// A record was written by an attempt that was not the current one.
    pub foreign_record: bool,
    /// A final run's records changed.
    pub final_rewritten: bool,
    /// The handler starts so far: (attempt, fence), in order.
    pub started: Vec<(u8, u8)>,
}

/// One step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AttemptAction {
    /// Time passes.
    Tick,
    /// claim.lua: the first attempt.
    Claim(usize),
    /// take_retry.lua.
    TakeRetry(usize),
    /// Take the run's lock.
    Lock(usize),
    /// finish.lua "running".
    RecordRunning(usize),
    /// renew_attempt.lua, and the watchdog's lock renewal.
    Renew(usize),
    /// The handler ended: finish.lua with its outcome, then release.
    Finish(usize, bool),
    /// The adversary kills a replica (it restarts at once, idle).
    Kill(usize),
    /// The adversary stops a replica.
    Pause(usize),
    /// And lets it run again.
    Resume(usize),
}

/// The model: the protocol, one mutant or none, the adversary's budget and the time bound.
#[derive(Clone, Debug)]
pub struct AttemptModel {
    /// The bug applied, if any.
    pub mutant: Option<AttemptMutant>,
    /// The adversary's budget of kills.
    pub kills: u8,
    /// And of pauses.
    pub pauses: u8,
    /// The last tick explored.
    pub until: u8,
    /// The run is a one-off job (`once.lua`): pending from the start, its first attempt taken
    /// by `take_retry.lua`.
    pub one_off: bool,
}

impl AttemptModel {
    /// The protocol with a budget of one kill and one pause, explored for long enough that the
    /// run must be final after them.
    pub fn new(mutant: Option<AttemptMutant>) -> Self {
        Self {
            mutant,
            kills: 1,
            pauses: 1,
            until: 2 * settle_bound(),
            one_off: false,
        }
    }

    /// The same for a one-off job: it starts pending, due at [`ONE_OFF_DUE`].
    pub fn one_off(mutant: Option<AttemptMutant>) -> Self {
        Self {
            one_off: true,
            until: 2 * settle_bound() + ONE_OFF_DUE,
            ..Self::new(mutant)
        }
    }

    /// The names of the properties that must never be broken (the safety and bounded-response
    /// ones; not the reachability checks, which must be reached).
    pub fn must_hold(&self) -> Vec<&'static str> {
        self.properties()
            .iter()
            .filter(|p| p.expectation != stateright::Expectation::Sometimes)
            .map(|p| p.name)
            .collect()
    }

    /// When the run can first be claimed.
    fn start(&self) -> u8 {
        if self.one_off { ONE_OFF_DUE } else { 0 }
    }

    fn is(&self, mutant: AttemptMutant) -> bool {
        self.mutant == Some(mutant)
    }

    /// What `replica` can do now (not the adversary's steps, nor time).
    fn due(&self, s: &AttemptState, r: usize, out: &mut Vec<AttemptAction>) {
        let replica = &s.replicas[r];
        if replica.paused {
            return;
        }
        let lock_free = s.redis.lock.is_none_or(|(_, expiry)| expiry <= s.now);
        match replica.task {
            Task::Idle => {
                if s.redis.claim.is_none() {
                    out.push(AttemptAction::Claim(r));
                }
                if s.redis.retries.is_some_and(|score| score <= s.now) {
                    out.push(AttemptAction::TakeRetry(r));
                }
            }
            Task::Claimed { .. } if lock_free => out.push(AttemptAction::Lock(r)),
            Task::Locked { .. } => out.push(AttemptAction::RecordRunning(r)),
            Task::Running { since, .. } if since < s.now => {
                out.push(AttemptAction::Finish(r, true));
                out.push(AttemptAction::Finish(r, false));
            }
            _ => {}
        }
        if replica.task != Task::Idle && replica.next_renew <= s.now {
            out.push(AttemptAction::Renew(r));
        }
    }

    /// Whether the run's current attempt has `token` (and is not over).
    fn current(s: &AttemptState, token: u8) -> bool {
        s.redis.claim.is_some_and(|(_, t)| t == token)
            && matches!(s.redis.end, End::None | End::Running)
    }

    fn is_final(end: End) -> bool {
        matches!(end, End::Ended { next: None, .. })
    }

    fn release(s: &mut AttemptState, token: u8) {
        if s.redis.lock.is_some_and(|(holder, _)| holder == token) {
            s.redis.lock = None;
        }
    }

    fn token(s: &mut AttemptState) -> u8 {
        s.next_token += 1;
        s.next_token
    }

    /// finish.lua's end: records `outcome` of the current attempt `attempt`.
    fn end(&self, s: &mut AttemptState, attempt: u8, outcome: Outcome) {
        let left = attempt < MAX_ATTEMPTS || self.is(AttemptMutant::UnboundedAttempts);
        let retry = outcome != Outcome::Succeeded && left;
        let next = retry.then_some(s.now + BACKOFF);
        s.redis.end = End::Ended { outcome, next };
        s.redis.retries = next;
    }
}

impl Model for AttemptModel {
    type State = AttemptState;
    type Action = AttemptAction;

    fn init_states(&self) -> Vec<AttemptState> {
        let idle = Replica {
            task: Task::Idle,
            paused: false,
            next_renew: 0,
        };
        // once.lua: attempt 0 by no token (tokens start at 1), "scheduled", due in `retries`.
        let redis = if self.one_off {
            Records {
                claim: Some((0, 0)),
                end: End::Ended {
                    outcome: Outcome::Scheduled,
                    next: Some(ONE_OFF_DUE),
                },
                retries: Some(ONE_OFF_DUE),
                lock: None,
                fence: 0,
            }
        } else {
            Records {
                claim: None,
                end: End::None,
                retries: None,
                lock: None,
                fence: 0,
            }
        };
        vec![AttemptState {
            now: 0,
            redis,
            replicas: [idle; REPLICAS],
            next_token: 0,
            kills: 0,
            pauses: 0,
            calm_since: 0,
            foreign_record: false,
            final_rewritten: false,
            started: Vec::new(),
        }]
    }

    fn actions(&self, s: &AttemptState, actions: &mut Vec<AttemptAction>) {
        for r in 0..REPLICAS {
            self.due(s, r, actions);
        }
        // A step that changes nothing (a look that finds nothing to do) does not hold time.
        actions.retain(|a| self.next_state(s, *a).as_ref() != Some(s));
        // Time passes only when no live replica has a step due.
        if actions.is_empty() && s.now < self.until {
            actions.push(AttemptAction::Tick);
        }
        for r in 0..REPLICAS {
            let replica = &s.replicas[r];
            if replica.task != Task::Idle && s.kills < self.kills {
                actions.push(AttemptAction::Kill(r));
            }
            if replica.task != Task::Idle && !replica.paused && s.pauses < self.pauses {
                actions.push(AttemptAction::Pause(r));
            }
            if replica.paused {
                actions.push(AttemptAction::Resume(r));
            }
        }
    }

    fn next_state(&self, last: &AttemptState, action: AttemptAction) -> Option<AttemptState> {
        let mut s = last.clone();
        let was_final = Self::is_final(s.redis.end);
        let before = (s.redis.claim, s.redis.end);
        let now = s.now;
        match action {
            AttemptAction::Tick => s.now += 1,
            AttemptAction::Claim(r) => {
                let token = Self::token(&mut s);
                s.redis.claim = Some((1, token));
                s.redis.end = End::None;
                s.redis.retries = Some(now + LEASE);
                s.replicas[r].task = Task::Claimed { token, attempt: 1 };
                s.replicas[r].next_renew = now + 1;
            }
            AttemptAction::TakeRetry(r) => {
                let (attempt, _) = s.redis.claim?;
                match s.redis.end {
                    End::None | End::Running => {
                        if self.is(AttemptMutant::NoLapseSettling) {
                            return Some(s);
                        }
                        self.end(&mut s, attempt, Outcome::Abandoned);
                    }
                    End::Ended { next: Some(_), .. } => {
                        let token = Self::token(&mut s);
                        s.redis.claim = Some((attempt + 1, token));
                        s.redis.end = End::None;
                        s.redis.retries = Some(now + LEASE);
                        s.replicas[r].task = Task::Claimed {
                            token,
                            attempt: attempt + 1,
                        };
                        s.replicas[r].next_renew = now + 1;
                    }
                    End::Ended { .. } => s.redis.retries = None,
                }
            }
            AttemptAction::Lock(r) => {
                let Task::Claimed { token, attempt } = s.replicas[r].task else {
                    return None;
                };
                s.redis.fence += 1;
                s.redis.lock = Some((token, now + LEASE));
                s.replicas[r].task = Task::Locked {
                    token,
                    attempt,
                    fence: s.redis.fence,
                };
            }
            AttemptAction::RecordRunning(r) => {
                let Task::Locked {
                    token,
                    attempt,
                    fence,
                } = s.replicas[r].task
                else {
                    return None;
                };
                let accepted = Self::current(&s, token);
                if accepted {
                    s.redis.end = End::Running;
                }
                if accepted || self.is(AttemptMutant::RunsWhenRefused) {
                    s.replicas[r].task = Task::Running {
                        token,
                        attempt,
                        fence,
                        since: now,
                    };
                    s.started.push((attempt, fence));
                } else {
                    Self::release(&mut s, token);
                    s.replicas[r].task = Task::Idle;
                }
            }
            AttemptAction::Renew(r) => {
                let task = s.replicas[r].task;
                let token = task.token()?;
                s.replicas[r].next_renew = now + 1;
                if Self::current(&s, token) && s.redis.retries.is_some() {
                    s.redis.retries = Some(now + LEASE);
                } else {
                    // Superseded: stop, release.
                    Self::release(&mut s, token);
                    s.replicas[r].task = Task::Idle;
                    return Some(s);
                }
                let holds = s
                    .redis
                    .lock
                    .is_some_and(|(holder, expiry)| holder == token && expiry > now);
                match task {
                    Task::Locked { .. } | Task::Running { .. } if holds => {
                        s.redis.lock = Some((token, now + LEASE));
                    }
                    Task::Locked { attempt, .. } | Task::Running { attempt, .. } => {
                        // The lock's lease was lost: the attempt is cancelled and recorded
                        // (retried), as a failure.
                        self.end(&mut s, attempt, Outcome::Failed);
                        Self::release(&mut s, token);
                        s.replicas[r].task = Task::Idle;
                    }
                    _ => {}
                }
            }
            AttemptAction::Finish(r, ok) => {
                let Task::Running { token, attempt, .. } = s.replicas[r].task else {
                    return None;
                };
                let accepted = if self.is(AttemptMutant::FinishWithoutToken) {
                    matches!(s.redis.end, End::None | End::Running)
                } else {
                    Self::current(&s, token)
                };
                if accepted {
                    if s.redis.claim.is_some_and(|(_, t)| t != token) {
                        s.foreign_record = true;
                    }
                    let outcome = if ok {
                        Outcome::Succeeded
                    } else {
                        Outcome::Failed
                    };
                    self.end(&mut s, attempt, outcome);
                }
                Self::release(&mut s, token);
                s.replicas[r].task = Task::Idle;
            }
            AttemptAction::Kill(r) => {
                s.kills += 1;
                s.replicas[r] = Replica {
                    task: Task::Idle,
                    paused: false,
                    next_renew: now,
                };
                s.calm_since = now;
            }
            AttemptAction::Pause(r) => {
                s.pauses += 1;
                s.replicas[r].paused = true;
            }
            AttemptAction::Resume(r) => {
                s.replicas[r].paused = false;
                s.calm_since = now;
            }
        }
        if was_final && (s.redis.claim, s.redis.end) != before {
            s.final_rewritten = true;
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("superseded never records", |_, s: &AttemptState| {
                !s.foreign_record
            }),
            Property::always("final stays final", |_, s: &AttemptState| {
                !s.final_rewritten
            }),
            Property::always("handlers in attempt order", |_, s: &AttemptState| {
                s.started
                    .windows(2)
                    .all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1)
            }),
            Property::always("within attempts", |_, s: &AttemptState| {
                s.redis
                    .claim
                    .is_none_or(|(attempt, _)| attempt <= MAX_ATTEMPTS)
            }),
            // Reachability: the interesting cases happen at these bounds (the checker must
            // discover both, or the properties above hold vacuously).
            Property::sometimes("a lapsed attempt is retried", |_, s: &AttemptState| {
                s.kills + s.pauses > 0 && s.started.iter().any(|(attempt, _)| *attempt > 1)
            }),
            Property::sometimes("a superseded attempt runs on", |_, s: &AttemptState| {
                s.replicas.iter().any(|r| {
                    matches!(r.task, Task::Running { token, .. } | Task::Locked { token, .. }
                        if s.redis.claim.is_some_and(|(_, t)| t != token))
                })
            }),
            Property::always(
                "no run left behind",
                |m: &AttemptModel, s: &AttemptState| {
                    let calm = s.replicas.iter().all(|r| !r.paused);
                    !(calm
                        && s.now == m.until
                        && s.now >= s.calm_since.max(m.start()) + settle_bound())
                        || Self::is_final(s.redis.end)
                },
            ),
        ]
    }

    fn within_boundary(&self, s: &AttemptState) -> bool {
        s.now <= self.until
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_protocol_keeps_every_property() {
        keeps_every_property("unit attempts", AttemptModel::new(None));
    }

    #[test]
    fn a_one_off_job_keeps_every_property() {
        keeps_every_property("unit one-off attempts", AttemptModel::one_off(None));
    }

    /// Every property of `model` (documented in the README as `id`) holds, every reachability
    /// check is reached, and the unique states are the README's.
    fn keeps_every_property(id: &str, model: AttemptModel) {
        let checker = model.clone().checker().spawn_bfs().join();
        for property in model.properties() {
            let found = checker.discovery(property.name);
            if property.expectation == stateright::Expectation::Sometimes {
                assert!(found.is_some(), "never reached: {}", property.name);
            } else if let Some(path) = found {
                panic!("`{}` broken: {:#?}", property.name, path.into_actions());
            }
        }
        if let Err(why) = crate::counts::compare(id, checker.unique_state_count()) {
            panic!("{why}");
        }
    }

    #[test]
    fn each_mutant_is_caught_by_its_property() {
        for mutant in AttemptMutant::ALL {
            if let Err(why) = mutant.caught() {
                panic!("{why}");
            }
        }
    }
}
