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
//! * [`REQUESTS_EXPIRE`] — nothing is kept forever: whenever `run_now` requests are queued,
//!   their list has an expiry (`request.lua` sets it; `withdraw.lua` sets it again for a
//!   request it queues back, the list having gone with its last request).
//!
//! Every fault and every path these are about is reached ([`REACHABLE`]), so none holds
//! vacuously. [`SchedMutant`] applies one bug at a time; each is caught by the property its
//! doc names, at the unit bounds.

use stateright::{Checker, Model, Property};

pub use super::world::{
    AT_MOST_ONCE, NO_WAIT_BEHIND_DEAD, PAUSED_OPENS_NOTHING, REQUEST_AT_MOST_ONCE, REQUEST_RUNS,
    REQUESTS_EXPIRE, SLOT_HELD, SchedMutant,
};
use super::world::{
    EV_DEAD_TURN, EV_DIED_CLAIMED, EV_MISSED, EV_PAUSED_REFUSED, EV_PAUSED_REQUEST_RAN,
    EV_REQUEUED_RAN, EV_SLOT_LAPSED, EV_SLOT_WAIT, EV_WITHDRAWN, FIRES, SETTLE, SchedModel,
    SchedState,
};

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
        Property::always(REQUESTS_EXPIRE, |_, s: &SchedState| {
            s.redis.requests.is_empty() || s.redis.requests_expire.is_some()
        }),
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

impl SchedMutant {
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
