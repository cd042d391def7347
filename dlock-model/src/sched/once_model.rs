//! One-off jobs with an idempotency key as a checked model (issue #46): an operator enqueues
//! the same key twice (a duplicate, or a call sent again after its reply was lost:
//! `once.lua`) and may cancel it (`once_cancel.lua`); a replica claims its first attempt when
//! it is due (`take_retry.lua`'s path for a pending attempt 0), records it running
//! (`finish.lua`'s check: the claim's token, no end other than "running"), ends it, and trims
//! the ledger at any time (`once_trim.lua`, keeping no final run: the most eager trim). The
//! claim retention is [`RETENTION`] ticks, so the model reaches a key enqueued again after it.
//! A call may also debounce (`once.lua` with a max wait of [`MAX_WAIT`] ticks and a delay of
//! [`DELAY`]) or replace the key's pending run's arguments (issue #51).
//!
//! Properties ([`OnceModel::properties`]):
//! * [`IDEMPOTENT`] — an idempotency key runs once: an enqueue is accepted only when the key's
//!   last accepted enqueue is at least the retention ago (once.lua forgets a claim
//!   scored at `now - retention`), and the key's run starts at most
//!   once per accepted enqueue.
//! * [`CANCELLED_NEVER_RUNS`] — a one-off whose cancel was answered 1 never starts (a later
//!   enqueue of the key, after the retention, is a new one-off).
//! * [`TRIM_KEEPS_PENDING`] — every run still pending or running (in `retries`) keeps its
//!   records.
//! * [`CLAIMED_UNTOUCHED`] — once a replica claimed the key's run, neither debounce nor
//!   replace changes its arguments or its due time (the run's occurrence).
//! * [`DEBOUNCE_CAPPED`] — a run any call debounced is due (and so claimed, when a replica
//!   is there) no later than its first call plus the max wait.
//! * [`ONE_PAYLOAD`] — the key's run holds one payload, the last accepted (by an enqueue or a
//!   replace), is claimed with it, and is never lost: until a replica claims it or a cancel is
//!   answered 1, it is pending.
//! * [`KEY_LISTED`] — the key's run stores the key it was enqueued with (`<id>:key`, what
//!   operators see: the run id is only the key's hash) for as long as the run is in the
//!   ledger, and no key record outlives its run (issue #51).
//!
//! Reachability: a duplicate refused, a key accepted again after its retention, a one-off run,
//! a trim that removed a run, a cancel refused because the run had started, a debounce that
//! moved the due time, one capped by the max wait, a replace applied, and a debounce or replace
//! refused because the run had been claimed. Mutants:
//! [`OnceMutant`]. Not modelled: the retries of an at-least-once attempt (the attempt model),
//! several replicas (a one-off's claim is take_retry.lua's, checked there), the arguments.

use stateright::{Checker, Model, Property};

use super::keys::{JobRedis, Ms, claim_record, end_record};
use super::steps::{OnceArgs, once, once_cancel, once_trim};

/// The claim retention in ticks.
pub const RETENTION: Ms = 3;
/// The run id of the key (`"o" + sha1hex(key)` in Redis).
pub const KEY_ID: &str = "okey";

/// `an idempotency key runs once`.
pub const IDEMPOTENT: &str = "an idempotency key runs once";
/// `a cancelled one-off never runs`.
pub const CANCELLED_NEVER_RUNS: &str = "a cancelled one-off never runs";
/// `trim keeps every pending run`.
pub const TRIM_KEEPS_PENDING: &str = "trim keeps every pending run";
/// `a claimed one-off is never altered`.
pub const CLAIMED_UNTOUCHED: &str = "a claimed one-off is never altered";
/// `a debounced one-off is due by its first call plus the max wait`.
pub const DEBOUNCE_CAPPED: &str = "a debounced one-off is due by its first call plus the max wait";
/// `a replaced one-off keeps one payload, the last, and is never lost`.
pub const ONE_PAYLOAD: &str = "a replaced one-off keeps one payload, the last, and is never lost";
/// `a keyed one-off's key is stored with it, and only while it is`.
pub const KEY_LISTED: &str = "a keyed one-off's key is stored with it, and only while it is";
/// The idempotency key the model's calls give (its run id is [`KEY_ID`]).
pub const KEY: &str = "k";
/// The debounce's max wait in ticks.
pub const MAX_WAIT: Ms = 3;
/// The delay every call asks for, in ticks.
pub const DELAY: Ms = 2;

