//! The scheduler's job-level scripts in lockstep with their model steps
//! (`dlock_model::sched`, one function per script over the job's decodable keys): `claim.lua`
//! (turns, misfire, at most once and at least once), `request.lua`, `take_request.lua`,
//! `withdraw.lua`, the pause (`SET paused 1`) and `resume.lua`, `heartbeat.lua`,
//! `register.lua`, `once.lua`, `once_cancel.lua` and `once_trim.lua`.
//!
//! Each walk is a sequence of calls with arguments drawn from a small world (three replicas,
//! four occurrences whose fire times fall inside the ticks, two instances in the registry, two
//! idempotency keys), and clock jumps of one tick. Every call is sent to Redis as the scheduler
//! sends it and given to the model's step with the same arguments and the server time the
//! script read (from its reply where it returns it, else read just before); the replies must
//! be equal, and then the keys decoded from Redis (`decode.rs`: sorted sets with scores, the
//! ledger hash, the request list, key expiries by `PEXPIRETIME`) must equal the model's, and
//! the messages on the job's wake channel the ones the model published.
//!
//! `Start` is the driver's own: `finish.lua` recording a run "running" (the run took its lock),
//! which the step module does not model (the attempt walks check `finish.lua`); its effect on
//! the model's ledger is written here, one line, so that `withdraw.lua` meets started runs.

mod decode;
mod fixed;

use std::time::Duration;

use super::{Counts, Dice, Keys, Sched, UNIT, ok};
use dlock_model::sched::{
    self, ClaimArgs, JobRedis, Ms, OnceArgs, Published, RegisterArgs, Registry, TakeRequestArgs,
    end_record,
};
use dlock_scheduler::__private::conformance::Script;

/// The registry's instance tokens.
const INSTANCES: [&str; 2] = ["i1", "i2"];
/// The job's name (its wake-up message).
const JOB: &str = "j";
/// The longest random walk.
const MAX_STEPS: usize = 40;
/// The claim retention and the ledger's length.
const RETENTION: u64 = 3 * UNIT;
const KEEP: i64 = 3;
/// A replica's liveness.
const LIVENESS: u64 = 2 * UNIT;

/// One call of a walk.
#[derive(Clone, Copy, Debug)]
pub(super) enum Op {
    /// The clock moves one tick.
    Tick,
    /// claim.lua by replica `r` of occurrence `occ` (1..=4), fired `jitter` quarter-ticks late,
    /// with a turn grace of `grace` ticks, at least once when `lease`, with turn offset
    /// `offset` (a job's rank in its group).
    Claim {
        r: u8,
        occ: u8,
        jitter: u8,
        grace: u8,
        lease: bool,
        offset: u8,
    },
    /// request.lua.
    Request,
    /// take_request.lua by replica `r`, with a new run id or the last one again.
    TakeRequest { r: u8, again: bool, lease: bool },
    /// withdraw.lua of the `pick`-th claim made (counting back), with its token or another.
    Withdraw { pick: u8, right: bool },
    /// finish.lua "running" of the `pick`-th claim made: its run starts.
    Start { pick: u8 },
    /// `SET paused 1`.
    Pause,
    /// resume.lua.
    Resume,
    /// heartbeat.lua of replica `r`: live (or leaving), naming `retries` or not.
    Heartbeat { r: u8, leave: bool, retries: bool },
    /// register.lua of instance `i`: publish, or withdraw.
    Register { i: u8, leave: bool },
    /// once.lua: with idempotency key `key` (0: none), a run id used before (`again`), due at
    /// a time in the past (`past`) or after `delay` ticks; `mode` 1 debounces (max wait one
    /// tick and a half), 2 replaces the arguments, 3 both, 0 neither; 4 added: with a
    /// traceparent (the call's own).
    Once {
        key: u8,
        again: bool,
        past: bool,
        delay: u8,
        mode: u8,
    },
    /// once_cancel.lua of the `pick`-th one-off run enqueued.
    OnceCancel { pick: u8 },
    /// once_trim.lua keeping `keep` runs, looking at `look` at most.
    OnceTrim { keep: u8, look: u8 },
}

