//! The cases of `foreign.rs` the model cannot judge alone: a leader record of another program
//! or with a larger fence than its lock's (election.lua), and the keys the model does not name
//! — a shared lock's `:limit`, a guarded write's target, fenced.lua's keys, a shared lock's keys
//! as the operators' read-only script meets them — each with the reply its script's contract
//! promises.

use dlock_core::__private::conformance::Source;
use dlock_model::{Key, Mode, Op, SharedEntry, apply};
use redis::Value;

use super::{Both, Do, M, S, array, refused, shared, shared_entry, take, write};
use crate::redis_side::{Answer, At, Kind, UNIT, token_hex};
use crate::replies::{model_norm, real_norm, show};

/// The election's leader record of another program, met by publish and resign.
pub(super) fn election_cases() -> Vec<(String, Vec<Do>)> {
    let mut out = Vec::new();
    for kind in [Kind::Text, Kind::Hash] {
        for resign in [false, true] {
            let write = write(Key::Leader(1), kind);
            let probe = Do::Raw(if resign {
                resign_leader
            } else {
                publish_leader
            });
            let what = if resign { "resigns" } else { "publishes" };
            out.push((
                format!("{kind:?} at the leader record, then the leader {what}"),
                vec![
                    take(1, 1),
                    Do::Op(Op::Fence { name: 1, token: 1 }),
                    write,
                    probe,
                ],
            ));
        }
    }
    out.push((
        "a leader record with a larger fence, then the leader publishes".into(),
        vec![
            take(1, 1),
            Do::Op(Op::Fence { name: 1, token: 1 }),
            Do::Write(At::Key(Key::Leader(1)), Kind::LargerRecord),
            Do::Raw(publish_stale),
        ],
    ));
    out
}

/// The leader's hold (token 1) and the fence the model issued it.
fn leader_fence(both: &Both<'_>) -> Result<u64, String> {
    both.fences
        .last()
        .map(|(m, _)| *m)
        .ok_or_else(|| "no fence issued".to_owned())
}

/// The leader publishes (the model: its record key marked as another program's).
fn publish_leader(both: &mut Both<'_>) -> Result<(), String> {
    let fence = leader_fence(both)?;
    both.exec(Op::ElectionPublish {
        name: 1,
        token: 1,
        fence,
        value: 1,
    })
}

/// The leader resigns.
fn resign_leader(both: &mut Both<'_>) -> Result<(), String> {
    let model_fence = leader_fence(both)?;
    // The model resigns with the model's fence; the real side with its own.
    let op = Op::ElectionResign {
        name: 1,
        token: 1,
        fence: both.real_fence(model_fence)?,
    };
    let answer = both.real.run(&op)?;
    let model = apply(
        &mut both.model,
        both.now,
        Op::ElectionResign {
            name: 1,
            token: 1,
            fence: model_fence,
        },
    );
    let (model, _) = model_norm(&op, &model);
    let (real, _) = real_norm(&op, &answer)?;
    if model != real {
        return Err(format!("resign: model {model:?}, redis {real:?}"));
    }
    Ok(())
}

/// A record of a later leader than the lock's holder (which no holder of the lock wrote, so
/// the model cannot hold it): the holder's publish is refused (-1) and the record left alone.
fn publish_stale(both: &mut Both<'_>) -> Result<(), String> {
    let fence = both.real_fence(leader_fence(both)?)?;
    let answer = both.real.run(&Op::ElectionPublish {
        name: 1,
        token: 1,
        fence,
        value: 1,
    })?;
    match answer {
        Ok(Value::Int(-1)) => Ok(()),
        other => Err(format!("expected -1, got {}", show(&other))),
    }
}

/// What the model does not name: a shared lock's `:limit`, a guarded write's target, fenced.lua's
/// keys, a shared lock's keys as the operators' read-only script meets them.
pub(super) fn raw_cases() -> Vec<(&'static str, Vec<Do>)> {
    vec![
        (
            "a hash at K:limit, then an acquire and set_limit",
            vec![Do::Write(At::Limit(0), Kind::Hash), Do::Raw(limit_refused)],
        ),
        (
            "a hash at K:limit of a held lock, then an acquire and set_limit",
            vec![
                shared(0, 3, 1, Mode::Wait),
                Do::Write(At::Limit(0), Kind::Hash),
                Do::Raw(limit_refused),
            ],
        ),
        (
            // The model refuses every shared script at such a counter; the script fails only
            // where it issues a fence, and a change that ends early serves the queue without
            // reporting it (the head stays queued for the next call).
            "the counter, then a stale writer's downgrade that serves a fitting head",
            vec![
                Do::Op(Op::SharedAcquire {
                    name: 1,
                    entry: shared_entry(1, dlock_model::RW_LIMIT),
                    limit: dlock_model::RW_LIMIT,
                    mode: Mode::Wait,
                }),
                Do::Op(Op::SharedAcquire {
                    name: 1,
                    entry: SharedEntry {
                        lease: 2 * UNIT,
                        ..shared_entry(2, 1)
                    },
                    limit: dlock_model::RW_LIMIT,
                    mode: Mode::Wait,
                }),
                Do::Advance,
                write(Key::Counter, Kind::Text),
                Do::Raw(stale_downgrade),
            ],
        ),
        (
            "text at K:limit, then an acquire and set_limit",
            vec![Do::Write(At::Limit(0), Kind::Text), Do::Raw(limit_refused)],
        ),
        (
            "a guarded write's target of another type",
            vec![
                take(0, 1),
                Do::Write(At::Written(M), Kind::Text),
                Do::Raw(guarded_wrong_type),
            ],
        ),
        (
            "a guarded GETDEL of a list, and a command no guarded write runs",
            vec![
                take(0, 1),
                Do::Write(At::Written(M), Kind::List),
                Do::Raw(guarded_getdel),
                Do::Raw(guarded_unknown),
            ],
        ),
        (
            "fenced.lua: a hash at the fence key",
            vec![
                Do::Write(At::FencedFence(0), Kind::Hash),
                Do::Raw(fenced_foreign),
            ],
        ),
        (
            "fenced.lua: text at the fence key",
            vec![
                Do::Write(At::FencedFence(0), Kind::Text),
                Do::Raw(fenced_foreign),
            ],
        ),
        (
            "fenced.lua: a list at the data key",
            vec![
                Do::Write(At::FencedData(0), Kind::List),
                Do::Raw(fenced_wrong_type),
            ],
        ),
    ]
}

