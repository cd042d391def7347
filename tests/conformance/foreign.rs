//! Another program's data where dlock keeps its keys, or a lock of a newer format version:
//! the reply paths random sequences cannot reach (coverage.rs marks them so), each reached here
//! by a fixed case that writes that data and then sends the scripts' requests at it.
//!
//! Where the model can say the outcome (its `WriteForeign` marks a key as another program's),
//! both sides run the same steps and their replies must agree; where it cannot (a shared
//! lock's `:limit`, a guarded write's target, fenced.lua's keys, a leader record with a larger
//! fence, the operators' read-only script), the case states the reply the script's contract
//! promises. In every case the foreign data must be left exactly as it was written (`DUMP`).
//! The state is not compared: its decoders refuse another program's data.

use dlock_model::{
    Entry, ExtendItem, Key, LockRef, Mode, Ms, Op, ReleaseHow, Server, SharedEntry, apply,
};
use redis::Value;

use crate::redis_side::{Answer, At, Kind, Real, UNIT};
use crate::replies::{model_norm, real_norm, show};

mod unmodelled;

/// One step of a case.
pub(crate) enum Do {
    /// A protocol step on both sides; the replies must agree.
    Op(Op),
    /// Another program's data at `At` (the model: `WriteForeign`, for a key it names).
    Write(At, Kind),
    /// Both clocks move one lease unit.
    Advance,
    /// A call the model has no step for, with the reply its contract promises.
    Raw(fn(&mut Both<'_>) -> Result<(), String>),
}

/// Both sides of one case.
pub(crate) struct Both<'r> {
    pub(crate) model: Server,
    pub(crate) now: Ms,
    pub(crate) real: &'r mut Real,
    /// Every fence seen: (model's, Redis's).
    pub(crate) fences: Vec<(u64, u64)>,
    /// The foreign keys written, with their content then.
    written: Vec<(String, Value)>,
    log: Vec<String>,
}

impl Both<'_> {
    pub(crate) fn real_fence(&self, fence: u64) -> Result<u64, String> {
        self.fences
            .iter()
            .find(|(m, _)| *m == fence)
            .map(|(_, r)| *r)
            .ok_or_else(|| format!("fence {fence} was never seen"))
    }

    pub(crate) fn exec(&mut self, op: Op) -> Result<(), String> {
        let real_op = match op.clone() {
            Op::ElectionPublish {
                name,
                token,
                fence,
                value,
            } => Op::ElectionPublish {
                name,
                token,
                fence: self.real_fence(fence)?,
                value,
            },
            other => other,
        };
        let reply = apply(&mut self.model, self.now, op.clone());
        let answer = self.real.run(&real_op)?;
        self.log
            .push(format!("{op:?}: model {reply:?}, redis {}", show(&answer)));
        let (model, model_fences) = model_norm(&op, &reply);
        let (real, real_fences) = real_norm(&op, &answer)?;
        if model != real {
            return Err(format!(
                "the replies differ: model {model:?}, redis {real:?}"
            ));
        }
        self.fences
            .extend(model_fences.into_iter().zip(real_fences));
        Ok(())
    }

    fn run(&mut self, step: Do) -> Result<(), String> {
        match step {
            Do::Op(op) => self.exec(op),
            Do::Write(at, kind) => {
                if let At::Key(key) = at {
                    apply(&mut self.model, self.now, Op::WriteForeign { key });
                }
                let key = self.real.write_foreign(at, kind)?;
                let content = self.real.dump(&key)?;
                self.written.push((key, content));
                Ok(())
            }
            Do::Advance => {
                self.now += UNIT;
                self.real.advance(1)
            }
            Do::Raw(call) => call(self),
        }
    }

    /// Every foreign key still holds what was written there.
    fn untouched(&mut self) -> Result<(), String> {
        for (key, content) in std::mem::take(&mut self.written) {
            if self.real.dump(&key)? != content {
                return Err(format!("{key}: another program's data was changed"));
            }
        }
        Ok(())
    }
}

/// `answer` is the error reply `code`.
pub(crate) fn refused(answer: &Answer, code: &str) -> Result<(), String> {
    match answer {
        Err((c, _)) if c == code => Ok(()),
        other => Err(format!("expected a {code} error, got {}", show(other))),
    }
}

/// `answer` is an array whose first item is the integer `first` (and, if given, whose third
/// names the type found).
pub(crate) fn array(answer: &Answer, first: i64, found: Option<&str>) -> Result<(), String> {
    let ok = match answer {
        Ok(Value::Array(items)) => {
            items.first() == Some(&Value::Int(first))
                && found.is_none_or(|t| {
                    items
                        .iter()
                        .any(|i| *i == Value::BulkString(t.as_bytes().to_vec()))
                })
        }
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "expected {{{first}, … {found:?}}}, got {}",
            show(answer)
        ))
    }
}

pub(crate) const M: LockRef = LockRef::Mutex(0);
pub(crate) const E: LockRef = LockRef::Mutex(1);
pub(crate) const S: LockRef = LockRef::Shared(0);
pub(crate) const RW: LockRef = LockRef::Shared(1);