/// Draws one call.
fn draw(dice: &mut Dice) -> Op {
    let n = |dice: &mut Dice, k: usize| dice.below(k) as u8;
    match dice.below(20) {
        0..=3 => Op::Tick,
        4..=7 => Op::Claim {
            r: n(dice, 3),
            occ: n(dice, 4) + 1,
            jitter: n(dice, 2),
            grace: n(dice, 2),
            lease: dice.below(3) == 0,
            offset: if dice.below(2) == 0 { 0 } else { n(dice, 3) },
        },
        8 => Op::Request,
        9 => Op::TakeRequest {
            r: n(dice, 3),
            again: dice.below(5) == 0,
            lease: dice.below(3) == 0,
        },
        10 => Op::Withdraw {
            pick: n(dice, 3),
            right: dice.below(4) != 0,
        },
        11 => Op::Start { pick: n(dice, 3) },
        12 => Op::Pause,
        13 => Op::Resume,
        14 | 15 => Op::Heartbeat {
            r: n(dice, 3),
            leave: dice.below(4) == 0,
            retries: dice.below(2) == 0,
        },
        16 => Op::Register {
            i: n(dice, 2),
            leave: dice.below(3) == 0,
        },
        17 => Op::Once {
            key: n(dice, 3),
            again: dice.below(4) == 0,
            past: dice.below(4) == 0,
            delay: n(dice, 3),
            mode: (if dice.below(2) == 0 {
                0
            } else {
                n(dice, 3) + 1
            }) | (4 * n(dice, 2)),
        },
        18 => Op::OnceCancel { pick: n(dice, 3) },
        _ => Op::OnceTrim {
            keep: n(dice, 3),
            look: n(dice, 3),
        },
    }
}

/// `walks` random walks, then the fixed ones.
pub(super) fn run(
    sched: &mut Sched,
    walks: usize,
    seed: u64,
    counts: &mut Counts,
) -> Result<(), String> {
    let mut sub = sched.connection()?;
    sub.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| format!("read timeout: {e}"))?;
    let keys = Keys::new();
    sub.send_packed_command(&redis::cmd("SUBSCRIBE").arg(&keys.wake).get_packed_command())
        .map_err(|e| format!("SUBSCRIBE: {e}"))?;
    super::schedules::drain(&mut sub)?;
    let mut dice = Dice::new(seed ^ 0x10b_c1a1);
    for n in 0..walks {
        let mut walk = Walk::start(sched, &mut sub)?;
        for _ in 0..MAX_STEPS {
            let op = draw(&mut dice);
            walk.take(op)
                .map_err(|e| walk.failed(&format!("job walk {n}"), &e))?;
        }
        counts.walks += 1;
        counts.steps += MAX_STEPS;
    }
    for (name, ops) in fixed::ALL {
        let mut walk = Walk::start(sched, &mut sub)?;
        for op in *ops {
            walk.take(*op)
                .map_err(|e| walk.failed(&format!("fixed job walk `{name}`"), &e))?;
        }
        counts.walks += 1;
        counts.steps += ops.len();
    }
    Ok(())
}

/// One walk: the model's keys beside Redis's.
struct Walk<'a> {
    sched: &'a mut Sched,
    sub: &'a mut redis::Connection,
    keys: Keys,
    job: JobRedis,
    registry: Registry,
    /// The claims made (run id, token), newest last.
    claimed: Vec<(String, String)>,
    /// The one-off run ids enqueued, newest last.
    once_ids: Vec<String>,
    /// Run ids handed out so far (`m<n>`, `o<n>`) and tokens.
    serial: u32,
    trail: Vec<String>,
}

impl<'a> Walk<'a> {
    fn start(sched: &'a mut Sched, sub: &'a mut redis::Connection) -> Result<Self, String> {
        sched.reset()?;
        Ok(Self {
            sched,
            sub,
            keys: Keys::new(),
            job: JobRedis::default(),
            registry: Registry::default(),
            claimed: Vec::new(),
            once_ids: Vec::new(),
            serial: 0,
            trail: Vec::new(),
        })
    }

    fn failed(&self, what: &str, why: &str) -> String {
        format!("{what}: {why}\n  calls: {}", self.trail.join(", "))
    }

    fn next_serial(&mut self) -> u32 {
        self.serial += 1;
        self.serial
    }

    /// A time `quarters` quarter-ticks after the walk began.
    fn at(&self, quarters: u64) -> Ms {
        (self.sched.t0() + quarters * UNIT / 4) as Ms
    }

    /// One call on both sides, then the comparison.
    fn take(&mut self, op: Op) -> Result<(), String> {
        self.trail.push(format!("{op:?}"));
        self.send(op)?;
        self.compare()
    }