/// One protocol bug.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OnceMutant {
    /// once.lua looks for the key's run in the ledger only, not in the claims: once its run is
    /// trimmed the key enqueues again within the retention. Caught by [`IDEMPOTENT`].
    KeyInLedgerOnly,
    /// once_trim.lua trims pending runs too. Caught by [`TRIM_KEEPS_PENDING`].
    TrimsPending,
    /// once.lua's debounce and replace skip the pending check (attempt 0, "scheduled"): a
    /// claimed run's arguments and due time change under it. Caught by [`CLAIMED_UNTOUCHED`].
    UpdatesClaimed,
    /// once.lua's debounce ignores the max wait (each call resets the due time, uncapped).
    /// Caught by [`DEBOUNCE_CAPPED`].
    Uncapped,
    /// A replace done as a cancel then an enqueue: the enqueue meets the key's claim and is
    /// refused, and the job is gone. Caught by [`ONE_PAYLOAD`].
    ReplaceByCancel,
    /// once.lua stores no `<id>:key` (as a replica older than issue #51 enqueues during a
    /// rolling deploy): operators see that the run is keyed, not by what. Caught by
    /// [`KEY_LISTED`].
    KeyNotStored,
    /// once_trim.lua leaves `<id>:key` behind (as an older replica trims during a rolling
    /// deploy): a record that outlives its run. Caught by [`KEY_LISTED`].
    TrimLeavesKey,
}

impl OnceMutant {
    /// Every mutant.
    pub const ALL: [OnceMutant; 7] = [
        OnceMutant::KeyInLedgerOnly,
        OnceMutant::TrimsPending,
        OnceMutant::UpdatesClaimed,
        OnceMutant::Uncapped,
        OnceMutant::ReplaceByCancel,
        OnceMutant::KeyNotStored,
        OnceMutant::TrimLeavesKey,
    ];

    /// The property that catches it.
    pub fn property(self) -> &'static str {
        match self {
            OnceMutant::KeyInLedgerOnly => IDEMPOTENT,
            OnceMutant::TrimsPending => TRIM_KEEPS_PENDING,
            OnceMutant::UpdatesClaimed => CLAIMED_UNTOUCHED,
            OnceMutant::Uncapped => DEBOUNCE_CAPPED,
            OnceMutant::ReplaceByCancel => ONE_PAYLOAD,
            OnceMutant::KeyNotStored | OnceMutant::TrimLeavesKey => KEY_LISTED,
        }
    }

    /// The mutation check: its property is broken with the mutant applied.
    ///
    /// # Errors
    /// Names what was broken instead.
    pub fn caught(self) -> Result<(), String> {
        let model = OnceModel::new(Some(self));
        let names = model.must_hold();
        let checker = model.checker().spawn_bfs().join();
        let broken: Vec<&str> = names
            .into_iter()
            .filter(|name| checker.discovery(name).is_some())
            .collect();
        if broken.contains(&self.property()) {
            Ok(())
        } else {
            Err(format!("{self:?}: broken {broken:?}"))
        }
    }
}

/// The replica's attempt at the key's run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OnceTask {
    /// Nothing.
    Idle,
    /// Claimed attempt 1 with this token.
    Claimed(u8),
    /// Its handler runs.
    Running(u8),
}

/// The model's state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OnceState {
    /// The server's clock.
    pub now: Ms,
    /// The hidden job's keys.
    pub redis: JobRedis,
    /// The replica.
    pub task: OnceTask,
    /// Tokens handed out.
    pub tokens: u8,
    /// Enqueues and cancels made.
    pub enqueues: u8,
    /// Cancels made.
    pub cancels: u8,
    /// When the accepted enqueues were made.
    pub accepted: Vec<Ms>,
    /// Handlers started.
    pub starts: u8,
    /// A cancel was answered 1 for the key's current run.
    pub cancelled: bool,
    /// A handler started after a cancel answered 1.
    pub ran_cancelled: bool,
    /// The payload of the key's run by the last accepted call (enqueue or replace).
    pub payload: u8,
    /// A call debounced the key's current run.
    pub debounced: bool,
    /// The key's current run as its claim found it: arguments and due time (its occurrence).
    pub taken: Option<(String, Ms)>,
    /// A claim took the run with another payload than the last accepted one.
    pub stale: bool,
    /// The reachability events of the last step.
    pub event: u8,
    /// More of them.
    pub event2: u8,
}

