//! The rate limiter's checked model: a few clients that try, reserve and refund on one
//! limiter (rate.lua, [`crate::rate`]), the clock advancing one tick at a time, and Redis
//! restarting empty (the key lost). Every cell admitted is logged at the server time it was
//! admitted for (a reservation's: now + wait), with the restart epoch it was decided in.
//!
//! # Properties
//!
//! * [`WINDOW`] `no window admits more than rate x window + burst`: for the cells decided in one
//!   epoch (between two restarts), every interval `[a, a + w)` of whole ticks holds fewer than
//!   `w / t + burst + r` cells, `r` being the cells refunded in that epoch. Checked as
//!   `count * t < w + (burst + r) * t` on the intervals from one cell's time to another's
//!   (the tightest ones). The GCRA bound is strict: n cells in `[a, a + w)` need
//!   `(n - 1) * t <= w - 1 + tau`. **Restarts**: a restart loses the TAT, so it gives one
//!   fresh burst; the property compares cells of one epoch only, so cells reserved before a
//!   restart are not counted against the bucket after it. **Refunds**: a refund gives back a
//!   slot the TAT had already passed, and a later request may take it at a later time than
//!   the slot it frees (t = 10, burst 1: cells at 0, 10 and 20 reserved, 10 refunded, a new
//!   one at 20), so each refunded cell is allowed once over the bound — this is
//!   "a refund never admits more than was refunded".
//! * [`REFUSED_TRY`] `a refused try changes nothing`: the key is as it was.
//! * [`REFILLED`] `a refilled bucket admits a try`: a try of n <= burst cells at least
//!   `t * burst` after the last admitted cell's time is admitted.
//! * [`REFUND_FLOOR`] `a refund keeps the TAT at or after now`: the TAT after a refund is not
//!   before now and the reply counts at most a burst remaining.
//! * [`RESERVE_WAIT`] `a reservation waits at most its max wait`.
//!
//! And five that must be reached (`sometimes`), so that none of the above is vacuous: a try
//! admitted, a try limited, a reservation made with a wait, a refund that gave cells back, and
//! a restart that lost a key whose TAT was still ahead of the clock (a bucket in use).
//!
//! # Restarts
//!
//! The restart here comes back empty. A failover to a lagging replica (or an AOF) comes back
//! with an older TAT of the same key instead. [`WINDOW`]'s bound per restart epoch does not
//! depend on the TAT an epoch starts from: every cell admitted in it moves the TAT at least
//! one emission interval past the epoch's first admitted cell, whatever the TAT was before,
//! and a cell conforms only within the tolerance of it. So the bound README states — "a
//! restart or failover resets a limiter (one fresh burst)" — holds for a lagging copy as for
//! an empty restart, which is the restart that admits the most at once (no TAT at all).

use stateright::{Model, Property};

use crate::rate::{Quota, RateMode, RateMutant, RateOp, RateReply, RateServer, Stored, Tick, rate};

/// `no window admits more than rate x window + burst`.
pub const WINDOW: &str = "no window admits more than rate x window + burst";
/// `a refused try changes nothing`.
pub const REFUSED_TRY: &str = "a refused try changes nothing";
/// `a refilled bucket admits a try`.
pub const REFILLED: &str = "a refilled bucket admits a try";
/// `a refund keeps the TAT at or after now`.
pub const REFUND_FLOOR: &str = "a refund keeps the TAT at or after now";
/// `a reservation waits at most its max wait`.
pub const RESERVE_WAIT: &str = "a reservation waits at most its max wait";

/// The checks that must be reached (`sometimes`), so that none of the properties is vacuous
/// (the last: the restart, with an effect).
pub const REACHABLE: [&str; 5] = [
    "a try is admitted",
    "a try is limited",
    "a reservation waits",
    "a refund gives cells back",
    "a restart emptied a bucket in use",
];

/// The verdict of a finished check: `Err` with the trace of the first broken property, or
/// naming a check of [`REACHABLE`] that was not reached.
///
/// # Errors
/// As above.
pub fn verdict(checker: &impl stateright::Checker<RateModel>) -> Result<(), String> {
    for property in checker.model().properties() {
        let found = checker.discovery(property.name);
        if REACHABLE.contains(&property.name) {
            if found.is_none() {
                return Err(format!("`{}` not reached: vacuous", property.name));
            }
        } else if let Some(path) = found {
            return Err(format!("`{}` broken:\n{}", property.name, trace(path)));
        }
    }
    Ok(())
}

/// One admitted cell group: `n` cells at server time `at`, decided in restart epoch `epoch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cells {
    /// The time they were admitted for.
    pub at: Tick,
    /// How many.
    pub n: u64,
    /// The restart epoch of the decision.
    pub epoch: u8,
}

/// The last step of rate.lua, for the properties about one step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Last {
    /// What was asked.
    pub op: RateOp,
    /// The answer.
    pub reply: RateReply,
    /// The key before and after.
    pub before: Option<Stored>,
    /// The key after.
    pub after: Option<Stored>,
    /// The latest time any cell was admitted for, before this step.
    pub latest: Option<Tick>,
}

