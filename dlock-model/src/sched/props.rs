//! The claim model's properties ([`super::model::SchedModel`]), its reachability checks and
//! its mutants.
//!
//! Properties (each a `const` below, named as in the crate README's table):
//! * [`AT_MOST_ONCE`] — under at-most-once delivery a scheduled occurrence's handler starts at
//!   most once, whatever is killed, stopped or lost: turns, waits, withdrawals and restarts.
//! * [`REQUEST_AT_MOST_ONCE`] — a `run_now` request's handler starts at most once, also when
//!   the take's reply was lost and the request was queued again.
//! * [`REQUEST_RUNS`] — and it does start: when no replica was killed (a killed replica's
//!   taken request is lost, as at-most-once allows), [`super::model::SETTLE`] ticks after the
//!   request, the last resume and the last fault, every request has run.
//! * [`PAUSED_OPENS_NOTHING`] — while the job is paused, no claim and no take opens a run.
//! * [`NO_WAIT_BEHIND_DEAD`] — bounded response: a replica that asks for an occurrence at or
//!   after its fire time plus the turn grace is never told to wait, whether the replica whose
//!   turn it is died, stopped or lives (claim.lua waits for a turn holder only within the
//!   grace; a dead one stays in the live set for its liveness, which is longer).
//! * [`SLOT_HELD`] — the group slot composed with a run: a handler starts only while its
//!   replica holds the slot on the server (a run whose slot lease ran out while its replica was
//!   stopped does not start).
//!
//! Every fault and every path these are about is reached ([`REACHABLE`]), so none holds
//! vacuously. [`SchedMutant`] applies one bug at a time; each is caught by the property its
//! doc names, at the unit bounds.

use stateright::{Checker, Model, Property};

use super::model::{FIRES, SETTLE, SchedModel, SchedState};

/// `an occurrence runs at most once`.
pub const AT_MOST_ONCE: &str = "an occurrence runs at most once";
/// `a run-now request runs at most once`.
pub const REQUEST_AT_MOST_ONCE: &str = "a run-now request runs at most once";
/// `a run-now request runs`.
pub const REQUEST_RUNS: &str = "a run-now request runs";
/// `a paused job opens no run`.
pub const PAUSED_OPENS_NOTHING: &str = "a paused job opens no run";
/// `nothing waits behind a dead replica`.
pub const NO_WAIT_BEHIND_DEAD: &str = "nothing waits behind a dead replica";
/// `a run never starts without its group slot`.
pub const SLOT_HELD: &str = "a run never starts without its group slot";

/// Another replica claimed an occurrence whose turn holder was dead or stopped.
pub(crate) const EV_DEAD_TURN: u16 = 1;
/// A claim or take whose reply was lost was withdrawn.
pub(crate) const EV_WITHDRAWN: u16 = 1 << 1;
/// A request queued again by a withdrawal ran.
pub(crate) const EV_REQUEUED_RAN: u16 = 1 << 2;
/// A replica died between its claim and its handler.
pub(crate) const EV_DIED_CLAIMED: u16 = 1 << 3;
/// A claim was refused: the job was paused.
pub(crate) const EV_PAUSED_REFUSED: u16 = 1 << 4;
/// A request made while the job was paused ran (after the resume).
pub(crate) const EV_PAUSED_REQUEST_RAN: u16 = 1 << 5;
/// An occurrence nobody had claimed was skipped as missed.
pub(crate) const EV_MISSED: u16 = 1 << 6;
/// A recorded run waited for the group slot while another held it.
pub(crate) const EV_SLOT_WAIT: u16 = 1 << 7;
/// A run's slot lease ran out before its handler started; it did not start.
pub(crate) const EV_SLOT_LAPSED: u16 = 1 << 8;

/// The reachability checks: (name, event).
pub const REACHABLE: [(&str, u16); 9] = [
    (
        "a dead turn holder's occurrence was claimed by another replica (reachable)",
        EV_DEAD_TURN,
    ),
    (
        "a claim whose reply was lost was withdrawn (reachable)",
        EV_WITHDRAWN,
    ),
    ("a withdrawn request ran (reachable)", EV_REQUEUED_RAN),
    (
        "a replica died between its claim and its run (reachable)",
        EV_DIED_CLAIMED,
    ),
    (
        "a paused job refused a claim (reachable)",
        EV_PAUSED_REFUSED,
    ),
    (
        "a request made while paused ran after the resume (reachable)",
        EV_PAUSED_REQUEST_RAN,
    ),
    (
        "an occurrence nobody claimed was skipped as missed (reachable)",
        EV_MISSED,
    ),
    ("a run waited for the group slot (reachable)", EV_SLOT_WAIT),
    (
        "a slot lapsed before its run started, which did not start (reachable)",
        EV_SLOT_LAPSED,
    ),
];

fn manual_starts(s: &SchedState) -> usize {
    s.ghost
        .started
        .iter()
        .filter(|id| id.starts_with('m'))
        .count()
}