/// One step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OnceAction {
    /// Time passes.
    Tick,
    /// once.lua with the key.
    Enqueue(Call),
    /// once_cancel.lua.
    Cancel,
    /// take_retry.lua claims the due attempt 0's successor.
    Take,
    /// finish.lua "running", then the handler starts.
    Start,
    /// finish.lua: succeeded, final.
    Finish,
    /// once_trim.lua, keeping no final run.
    Trim,
}

const EV_DUPLICATE: u8 = 1;
const EV_AGAIN: u8 = 1 << 1;
const EV_RAN: u8 = 1 << 2;
const EV_TRIMMED: u8 = 1 << 3;
const EV_CANCEL_REFUSED: u8 = 1 << 4;
const EV_DEBOUNCED: u8 = 1 << 5;
const EV_CAPPED: u8 = 1 << 6;
const EV_REPLACED: u8 = 1 << 7;
/// In the same byte as the rest would overflow: refusals of updates have their own flag.
const EV2_UPDATE_REFUSED: u8 = 1;

/// How the caller calls `once.lua` with the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Call {
    /// A plain keyed enqueue.
    Plain,
    /// `.debounce(MAX_WAIT)`.
    Debounce,
    /// `.replace()`, with a new payload.
    Replace,
}

/// The model: up to two enqueues and one cancel, clock up to `until`.
#[derive(Clone, Debug)]
pub struct OnceModel {
    /// The bug applied.
    pub mutant: Option<OnceMutant>,
    /// The last tick explored.
    pub until: Ms,
}

impl OnceModel {
    /// The unit bounds.
    pub fn new(mutant: Option<OnceMutant>) -> Self {
        Self { mutant, until: 6 }
    }