    fn send(&mut self, op: Op) -> Result<(), String> {
        match op {
            Op::Tick => self.sched.tick(),
            Op::Claim {
                r,
                occ,
                jitter,
                grace,
                lease,
                offset,
            } => self.claim(r, occ, jitter, grace, lease, offset),
            Op::Request => self.request(),
            Op::TakeRequest { r, again, lease } => self.take_request(r, again, lease),
            Op::Withdraw { pick, right } => self.withdraw(pick, right),
            Op::Start { pick } => self.start_run(pick),
            Op::Pause => {
                let now = self.sched.now_ms()? as Ms;
                self.sched
                    .read::<()>(redis::cmd("SET").arg(&self.keys.paused).arg(1))?;
                sched::pause(&mut self.job, now);
                Ok(())
            }
            Op::Resume => self.resume(),
            Op::Heartbeat { r, leave, retries } => self.heartbeat(r, leave, retries),
            Op::Register { i, leave } => self.register(i, leave),
            Op::Once {
                key,
                again,
                past,
                delay,
                mode,
            } => self.once(key, again, past, delay, mode),
            Op::OnceCancel { pick } => self.once_cancel(pick),
            Op::OnceTrim { keep, look } => self.once_trim(keep, look),
        }
    }

    fn claim(
        &mut self,
        r: u8,
        occ: u8,
        jitter: u8,
        grace: u8,
        lease: bool,
        offset: u8,
    ) -> Result<(), String> {
        // The occurrence falls in the middle of tick `occ`; its fire time a quarter later
        // with jitter.
        let occurrence = self.at(u64::from(occ) * 4 + 1);
        let token = format!("c{}", self.next_serial());
        let args = ClaimArgs {
            run_id: occurrence.to_string(),
            occurrence,
            replica: format!("r{r}"),
            host: "host".into(),
            pid: "1".into(),
            token: token.clone(),
            retention: RETENTION as Ms,
            keep: KEEP,
            fire_at: occurrence + Ms::from(jitter) * (UNIT as Ms) / 4,
            grace: Ms::from(grace) * UNIT as Ms,
            liveness: LIVENESS as Ms,
            lease: if lease { (2 * UNIT) as Ms } else { 0 },
            offset: i64::from(offset),
        };
        let k = &self.keys;
        let keys = [
            &k.claims,
            &k.runs,
            &k.ledger,
            &k.paused,
            &k.replicas,
            &k.turn,
            &k.retries,
        ]
        .map(String::as_str);
        let argv = [
            args.run_id.clone(),
            args.occurrence.to_string(),
            args.replica.clone(),
            args.host.clone(),
            args.pid.clone(),
            args.token.clone(),
            args.retention.to_string(),
            args.keep.to_string(),
            args.fire_at.to_string(),
            args.grace.to_string(),
            args.liveness.to_string(),
            args.lease.to_string(),
            args.offset.to_string(),
        ];
        let reply = ok(self.sched.call(Script::Claim, &keys, &argv)?, "claim.lua")?;
        let real = decode::claim(&reply, lease)?;
        let want = sched::claim(&mut self.job, decode::claim_now(&real), &args);
        same("claim.lua", &real, &want)?;
        if matches!(want, sched::ClaimReply::Won { .. }) {
            self.claimed.push((args.run_id, token));
        }
        Ok(())
    }

    fn request(&mut self) -> Result<(), String> {
        let now = self.sched.now_ms()? as Ms;
        // Requested "now" by the operator's clock; kept 150 s (a tick and a half).
        let requested = now;
        let argv = [
            requested.to_string(),
            "150".into(),
            self.keys.wake.clone(),
            JOB.into(),
            "PUBLISH".into(),
        ];
        let key = self.keys.requests.clone();
        let reply = ok(
            self.sched.call(Script::Request, &[&key], &argv)?,
            "request.lua",
        )?;
        // request.lua returns no time; the one it read is its EXPIRE's base (the script runs
        // a few ms after the read above, more under the debugger).
        let at: i64 = self.sched.read(redis::cmd("PEXPIRETIME").arg(&key))?;
        let now = if at > 0 { at - 150_000 } else { now };
        let want = sched::request(
            &mut self.job,
            now,
            requested,
            150,
            &self.keys.wake,
            JOB,
            false,
        );
        same("request.lua", &decode::one(&reply)?, &want)
    }

