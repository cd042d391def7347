//! Runs one sequence on both sides in lockstep. Each [`Step`] becomes the protocol steps the
//! client library takes ([`Op`]s: one script or one plain command each, decided from the
//! replies as the client decides); each `Op` is applied to the model and sent to Redis, and
//! then compared (`driver/compare.rs`): the replies, the grants each client's subscription
//! received, the whole state as an [`Abstract`](dlock_model::Abstract) (holders, queue order,
//! stored limit, order of fences, live leases, the tokens of release requests), and the time
//! left of every hold and release request (in whole lease units).
//! Fence values differ between the sides (the model's clock is not the server's): every fence
//! seen is paired with its counterpart, and each new pair must order like every earlier one.
//!
//! The clients' faults are the driver's: a dead client's subscription is closed; a paused one
//! sends nothing and its timers do not fire until it resumes (its subscription stays open); a
//! lost reply makes the client send the same call again; a lost grant leaves its request
//! waiting.

mod compare;
mod inspect;

use std::collections::BTreeSet;

use dlock_model::{
    ClientId, Entry, ExtendItem, LockRef, Mode, Ms, Name, Op, Push, RW_LIMIT, ReleaseHow, Reply,
    Server, SharedEntry, Token, apply,
};

use crate::redis_side::{Real, UNIT};
use crate::steps::{CLIENTS, Lock, Step};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Queued,
    Holding,
    Done,
}

/// An acquire call as its client sees it.
#[derive(Clone, Debug)]
struct Request {
    token: Token,
    client: ClientId,
    lock: Lock,
    weight: u32,
    limit: u32,
    lease: Ms,
    state: State,
    /// The model's fence of its hold, when the client knows it.
    fence: Option<u64>,
    /// Its latest attempt was a `Wait` or `Join` that left it queued: its next retry is an
    /// `Again` (as every waiting acquire re-asks after its fallback timer).
    confirmed: bool,
}

pub(crate) fn lock_ref(lock: Lock) -> LockRef {
    match lock {
        Lock::Mutex => LockRef::Mutex(0),
        Lock::Election => LockRef::Mutex(1),
        Lock::Sem => LockRef::Shared(0),
        Lock::Rw => LockRef::Shared(1),
    }
}

fn name_of(lock: Lock) -> Name {
    match lock_ref(lock) {
        LockRef::Mutex(n) | LockRef::Shared(n) => n,
    }
}

fn is_mutex(lock: Lock) -> bool {
    matches!(lock, Lock::Mutex | Lock::Election)
}

const N: usize = CLIENTS as usize;

/// One sequence's run.
pub(crate) struct Case<'r> {
    model: Server,
    now: Ms,
    real: &'r mut Real,
    requests: Vec<Request>,
    next_token: Token,
    dead: [bool; N],
    /// Paused clients: they send nothing, and read their grants when they resume.
    paused: [bool; N],
    /// Grants that reached a paused client, read when it resumes.
    unread: Vec<Push>,
    /// The client's next request's reply is lost (it sends the call again).
    lose_reply: [bool; N],
    /// The next grant to the client is lost.
    lose_push: [bool; N],
    /// What each client knows of its connection: the epoch it believes it is in, and the
    /// slots (here: mutex names) it floored there (fence_epoch.rs).
    known: Vec<(u32, BTreeSet<Name>)>,
    /// Every fence seen: (model's, Redis's).
    fences: Vec<(u64, u64)>,
    /// The protocol steps of the current step, with both replies (for a failure's report).
    log: Vec<String>,
    /// Protocol steps run.
    pub ops: usize,
}