pub(crate) fn take(name: u8, token: u32) -> Do {
    Do::Op(Op::SetNxGet {
        name,
        token,
        lease: UNIT,
    })
}

fn entry(token: u32) -> Entry {
    Entry {
        token,
        client: 0,
        lease: UNIT,
    }
}

fn join(name: u8, token: u32) -> Do {
    Do::Op(Op::Acquire {
        name,
        entry: entry(token),
        mode: Mode::Join,
    })
}

pub(crate) fn shared_entry(token: u32, weight: u32) -> SharedEntry {
    SharedEntry {
        token,
        client: 0,
        lease: UNIT,
        weight,
    }
}

pub(crate) fn shared(name: u8, token: u32, weight: u32, mode: Mode) -> Do {
    Do::Op(Op::SharedAcquire {
        name,
        entry: shared_entry(token, weight),
        limit: 3,
        mode,
    })
}

fn release(name: u8, token: u32, how: ReleaseHow) -> Do {
    Do::Op(Op::Release {
        name,
        token,
        leaving: None,
        how,
    })
}

pub(crate) fn write(key: Key, kind: Kind) -> Do {
    Do::Write(At::Key(key), kind)
}

/// A request sent after another program's data was written: its name and its steps.
type Probe = (&'static str, fn() -> Vec<Do>);

/// The mutex's requests, each after another program's data at the lock key.
fn mutex_cases() -> Vec<(String, Vec<Do>)> {
    let mut out = Vec::new();
    for kind in [Kind::Text, Kind::Hash, Kind::NewerLock, Kind::Unexpiring] {
        let probes: [Probe; 7] = [
            ("acquire", || vec![join(0, 1)]),
            ("release", || vec![release(0, 1, ReleaseHow::Own)]),
            ("forced release", || vec![release(0, 1, ReleaseHow::Force)]),
            ("fence", || vec![Do::Op(Op::Fence { name: 0, token: 1 })]),
            ("guarded write", || {
                vec![Do::Op(Op::Guarded {
                    lock: M,
                    token: 1,
                    fence: 0,
                })]
            }),
            ("release request", || vec![Do::Op(Op::Ask { lock: M })]),
            ("renewal", || {
                vec![Do::Op(Op::Extend {
                    items: vec![ExtendItem {
                        lock: M,
                        token: 1,
                        lease: UNIT,
                    }],
                })]
            }),
        ];
        for (what, probe) in probes {
            // A value of dlock's format without an expiry is refused by the scripts that would
            // keep or ask it (acquire, the release request); the others judge its token.
            if kind == Kind::Unexpiring && !matches!(what, "acquire" | "release request") {
                continue;
            }
            let mut steps = vec![write(Key::Lock(0), kind)];
            steps.extend(probe());
            out.push((format!("{kind:?} at the mutex key, then its {what}"), steps));
        }
    }
    out
}

/// The mutex's queue and the slot's fence counter of another program.
fn queue_and_counter_cases() -> Vec<(&'static str, Vec<Do>)> {
    let queue = || write(Key::Queue(0), Kind::Text);
    let counter = || write(Key::Counter, Kind::Text);
    let leave = Do::Op(Op::Release {
        name: 0,
        token: 2,
        leaving: Some(entry(2)),
        how: ReleaseHow::Own,
    });
    vec![
        ("the queue, then an acquire", vec![queue(), join(0, 1)]),
        (
            "the queue, then a waiter leaves",
            vec![take(0, 1), queue(), leave],
        ),
        (
            "the queue under a kept key, then the stale holder releases",
            vec![
                take(0, 1),
                join(0, 2),
                Do::Advance,
                queue(),
                release(0, 1, ReleaseHow::Own),
            ],
        ),
        (
            "the queue under a flagged holder, which releases",
            vec![
                take(0, 1),
                join(0, 2),
                queue(),
                release(0, 1, ReleaseHow::Own),
            ],
        ),
        (
            "the counter, then an acquire of the free lock",
            vec![counter(), join(0, 1)],
        ),
        (
            "the counter, then an acquire of a kept key for a waiter",
            vec![take(0, 1), join(0, 2), Do::Advance, counter(), join(0, 3)],
        ),
        (
            "the counter, then the stale holder of a kept key releases",
            vec![
                take(0, 1),
                join(0, 2),
                Do::Advance,
                counter(),
                release(0, 1, ReleaseHow::Own),
            ],
        ),
        (
            "the counter, then a flagged holder releases",
            vec![
                take(0, 1),
                join(0, 2),
                counter(),
                release(0, 1, ReleaseHow::Own),
            ],
        ),
        (
            "the counter, then a holder asks its fence",
            vec![
                take(0, 1),
                counter(),
                Do::Op(Op::Fence { name: 0, token: 1 }),
            ],
        ),
    ]
}

/// Every shared script, after another program's data at K, `K:exp` or `K:queue`.
fn shared_cases() -> Vec<(String, Vec<Do>)> {
    let probes: [Probe; 6] = [
        ("acquire", || vec![shared(0, 1, 1, Mode::Wait)]),
        ("release", || {
            vec![Do::Op(Op::SharedRelease {
                name: 0,
                token: 1,
                leaving: None,
            })]
        }),
        ("set_limit", || {
            vec![Do::Op(Op::SetLimit { name: 0, limit: 2 })]
        }),
        ("mode change", || {
            vec![Do::Op(Op::RwChange {
                name: 0,
                old: 1,
                new: 2,
                up: true,
                lease: UNIT,
            })]
        }),
        ("guarded write", || {
            vec![Do::Op(Op::Guarded {
                lock: S,
                token: 1,
                fence: 0,
            })]
        }),
        ("release request", || vec![Do::Op(Op::Ask { lock: S })]),
    ];
    let mut out = Vec::new();
    let places = [
        (Key::Shared(0), Kind::Text),
        (Key::Shared(0), Kind::NewerHash),
        (Key::Shared(0), Kind::OtherHash),
        (Key::Shared(0), Kind::Hash),
        (Key::SharedExp(0), Kind::Text),
        (Key::SharedQueue(0), Kind::Text),
    ];
    for (key, kind) in places {
        for (what, probe) in probes {
            let mut steps = vec![write(key, kind)];
            steps.extend(probe());
            out.push((format!("{kind:?} at {key:?}, then its {what}"), steps));
        }
    }
    out.push((
        "Text at SharedExp(0) of a holder, then its renewal".into(),
        vec![
            shared(0, 1, 1, Mode::Wait),
            write(Key::SharedExp(0), Kind::Text),
            Do::Op(Op::Extend {
                items: vec![ExtendItem {
                    lock: S,
                    token: 1,
                    lease: UNIT,
                }],
            }),
        ],
    ));
    out
}

/// The fence counter of another program, met by each shared script when it admits.
fn shared_counter_cases() -> Vec<(&'static str, Vec<Do>)> {
    let counter = || write(Key::Counter, Kind::Text);
    vec![
        (
            "an acquire that fits",
            vec![counter(), shared(0, 1, 1, Mode::Wait)],
        ),
        (
            "an acquire at the head of the queue, once the holder's lease ended",
            vec![
                shared(0, 1, 3, Mode::Wait),
                shared(0, 2, 1, Mode::Wait),
                Do::Advance,
                counter(),
                shared(0, 2, 1, Mode::Wait),
            ],
        ),
        (
            "a wait that times out, admitting the request behind it",
            vec![
                shared(0, 1, 2, Mode::Wait),
                shared(0, 2, 2, Mode::Wait),
                shared(0, 3, 1, Mode::Wait),
                counter(),
                shared(0, 2, 2, Mode::Last),
            ],
        ),
        (
            "a release admitting the head",
            vec![
                shared(0, 1, 3, Mode::Wait),
                shared(0, 2, 1, Mode::Wait),
                counter(),
                Do::Op(Op::SharedRelease {
                    name: 0,
                    token: 1,
                    leaving: None,
                }),
            ],
        ),
        (
            "set_limit admitting the head",
            vec![
                shared(0, 1, 3, Mode::Wait),
                shared(0, 2, 1, Mode::Wait),
                counter(),
                Do::Op(Op::SetLimit { name: 0, limit: 4 }),
            ],
        ),
        (
            "a downgrade",
            vec![
                Do::Op(Op::SharedAcquire {
                    name: 1,
                    entry: shared_entry(1, dlock_model::RW_LIMIT),
                    limit: dlock_model::RW_LIMIT,
                    mode: Mode::Wait,
                }),
                counter(),
                Do::Op(Op::RwChange {
                    name: 1,
                    old: 1,
                    new: 2,
                    up: false,
                    lease: UNIT,
                }),
            ],
        ),
    ]
}

/// Every case, by name.
fn cases() -> Vec<(String, Vec<Do>)> {
    let mut out = mutex_cases();
    out.extend(shared_cases());
    out.extend(unmodelled::election_cases());
    for (name, steps) in queue_and_counter_cases()
        .into_iter()
        .chain(shared_counter_cases())
        .chain(unmodelled::raw_cases())
        .chain(unmodelled::inspect_cases())
    {
        out.push((name.to_owned(), steps));
    }
    out
}

/// Runs every case on a fresh server; the number run, or the first difference.
pub(crate) fn run(real: &mut Real) -> Result<usize, String> {
    let cases = cases();
    let count = cases.len();
    for (name, steps) in cases {
        real.reset()?;
        let mut both = Both {
            model: Server::new(None),
            now: UNIT,
            real: &mut *real,
            fences: Vec::new(),
            written: Vec::new(),
            log: Vec::new(),
        };
        // The waiters' client listens on every lock, so that its requests count as alive.
        let mut result = [M, E, S, RW]
            .into_iter()
            .try_for_each(|lock| both.exec(Op::Subscribe { lock, client: 0 }));
        for step in steps {
            if result.is_err() {
                break;
            }
            result = both.run(step);
        }
        result
            .and_then(|()| both.untouched())
            .map_err(|e| format!("{name}: {e}\n    {}", both.log.join("\n    ")))?;
    }
    Ok(count)
}