    fn take_request(&mut self, r: u8, again: bool, lease: bool) -> Result<(), String> {
        let run_id = match self
            .claimed
            .iter()
            .rev()
            .find(|(id, _)| id.starts_with('m'))
        {
            Some((id, _)) if again => id.clone(),
            _ => format!("m{:016x}", self.next_serial()),
        };
        let token = format!("q{}", self.next_serial());
        let args = TakeRequestArgs {
            run_id,
            replica: format!("r{r}"),
            host: "host".into(),
            pid: "1".into(),
            token: token.clone(),
            retention: RETENTION as Ms,
            keep: KEEP,
            lease: if lease { (2 * UNIT) as Ms } else { 0 },
        };
        let k = &self.keys;
        let keys = [
            &k.claims,
            &k.runs,
            &k.ledger,
            &k.paused,
            &k.requests,
            &k.retries,
        ]
        .map(String::as_str);
        let argv = [
            args.run_id.clone(),
            args.replica.clone(),
            args.host.clone(),
            args.pid.clone(),
            args.token.clone(),
            args.retention.to_string(),
            args.keep.to_string(),
            args.lease.to_string(),
        ];
        let reply = ok(
            self.sched.call(Script::TakeRequest, &keys, &argv)?,
            "take_request.lua",
        )?;
        let real = decode::take_request(&reply)?;
        let now = match real {
            sched::TakeRequestReply::Took { now, .. }
            | sched::TakeRequestReply::Empty { now }
            | sched::TakeRequestReply::Paused { now }
            | sched::TakeRequestReply::Claimed { now } => now,
        };
        let want = sched::take_request(&mut self.job, now, &args);
        same("take_request.lua", &real, &want)?;
        if matches!(want, sched::TakeRequestReply::Took { .. }) {
            self.claimed.push((args.run_id, token));
        }
        Ok(())
    }

    /// The `pick`-th claim counting back from the newest (an unknown run when there is none).
    fn picked(&self, pick: u8) -> (String, String) {
        let n = self.claimed.len();
        match n.checked_sub(1 + usize::from(pick) % n.max(1)) {
            Some(i) if n > 0 => self.claimed[i].clone(),
            _ => ("9".into(), "none".into()),
        }
    }

    fn withdraw(&mut self, pick: u8, right: bool) -> Result<(), String> {
        let (id, token) = self.picked(pick);
        let token = if right { token } else { format!("{token}x") };
        let k = &self.keys;
        let keys = [&k.claims, &k.runs, &k.ledger, &k.requests, &k.retries].map(String::as_str);
        let now = self.sched.now_ms()? as Ms;
        let reply = ok(
            self.sched.call(
                Script::Withdraw,
                &keys,
                &[id.clone(), token.clone(), "150".into()],
            )?,
            "withdraw.lua",
        )?;
        let want = sched::withdraw(&mut self.job, now, &id, &token, 150);
        same("withdraw.lua", &decode::one(&reply)?, &i64::from(want))
    }

    /// finish.lua "running" (the driver's own step: see the module docs).
    fn start_run(&mut self, pick: u8) -> Result<(), String> {
        let (id, token) = self.picked(pick);
        let argv = [
            id.clone(),
            token.clone(),
            "running".into(),
            "7".into(),
            String::new(),
            String::new(),
            "1".into(),
            self.keys.wake.clone(),
            JOB.into(),
            "PUBLISH".into(),
            String::new(),
        ];
        let keys = [self.keys.ledger.clone(), self.keys.retries.clone()];
        let keys = keys.each_ref().map(String::as_str);
        let now = self.sched.now_ms()? as Ms;
        let reply = ok(self.sched.call(Script::Finish, &keys, &argv)?, "finish.lua")?;
        self.job.expire(now);
        let mine = self
            .job
            .claim_of(&id)
            .is_some_and(|c| c.first() == Some(&"1") && c.get(6) == Some(&token.as_str()));
        // finish.lua "running": only the claim's own attempt, and not over an end.
        let running = self
            .job
            .end_of(&id)
            .is_none_or(|e| e.first() == Some(&"1") && e.get(1) == Some(&"running"));
        let started = mine && running;
        if started {
            self.job.ledger.insert(
                format!("{id}:end"),
                end_record("running", "", "7", "", "", ""),
            );
        }
        same(
            "finish.lua running",
            &super::ints(&reply),
            &vec![Some(i64::from(started))],
        )
    }

