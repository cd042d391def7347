//! The release request (ask.lua, and extend.lua's answer 2) held to the model in set
//! scenarios, before the random sequences, so that every rule of its contract is met on every
//! run whatever the seed draws: a mutex holder asked and told while its successor is not; every
//! live shared holder asked, a holder past its deadline not, a newcomer not told while another
//! holder's request keeps the ask key alive; a RwLock writer asked, whose read hold after a
//! downgrade (a new token) is not told; an election's lock; a request to nobody.
//!
//! Each scenario runs as a sequence does (`crate::run`: replies, grants, state, and the time
//! left of every hold and ask key compared after every step). The foreign-data refusals run
//! step by step on both sides instead, comparing the replies and the keys the request must not
//! have written: the state decoders refuse another program's data.

use dlock_model::{ExtendItem, Key, LockRef, Mode, Op, Server, SharedEntry, apply};
use redis::Value;

use crate::redis_side::{Real, UNIT};
use crate::replies::{model_norm, real_norm, show};
use crate::steps::{Lock, Step};

fn acquire(client: u8, lock: Lock, weight: u32, lease: u8, wait: bool) -> Step {
    Step::Acquire {
        client,
        lock,
        weight,
        limit: 2,
        lease,
        wait,
        fenced: false,
    }
}

fn extend(client: u8, lock: Lock, lease: u8) -> Step {
    Step::Extend {
        client,
        lock,
        lease,
    }
}

/// The scenarios, by name.
fn scenarios() -> Vec<(&'static str, Vec<Step>)> {
    let (m, s, rw) = (Lock::Mutex, Lock::Sem, Lock::Rw);
    vec![
        (
            "a mutex holder is asked and told; the waiter it hands over to is not",
            vec![
                acquire(0, m, 1, 2, false),
                acquire(1, m, 1, 1, true),
                Step::Ask { lock: m },
                extend(0, m, 2),
                Step::Advance { units: 1 },
                extend(0, m, 2),
                Step::Release { client: 0, lock: m },
                extend(1, m, 1),
                Step::Ask { lock: m },
                extend(1, m, 1),
                Step::Advance { units: 2 },
                Step::Ask { lock: m },
            ],
        ),
        (
            "every live semaphore holder is asked; the request admitted in a freed place is not",
            vec![
                acquire(0, s, 1, 1, true),
                acquire(1, s, 1, 2, true),
                acquire(2, s, 1, 1, true),
                Step::Ask { lock: s },
                extend(0, s, 1),
                Step::Release { client: 0, lock: s },
                extend(2, s, 1),
                extend(1, s, 2),
                Step::Ask { lock: s },
                extend(2, s, 1),
            ],
        ),
        (
            "a semaphore holder past its deadline, not purged yet, is not asked",
            vec![
                acquire(0, s, 1, 1, true),
                acquire(1, s, 1, 2, true),
                Step::Advance { units: 1 },
                Step::Ask { lock: s },
                extend(1, s, 1),
            ],
        ),
        (
            "a writer asked, then downgraded: its read hold is not told; a reader asked is",
            vec![
                acquire(0, rw, 2, 2, true),
                Step::Ask { lock: rw },
                Step::Downgrade { client: 0 },
                extend(0, rw, 2),
                acquire(1, rw, 1, 1, true),
                Step::Ask { lock: rw },
                extend(1, rw, 1),
                extend(0, rw, 1),
            ],
        ),
        (
            "an election's lock, and requests to nobody",
            vec![
                Step::Ask {
                    lock: Lock::Election,
                },
                acquire(0, Lock::Election, 1, 1, false),
                Step::Ask {
                    lock: Lock::Election,
                },
                extend(0, Lock::Election, 1),
                Step::Ask { lock: m },
                Step::Ask { lock: s },
                Step::Ask { lock: rw },
            ],
        ),
    ]
}

/// Runs every scenario, then the foreign-data refusals; the number run, or the first
/// difference.
pub(crate) fn run(real: &mut Real) -> Result<usize, String> {
    let scenarios = scenarios();
    for (name, steps) in &scenarios {
        crate::run(real, steps).map_err(|e| format!("scenario \"{name}\": {e}"))?;
    }
    let foreign = foreign(real)?;
    Ok(scenarios.len() + foreign)
}

/// One side-by-side run of protocol steps on a fresh server (no state decoding).
struct Both<'r> {
    model: Server,
    real: &'r mut Real,
    log: Vec<String>,
}

