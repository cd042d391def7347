//! The bounds the checker runs at: `unit*` in `cargo test` (tests/check.rs), `deep*` in
//! `make model` (tests/deep.rs). dlock-model/README.md records the unique states of each, and
//! both tests fail when a count drifts from it.

use super::{Env, Kind, LockModel, Req, model};
use crate::server::RW_LIMIT;

/// The model of `kind` at the unit test's bounds.
pub fn unit(kind: Kind) -> LockModel {
    let mut m = match kind {
        Kind::Mutex => model(
            kind,
            1,
            vec![vec![Req::of(1)], vec![Req::of(1).timeout(2)]],
            4,
        ),
        Kind::FencedMutex => model(
            kind,
            1,
            vec![vec![Req::of(1), Req::of(1)], vec![Req::of(1)]],
            4,
        ),
        Kind::Semaphore => model(
            kind,
            3,
            vec![
                vec![Req::of(2)],
                vec![Req::of(3).timeout(1)],
                vec![Req::of(1)],
            ],
            4,
        ),
        Kind::RwLock => model(
            kind,
            RW_LIMIT,
            vec![
                vec![Req::of(1).change()],
                vec![Req::of(RW_LIMIT).timeout(1).change()],
                vec![Req::of(1)],
            ],
            4,
        ),
        Kind::Election => model(
            kind,
            1,
            vec![vec![Req::of(1), Req::of(1)], vec![Req::of(1)]],
            4,
        ),
    };
    m.env = match kind {
        Kind::Mutex => Env {
            pauses: 1,
            lost_pushes: 1,
            lost_replies: 1,
            ..Env::default()
        },
        Kind::FencedMutex => Env {
            restarts: 1,
            lost_replies: 1,
            ..Env::default()
        },
        Kind::Semaphore => Env {
            crashes: 1,
            lost_pushes: 1,
            set_limit: Some(2),
            ..Env::default()
        },
        Kind::RwLock => Env {
            crashes: 1,
            lost_pushes: 1,
            ..Env::default()
        },
        Kind::Election => Env {
            crashes: 1,
            lost_pushes: 1,
            foreign_record: true,
            reads: 1,
            ..Env::default()
        },
    };
    m
}

/// The native release (issue #48): [`unit()`]'s mutex on a server with `DELIFEQ`, so that a
/// hold taken by the plain `SET` is released with it, and with release.lua after a 0. Its
/// pause, lost push and lost reply reach each of the 0's causes: a waiter flagged the hold
/// (release.lua hands it on), the holder was paused past its lease (release.lua answers
/// "expired") and the other client took it meanwhile ("held by another").
pub fn unit_native() -> LockModel {
    let mut m = unit(Kind::Mutex);
    m.env.native = true;
    m
}

/// The model of `kind` at the deeper bounds of `make model`: more clients or requests,
/// more of the environment, a longer clock.
pub fn deep(kind: Kind) -> LockModel {
    let mut m = unit(kind);
    match kind {
        Kind::Mutex => {
            m = unit_crowd();
            m.env.lost_pushes = 1;
            m.env.lost_replies = 1;
            m.max_time = 5;
        }
        Kind::FencedMutex => m.env.restarts = 2,
        Kind::Semaphore => {
            m.clients[0] = vec![Req::of(2).watchdog()];
            m.clients[2] = vec![Req::of(1).cancel()];
            m.env.lost_replies = 1;
        }
        Kind::RwLock => {
            m.clients[2] = vec![Req::of(1).cancel()];
            m.env.lost_replies = 1;
        }
        Kind::Election => {
            m.env.pauses = 1;
            m.max_time = 5;
        }
    }
    m
}

/// Retries of the shared scripts (issue #44): [`unit()`]'s requests with one lost reply (the
/// call sent again after its script ran), so that every shared script's retry is explored at
/// the unit bounds — a semaphore with an operator's `set_limit`, a RwLock whose holders change
/// mode. (Kept apart from [`unit()`]'s crash and lost push, whose product with a lost reply
/// is ten times the states.) Other kinds: [`unit()`] (the mutex's has a lost reply already).
pub fn unit_retry(kind: Kind) -> LockModel {
    let mut m = unit(kind);
    if kind.shared() {
        m.env = Env {
            lost_replies: 1,
            set_limit: m.env.set_limit,
            ..Env::default()
        };
    }
    m
}

