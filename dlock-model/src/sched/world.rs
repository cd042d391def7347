//! The claim model's world: its bounds, the replicas' and runs' states, the actions, the
//! names of its properties and reachability events, and its mutants — the types the model
//! ([`super::model`]) steps and the properties ([`super::props`]) judge, below both so that
//! each imports downward.

use super::keys::{JobRedis, Ms};

/// The scheduled occurrences' fire times (and run ids).
pub const FIRES: [Ms; 2] = [1, 4];
/// The turn grace: how long the others leave an occurrence to the replica whose turn it is.
pub const GRACE: Ms = 1;
/// A replica skips an occurrence it has not claimed this long after its fire time (misfire).
pub const MISS: Ms = 2;
/// How long a heartbeat or a claim keeps a replica live.
pub const LIVENESS: Ms = 2;
/// The group slot's lease.
pub const SLOT_LEASE: Ms = 2;
/// The replicas.
pub const REPLICAS: usize = 2;
/// The replicas' ids, sorted as claim.lua sorts them.
pub const IDS: [&str; REPLICAS] = ["a", "b"];

/// A run a replica works on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Run {
    /// Scheduled occurrence `FIRES[i]`.
    Occurrence(u8),
    /// A `run_now` request's run, the replica's `n`-th take (run id `m<replica><n>`).
    Manual(u8),
}

/// A replica's attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Task {
    /// Nothing: may claim or take.
    Idle,
    /// A claim or take whose reply was lost: to withdraw first.
    #[allow(missing_docs)]
    Unanswered { run: Run, token: u8 },
    /// Won the claim.
    #[allow(missing_docs)]
    Claimed { run: Run, token: u8 },
    /// Recorded "running"; waits for the group slot.
    #[allow(missing_docs)]
    Recorded { run: Run, token: u8 },
    /// Holds the slot since `at` (by its own clock).
    #[allow(missing_docs)]
    Slotted { run: Run, token: u8, at: Ms },
    /// Its handler runs since `since`.
    #[allow(missing_docs)]
    Running { run: Run, token: u8, since: Ms },
}

/// A replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Replica {
    /// Running (not killed).
    pub up: bool,
    /// Stopped by the environment (a pause of the process).
    pub stopped: bool,
    /// The next occurrence it will try (`FIRES.len()`: none left).
    pub next: u8,
    /// Told to wait: not before this.
    pub retry_at: Ms,
    /// Requests it took (numbers its manual run ids).
    pub takes: u8,
    /// Its attempt.
    pub task: Task,
}

/// The model's state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SchedState {
    /// The server's clock.
    pub now: Ms,
    /// The job's keys.
    pub redis: JobRedis,
    /// The group slot: (replica, token, lease deadline); free when absent or lapsed.
    pub slot: Option<(u8, u8, Ms)>,
    /// The replicas.
    pub replicas: [Replica; REPLICAS],
    /// The last token handed out.
    pub tokens: u8,
    /// Budgets used: kills, stops, lost replies, job pauses, requests.
    pub used: Used,
    /// When the last fault or pause ended.
    pub calm_since: Ms,
    /// Ghosts, for the properties.
    pub ghost: Ghost,
}

/// The environment's and the operator's budgets used so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Used {
    /// Replicas killed.
    pub kills: u8,
    /// Replicas stopped.
    pub stops: u8,
    /// Replies lost.
    pub lost: u8,
    /// Job pauses.
    pub pauses: u8,
    /// `run_now` requests.
    pub requests: u8,
}

/// What the properties look at; `event` is set by the step that made it and cleared by the
/// next (so a reachability check does not double the state space).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ghost {
    /// Handlers started, by run id, in order.
    pub started: Vec<String>,
    /// A claim or take opened a run while the job was paused.
    pub opened_while_paused: bool,
    /// A replica asking at or after an occurrence's fire time + grace was told to wait.
    pub waited_past_grace: bool,
    /// A handler started while its slot was not its replica's on the server.
    pub started_without_slot: bool,
    /// Requests made while the job was paused and not yet run.
    pub paused_requests: u8,
    /// Requests a withdrawal queued again and not yet run.
    pub requeued: u8,
    /// When the last request was made.
    pub last_request: Ms,
    /// The reachability events of the last step (`props::EV_*`).
    pub event: u16,
}

/// One step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SchedAction {
    /// Time passes; every running replica heartbeats.
    Tick,
    /// claim.lua for the replica's next occurrence; `lost`: its reply is lost.
    Claim(usize, bool),
    /// The replica skips its next occurrence: missed by more than [`MISS`].
    Skip(usize),
    /// take_request.lua; `lost`: its reply is lost.
    Take(usize, bool),
    /// withdraw.lua for the unanswered claim.
    Withdraw(usize),
    /// Record "running" (the run took its lock).
    Record(usize),
    /// Take the group slot.
    Slot(usize),
    /// Start the handler.
    Start(usize),
    /// The handler ended: record it, give the slot back.
    Finish(usize),
    /// The environment kills a replica.
    Kill(usize),
    /// A killed replica starts again.
    Restart(usize),
    /// The environment stops a replica.
    Stop(usize),
    /// And lets it go on.
    Go(usize),
    /// The operator: request.lua.
    Request,
    /// The operator: pause.
    Pause,
    /// The operator: resume.lua.
    Resume,
}

/// The model: bounds, budgets and the mutant applied, if any.
#[derive(Clone, Debug)]
pub struct SchedModel {
    /// The bug applied.
    pub mutant: Option<SchedMutant>,
    /// Budgets: kills, stops, lost replies, job pauses, requests.
    pub budget: Used,
    /// The last tick explored.
    pub until: Ms,
}

/// Ticks after the last fault by which a request has run (take, record, slot up to one lease
/// behind another run, start, a margin).
pub const SETTLE: Ms = 3;

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
/// `the run-now request list always expires`.
pub const REQUESTS_EXPIRE: &str = "the run-now request list always expires";

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
    /// withdraw.lua queues a withdrawn request again without the list's expiry (the scripts
    /// before this check): a list whose last request was taken is made again with none, and
    /// kept forever if no replica takes it. Caught by [`REQUESTS_EXPIRE`].
    WithdrawWithoutExpiry,
}

impl SchedMutant {
    /// Every mutant.
    pub const ALL: [SchedMutant; 7] = [
        SchedMutant::TurnIgnoresGrace,
        SchedMutant::ClaimIgnoresPause,
        SchedMutant::TakeIgnoresPause,
        SchedMutant::WithdrawIgnoresToken,
        SchedMutant::WithdrawDropsRequest,
        SchedMutant::StartsWithLapsedSlot,
        SchedMutant::WithdrawWithoutExpiry,
    ];

    /// The property that catches it.
    pub fn property(self) -> &'static str {
        match self {
            SchedMutant::TurnIgnoresGrace => NO_WAIT_BEHIND_DEAD,
            SchedMutant::ClaimIgnoresPause | SchedMutant::TakeIgnoresPause => PAUSED_OPENS_NOTHING,
            SchedMutant::WithdrawIgnoresToken => AT_MOST_ONCE,
            SchedMutant::WithdrawDropsRequest => REQUEST_RUNS,
            SchedMutant::StartsWithLapsedSlot => SLOT_HELD,
            SchedMutant::WithdrawWithoutExpiry => REQUESTS_EXPIRE,
        }
    }
}