    fn resume(&mut self) -> Result<(), String> {
        let k = &self.keys;
        let keys = [&k.paused, &k.requests, &k.retries].map(String::as_str);
        let now = self.sched.now_ms()? as Ms;
        let argv = [self.keys.wake.clone(), JOB.into(), "PUBLISH".into()];
        let reply = ok(self.sched.call(Script::Resume, &keys, &argv)?, "resume.lua")?;
        let want = sched::resume(&mut self.job, now, &self.keys.wake, JOB, false);
        same("resume.lua", &decode::one(&reply)?, &want)
    }

    fn heartbeat(&mut self, r: u8, leave: bool, retries: bool) -> Result<(), String> {
        let replica = format!("r{r}");
        let liveness = if leave { 0 } else { LIVENESS as Ms };
        let mut keys = vec![self.keys.replicas.as_str()];
        if retries {
            keys.push(self.keys.retries.as_str());
        }
        let keys: Vec<String> = keys.into_iter().map(str::to_owned).collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let reply = ok(
            self.sched.call(
                Script::Heartbeat,
                &keys,
                &[replica.clone(), liveness.to_string()],
            )?,
            "heartbeat.lua",
        )?;
        let real = decode::pair(&reply)?;
        let want = sched::heartbeat(&mut self.job, real.0, &replica, liveness, retries);
        same("heartbeat.lua", &real, &want)
    }

    fn register(&mut self, i: u8, leave: bool) -> Result<(), String> {
        let token = INSTANCES[usize::from(i) % INSTANCES.len()];
        let args = RegisterArgs {
            entry_key: self.keys.entry(token),
            token: token.into(),
            ttl: if leave { 0 } else { (3 * UNIT) as Ms },
            body: format!("replica {token}\njob {JOB}"),
            liveness: LIVENESS as Ms,
        };
        let keys = [self.keys.index.clone(), args.entry_key.clone()];
        let keys = keys.each_ref().map(String::as_str);
        let argv = [
            args.token.clone(),
            args.ttl.to_string(),
            args.body.clone(),
            args.liveness.to_string(),
        ];
        let reply = ok(
            self.sched.call(Script::Register, &keys, &argv)?,
            "register.lua",
        )?;
        let now = decode::one(&reply)?;
        let want = sched::register(&mut self.registry, now, &args);
        same("register.lua", &now, &want)
    }

    fn once(
        &mut self,
        key: u8,
        again: bool,
        past: bool,
        delay: u8,
        mode: u8,
    ) -> Result<(), String> {
        let run_id = match self.once_ids.last() {
            Some(id) if again && key == 0 => id.clone(),
            _ => format!("o{:016x}", self.next_serial()),
        };
        let idem = if key == 0 {
            String::new()
        } else {
            format!("key{key}")
        };
        let key_id = if key == 0 {
            None
        } else {
            let sha: String = self.sched.read(
                redis::cmd("EVAL")
                    .arg("return redis.sha1hex(ARGV[1])")
                    .arg(0)
                    .arg(&idem),
            )?;
            Some(format!("o{sha}"))
        };
        let due = past.then(|| self.at(1));
        let args = OnceArgs {
            run_id,
            key_id,
            key: idem.clone(),
            due,
            delay: Ms::from(delay) * UNIT as Ms + (UNIT / 2) as Ms,
            replica: "r9".into(),
            host: "host".into(),
            pid: "1".into(),
            // Each call's own payload, so that a replace shows.
            args: format!("{{\"n\":{}}}", self.serial),
            retention: RETENTION as Ms,
            channel: self.keys.wake.clone(),
            message: JOB.into(),
            sharded: false,
            max_wait: (mode & 1 == 1).then_some((UNIT + UNIT / 2) as Ms),
            replace: mode & 2 == 2,
            trace: if mode & 4 == 4 {
                format!("00-{:032x}-{:016x}-01", self.serial, self.serial)
            } else {
                String::new()
            },
        };
        let k = &self.keys;
        let keys = [&k.claims, &k.runs, &k.ledger, &k.retries].map(String::as_str);
        let argv = [
            if key == 0 {
                args.run_id.clone()
            } else {
                String::new()
            },
            idem,
            args.due.map_or(String::new(), |d| d.to_string()),
            args.delay.to_string(),
            args.replica.clone(),
            args.host.clone(),
            args.pid.clone(),
            args.args.clone(),
            args.retention.to_string(),
            args.channel.clone(),
            args.message.clone(),
            "PUBLISH".into(),
            args.max_wait.map_or(String::new(), |w| w.to_string()),
            if args.replace { "1" } else { "" }.into(),
            args.trace.clone(),
        ];
        let reply = ok(self.sched.call(Script::Once, &keys, &argv)?, "once.lua")?;
        let real = decode::once(&reply)?;
        let want = sched::once(&mut self.job, real.3, &args);
        same(
            "once.lua",
            &real,
            &(want.status, want.id.clone(), want.due, want.now),
        )?;
        if want.status == 1 {
            self.once_ids.push(want.id);
        }
        Ok(())
    }

