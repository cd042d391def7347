//! The scheduler's run-time schedules (dlock-scheduler, issue #31) as a checked model: one
//! schedule name whose record an operator adds, changes and removes (`schedule.lua`: the hash,
//! the revision counter and a wake-up message in one step), and three replicas that follow it
//! (`follow.rs`): one with the schedule's handler, one without (an older deploy). A replica
//! looks when a wake-up message reaches it and at every heartbeat; a look reads the revision,
//! and only when it moved reads the hash and makes its jobs match — two separate requests,
//! between which the operator may change the schedule again. The adversary loses wake-up
//! messages (a replica that was reconnecting).
//!
//! Time is in heartbeats: every replica looks once per heartbeat (a tick does not pass while a
//! replica's poll or read is due), so the bounded-response property below is about the
//! protocol, not about a replica that chose not to look.
//!
//! Properties ([`ScheduleModel::properties`]):
//! * `never without the handler` — a replica without the handler never runs the schedule.
//! * `seen means current` — a replica that has read the current revision runs exactly what is
//!   stored (nothing once it is removed; the changed version once it changed).
//! * `converges within a heartbeat` — [`CONVERGE_TICKS`] heartbeats after the last change, every
//!   replica runs what is stored, whatever messages were lost.
//!
//! [`ScheduleMutant`] applies one protocol bug at a time; each is caught by the property its
//! doc names. Not modelled: several schedules (each name is followed independently, the hash
//! is read whole), the jobs' own claims (the claim model's business: a stopped loop claims
//! nothing), a Redis restart that empties the hash (the counter restarts too; a replica that
//! saw a higher revision then waits for the counter to move again — see the docs of
//! `follow.rs`).

use stateright::{Checker, Model, Property};

/// The replicas: the first [`WITH_HANDLER`] have the handler. (Replicas do not interact: each
/// follows Redis on its own, so one of each kind covers every case.)
pub const REPLICAS: usize = 2;
/// How many replicas have the handler.
pub const WITH_HANDLER: usize = 1;
/// How many changes the operator makes at most: enough to add and then change or remove.
pub const MAX_CHANGES: u8 = 2;
/// Heartbeats after the last change by which every replica runs what is stored: a look that
/// straddled the change reads the revision again at the next heartbeat.
pub const CONVERGE_TICKS: u8 = 2;

/// One protocol bug (see the module docs for the property that catches each).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScheduleMutant {
    /// A look reads the hash first and the revision after: a change between the two leaves
    /// the replica with the old record under the new revision, and it never reads again.
    /// Caught by `seen means current`.
    HashBeforeRevision,
    /// Replicas look only when a wake-up message reaches them (no poll): a lost message leaves
    /// one running a removed schedule. Caught by `converges within a heartbeat`.
    NoPoll,
    /// A replica starts a schedule whatever its handlers. Caught by `never without the
    /// handler`.
    IgnoresHandlers,
}

impl ScheduleMutant {
    /// Every mutant.
    pub const ALL: [ScheduleMutant; 3] = [
        ScheduleMutant::HashBeforeRevision,
        ScheduleMutant::NoPoll,
        ScheduleMutant::IgnoresHandlers,
    ];

    /// The property that catches it.
    pub fn property(self) -> &'static str {
        match self {
            ScheduleMutant::HashBeforeRevision => "seen means current",
            ScheduleMutant::NoPoll => "converges within a heartbeat",
            ScheduleMutant::IgnoresHandlers => "never without the handler",
        }
    }

    /// The mutation check: its property is broken with the mutant applied (the unit tests and
    /// `make model-mutants`).
    ///
    /// # Errors
    /// Names what was broken instead.
    pub fn caught(self) -> Result<(), String> {
        let model = ScheduleModel::new(Some(self));
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

/// A version of the schedule's record (another cron expression, other arguments).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Version {
    /// As first added.
    First,
    /// As changed.
    Second,
}

/// A look in progress: what its first request read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reading {
    /// Read the revision (the hash comes next).
    Revision(u8),
    /// Mutant [`ScheduleMutant::HashBeforeRevision`]: read the hash (the revision comes next).
    Hash(Option<Version>),
}