/// The model's state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RateState {
    /// The server clock.
    pub now: Tick,
    /// The limiter's key.
    pub server: RateServer,
    /// Restarts so far.
    pub epoch: u8,
    /// Every admitted cell group.
    pub log: Vec<Cells>,
    /// Cells refunded in each epoch.
    pub refunded: Vec<u64>,
    /// Each client's reservation not used yet: its time and cells.
    pub pending: Vec<Option<(Tick, u64)>>,
    /// Calls of rate.lua left.
    pub calls: u8,
    /// The last call.
    pub last: Option<Last>,
    /// The last step was a restart that lost a key whose TAT was after the clock.
    pub reset: bool,
}

/// A step of the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RateAction {
    /// The clock moves one tick.
    Tick,
    /// Client `c` tries for `n` cells.
    Try(u8, u64),
    /// Client `c` reserves `n` cells.
    Reserve(u8, u64),
    /// Client `c` gives back its reservation, before its time.
    Refund(u8),
    /// Redis restarts empty.
    Restart,
}

/// The model: its bounds and the mutant applied.
#[derive(Clone, Debug)]
pub struct RateModel {
    /// The limiter's quota.
    pub quota: Quota,
    /// A reservation's max wait.
    pub max_wait: Tick,
    /// Clients.
    pub clients: u8,
    /// Calls of rate.lua in all.
    pub calls: u8,
    /// The clock's last tick.
    pub until: Tick,
    /// Restarts allowed.
    pub restarts: u8,
    /// The protocol bug applied, if any.
    pub mutant: Option<RateMutant>,
}

/// The bounds the tests check.
pub mod bounds {
    use super::{Quota, RateModel};

    /// Cheap (in `cargo test`): t = 2, burst 2, two clients, four calls, eight ticks, one
    /// restart.
    pub fn unit_rate() -> RateModel {
        RateModel {
            quota: Quota { t: 2, burst: 2 },
            max_wait: 2,
            clients: 2,
            calls: 4,
            until: 8,
            restarts: 1,
            mutant: None,
        }
    }

    /// The deep target (`make model`): t = 2, burst 3, two clients, six calls, nine ticks,
    /// one restart.
    pub fn deep_rate() -> RateModel {
        RateModel {
            quota: Quota { t: 2, burst: 3 },
            max_wait: 4,
            clients: 2,
            calls: 6,
            until: 9,
            restarts: 1,
            mutant: None,
        }
    }
}

impl RateModel {
    fn call(&self, s: &mut RateState, op: RateOp) -> RateReply {
        let before = s.server.key;
        let latest = s.log.iter().map(|c| c.at).max();
        let reply = rate(&mut s.server, s.now, self.quota, op);
        s.calls -= 1;
        s.last = Some(Last {
            op,
            reply,
            before,
            after: s.server.key,
            latest,
        });
        reply
    }

    fn admit(s: &mut RateState, at: Tick, n: u64) {
        let epoch = s.epoch;
        s.log.push(Cells { at, n, epoch });
        // The order of decisions is no part of any property: one state per multiset of cells.
        s.log.sort_by_key(|c| (c.epoch, c.at, c.n));
    }
}

impl Model for RateModel {
    type State = RateState;
    type Action = RateAction;

    fn init_states(&self) -> Vec<RateState> {
        vec![RateState {
            now: 0,
            server: RateServer::new(1, self.mutant),
            epoch: 0,
            log: Vec::new(),
            refunded: vec![0],
            pending: vec![None; usize::from(self.clients)],
            calls: self.calls,
            last: None,
            reset: false,
        }]
    }

    fn actions(&self, s: &RateState, actions: &mut Vec<RateAction>) {
        if s.now < self.until {
            actions.push(RateAction::Tick);
        }
        if s.epoch < self.restarts {
            actions.push(RateAction::Restart);
        }
        if s.calls == 0 {
            return;
        }
        for c in 0..self.clients {
            match s.pending[usize::from(c)] {
                Some((at, _)) if s.now < at => actions.push(RateAction::Refund(c)),
                _ => {
                    for n in 1..=self.quota.burst {
                        actions.push(RateAction::Try(c, n));
                    }
                    actions.push(RateAction::Reserve(c, 1));
                }
            }
        }
    }