/// [`unit_retry()`] at the deeper bounds of `make model`: with [`unit()`]'s crash and lost
/// push as well.
pub fn deep_retry(kind: Kind) -> LockModel {
    let mut m = unit(kind);
    m.env.lost_replies = 1;
    m
}

/// Restarts in every kind's model (issue #44): one restart, empty or from the replica's (AOF's)
/// lagging copy, with what each kind promises across it — a mutex whose first request makes a
/// guarded write (three requests: a key kept for a waiter); a semaphore of limit 2 with two
/// guarded requests (2 and 1) and an operator's `set_limit(1)`; a RwLock writer that
/// downgrades and a reader that upgrades, the writer making a guarded write; an election of
/// three campaigns followed by an observer's two reads (clock up to 3). The fenced mutex's
/// [`unit()`] has its restart already.
pub fn unit_restart(kind: Kind) -> LockModel {
    let mut m = match kind {
        Kind::Semaphore => model(
            kind,
            2,
            vec![vec![Req::of(2).guard()], vec![Req::of(1).guard()]],
            4,
        ),
        Kind::RwLock => model(
            kind,
            RW_LIMIT,
            vec![
                vec![Req::of(RW_LIMIT).change().guard()],
                vec![Req::of(1).change()],
            ],
            4,
        ),
        Kind::Election => model(
            kind,
            1,
            vec![vec![Req::of(1), Req::of(1)], vec![Req::of(1)]],
            3,
        ),
        Kind::Mutex | Kind::FencedMutex => model(
            kind,
            1,
            vec![vec![Req::of(1).guard(), Req::of(1)], vec![Req::of(1)]],
            4,
        ),
    };
    m.env = Env {
        restarts: 1,
        ..Env::default()
    };
    match kind {
        Kind::Semaphore => m.env.set_limit = Some(1),
        Kind::Election => m.env.reads = 2,
        _ => {}
    }
    m
}

/// [`unit_restart()`] at the deeper bounds of `make model`: a lost reply as well (a call sent
/// again across a restart), and the election's clock up to 4.
pub fn deep_restart(kind: Kind) -> LockModel {
    let mut m = unit_restart(kind);
    m.env.lost_replies = 1;
    if kind == Kind::Election {
        m.max_time = 4;
    }
    m
}

/// A paused campaign (issue #44): [`unit()`]'s election with one pause and an observer's read,
/// without its crash, lost push and foreign data — a candidate that lost the lock while paused
/// must not write the leader record when it resumes. (`make model`'s [`deep()`] election has
/// the pause with everything else.)
pub fn unit_paused(kind: Kind) -> LockModel {
    let mut m = unit(kind);
    m.env = Env {
        pauses: 1,
        reads: 1,
        ..Env::default()
    };
    m
}

/// The guarded write's models for the unit run (issue 32): two requests that each make one
/// guarded write while they hold, and the environment that makes a holder stale — one
/// pause (a holder paused past its lease writes when it resumes; for a mutex, one lost
/// reply too: a write sent again), or for the fenced mutex one restart (a hold lost by a
/// restart, or brought back from the lagging replica). A semaphore of limit 2 (two holders
/// with different deadlines: one past its lease while `K:exp` lives), a RwLock writer and
/// a reader.
pub fn unit_guarded(kind: Kind) -> LockModel {
    let two = vec![vec![Req::of(1).guard()], vec![Req::of(1).guard()]];
    let mut m = match kind {
        Kind::Semaphore => model(kind, 2, two, 4),
        Kind::RwLock => model(
            kind,
            RW_LIMIT,
            vec![vec![Req::of(RW_LIMIT).guard()], vec![Req::of(1).guard()]],
            4,
        ),
        _ => model(kind, 1, two, 4),
    };
    m.env = match kind {
        Kind::FencedMutex => Env {
            restarts: 1,
            ..Env::default()
        },
        Kind::Mutex | Kind::Election => Env {
            pauses: 1,
            lost_replies: 1,
            ..Env::default()
        },
        Kind::Semaphore | Kind::RwLock => Env {
            pauses: 1,
            ..Env::default()
        },
    };
    m
}