/// Every property, the reachability checks last.
pub(crate) fn all() -> Vec<Property<SchedModel>> {
    let mut out: Vec<Property<SchedModel>> = vec![
        Property::always(AT_MOST_ONCE, |_, s: &SchedState| {
            FIRES.iter().all(|fire| {
                let id = fire.to_string();
                s.ghost.started.iter().filter(|run| **run == id).count() <= 1
            })
        }),
        Property::always(REQUEST_AT_MOST_ONCE, |_, s: &SchedState| {
            manual_starts(s) <= s.used.requests as usize
        }),
        Property::always(REQUEST_RUNS, |m: &SchedModel, s: &SchedState| {
            let settled = s.now == m.until
                && s.used.kills == 0
                && !s.redis.paused
                && s.replicas.iter().all(|r| !r.stopped)
                && s.now >= s.calm_since + SETTLE
                && (s.used.requests == 0 || s.now >= s.ghost.last_request + SETTLE);
            !settled || manual_starts(s) == s.used.requests as usize
        }),
        Property::always(PAUSED_OPENS_NOTHING, |_, s: &SchedState| {
            !s.ghost.opened_while_paused
        }),
        Property::always(NO_WAIT_BEHIND_DEAD, |_, s: &SchedState| {
            !s.ghost.waited_past_grace
        }),
        Property::always(SLOT_HELD, |_, s: &SchedState| !s.ghost.started_without_slot),
    ];
    // Closures without captures (stateright takes fn pointers): one per event.
    macro_rules! reached {
        ($($i:literal),*) => {
            $(out.push(Property::sometimes(REACHABLE[$i].0, |_, s: &SchedState| {
                s.ghost.event & REACHABLE[$i].1 != 0
            }));)*
        };
    }
    reached!(0, 1, 2, 3, 4, 5, 6, 7, 8);
    out
}

/// One protocol bug (see each for the property that catches it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SchedMutant {
    /// claim.lua waits for the turn holder as long as it is in the live set, not only within
    /// the turn grace: a dead holder delays its occurrence by its liveness. Caught by
    /// [`NO_WAIT_BEHIND_DEAD`].
    TurnIgnoresGrace,
    /// claim.lua does not look at the pause key. Caught by [`PAUSED_OPENS_NOTHING`].
    ClaimIgnoresPause,
    /// take_request.lua does not look at the pause key. Caught by [`PAUSED_OPENS_NOTHING`].
    TakeIgnoresPause,
    /// withdraw.lua does not compare the attempt token: a replica whose lost claim lost the
    /// race withdraws the winner's claim, and the occurrence is claimed again. Caught by
    /// [`AT_MOST_ONCE`].
    WithdrawIgnoresToken,
    /// withdraw.lua does not queue a withdrawn request again: the request is lost. Caught by
    /// [`REQUEST_RUNS`].
    WithdrawDropsRequest,
    /// A run starts its handler without looking at its slot's lease (the scheduler ignoring a
    /// lost permit). Caught by [`SLOT_HELD`].
    StartsWithLapsedSlot,
}

impl SchedMutant {
    /// Every mutant.
    pub const ALL: [SchedMutant; 6] = [
        SchedMutant::TurnIgnoresGrace,
        SchedMutant::ClaimIgnoresPause,
        SchedMutant::TakeIgnoresPause,
        SchedMutant::WithdrawIgnoresToken,
        SchedMutant::WithdrawDropsRequest,
        SchedMutant::StartsWithLapsedSlot,
    ];

    /// The property that catches it.
    pub fn property(self) -> &'static str {
        match self {
            SchedMutant::TurnIgnoresGrace => NO_WAIT_BEHIND_DEAD,
            SchedMutant::ClaimIgnoresPause | SchedMutant::TakeIgnoresPause => PAUSED_OPENS_NOTHING,
            SchedMutant::WithdrawIgnoresToken => AT_MOST_ONCE,
            SchedMutant::WithdrawDropsRequest => REQUEST_RUNS,
            SchedMutant::StartsWithLapsedSlot => SLOT_HELD,
        }
    }

    /// The mutation check at the unit bounds: its property is broken with the mutant applied.
    ///
    /// # Errors
    /// Names what was broken instead.
    pub fn caught(self) -> Result<(), String> {
        let model = match self {
            SchedMutant::TurnIgnoresGrace | SchedMutant::StartsWithLapsedSlot => {
                SchedModel::turns(Some(self))
            }
            _ => SchedModel::requests(Some(self)),
        };
        let names = model.must_hold();
        let checker = model.checker().threads(2).spawn_bfs().join();
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

/// Judges a finished check of the model: every property holds, every reachability check was
/// reached.
///
/// # Errors
/// The first property broken (with its trace) or check not reached.
pub fn verdict<C: Checker<SchedModel>>(model: &SchedModel, checker: &C) -> Result<(), String> {
    for property in model.properties() {
        let found = checker.discovery(property.name);
        if property.expectation == stateright::Expectation::Sometimes {
            if found.is_none() && model.reachable().contains(&property.name) {
                return Err(format!("never reached: {}", property.name));
            }
        } else if let Some(path) = found {
            return Err(format!(
                "`{}` broken: {:#?}",
                property.name,
                path.into_actions()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_and_deaths_keep_every_property() {
        keeps_every_property("unit scheduler turns", SchedModel::turns(None));
    }

    #[test]
    fn requests_pauses_and_lost_replies_keep_every_property() {
        keeps_every_property("unit scheduler requests", SchedModel::requests(None));
    }

    fn keeps_every_property(id: &str, model: SchedModel) {
        let started = std::time::Instant::now();
        let checker = model.clone().checker().threads(2).spawn_bfs().join();
        eprintln!(
            "`{id}`: {} unique states, {:.1?}",
            checker.unique_state_count(),
            started.elapsed()
        );
        if let Err(why) = verdict(&model, &checker) {
            panic!("{why}");
        }
        if let Err(why) = crate::counts::compare(id, checker.unique_state_count()) {
            panic!("{why}");
        }
    }
}