impl<'r> Case<'r> {
    /// A fresh case: empty server, every client alive and subscribed to every lock.
    pub(crate) fn start(real: &'r mut Real) -> Result<Self, String> {
        real.reset()?;
        let mut case = Self {
            model: Server::new(None),
            now: UNIT,
            real,
            requests: Vec::new(),
            next_token: 1,
            dead: [false; N],
            paused: [false; N],
            unread: Vec::new(),
            lose_reply: [false; N],
            lose_push: [false; N],
            known: vec![(0, BTreeSet::new()); N],
            fences: Vec::new(),
            log: Vec::new(),
            ops: 0,
        };
        for client in 0..CLIENTS {
            for lock in [Lock::Mutex, Lock::Election, Lock::Sem, Lock::Rw] {
                case.exec(Op::Subscribe {
                    lock: lock_ref(lock),
                    client,
                })?;
            }
        }
        Ok(case)
    }

    /// Runs `step`; on a difference, says what differed and which protocol steps led there.
    pub(crate) fn step(&mut self, step: &Step) -> Result<(), String> {
        self.log.clear();
        self.run(step).map_err(|e| {
            format!(
                "{e}\n  protocol steps of this step:\n    {}",
                self.log.join("\n    ")
            )
        })
    }

    fn new_token(&mut self) -> Token {
        let token = self.next_token;
        self.next_token += 1;
        token
    }

    /// Whether `client` can act: alive and not paused.
    fn running(&self, client: u8) -> bool {
        !self.dead[usize::from(client)] && !self.paused[usize::from(client)]
    }

    fn find(&self, client: u8, lock: Lock, state: State) -> Option<usize> {
        if !self.running(client) {
            return None;
        }
        self.requests
            .iter()
            .position(|r| r.client == client && r.lock == lock && r.state == state)
    }

    fn entry(r: &Request) -> Entry {
        Entry {
            token: r.token,
            client: r.client,
            lease: r.lease,
        }
    }

    fn shared_entry(r: &Request) -> SharedEntry {
        SharedEntry {
            token: r.token,
            client: r.client,
            lease: r.lease,
            weight: r.weight,
        }
    }

    /// `op` sent by `client`: twice when its reply is to be lost (the first reply is dropped,
    /// as the client never sees it; both runs are compared).
    fn send(&mut self, client: ClientId, op: Op) -> Result<Reply, String> {
        if std::mem::take(&mut self.lose_reply[usize::from(client)]) {
            self.exec(op.clone())?;
            self.log
                .push("(that reply is lost: the same call again)".into());
        }
        self.exec(op)
    }

    fn run(&mut self, step: &Step) -> Result<(), String> {
        match *step {
            Step::Acquire {
                client,
                lock,
                weight,
                limit,
                lease,
                wait,
                fenced,
            } => self.acquire(client, lock, (weight, limit), lease, wait, fenced),
            Step::Retry { client, lock } => match self.find(client, lock, State::Queued) {
                Some(at) if self.requests[at].confirmed => self.attempt(at, Mode::Again),
                Some(at) => self.attempt(at, Mode::Wait),
                None => Ok(()),
            },
            Step::GiveUp { client, lock } => match self.find(client, lock, State::Queued) {
                Some(at) => self.attempt(at, Mode::Last),
                None => Ok(()),
            },
            Step::Cancel { client, lock } => match self.find(client, lock, State::Queued) {
                Some(at) => self.release(at, true),
                None => Ok(()),
            },
            Step::Release { client, lock } => match self.find(client, lock, State::Holding) {
                Some(at) => self.release(at, false),
                None => Ok(()),
            },
            Step::Extend {
                client,
                lock,
                lease,
            } => self.extend(client, lock, lease),
            Step::Fence { client } => match self.find(client, Lock::Mutex, State::Holding) {
                Some(at) => self.fence(at).map(|_| ()),
                None => Ok(()),
            },
            Step::Guarded { client, lock } => self.guarded(client, lock),
            Step::FencedSet { client, lock } => self.fenced_set(client, lock),
            Step::SetLimit { limit } => self.exec(Op::SetLimit { name: 0, limit }).map(|_| ()),
            Step::Ask { lock } => self
                .exec(Op::Ask {
                    lock: lock_ref(lock),
                })
                .map(|_| ()),
            Step::ForceUnlock { lock } if is_mutex(lock) => self
                .exec(Op::Release {
                    name: name_of(lock),
                    token: 0,
                    leaving: None,
                    how: ReleaseHow::Force,
                })
                .map(|_| ()),
            Step::ForceUnlock { .. } => Ok(()),
            Step::Upgrade { client } => self.change(client, true),
            Step::Downgrade { client } => self.change(client, false),
            Step::Publish { client } => self.publish(client),
            Step::Resign { client } => self.resign(client),
            Step::Observe => self.exec(Op::ElectionRead { name: 1 }).map(|_| ()),
            Step::Inspect { lock } => self.inspect(lock),
            Step::Advance { .. }
            | Step::Replicate
            | Step::Restart { .. }
            | Step::Crash { .. }
            | Step::Pause { .. }
            | Step::Resume { .. }
            | Step::LoseReply { .. }
            | Step::LosePush { .. } => self.fault(step),
        }
    }