    fn once_cancel(&mut self, pick: u8) -> Result<(), String> {
        let n = self.once_ids.len();
        let id = match n.checked_sub(1 + usize::from(pick) % n.max(1)) {
            Some(i) if n > 0 => self.once_ids[i].clone(),
            _ => "o0000000000000000".into(),
        };
        let keys = [self.keys.ledger.clone(), self.keys.retries.clone()];
        let keys = keys.each_ref().map(String::as_str);
        let reply = ok(
            self.sched
                .call(Script::OnceCancel, &keys, &[id.clone(), "cancelled".into()])?,
            "once_cancel.lua",
        )?;
        let (done, now) = decode::pair(&reply)?;
        let want = sched::once_cancel(&mut self.job, now, &id, "cancelled");
        same(
            "once_cancel.lua",
            &(done, now),
            &(i64::from(want.0), want.1),
        )
    }

    fn once_trim(&mut self, keep: u8, look: u8) -> Result<(), String> {
        let k = &self.keys;
        let keys = [&k.runs, &k.ledger, &k.retries].map(String::as_str);
        let now = self.sched.now_ms()? as Ms;
        let reply = ok(
            self.sched.call(
                Script::OnceTrim,
                &keys,
                &[keep.to_string(), look.to_string()],
            )?,
            "once_trim.lua",
        )?;
        let want = sched::once_trim(&mut self.job, now, i64::from(keep), i64::from(look));
        same("once_trim.lua", &decode::one(&reply)?, &want)
    }

    /// Redis's keys and messages against the model's.
    fn compare(&mut self) -> Result<(), String> {
        let heard = super::schedules::drain(self.sub)?;
        let published: Vec<Published> = self.job.drain_published();
        let want: Vec<String> = published
            .iter()
            .filter(|p| p.channel == self.keys.wake && !p.sharded)
            .map(|p| p.message.clone())
            .collect();
        if heard != want || want.len() != published.len() {
            return Err(format!(
                "the wake channel carried {heard:?}; the model published {published:?}"
            ));
        }
        // Redis drops an expired key whether a script touches it or not: the model's keys are
        // compared as of now.
        let now = self.sched.now_ms()? as Ms;
        let mut job = self.job.clone();
        job.expire(now);
        let mut registry = self.registry.clone();
        registry.expire(now);
        let mut real = decode::job(self.sched, &self.keys)?;
        close(&mut real.replicas_expire, job.replicas_expire);
        close(&mut real.requests_expire, job.requests_expire);
        if real != job {
            return Err(format!(
                "after the call, Redis holds\n    {real:?}\n  the model\n    {job:?}"
            ));
        }
        let mut real = decode::registry(self.sched, &self.keys)?;
        close(&mut real.index_expire, registry.index_expire);
        for (key, (_, at)) in &mut real.entries {
            let mut got = Some(*at);
            close(&mut got, registry.entries.get(key).map(|(_, at)| *at));
            *at = got.unwrap_or(*at);
        }
        if real != registry {
            return Err(format!(
                "after the call, the registry holds\n    {real:?}\n  the model\n    {registry:?}"
            ));
        }
        Ok(())
    }
}

/// A key's expiry as the model's when they are within 50 ms: `PEXPIRE` counts from the time
/// Redis took when the script started, and `TIME` inside it reads later (a millisecond, or a
/// few under the debugger). The walks move the clock in ticks of 100 s, so no expiry the
/// steps judge is that close to a call.
fn close(real: &mut Option<Ms>, model: Option<Ms>) {
    if let (Some(r), Some(m)) = (*real, model)
        && (r - m).abs() <= 50
    {
        *real = Some(m);
    }
}

/// A reply against the model's.
fn same<T: PartialEq + std::fmt::Debug>(what: &str, real: &T, model: &T) -> Result<(), String> {
    if real == model {
        Ok(())
    } else {
        Err(format!("{what} answered {real:?}; the model: {model:?}"))
    }
}