/// A replica following the schedules.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Follower {
    /// Whether it registered the schedule's handler.
    pub has_handler: bool,
    /// The revision it last read in full.
    pub seen: Option<u8>,
    /// A look in progress.
    pub reading: Option<Reading>,
    /// The version it runs (a job loop).
    pub running: Option<Version>,
    /// A wake-up message has reached it and not been acted on.
    pub woken: bool,
    /// It has polled in this heartbeat.
    pub polled: bool,
}

/// The model's state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ScheduleState {
    /// Heartbeats so far.
    pub now: u8,
    /// The stored record.
    pub stored: Option<Version>,
    /// The revision counter.
    pub revision: u8,
    /// The replicas.
    pub followers: [Follower; REPLICAS],
    /// Changes so far.
    pub changes: u8,
    /// When the last change was made.
    pub last_change: u8,
    /// Whether a wake-up message was lost (ghost, for reachability).
    pub lost: bool,
}

/// One step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScheduleAction {
    /// A heartbeat passes.
    Tick,
    /// schedule.lua: store this version (`None`: remove).
    Change(Option<Version>),
    /// A wake-up message to this replica is lost.
    Lose(usize),
    /// The first request of a look.
    Look(usize),
    /// The second request, and the jobs made to match.
    Read(usize),
}

/// The model: the checker explores every interleaving up to `until` heartbeats.
#[derive(Clone, Debug)]
pub struct ScheduleModel {
    /// The bug applied, if any.
    pub mutant: Option<ScheduleMutant>,
    /// Heartbeats explored.
    pub until: u8,
}

impl ScheduleModel {
    /// The model with `mutant` applied (`None`: the protocol as written).
    pub fn new(mutant: Option<ScheduleMutant>) -> Self {
        Self {
            mutant,
            until: MAX_CHANGES + CONVERGE_TICKS + 1,
        }
    }

    fn is(&self, mutant: ScheduleMutant) -> bool {
        self.mutant == Some(mutant)
    }

    /// The names of the properties that must hold (the `always` ones).
    pub fn must_hold(&self) -> Vec<&'static str> {
        self.properties()
            .into_iter()
            .filter(|p| p.expectation == stateright::Expectation::Always)
            .map(|p| p.name)
            .collect()
    }

    /// Whether replica `f` runs what is stored.
    fn current(f: &Follower, stored: Option<Version>) -> bool {
        f.running == if f.has_handler { stored } else { None }
    }

    /// The replica makes its jobs match `record`, read under `revision`.
    fn reconcile(&self, f: &mut Follower, record: Option<Version>, revision: u8) {
        f.running = if f.has_handler || self.is(ScheduleMutant::IgnoresHandlers) {
            record
        } else {
            None
        };
        f.seen = Some(revision);
        f.reading = None;
    }
}

impl Model for ScheduleModel {
    type State = ScheduleState;
    type Action = ScheduleAction;

    fn init_states(&self) -> Vec<ScheduleState> {
        let follower = |i: usize| Follower {
            has_handler: i < WITH_HANDLER,
            seen: None,
            reading: None,
            running: None,
            woken: false,
            polled: false,
        };
        vec![ScheduleState {
            now: 0,
            stored: None,
            revision: 0,
            followers: [follower(0), follower(1)],
            changes: 0,
            last_change: 0,
            lost: false,
        }]
    }

    fn actions(&self, s: &ScheduleState, actions: &mut Vec<ScheduleAction>) {
        let poll = !self.is(ScheduleMutant::NoPoll);
        let due = |f: &Follower| f.reading.is_some() || (poll && !f.polled);
        if !s.followers.iter().any(due) {
            actions.push(ScheduleAction::Tick);
        }
        if s.changes < MAX_CHANGES {
            for version in [None, Some(Version::First), Some(Version::Second)] {
                // schedule.lua changes nothing (no revision, no message) for the same record.
                if version != s.stored {
                    actions.push(ScheduleAction::Change(version));
                }
            }
        }
        for (r, f) in s.followers.iter().enumerate() {
            if f.woken {
                actions.push(ScheduleAction::Lose(r));
            }
            if f.reading.is_none() && (f.woken || (poll && !f.polled)) {
                actions.push(ScheduleAction::Look(r));
            }
            if f.reading.is_some() {
                actions.push(ScheduleAction::Read(r));
            }
        }
    }