    /// The environment's steps: the clock, the server's copy and restarts, the clients'
    /// deaths, pauses and lost messages.
    fn fault(&mut self, step: &Step) -> Result<(), String> {
        match *step {
            Step::Advance { units } => self.advance(u64::from(units)),
            Step::Replicate => self.exec(Op::Replicate).map(|_| ()),
            Step::Restart { from_copy } => {
                self.exec(Op::Restart {
                    from_replica: from_copy,
                })?;
                // The model floors fences at its clock: it must move for them to pass the
                // lost ones, as the real clock does while the server restarts. Every waiter
                // asks again at once on its new connection (here: after that unit).
                self.advance(1)
            }
            Step::Crash { client } => self.crash(client),
            Step::Pause { client } => {
                self.paused[usize::from(client)] = true;
                Ok(())
            }
            Step::Resume { client } => self.resume(client),
            Step::LoseReply { client } => {
                self.lose_reply[usize::from(client)] = true;
                Ok(())
            }
            Step::LosePush { client } => {
                self.lose_push[usize::from(client)] = true;
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// A new acquire call: the uncontended attempt first for a mutex (an election's too), then
    /// the waiting acquire's first attempt ("join"), or one single attempt.
    fn acquire(
        &mut self,
        client: u8,
        lock: Lock,
        (weight, limit): (u32, u32),
        lease: u8,
        wait: bool,
        fenced: bool,
    ) -> Result<(), String> {
        if !self.running(client) {
            return Ok(());
        }
        let (weight, limit) = match lock {
            Lock::Sem => (weight, limit),
            Lock::Rw if weight == 1 => (1, RW_LIMIT),
            Lock::Rw => (RW_LIMIT, RW_LIMIT),
            Lock::Mutex | Lock::Election => (1, 1),
        };
        let token = self.new_token();
        self.requests.push(Request {
            token,
            client,
            lock,
            weight,
            limit,
            lease: u64::from(lease) * UNIT,
            state: State::Done,
            fence: None,
            confirmed: false,
        });
        let at = self.requests.len() - 1;
        if is_mutex(lock) && self.fast_path(at, fenced)? {
            return Ok(());
        }
        if !wait && is_mutex(lock) {
            return Ok(());
        }
        // A waiting acquire's first attempt queues its new entry without a scan ("join").
        let mode = if wait { Mode::Join } else { Mode::Single };
        self.attempt(at, mode)
    }

    fn extend(&mut self, client: u8, lock: Lock, lease: u8) -> Result<(), String> {
        let Some(at) = self.find(client, lock, State::Holding) else {
            return Ok(());
        };
        let r = &self.requests[at];
        let item = ExtendItem {
            lock: lock_ref(lock),
            token: r.token,
            lease: u64::from(lease) * UNIT,
        };
        // 2: extended, and the holder was asked to give the lock back (it keeps it).
        let reply = self.send(client, Op::Extend { items: vec![item] })?;
        if !matches!(&reply, Reply::Extended(r) if r == &[1] || r == &[2]) {
            self.requests[at].state = State::Done;
        }
        Ok(())
    }

    /// The holder writes with the fence it knows (0: none; it does not ask fence.lua first,
    /// which would tell a stale holder that its hold is gone before it writes). A refused
    /// write reports the lease lost: the request is over.
    fn guarded(&mut self, client: u8, lock: Lock) -> Result<(), String> {
        let Some(at) = self.find(client, lock, State::Holding) else {
            return Ok(());
        };
        let r = &self.requests[at];
        let op = Op::Guarded {
            lock: lock_ref(lock),
            token: r.token,
            fence: r.fence.unwrap_or(0),
        };
        if self.send(client, op)? != Reply::Applied {
            self.requests[at].state = State::Done;
        }
        Ok(())
    }

    /// A holder's `fenced_set` of its lock's data key with its fence (a mutex holder asks
    /// fence.lua when it knows none; a lost hold gets none and writes nothing).
    fn fenced_set(&mut self, client: u8, lock: Lock) -> Result<(), String> {
        let Some(at) = self.find(client, lock, State::Holding) else {
            return Ok(());
        };
        let fence = if is_mutex(lock) {
            self.fence(at)?
        } else {
            self.requests[at].fence
        };
        let Some(fence) = fence else {
            return Ok(());
        };
        let key = match lock {
            Lock::Mutex => 0,
            Lock::Sem => 1,
            Lock::Rw => 2,
            Lock::Election => 3,
        };
        let value = self.requests[at].token;
        self.send(client, Op::FencedSet { key, fence, value })
            .map(|_| ())
    }

    /// The election's holder publishes itself (fence.lua first, if it knows no fence).
    fn publish(&mut self, client: u8) -> Result<(), String> {
        let Some(at) = self.find(client, Lock::Election, State::Holding) else {
            return Ok(());
        };
        let Some(fence) = self.fence(at)? else {
            return Ok(());
        };
        let token = self.requests[at].token;
        let op = Op::ElectionPublish {
            name: 1,
            token,
            fence,
            value: client + 1,
        };
        self.send(client, op).map(|_| ())
    }

    /// The election's leader resigns (with the fence it knows), then releases its lock.
    fn resign(&mut self, client: u8) -> Result<(), String> {
        let Some(at) = self.find(client, Lock::Election, State::Holding) else {
            return Ok(());
        };
        if let Some(fence) = self.requests[at].fence {
            let token = self.requests[at].token;
            self.send(
                client,
                Op::ElectionResign {
                    name: 1,
                    token,
                    fence,
                },
            )?;
        }
        self.release(at, false)
    }

    fn crash(&mut self, client: u8) -> Result<(), String> {
        if self.dead[usize::from(client)] {
            return Ok(());
        }
        for lock in [Lock::Mutex, Lock::Election, Lock::Sem, Lock::Rw] {
            self.exec(Op::Unsubscribe {
                lock: lock_ref(lock),
                client,
            })?;
        }
        self.dead[usize::from(client)] = true;
        Ok(())
    }

    /// A paused client runs again: it reads the grants that reached it, then each of its
    /// requests still waiting asks again (its timer fired during the pause).
    fn resume(&mut self, client: u8) -> Result<(), String> {
        if !std::mem::take(&mut self.paused[usize::from(client)]) || self.dead[usize::from(client)]
        {
            return Ok(());
        }
        let (mine, others): (Vec<Push>, Vec<Push>) = std::mem::take(&mut self.unread)
            .into_iter()
            .partition(|p| p.client == client);
        self.unread = others;
        for push in mine {
            self.hear(push);
        }
        self.reask(client)
    }

    /// Every waiting request of `client` asks again, as after its fallback timer.
    fn reask(&mut self, client: u8) -> Result<(), String> {
        let queued: Vec<Token> = self
            .requests
            .iter()
            .filter(|r| r.client == client && r.state == State::Queued)
            .map(|r| r.token)
            .collect();
        for token in queued {
            if let Some(at) = self
                .requests
                .iter()
                .position(|r| r.token == token && r.state == State::Queued)
            {
                let mode = if self.requests[at].confirmed {
                    Mode::Again
                } else {
                    Mode::Wait
                };
                self.attempt(at, mode)?;
            }
        }
        Ok(())
    }

    /// The mutex's uncontended acquire (`SET NX PX GET` alone: callers who wait keep the lock
    /// key, issue #35; with `fenced`, the `MULTI` that also issues the fence). Whether it holds
    /// now.
    fn fast_path(&mut self, at: usize, fenced: bool) -> Result<bool, String> {
        let r = self.requests[at].clone();
        let name = name_of(r.lock);
        let (taken, fence) = if fenced {
            self.fenced_attempt(&r)?
        } else {
            let set = self.exec(Op::SetNxGet {
                name,
                token: r.token,
                lease: r.lease,
            })?;
            (set == Reply::SetNx(None), None)
        };
        if !taken {
            return Ok(false);
        }
        self.requests[at].state = State::Holding;
        self.requests[at].fence = fence;
        // A lease that never waited is released by the whole value its SET wrote (lease.rs).
        self.real.release_by_value(r.token);
        if fenced && fence.is_none() {
            // The INCR was not trusted: fence.lua issues the hold's fence.
            self.fence(at)?;
        }
        Ok(true)
    }

    /// The fenced uncontended `MULTI` as fence_epoch.rs runs it: a plain `INCR` only for a slot
    /// this client floored on its connection's current epoch, fence.lua otherwise; the
    /// connection name read back says which epoch it ran on. Whether it took the lock, and the
    /// fence when it can be trusted.
    fn fenced_attempt(&mut self, r: &Request) -> Result<(bool, Option<u64>), String> {
        let name = name_of(r.lock);
        let client = usize::from(r.client);
        let incr = self.known[client].1.contains(&name);
        let reply = self.exec(Op::FencedFast {
            name,
            token: r.token,
            lease: r.lease,
            incr,
        })?;
        let Reply::Multi { set, fence, epoch } = reply else {
            return Ok((false, None));
        };
        let same = epoch == self.known[client].0;
        if !same {
            // Another connection: the epoch ends, the next one knows no slot.
            self.known[client] = (epoch, BTreeSet::new());
        } else if !incr && fence > 0 {
            self.known[client].1.insert(name);
        }
        let trusted = (same || !incr) && fence > 0;
        Ok((set.is_none(), trusted.then(|| fence.unsigned_abs())))
    }

    /// One waiting acquire's attempt (acquire.lua / shared_acquire.lua) in `mode`.
    fn attempt(&mut self, at: usize, mode: Mode) -> Result<(), String> {
        let r = self.requests[at].clone();
        let op = if is_mutex(r.lock) {
            Op::Acquire {
                name: name_of(r.lock),
                entry: Self::entry(&r),
                mode,
            }
        } else {
            Op::SharedAcquire {
                name: name_of(r.lock),
                entry: Self::shared_entry(&r),
                limit: r.limit,
                mode,
            }
        };
        let reply = self.send(r.client, op)?;
        let r = &mut self.requests[at];
        match reply {
            Reply::Holds { fence, .. } => {
                r.state = State::Holding;
                r.fence = (fence > 0).then_some(fence);
            }
            Reply::Busy { .. } if matches!(mode, Mode::Wait | Mode::Again | Mode::Join) => {
                r.state = State::Queued;
            }
            _ => r.state = State::Done,
        }
        r.confirmed = r.state == State::Queued && matches!(mode, Mode::Wait | Mode::Join);
        Ok(())
    }

    /// A release of a hold, or (`leaving`) of an abandoned wait with its entry. On a server
    /// with `DELIFEQ`, a mutex hold the plain `SET` took, whose fence the client does not know,
    /// goes to it first (acquisition.rs `LeaseCore::release`); its 0 sends release.lua next.
    fn release(&mut self, at: usize, leaving: bool) -> Result<(), String> {
        let r = self.requests[at].clone();
        let native = !leaving && r.fence.is_none() && self.real.native_release(r.token);
        if is_mutex(r.lock) && native {
            let op = Op::NativeRelease {
                name: name_of(r.lock),
                token: r.token,
            };
            if self.send(r.client, op)? == Reply::Int(1) {
                self.real.native_outcome("1 (released)");
                self.requests[at].state = State::Done;
                return Ok(());
            }
        }
        let op = if is_mutex(r.lock) {
            Op::Release {
                name: name_of(r.lock),
                token: r.token,
                leaving: leaving.then(|| Self::entry(&r)),
                how: ReleaseHow::Own,
            }
        } else {
            Op::SharedRelease {
                name: name_of(r.lock),
                token: r.token,
                leaving: leaving.then(|| Self::shared_entry(&r)),
            }
        };
        let reply = self.send(r.client, op)?;
        if is_mutex(r.lock) && native {
            self.real.native_outcome(match reply {
                Reply::Handed(_) => "0, then handed on",
                Reply::Int(0) => "0, then expired",
                Reply::Int(-1) => "0, then held by another",
                Reply::Int(1) => "0, then released by release.lua",
                _ => "0, then another answer",
            });
        }
        self.requests[at].state = State::Done;
        Ok(())
    }

    /// The fence of a mutex hold: known, or asked for (fence.lua).
    fn fence(&mut self, at: usize) -> Result<Option<u64>, String> {
        if let Some(fence) = self.requests[at].fence {
            return Ok(Some(fence));
        }
        let r = self.requests[at].clone();
        let reply = self.send(
            r.client,
            Op::Fence {
                name: name_of(r.lock),
                token: r.token,
            },
        )?;
        let fence = match reply {
            Reply::Int(n) if n > 0 => u64::try_from(n).ok(),
            _ => None,
        };
        self.requests[at].fence = fence;
        Ok(fence)
    }

    /// An upgrade (`up`) or a downgrade by `client` of the read-write lock: of a hold in the
    /// mode it changes from if the client has one, else of any hold of it (refused: DLOCKMODE).
    fn change(&mut self, client: u8, up: bool) -> Result<(), String> {
        if !self.running(client) {
            return Ok(());
        }
        let from = if up { 1 } else { RW_LIMIT };
        let holds =
            |r: &Request| r.client == client && r.lock == Lock::Rw && r.state == State::Holding;
        let Some(at) = self
            .requests
            .iter()
            .position(|r| holds(r) && r.weight == from)
            .or_else(|| self.requests.iter().position(holds))
        else {
            return Ok(());
        };
        let old = self.requests[at].clone();
        let new = self.new_token();
        let reply = self.send(
            client,
            Op::RwChange {
                name: 1,
                old: old.token,
                new,
                up,
                lease: old.lease,
            },
        )?;
        match reply {
            Reply::Holds { fence, .. } => {
                self.requests[at].state = State::Done;
                self.requests.push(Request {
                    token: new,
                    weight: if up { RW_LIMIT } else { 1 },
                    state: State::Holding,
                    fence: Some(fence),
                    ..old
                });
            }
            Reply::Int(0) => self.requests[at].state = State::Done,
            _ => {}
        }
        Ok(())
    }

    /// The clock moves `n` lease units on both sides, one at a time. After each, every running
    /// client's queued requests ask again, as their fallback timers make them: a waiter sleeps
    /// at most the lease its last attempt was told of, one unit here. (Dead and paused
    /// clients' requests do not: that is how a queue of dead waiters ends, and how a lock key
    /// kept for paused ones stays unclaimed past its holder's deadline.)
    fn advance(&mut self, n: u64) -> Result<(), String> {
        for _ in 0..n {
            self.now += UNIT;
            self.real.advance(1)?;
            // A read-only step lets the model expire what ran out (Redis does it by itself).
            apply(&mut self.model, self.now, Op::ExistsQueue { name: 0 });
            self.compare_state()?;
            let queued: Vec<Token> = self
                .requests
                .iter()
                .filter(|r| r.state == State::Queued && self.running(r.client))
                .map(|r| r.token)
                .collect();
            for token in queued {
                if let Some(at) = self
                    .requests
                    .iter()
                    .position(|r| r.token == token && r.state == State::Queued)
                {
                    self.attempt(at, Mode::Wait)?;
                }
            }
        }
        Ok(())
    }
}