/// The operators' read-only script meets another program's data at a shared lock's keys.
pub(super) fn inspect_cases() -> Vec<(&'static str, Vec<Do>)> {
    vec![
        (
            "inspect: text at K",
            vec![write(Key::Shared(0), Kind::Text), Do::Raw(inspect_foreign)],
        ),
        (
            "inspect: K of a newer format",
            vec![
                write(Key::Shared(0), Kind::NewerHash),
                Do::Raw(inspect_foreign),
            ],
        ),
        (
            "inspect: text at K:queue",
            vec![
                write(Key::SharedQueue(0), Kind::Text),
                Do::Raw(inspect_foreign),
            ],
        ),
        (
            "inspect: text at K:exp",
            vec![
                write(Key::SharedExp(0), Kind::Text),
                Do::Raw(inspect_foreign),
            ],
        ),
        (
            "inspect: K:exp without an expiry",
            vec![
                write(Key::SharedExp(0), Kind::UnexpiringZset),
                Do::Raw(inspect_foreign),
            ],
        ),
    ]
}

/// A stale writer downgrades: it holds nothing (`{0, 0, 0}`); the reader queued behind it
/// stays queued (its admission met the counter).
fn stale_downgrade(both: &mut Both<'_>) -> Result<(), String> {
    let op = Op::RwChange {
        name: 1,
        old: 1,
        new: 3,
        up: false,
        lease: UNIT,
    };
    array(&both.real.run(&op)?, 0, None)?;
    let queue = both.real.name_of(At::Key(Key::SharedQueue(1)))?;
    match both.real.raw(redis::cmd("LLEN").arg(queue))? {
        Value::Int(1) => Ok(()),
        other => Err(format!("the reader's entry: LLEN {other:?}")),
    }
}

/// An acquire and `set_limit` refuse a `K:limit` dlock did not write.
fn limit_refused(both: &mut Both<'_>) -> Result<(), String> {
    let acquire = Op::SharedAcquire {
        name: 0,
        entry: shared_entry(1, 1),
        limit: 3,
        mode: Mode::Wait,
    };
    refused(&both.real.run(&acquire)?, "DLOCKFOREIGN")?;
    refused(
        &both.real.run(&Op::SetLimit { name: 0, limit: 2 })?,
        "DLOCKFOREIGN",
    )
}

fn guarded_wrong_type(both: &mut Both<'_>) -> Result<(), String> {
    let op = Op::Guarded {
        lock: M,
        token: 1,
        fence: 0,
    };
    array(&both.real.run(&op)?, -1, Some("string"))
}

/// guarded.lua with a batch of its own: `(name, argument count)` on the lock's target.
fn guarded_batch(both: &mut Both<'_>, name: &str) -> Result<Answer, String> {
    let key = both.real.name_of(At::Key(Key::Lock(0)))?;
    let data = both.real.name_of(At::Written(M))?;
    let args = [
        token_hex(1),
        "1".into(),
        name.into(),
        "2".into(),
        "0".into(),
    ];
    both.real.script(Source::Guarded, &[&key, &data], &args)
}

fn guarded_getdel(both: &mut Both<'_>) -> Result<(), String> {
    array(&guarded_batch(both, "GETDEL")?, -1, Some("list"))
}

fn guarded_unknown(both: &mut Both<'_>) -> Result<(), String> {
    refused(&guarded_batch(both, "FLUSHALL")?, "DLOCKGUARD")?;
    // Not even a command's name.
    refused(&guarded_batch(both, "set")?, "DLOCKGUARD")
}

fn fenced_set(both: &mut Both<'_>) -> Result<Answer, String> {
    both.real.run(&Op::FencedSet {
        key: 0,
        fence: 7,
        value: 1,
    })
}

fn fenced_foreign(both: &mut Both<'_>) -> Result<(), String> {
    refused(&fenced_set(both)?, "DLOCKFOREIGN")
}

fn fenced_wrong_type(both: &mut Both<'_>) -> Result<(), String> {
    array(&fenced_set(both)?, -1, Some("list"))
}

fn inspect_foreign(both: &mut Both<'_>) -> Result<(), String> {
    refused(&both.real.inspect(S)?, "DLOCKFOREIGN")
}
