//! The quorum fence's hard states, each a fixed list of steps run on both sides
//! (`quorum.rs`): a node restarted empty inside its keep-out, a restarted node counting again
//! once its TTL is over (and still kept out one tick before), a minority holding a higher fence
//! than the majority's grant, round 2 after the lease ran out or went to another owner, a round
//! 2 sent again, a data-since record ahead of its node's clock, and the model's clock-jump
//! counterexample (one node's clock a tick ahead: two grants valid at once, the later with the
//! smaller fence) replayed on the real servers. Then another program's data at the keys
//! fence_raise.lua reads, which the model does not hold: refused, and left as found.

use dlock_core::__private::conformance::lock_value;
use dlock_core::__private::conformance::{RaiseAnswer, Source, raise_answer};
use dlock_model::quorum::{Phase, QuorumAction as Action, QuorumModel, START, TTL};
use redis::Value;

use super::{HOLDER, Nodes, Seen, Step, TTL_MS, case, keys, token_hex};
use crate::redis_side::Real;

use Action::{Acquire, Jump, Raise, Release, Restart, Retry, Tick};

/// The bound of a scenario: `attempts` per client, a restart and a jump allowed.
fn model(attempts: u8) -> QuorumModel {
    QuorumModel {
        mutant: None,
        restarts: 1,
        jumps: 1,
        until: START + 4,
        attempts,
    }
}

/// The model's steps, as a scenario's.
fn steps(actions: &[Action]) -> Vec<Step> {
    actions.iter().copied().map(Step::Model).collect()
}

/// Round 1 on every node for client `c`.
const fn all(c: usize) -> [Action; 3] {
    [Acquire(c, 0), Acquire(c, 1), Acquire(c, 2)]
}

/// Round 2 on every node for client `c`.
const fn raise_all(c: usize) -> [Action; 3] {
    [Raise(c, 0), Raise(c, 1), Raise(c, 2)]
}

fn scenarios() -> Vec<(&'static str, u8, Vec<Step>)> {
    vec![
        (
            // Client 1 holds nodes 0 and 1; node 0 restarts empty (its lease forgotten); client
            // 0 takes it and node 2: node 0 must be kept out, or client 0 would be granted
            // beside client 1 (the model's counterexample to `RaiseSkipsDataSince`).
            "a node restarted empty inside its keep-out",
            1,
            steps(&[
                Acquire(1, 1),
                Tick,
                Acquire(0, 1),
                Acquire(0, 2),
                Acquire(1, 0),
                Acquire(1, 2),
                Raise(1, 0),
                Raise(1, 1),
                Restart(0),
                Acquire(0, 0),
                Raise(0, 0),
                Raise(0, 2),
            ]),
        ),
        (
            // Node 2 restarts empty; client 1's grant counts nodes 0 and 1 while node 2 is
            // kept out (two ticks left), client 0's too; a tick later one tick is left; once
            // the TTL is over node 2 counts again.
            "a restarted node kept out one TTL, then back",
            2,
            [
                &[Acquire(1, 0), Acquire(1, 1), Restart(2), Acquire(1, 2)][..],
                &raise_all(1),
                &[Release(1)],
                &all(0),
                &[
                    Raise(0, 2),
                    Raise(0, 0),
                    Raise(0, 1),
                    Release(0),
                    Tick,
                    Retry(1),
                ],
                &all(1),
                &raise_all(1),
                &[Release(1), Tick, Retry(0)],
                &all(0),
                &[Raise(0, 2), Raise(0, 0), Raise(0, 1)],
            ]
            .concat()
            .into_iter()
            .map(Step::Model)
            .collect(),
        ),
        (
            // Client 0's round 1 takes nodes 0 and 1 at tick 2; at tick 3 client 1 takes node
            // 2 (a later fence) and fails; client 0 is granted below node 2's counter; client
            // 1's next attempt, with node 2 in its round 1, gets a fence above both.
            "a minority holding a higher fence",
            2,
            [
                &all(0)[..],
                &[Tick, Acquire(1, 2), Acquire(1, 0), Acquire(1, 1)],
                &[Raise(0, 0), Raise(0, 1), Release(0), Retry(1)],
                &all(1),
                &raise_all(1),
            ]
            .concat()
            .into_iter()
            .map(Step::Model)
            .collect(),
        ),
        (
            // Client 0's leases run out before its round 2; client 1 takes node 0 meanwhile.
            "round 2 after the lease ran out, or went to another owner",
            1,
            steps(&[
                Acquire(0, 0),
                Acquire(0, 1),
                Acquire(0, 2),
                Tick,
                Tick,
                Acquire(1, 0),
                Raise(0, 0),
                Raise(0, 1),
            ]),
        ),
        (
            // A granted client's round 2 answered but lost, sent again on each node.
            "a round 2 sent again",
            1,
            [
                steps(&[Tick]),
                steps(&all(0)),
                steps(&raise_all(0)),
                vec![Step::Resend(0, 0), Step::Resend(0, 1), Step::Resend(0, 2)],
            ]
            .concat(),
        ),
        (
            // Node 0's record is a tick ahead of its clock when client 0's round 2 comes: the
            // wait starts again from now.
            "a data-since record ahead of its node's clock",
            1,
            [
                steps(&all(0)),
                vec![Step::SinceAhead(0)],
                steps(&[Raise(0, 0), Raise(0, 1)]),
            ]
            .concat(),
        ),
    ]
}