    fn next_state(&self, last: &ScheduleState, action: ScheduleAction) -> Option<ScheduleState> {
        let mut s = last.clone();
        match action {
            ScheduleAction::Tick => {
                s.now += 1;
                for f in &mut s.followers {
                    f.polled = false;
                }
            }
            ScheduleAction::Change(version) => {
                s.stored = version;
                s.revision += 1;
                s.changes += 1;
                s.last_change = s.now;
                for f in &mut s.followers {
                    f.woken = true;
                }
            }
            ScheduleAction::Lose(r) => {
                s.followers[r].woken = false;
                s.lost = true;
            }
            ScheduleAction::Look(r) => {
                let f = &mut s.followers[r];
                // A message and a poll both lead here; either is spent.
                if f.woken {
                    f.woken = false;
                } else {
                    f.polled = true;
                }
                if self.is(ScheduleMutant::HashBeforeRevision) {
                    f.reading = Some(Reading::Hash(s.stored));
                } else if f.seen == Some(s.revision) {
                    // Nothing moved: no second request.
                } else {
                    f.reading = Some(Reading::Revision(s.revision));
                }
            }
            ScheduleAction::Read(r) => {
                let mut f = s.followers[r];
                match f.reading? {
                    Reading::Revision(revision) => self.reconcile(&mut f, s.stored, revision),
                    Reading::Hash(record) => self.reconcile(&mut f, record, s.revision),
                }
                s.followers[r] = f;
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("never without the handler", |_, s: &ScheduleState| {
                s.followers
                    .iter()
                    .all(|f| f.has_handler || f.running.is_none())
            }),
            Property::always("seen means current", |_, s: &ScheduleState| {
                s.followers.iter().all(|f| {
                    f.seen != Some(s.revision) || f.reading.is_some() || Self::current(f, s.stored)
                })
            }),
            Property::always("converges within a heartbeat", |_, s: &ScheduleState| {
                s.changes == 0
                    || s.now < s.last_change + CONVERGE_TICKS
                    || s.followers.iter().all(|f| Self::current(f, s.stored))
            }),
            // Reachability: the interesting cases happen at these bounds.
            Property::sometimes("a look straddles a change", |_, s: &ScheduleState| {
                s.followers
                    .iter()
                    .any(|f| matches!(f.reading, Some(Reading::Revision(r)) if r < s.revision))
            }),
            Property::sometimes(
                "a removal reaches a replica whose message was lost",
                |_, s: &ScheduleState| {
                    s.lost
                        && s.changes == MAX_CHANGES
                        && s.stored.is_none()
                        && s.followers.iter().all(|f| Self::current(f, s.stored))
                },
            ),
        ]
    }

    fn within_boundary(&self, s: &ScheduleState) -> bool {
        s.now <= self.until
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_protocol_keeps_every_property() {
        let model = ScheduleModel::new(None);
        let checker = model.clone().checker().spawn_bfs().join();
        for property in model.properties() {
            let found = checker.discovery(property.name);
            if property.expectation == stateright::Expectation::Sometimes {
                assert!(found.is_some(), "never reached: {}", property.name);
            } else if let Some(path) = found {
                panic!("`{}` broken: {:#?}", property.name, path.into_actions());
            }
        }
        if let Err(why) = crate::counts::compare("unit schedules", checker.unique_state_count()) {
            panic!("{why}");
        }
    }

    #[test]
    fn each_mutant_is_caught_by_its_property() {
        for mutant in ScheduleMutant::ALL {
            if let Err(why) = mutant.caught() {
                panic!("{why}");
            }
        }
    }
}