    /// The names of the properties that must never be broken.
    pub fn must_hold(&self) -> Vec<&'static str> {
        self.properties()
            .iter()
            .filter(|p| p.expectation != stateright::Expectation::Sometimes)
            .map(|p| p.name)
            .collect()
    }

    fn args(call: Call, payload: u8) -> OnceArgs {
        OnceArgs {
            run_id: String::new(),
            key_id: Some(KEY_ID.to_owned()),
            key: KEY.to_owned(),
            due: None,
            delay: DELAY,
            replica: "a".to_owned(),
            host: "h".to_owned(),
            pid: "1".to_owned(),
            args: payload.to_string(),
            retention: RETENTION,
            channel: "wake".to_owned(),
            message: "once:job".to_owned(),
            sharded: false,
            max_wait: (call == Call::Debounce).then_some(MAX_WAIT),
            replace: call == Call::Replace,
            trace: String::new(),
        }
    }

    /// once.lua, or with the mutant applied.
    fn enqueue(&self, s: &mut OnceState, call: Call, payload: u8) -> i64 {
        let mut args = Self::args(call, payload);
        match self.mutant {
            Some(OnceMutant::KeyInLedgerOnly) => {
                let claims = s.redis.claims.clone();
                s.redis.claims.remove(KEY_ID);
                let reply = once(&mut s.redis, s.now, &args);
                if reply.status != 1 {
                    s.redis.claims = claims;
                    zrem_retention(&mut s.redis, s.now);
                }
                return reply.status;
            }
            Some(OnceMutant::Uncapped) if call == Call::Debounce => {
                args.max_wait = Some(Ms::MAX / 4)
            }
            Some(OnceMutant::ReplaceByCancel) if call == Call::Replace => {
                once_cancel(&mut s.redis, s.now, KEY_ID, "replaced");
                args.replace = false;
            }
            Some(OnceMutant::UpdatesClaimed) if call != Call::Plain => {
                return Self::update_claimed(s, &args);
            }
            Some(OnceMutant::KeyNotStored) => {
                let reply = once(&mut s.redis, s.now, &args);
                if reply.status == 1 {
                    s.redis.ledger.remove(&format!("{KEY_ID}:key"));
                }
                return reply.status;
            }
            _ => {}
        }
        once(&mut s.redis, s.now, &args).status
    }

    /// [`OnceMutant::UpdatesClaimed`]: once.lua with the key's records shown to it as pending
    /// (attempt 0, "scheduled", first called when its claim was), then put back.
    fn update_claimed(s: &mut OnceState, args: &OnceArgs) -> i64 {
        let claim = s.redis.ledger.get(&format!("{KEY_ID}:claim")).cloned();
        let end = s.redis.ledger.get(&format!("{KEY_ID}:end")).cloned();
        let claimed = s.redis.claims.get(KEY_ID).copied().unwrap_or(s.now);
        if claim.is_some() {
            let pending = claim_record("a", "h", "1", claimed, true, "", 0);
            s.redis.ledger.insert(format!("{KEY_ID}:claim"), pending);
            let scheduled = end_record("scheduled", "", "", "0", "", "");
            s.redis.ledger.insert(format!("{KEY_ID}:end"), scheduled);
        }
        let status = once(&mut s.redis, s.now, args).status;
        if status == 3 {
            for (field, record) in [("claim", claim), ("end", end)] {
                let field = format!("{KEY_ID}:{field}");
                match record {
                    Some(r) => s.redis.ledger.insert(field, r),
                    None => s.redis.ledger.remove(&field),
                };
            }
        }
        status
    }

    /// take_retry.lua's path for a due pending attempt 0 (once.lua's "scheduled"): claims
    /// attempt 1, drops the end record, opens the attempt's lease.
    fn take(s: &mut OnceState, token: u8) -> bool {
        let due = s.redis.retries.get(KEY_ID).is_some_and(|at| *at <= s.now);
        let scheduled = s.redis.end_of(KEY_ID).and_then(|e| e.get(1).copied()) == Some("scheduled");
        if !due || !scheduled {
            return false;
        }
        let record = claim_record("a", "h", "1", s.now, true, &format!("t{token}"), 1);
        s.redis.ledger.insert(format!("{KEY_ID}:claim"), record);
        s.redis.ledger.remove(&format!("{KEY_ID}:end"));
        s.redis.retries.insert(KEY_ID.to_owned(), s.now + 2);
        let args = s.redis.ledger.get(&format!("{KEY_ID}:args")).cloned();
        let due = s.redis.runs.get(KEY_ID).copied().unwrap_or(-1);
        s.stale |= args.as_deref() != Some(s.payload.to_string().as_str());
        s.taken = Some((args.unwrap_or_default(), due));
        true
    }

    /// finish.lua's check for "running": the claim is this token's, no other end recorded.
    fn current(s: &OnceState, token: u8) -> bool {
        let mine = s.redis.claim_of(KEY_ID).and_then(|c| c.get(6).copied())
            == Some(format!("t{token}").as_str());
        let end = s.redis.end_of(KEY_ID).and_then(|e| e.get(1).copied());
        mine && end.is_none_or(|e| e == "running")
    }
}

/// once.lua's first line, for the mutant that hid the claims from it.
fn zrem_retention(s: &mut JobRedis, now: Ms) {
    super::zrem_upto(&mut s.claims, now - RETENTION);
}

impl Model for OnceModel {
    type State = OnceState;
    type Action = OnceAction;

    fn init_states(&self) -> Vec<OnceState> {
        vec![OnceState {
            now: 0,
            redis: JobRedis::default(),
            task: OnceTask::Idle,
            tokens: 0,
            enqueues: 0,
            cancels: 0,
            accepted: Vec::new(),
            starts: 0,
            cancelled: false,
            ran_cancelled: false,
            payload: 0,
            debounced: false,
            taken: None,
            stale: false,
            event: 0,
            event2: 0,
        }]
    }

    fn actions(&self, s: &OnceState, out: &mut Vec<OnceAction>) {
        match s.task {
            OnceTask::Idle => out.push(OnceAction::Take),
            OnceTask::Claimed(_) => out.push(OnceAction::Start),
            OnceTask::Running(_) => out.push(OnceAction::Finish),
        }
        out.push(OnceAction::Trim);
        out.retain(|a| {
            self.next_state(s, *a)
                .is_some_and(|n| (&n.redis, n.task) != (&s.redis, s.task))
        });
        if s.now < self.until {
            out.push(OnceAction::Tick);
        }
        if s.enqueues < 3 {
            out.extend([Call::Plain, Call::Debounce, Call::Replace].map(OnceAction::Enqueue));
        }
        if s.cancels < 1 {
            out.push(OnceAction::Cancel);
        }
    }