/// The model's clock-jump counterexample (`a_clock_jump_on_one_node_breaks_the_fence_order`):
/// client 1 commits its fence on node 1, node 1's clock jumps a tick (half a TTL) and ends that
/// lease early, client 0 takes node 1 and node 2 and is granted with the larger fence, then
/// client 1's last round 2 (node 0) grants it too: two valid grants, the later with the smaller
/// fence. The real servers must do the same.
fn jump() -> Vec<Step> {
    steps(&[
        Acquire(1, 1),
        Tick,
        Acquire(0, 2),
        Acquire(1, 0),
        Acquire(0, 0),
        Acquire(1, 2),
        Raise(1, 1),
        Jump(1),
        Acquire(0, 1),
        Raise(0, 1),
        Raise(0, 2),
        Raise(1, 0),
    ])
}

/// Every scenario; what they covered.
pub(crate) fn run(real: &mut Real, nodes: &mut Nodes) -> Result<Seen, String> {
    let mut total = Seen::default();
    for (name, attempts, list) in scenarios() {
        let (seen, _, _) = case(real, nodes, model(attempts), &list)
            .map_err(|e| format!("quorum scenario \"{name}\": {e}"))?;
        total.add(seen);
    }
    let (seen, state, back) = case(real, nodes, model(1), &jump())
        .map_err(|e| format!("quorum scenario \"the clock jump\": {e}"))?;
    let valid = state
        .clients
        .iter()
        .filter(|c| matches!(c.phase, Phase::Holding(_)) && state.now < c.started + TTL)
        .count();
    if !(state.back && back && valid == 2) {
        return Err(format!(
            "quorum scenario \"the clock jump\": expected two valid grants, the later with the \
             smaller fence, on both sides; the model's went back: {}, the servers': {back}, \
             valid grants {valid}",
            state.back
        ));
    }
    total.add(seen);
    foreign(real, nodes)?;
    Ok(total)
}

/// Another program's data where fence_raise.lua reads: at the data-since record and at the
/// fence counter it is refused with DLOCKFOREIGN, at the lock key (another Redis type) it is
/// another owner's; each key is left as it was.
fn foreign(real: &mut Real, nodes: &mut Nodes) -> Result<(), String> {
    let k = keys()?;
    let token = token_hex(1);
    let value = lock_value(&token, HOLDER, "").ok_or("token")?;
    let cases: [(&str, &str, Option<&str>); 3] = [
        (&k.since, "not a time", Some("DLOCKFOREIGN")),
        (&k.counter, "not a fence", Some("DLOCKFOREIGN")),
        (&k.lock, "", None),
    ];
    for (key, data, refused) in cases {
        nodes.query(0, &redis::cmd("FLUSHALL"))?;
        if key == k.lock {
            nodes.query(0, redis::cmd("RPUSH").arg(key).arg("x"))?;
        } else {
            nodes.query(
                0,
                redis::cmd("SET")
                    .arg(&k.lock)
                    .arg(&value)
                    .arg("PX")
                    .arg(TTL_MS),
            )?;
            nodes.query(0, redis::cmd("SET").arg(&k.since).arg(1))?;
            nodes.query(0, redis::cmd("SET").arg(key).arg(data))?;
        }
        let args = [
            token.clone(),
            k.counter.clone(),
            "99".into(),
            k.since.clone(),
            TTL_MS.to_string(),
        ];
        let server = &nodes.servers.nodes()[0];
        let con = &mut nodes.cons[0];
        let answer = real.call_at((server, con), Source::FenceRaise, &[&k.lock], &args)?;
        let ok = match (&answer, refused) {
            (Err((code, detail)), Some(want)) => code == want && detail.contains(key),
            (Ok(reply), None) => raise_answer(reply) == Some(RaiseAnswer::Other),
            _ => false,
        };
        if !ok {
            return Err(format!(
                "quorum: {key} holding another program's data: {answer:?}"
            ));
        }
        let kept = if key == k.lock {
            nodes.query(0, redis::cmd("LLEN").arg(key))? == Value::Int(1)
        } else {
            nodes.query(0, redis::cmd("GET").arg(key))? == Value::BulkString(data.into())
        };
        if !kept {
            return Err(format!(
                "quorum: fence_raise.lua changed {key} holding another program's data"
            ));
        }
    }
    Ok(())
}