/// The guarded write's models at the deeper bounds of `make model`: [`unit_guarded()`] with
/// more of the environment — a mutex with a lost push and a clock up to 5, the fenced mutex
/// with 2 restarts and a lost reply, a semaphore with a request for both permits that
/// waits (its queue keeps `K:exp` alive) and a lost reply, a RwLock with a second reader and
/// a lost push.
pub fn deep_guarded(kind: Kind) -> LockModel {
    let mut m = unit_guarded(kind);
    match kind {
        Kind::Mutex | Kind::Election => {
            m.env.lost_pushes = 1;
            m.max_time = 5;
        }
        Kind::FencedMutex => {
            m.env.restarts = 2;
            m.env.lost_replies = 1;
        }
        Kind::Semaphore => {
            m.clients.push(vec![Req::of(2)]);
            m.env.lost_replies = 1;
        }
        Kind::RwLock => {
            m.clients.push(vec![Req::of(1).guard()]);
            m.env.lost_pushes = 1;
        }
    }
    m
}

/// The release request's models for the unit run: holders renewed by a watchdog, one that
/// ignores a request and one that gives the lock back when told, and a request by someone
/// else at any time. A mutex with a lost reply (a renewal or an acquire sent again); a
/// semaphore of limit 2 with a third request (it is admitted in the place of a holder that
/// gave back, while the other holder's request keeps the ask key alive, and must not be
/// told), clock up to 3; a RwLock writer that gives back when told or downgrades (a new
/// token, which the request does not follow) and a reader that ignores it, two requests.
pub fn unit_ask(kind: Kind) -> LockModel {
    let ignores = Req::of(1).watchdog();
    let yields = Req::of(1).watchdog().yields();
    let mut m = match kind {
        Kind::Semaphore => model(kind, 2, vec![vec![ignores], vec![yields], vec![ignores]], 3),
        Kind::RwLock => model(
            kind,
            RW_LIMIT,
            vec![
                vec![Req::of(RW_LIMIT).watchdog().yields().change()],
                vec![ignores],
            ],
            4,
        ),
        _ => model(kind, 1, vec![vec![ignores], vec![yields]], 4),
    };
    m.env = match kind {
        Kind::RwLock => Env {
            asks: 2,
            ..Env::default()
        },
        Kind::Semaphore => Env {
            asks: 1,
            ..Env::default()
        },
        _ => Env {
            asks: 1,
            lost_replies: 1,
            ..Env::default()
        },
    };
    m
}

/// The release request across a restart (issue #44): [`unit_ask()`] with one restart (empty or
/// from the lagging copy) instead of the lost reply — the request is lost with the data, or
/// comes back with the hold it named. The mutex's at the unit bounds; the shared kinds' (about 7
/// and 3 million states) in `make model`.
pub fn unit_ask_restart(kind: Kind) -> LockModel {
    let mut m = unit_ask(kind);
    m.env.lost_replies = 0;
    m.env.restarts = 1;
    m
}

/// The release request's models at the deeper bounds of `make model`: [`unit_ask()`] with
/// a pause (a holder paused past its lease is not asked, and its late renewal is not
/// told); for the mutex and the RwLock also a lost push, and for the mutex a second
/// request.
pub fn deep_ask(kind: Kind) -> LockModel {
    let mut m = unit_ask(kind);
    m.env.pauses = 1;
    if kind != Kind::Semaphore {
        m.env.lost_pushes = 1;
    }
    if !kind.shared() {
        m.env.asks = 2;
    }
    m
}

/// A second mutex model for the unit run: three clients, one of them crashing, one
/// cancelling its wait, one renewed by a watchdog (no pauses or lost replies, which
/// [`unit()`] covers with two clients).
pub fn unit_crowd() -> LockModel {
    let mut m = model(
        Kind::Mutex,
        1,
        vec![
            vec![Req::of(1).watchdog()],
            vec![Req::of(1).timeout(2)],
            vec![Req::of(1).cancel()],
        ],
        4,
    );
    m.env = Env {
        crashes: 1,
        ..Env::default()
    };
    m
}