    fn next_state(&self, last: &OnceState, action: OnceAction) -> Option<OnceState> {
        let mut s = last.clone();
        s.event = 0;
        s.event2 = 0;
        match action {
            OnceAction::Tick => s.now += 1,
            OnceAction::Enqueue(call) => {
                s.enqueues += 1;
                let payload = s.enqueues;
                let before = s.redis.runs.get(KEY_ID).copied();
                match self.enqueue(&mut s, call, payload) {
                    1 => {
                        if !s.accepted.is_empty() {
                            s.event |= EV_AGAIN;
                        }
                        s.accepted.push(s.now);
                        // A new run of the key: the cancel was the last run's.
                        s.cancelled = false;
                        s.payload = payload;
                        s.debounced = call == Call::Debounce;
                        s.taken = None;
                    }
                    3 => {
                        if call == Call::Replace {
                            s.payload = payload;
                            s.event |= EV_REPLACED;
                        } else {
                            s.debounced = true;
                            let due = s.redis.runs.get(KEY_ID).copied();
                            if due != before {
                                s.event |= EV_DEBOUNCED;
                            }
                            if due < Some(s.now + DELAY) {
                                s.event |= EV_CAPPED;
                            }
                        }
                    }
                    4 => s.event2 |= EV2_UPDATE_REFUSED,
                    _ => s.event |= EV_DUPLICATE,
                }
            }
            OnceAction::Cancel => {
                s.cancels += 1;
                if once_cancel(&mut s.redis, s.now, KEY_ID, "no").0 {
                    s.cancelled = true;
                } else if s.starts > 0 {
                    s.event |= EV_CANCEL_REFUSED;
                }
            }
            OnceAction::Take => {
                let token = s.tokens + 1;
                if Self::take(&mut s, token) {
                    s.tokens = token;
                    s.task = OnceTask::Claimed(token);
                }
            }
            OnceAction::Start => {
                let OnceTask::Claimed(token) = s.task else {
                    return None;
                };
                if Self::current(&s, token) {
                    let running = end_record("running", "", "1", "", "", "");
                    s.redis.ledger.insert(format!("{KEY_ID}:end"), running);
                    s.starts += 1;
                    s.ran_cancelled |= s.cancelled;
                    s.event |= EV_RAN;
                    s.task = OnceTask::Running(token);
                } else {
                    s.task = OnceTask::Idle;
                }
            }
            OnceAction::Finish => {
                let OnceTask::Running(token) = s.task else {
                    return None;
                };
                if Self::current(&s, token) {
                    let end = end_record("succeeded", &s.now.to_string(), "1", "", "", "");
                    s.redis.ledger.insert(format!("{KEY_ID}:end"), end);
                    s.redis.retries.remove(KEY_ID);
                }
                s.task = OnceTask::Idle;
            }
            OnceAction::Trim => {
                let retries = s.redis.retries.clone();
                if self.mutant == Some(OnceMutant::TrimsPending) {
                    s.redis.retries.clear();
                }
                let key = s.redis.ledger.get(&format!("{KEY_ID}:key")).cloned();
                let removed = once_trim(&mut s.redis, s.now, 0, 10);
                s.redis.retries = retries;
                if let (Some(OnceMutant::TrimLeavesKey), Some(key)) = (self.mutant, key) {
                    s.redis.ledger.insert(format!("{KEY_ID}:key"), key);
                }
                if removed > 0 {
                    s.event |= EV_TRIMMED;
                }
            }
        }
        s.redis.published.clear();
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(IDEMPOTENT, |_, s: &OnceState| {
                s.accepted.windows(2).all(|w| w[1] - w[0] >= RETENTION)
                    && s.starts as usize <= s.accepted.len()
            }),
            Property::always(CANCELLED_NEVER_RUNS, |_, s: &OnceState| !s.ran_cancelled),
            Property::always(TRIM_KEEPS_PENDING, |_, s: &OnceState| {
                s.redis
                    .retries
                    .keys()
                    .all(|id| s.redis.ledger.contains_key(&format!("{id}:claim")))
            }),
            Property::sometimes(
                "a duplicate key was refused (reachable)",
                |_, s: &OnceState| s.event & EV_DUPLICATE != 0,
            ),
            Property::sometimes(
                "a key was accepted again after its retention (reachable)",
                |_, s: &OnceState| s.event & EV_AGAIN != 0,
            ),
            Property::sometimes("a one-off ran (reachable)", |_, s: &OnceState| {
                s.event & EV_RAN != 0
            }),
            Property::sometimes("a trim removed a run (reachable)", |_, s: &OnceState| {
                s.event & EV_TRIMMED != 0
            }),
            Property::sometimes(
                "a cancel of a started one-off was refused (reachable)",
                |_, s: &OnceState| s.event & EV_CANCEL_REFUSED != 0,
            ),
            Property::always(CLAIMED_UNTOUCHED, |_, s: &OnceState| {
                let Some((args, due)) = &s.taken else {
                    return true;
                };
                // Until the ledger forgets it (a trim after it ended).
                let now_args = s.redis.ledger.get(&format!("{KEY_ID}:args"));
                now_args.is_none_or(|a| a == args)
                    && s.redis.runs.get(KEY_ID).is_none_or(|d| d == due)
            }),
            Property::always(DEBOUNCE_CAPPED, |_, s: &OnceState| {
                let Some(first) = s.accepted.last() else {
                    return true;
                };
                let due = match &s.taken {
                    Some((_, due)) => Some(*due),
                    None => s.redis.runs.get(KEY_ID).copied(),
                };
                !s.debounced || due.is_none_or(|due| due <= first + MAX_WAIT)
            }),
            Property::always(ONE_PAYLOAD, |_, s: &OnceState| {
                if s.stale {
                    return false;
                }
                if s.accepted.is_empty() || s.cancelled || s.taken.is_some() {
                    return true;
                }
                let pending = s.redis.end_of(KEY_ID).and_then(|e| e.get(1).copied());
                let args = s.redis.ledger.get(&format!("{KEY_ID}:args"));
                s.redis.retries.contains_key(KEY_ID)
                    && pending == Some("scheduled")
                    && args.map(String::as_str) == Some(s.payload.to_string().as_str())
            }),
            Property::always(KEY_LISTED, |_, s: &OnceState| {
                let key = s.redis.ledger.get(&format!("{KEY_ID}:key"));
                if s.redis.ledger.contains_key(&format!("{KEY_ID}:claim")) {
                    key.map(String::as_str) == Some(&format!("1\u{1f}{KEY}"))
                } else {
                    key.is_none()
                }
            }),
            Property::sometimes(
                "a debounce moved the due time (reachable)",
                |_, s: &OnceState| s.event & EV_DEBOUNCED != 0,
            ),
            Property::sometimes(
                "a debounce was capped by the max wait (reachable)",
                |_, s: &OnceState| s.event & EV_CAPPED != 0,
            ),
            Property::sometimes("a replace was applied (reachable)", |_, s: &OnceState| {
                s.event & EV_REPLACED != 0
            }),
            Property::sometimes(
                "a debounce or replace of a claimed one-off was refused (reachable)",
                |_, s: &OnceState| s.event2 & EV2_UPDATE_REFUSED != 0,
            ),
        ]
    }

    fn within_boundary(&self, s: &OnceState) -> bool {
        s.now <= self.until
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_off_keys_keep_every_property() {
        let model = OnceModel::new(None);
        let checker = model.clone().checker().spawn_bfs().join();
        for property in model.properties() {
            let found = checker.discovery(property.name);
            if property.expectation == stateright::Expectation::Sometimes {
                assert!(found.is_some(), "never reached: {}", property.name);
            } else if let Some(path) = found {
                panic!("`{}` broken: {:#?}", property.name, path.into_actions());
            }
        }
        let unique = checker.unique_state_count();
        if let Err(why) = crate::counts::compare("unit scheduler one-off keys", unique) {
            panic!("{why}");
        }
    }

    #[test]
    fn every_one_off_mutant_is_caught_by_its_property() {
        for mutant in OnceMutant::ALL {
            if let Err(why) = mutant.caught() {
                panic!("{why}");
            }
        }
    }
}