    fn next_state(&self, last: &RateState, action: RateAction) -> Option<RateState> {
        let mut s = last.clone();
        s.last = None;
        s.reset = false;
        match action {
            RateAction::Tick => {
                s.now += 1;
                s.server.expire(s.now);
            }
            RateAction::Restart => {
                s.reset = matches!(s.server.key, Some(Stored::Limiter { tat, .. }) if tat > s.now);
                s.server.key = None;
                s.epoch += 1;
                s.refunded.push(0);
            }
            RateAction::Try(_, n) => {
                let op = RateOp {
                    mode: RateMode::Try,
                    n,
                };
                if let RateReply::Decision { admitted: true, .. } = self.call(&mut s, op) {
                    let now = s.now;
                    Self::admit(&mut s, now, n);
                }
            }
            RateAction::Reserve(c, n) => {
                let mode = RateMode::Reserve {
                    max_wait: self.max_wait,
                };
                let op = RateOp { mode, n };
                if let RateReply::Decision {
                    admitted: true,
                    wait,
                    ..
                } = self.call(&mut s, op)
                {
                    let at = s.now + wait;
                    Self::admit(&mut s, at, n);
                    s.pending[usize::from(c)] = Some((at, n));
                }
            }
            RateAction::Refund(c) => {
                let (_, n) = s.pending[usize::from(c)].take()?;
                let op = RateOp {
                    mode: RateMode::Refund,
                    n,
                };
                self.call(&mut s, op);
                if let Some(r) = s.refunded.last_mut() {
                    *r += n;
                }
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(WINDOW, |m: &RateModel, s: &RateState| window_bound(m, s)),
            Property::always(REFUSED_TRY, |_, s: &RateState| {
                s.last.is_none_or(|l| match (l.op.mode, l.reply) {
                    (
                        RateMode::Try,
                        RateReply::Decision {
                            admitted: false, ..
                        },
                    ) => l.before == l.after,
                    _ => true,
                })
            }),
            Property::always(REFILLED, |m: &RateModel, s: &RateState| {
                s.last.is_none_or(|l| {
                    let refilled = l
                        .latest
                        .is_none_or(|at| s.now >= at + m.quota.t * m.quota.burst);
                    let asked = l.op.mode == RateMode::Try && l.op.n <= m.quota.burst;
                    !(refilled && asked)
                        || matches!(l.reply, RateReply::Decision { admitted: true, .. })
                })
            }),
            Property::always(REFUND_FLOOR, |m: &RateModel, s: &RateState| {
                s.last.is_none_or(|l| match (l.op.mode, l.reply) {
                    (RateMode::Refund, RateReply::Decision { remaining, .. }) => {
                        let tat = match l.after {
                            Some(Stored::Limiter { tat, .. }) => tat,
                            _ => s.now,
                        };
                        tat >= s.now && remaining <= m.quota.burst
                    }
                    _ => true,
                })
            }),
            Property::always(RESERVE_WAIT, |m: &RateModel, s: &RateState| {
                s.last.is_none_or(|l| match (l.op.mode, l.reply) {
                    (
                        RateMode::Reserve { .. },
                        RateReply::Decision {
                            admitted: true,
                            wait,
                            ..
                        },
                    ) => wait <= m.max_wait,
                    _ => true,
                })
            }),
            Property::sometimes(REACHABLE[0], |_, s: &RateState| {
                s.last.is_some_and(|l| {
                    l.op.mode == RateMode::Try
                        && matches!(l.reply, RateReply::Decision { admitted: true, .. })
                })
            }),
            Property::sometimes(REACHABLE[1], |_, s: &RateState| {
                s.last.is_some_and(|l| {
                    l.op.mode == RateMode::Try
                        && matches!(
                            l.reply,
                            RateReply::Decision {
                                admitted: false,
                                ..
                            }
                        )
                })
            }),
            Property::sometimes(REACHABLE[2], |_, s: &RateState| {
                s.last.is_some_and(|l| {
                    matches!(l.op.mode, RateMode::Reserve { .. })
                        && matches!(l.reply, RateReply::Decision { admitted: true, wait, .. } if wait > 0)
                })
            }),
            Property::sometimes(REACHABLE[4], |_, s: &RateState| s.reset),
            Property::sometimes(REACHABLE[3], |_, s: &RateState| {
                s.last.is_some_and(|l| {
                    let tat = |key| match key {
                        Some(Stored::Limiter { tat, .. }) => tat.max(s.now),
                        _ => s.now,
                    };
                    l.op.mode == RateMode::Refund && tat(l.after) < tat(l.before)
                })
            }),
        ]
    }

    fn within_boundary(&self, s: &RateState) -> bool {
        s.now <= self.until
    }
}

/// [`WINDOW`] on `s`'s log: per epoch, from every cell's time to every later one's.
fn window_bound(m: &RateModel, s: &RateState) -> bool {
    let t = m.quota.t;
    (0..=s.epoch).all(|epoch| {
        let refunded = s.refunded.get(usize::from(epoch)).copied().unwrap_or(0);
        let cells: Vec<&Cells> = s.log.iter().filter(|c| c.epoch == epoch).collect();
        cells.iter().all(|first| {
            cells.iter().filter(|c| c.at >= first.at).all(|last| {
                let w = last.at - first.at + 1;
                let count: u64 = cells
                    .iter()
                    .filter(|c| c.at >= first.at && c.at <= last.at)
                    .map(|c| c.n)
                    .sum();
                count * t < w + (m.quota.burst + refunded) * t
            })
        })
    })
}

/// A counterexample, one step a line.
pub fn trace(path: stateright::Path<RateState, RateAction>) -> String {
    let mut out = String::new();
    for (state, action) in path.into_vec() {
        let key = state.server.key;
        out.push_str(&format!(
            "  now {} key {key:?} log {:?} then {action:?}\n",
            state.now, state.log
        ));
        if let Some(last) = state.last {
            out.push_str(&format!("    (last: {:?} -> {:?})\n", last.op, last.reply));
        }
    }
    out
}