impl Both<'_> {
    fn exec(&mut self, op: Op) -> Result<(), String> {
        let reply = apply(&mut self.model, UNIT, op.clone());
        let answer = self.real.run(&op)?;
        self.log
            .push(format!("{op:?}: model {reply:?}, redis {}", show(&answer)));
        let model = model_norm(&op, &reply).0;
        let real = real_norm(&op, &answer)?.0;
        if model != real {
            return Err(format!(
                "the replies differ: model {model:?}, redis {real:?}\n    {}",
                self.log.join("\n    ")
            ));
        }
        Ok(())
    }

    /// The key `key` of the real server holds `want` (a string) still, or nothing.
    fn holds(&mut self, key: &str, want: Option<&str>) -> Result<(), String> {
        let got = self.real.raw(redis::cmd("GET").arg(key))?;
        let got = match &got {
            Value::Nil => None,
            Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
            other => return Err(format!("{key}: {other:?}")),
        };
        if got.as_deref() != want {
            return Err(format!("{key} holds {got:?}, not {want:?}"));
        }
        Ok(())
    }
}

/// The refusals, each on a fresh server: foreign data at a mutex's key or a shared lock's hash
/// (DLOCKFOREIGN), at `K:exp` or at the ask key (a plain WRONGTYPE, before any write); an ask
/// key of another type is no request to extend.lua, and a request to nobody does not touch it.
fn foreign(real: &mut Real) -> Result<usize, String> {
    let (m, sh) = (LockRef::Mutex(0), LockRef::Shared(0));
    let take = Op::SetNxGet {
        name: 0,
        token: 1,
        lease: UNIT,
    };
    let take_shared = Op::SharedAcquire {
        name: 0,
        entry: SharedEntry {
            token: 1,
            client: 0,
            lease: UNIT,
            weight: 1,
        },
        limit: 2,
        mode: Mode::Wait,
    };
    let renew = Op::Extend {
        items: vec![ExtendItem {
            lock: m,
            token: 1,
            lease: UNIT,
        }],
    };
    let foreign = |key| Op::WriteForeign { key };
    let cases: Vec<(&str, Vec<Op>, Option<LockRef>)> = vec![
        (
            "foreign data at the mutex key",
            vec![foreign(Key::Lock(0)), Op::Ask { lock: m }],
            Some(m),
        ),
        (
            // Another program's value that expires: refused as foreign, not merely as a lock
            // without an expiry.
            "foreign data with an expiry at the mutex key",
            vec![foreign(Key::Lock(0)), Op::Ask { lock: m }],
            Some(m),
        ),
        (
            "foreign data at the shared lock's hash",
            vec![foreign(Key::Shared(0)), Op::Ask { lock: sh }],
            Some(sh),
        ),
        (
            "a holder's K:exp of another type",
            vec![
                take_shared,
                foreign(Key::SharedExp(0)),
                Op::Ask { lock: sh },
            ],
            Some(sh),
        ),
        (
            "an ask key of another type",
            vec![
                take,
                Op::Ask { lock: m },
                foreign(Key::Ask(m)),
                renew,
                Op::Ask { lock: m },
            ],
            None,
        ),
        (
            "an ask key of another type, nobody holding",
            vec![foreign(Key::Ask(m)), Op::Ask { lock: m }],
            None,
        ),
    ];
    let count = cases.len();
    for (name, ops, untouched) in cases {
        real.reset()?;
        let mut both = Both {
            model: Server::new(None),
            real: &mut *real,
            log: Vec::new(),
        };
        for op in ops {
            let foreign_written = matches!(op, Op::WriteForeign { .. });
            both.exec(op).map_err(|e| format!("{name}: {e}"))?;
            if foreign_written && name.contains("with an expiry") {
                let key = both.real.key(m).to_owned();
                both.real
                    .raw(redis::cmd("PEXPIRE").arg(key).arg(100_000))
                    .map_err(|e| format!("{name}: {e}"))?;
            }
        }
        // Nothing written: no ask key where the lock's was refused; the foreign ask key kept.
        let (key, want) = match untouched {
            Some(lock) => (both.real.ask_key(lock), None),
            None => (both.real.ask_key(m), Some("not written by dlock")),
        };
        both.holds(&key, want).map_err(|e| format!("{name}: {e}"))?;
    }
    Ok(count)
}
