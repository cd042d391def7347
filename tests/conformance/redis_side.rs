//! The real side: one `redis-server` with a movable clock, reused across cases (`FLUSHALL`
//! between them), the shipped scripts called by hand through `dlock_core::__private::
//! conformance`, one subscriber connection per simulated client, and the decoded state turned
//! into the model's [`Abstract`].
//!
//! Each model [`Op`] is sent as the client sends it (same script, same keys and arguments in
//! the same order); [`Real::run`] answers with what Redis replied, [`Real::drain`] with the
//! messages each client's subscription received meanwhile.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use dlock_core::__private::conformance::{
    KeyKind, Source, fence_counter, lock_key, lock_value, mutex_entry, shared_entry, wake_channel,
};
use dlock_model::{ClientId, LockRef, Mode, Op, ReleaseHow, Token};
use dlock_testkit::{RedisServer, ServerOptions};
use redis::Value;

use crate::coverage::{Phase, Tally};
use crate::mutants::Mutant;

pub(crate) mod debug;
mod foreign;
mod persist;
mod state;
pub(crate) use foreign::{At, Kind};
pub(crate) use state::Leases;

use crate::steps::CLIENTS;

/// One lease unit in ms: every lease is a whole number of them, and the clock moves in them.
/// Far longer than a case runs, so real time never ends a lease; only jumps do.
pub(crate) const UNIT: u64 = 100_000;
const PREFIX: &str = "cf:";
/// The election's name (its mutex is `election:<name>`); the other locks share its slot.
const ELECTION: &str = "election:e";
/// `<host>\x1f<pid>` of every simulated client's values.
const HOLDER: &str = "conform\x1f1";

/// What a call answered: a value, or an error reply (`code`, the rest).
pub(crate) type Answer = Result<Value, (String, String)>;

/// The real side.
pub(crate) struct Real {
    server: RedisServer,
    con: redis::Connection,
    subs: Vec<Option<redis::Connection>>,
    /// What each client is subscribed to (restored after a restart).
    subscribed: BTreeSet<(LockRefKey, ClientId)>,
    scripts: HashMap<SourceKey, redis::Script>,
    /// Their texts (as loaded: mutated, with a mutant).
    texts: HashMap<SourceKey, String>,
    mutex_keys: [String; 2],
    shared_keys: [String; 2],
    counters: HashMap<String, String>,
    /// The connection's epoch: its name is `conform:<epoch>`, a new one after each restart
    /// (as fence_epoch.rs names a client's connection).
    epoch: u32,
    /// The reply paths reached, when counted (`coverage.rs`): each script then runs under the
    /// debugger.
    pub coverage: Option<Tally>,
    /// The holds taken by the uncontended acquire: released by the whole value their `SET`
    /// wrote, as the client does (lease.rs).
    by_value: BTreeSet<Token>,
    /// The server has `DELIFEQ` (`COMMAND INFO DELIFEQ`, as the client asks; Valkey 9): a hold
    /// released by value goes to it first (issue #48, `Op::NativeRelease`).
    native: bool,
    /// The native release's outcomes so far (one of [`NATIVE_OUTCOMES`], or another answer
    /// of release.lua after a 0), counted by the driver.
    pub native_outcomes: BTreeMap<&'static str, usize>,
    /// The replica's (or the AOF's) copy: a snapshot of the data, taken at `Op::Replicate`.
    copy: persist::Snapshot,
}

/// `LockRef` as an ordered key (it is `Ord` already; an alias for readability).
type LockRefKey = LockRef;
type SourceKey = u8;

fn source_key(source: Source) -> SourceKey {
    source as u8
}

/// The real token of a model token: 32 hex digits.
pub(crate) fn token_hex(token: Token) -> String {
    format!("{token:032x}")
}

/// The model token of a real one.
pub(crate) fn token_of(hex: &str) -> Option<Token> {
    u128::from_str_radix(hex, 16)
        .ok()
        .and_then(|t| Token::try_from(t).ok())
}

/// A client's id (its wake channels' suffix).
pub(crate) fn client_hex(client: ClientId) -> String {
    format!("{:016x}", 0xc0ffee00_u64 + u64::from(client))
}

fn io(what: &str) -> impl Fn(redis::RedisError) -> String + '_ {
    move |e| format!("{what}: {e}")
}

impl Real {
    /// Starts the server; `mutant` replaces one script's text (see `mutants.rs`).
    pub(crate) fn start(mutant: Option<Mutant>) -> Result<Self, String> {
        let server = RedisServer::start_with(ServerOptions::new().movable_clock())
            .map_err(|e| format!("redis-server: {e}"))?;
        let con = server.connection().map_err(|e| format!("connect: {e}"))?;
        let mut scripts = HashMap::new();
        let mut texts = HashMap::new();
        for source in Source::ALL {
            let mut text = source.text().into_owned();
            if let Some(mutant) = mutant {
                text = mutant.apply(source, text)?;
            }
            scripts.insert(source_key(source), redis::Script::new(&text));
            texts.insert(source_key(source), text);
        }
        if let Some(mutant) = mutant {
            mutant.check_applied()?;
        }
        // Every lock in the fence counter's slot of the election's: the model has one counter,
        // and the fenced fast path's plain INCR is the slot's.
        let counter = fence_counter(PREFIX, ELECTION).ok_or("bad name")?;
        let name = |stem: &str| {
            (0..100_000)
                .map(|i| format!("{stem}{i}"))
                .find(|n| fence_counter(PREFIX, n).as_ref() == Some(&counter))
                .ok_or_else(|| format!("no name {stem}<i> in the election's slot"))
        };
        let (m, sem, rw) = (name("m")?, name("s")?, name("rw")?);
        let key = |kind, name: &str| lock_key(kind, PREFIX, name).ok_or("bad name");
        let mutex_keys = [key(KeyKind::Mutex, &m)?, key(KeyKind::Mutex, ELECTION)?];
        let shared_keys = [key(KeyKind::Semaphore, &sem)?, key(KeyKind::RwLock, &rw)?];
        let counters = mutex_keys
            .iter()
            .chain(&shared_keys)
            .map(|k| (k.clone(), counter.clone()))
            .collect();
        let mut con = con;
        name_connection(&mut con, 0)?;
        let native = has_delifeq(&mut con)?;
        Ok(Self {
            server,
            con,
            subs: (0..CLIENTS).map(|_| None).collect(),
            subscribed: BTreeSet::new(),
            scripts,
            texts,
            mutex_keys,
            shared_keys,
            counters,
            epoch: 0,
            coverage: None,
            by_value: BTreeSet::new(),
            native,
            native_outcomes: BTreeMap::new(),
            copy: persist::Snapshot::new(),
        })
    }

    /// A clean slate for the next case: no keys, no subscriptions.
    pub(crate) fn reset(&mut self) -> Result<(), String> {
        redis::cmd("FLUSHALL")
            .exec(&mut self.con)
            .map_err(io("FLUSHALL"))?;
        // Epochs count from each case's start, as the model's do.
        self.epoch = 0;
        self.by_value.clear();
        self.copy.clear();
        name_connection(&mut self.con, 0)?;
        for sub in &mut self.subs {
            if let Some(mut con) = sub.take() {
                // Awaited, so the server no longer counts it before the next PUBLISH.
                let _ = con.send_packed_command(&redis::cmd("UNSUBSCRIBE").get_packed_command());
                let _ = read_until(&mut con, |v| is_kind(v, "unsubscribe"), &mut Vec::new());
            }
        }
        self.subscribed.clear();
        Ok(())
    }

    pub(crate) fn key(&self, lock: LockRef) -> &str {
        match lock {
            LockRef::Mutex(n) => &self.mutex_keys[usize::from(n)],
            LockRef::Shared(n) => &self.shared_keys[usize::from(n)],
        }
    }

    fn counter(&self, key: &str) -> &str {
        self.counters.get(key).map_or("", String::as_str)
    }

    /// The data a lock's guarded writes go to: a list, one `"<token> <fence>"` per write.
    pub(crate) fn written_key(&self, lock: LockRef) -> String {
        format!("{}:written", self.key(lock))
    }

    /// A lock's release requests (ask.lua): `<lock>:ask`.
    pub(crate) fn ask_key(&self, lock: LockRef) -> String {
        format!("{}:ask", self.key(lock))
    }

    /// fenced.lua's data key number `n` and its fence key (`fence_key`, as the client names it).
    pub(crate) fn fenced_keys(n: u8) -> Result<(String, String), String> {
        let data = format!("fenced:{n}");
        let fence = dlock_core::fence_key(&data).map_err(|e| e.to_string())?;
        Ok((data, fence))
    }

    /// The lock a wake channel belongs to.
    fn lock_of_channel(&self, channel: &str) -> Option<(LockRef, ClientId)> {
        let (key, client) = channel.rsplit_once(":wake:")?;
        let client = (0..CLIENTS).find(|c| client_hex(*c) == client)?;
        let lock = [0u8, 1]
            .into_iter()
            .map(LockRef::Mutex)
            .chain([0u8, 1].into_iter().map(LockRef::Shared))
            .find(|l| self.key(*l) == key)?;
        Some((lock, client))
    }

    fn call(&mut self, source: Source, keys: &[&str], args: &[String]) -> Result<Answer, String> {
        if let Some(lines) = self.coverage.as_ref().and_then(|t| t.breakpoints(source)) {
            let text = self
                .texts
                .get(&source_key(source))
                .ok_or("script missing")?;
            let (answer, hits) = debug::run(&self.server, text, keys, args, &lines)?;
            if let Some(tally) = &mut self.coverage {
                tally.record(source, &hits);
            }
            return Ok(answer);
        }
        let script = self
            .scripts
            .get(&source_key(source))
            .ok_or("script missing")?;
        let mut invocation = script.prepare_invoke();
        for k in keys {
            invocation.key(*k);
        }
        for a in args {
            invocation.arg(a.as_str());
        }
        answer(invocation.invoke::<Value>(&mut self.con))
    }

    /// Runs `source` as loaded here (mutated, with a mutant) on another server, `server`
    /// through `con` (the quorum's nodes, `quorum.rs`), its paths counted as this server's are.
    pub(crate) fn call_at(
        &mut self,
        (server, con): (&RedisServer, &mut redis::Connection),
        source: Source,
        keys: &[&str],
        args: &[String],
    ) -> Result<Answer, String> {
        let text = self.text(source)?.to_owned();
        if let Some(lines) = self.coverage.as_ref().and_then(|t| t.breakpoints(source)) {
            let (answer, hits) = debug::run(server, &text, keys, args, &lines)?;
            if let Some(tally) = &mut self.coverage {
                tally.record(source, &hits);
            }
            return Ok(answer);
        }
        let mut eval = redis::cmd("EVAL");
        eval.arg(text).arg(keys.len()).arg(keys).arg(args);
        answer(eval.query::<Value>(con))
    }

    /// `source`'s text as loaded here (mutated, with a mutant).
    pub(crate) fn text(&self, source: Source) -> Result<&str, String> {
        self.texts
            .get(&source_key(source))
            .map(String::as_str)
            .ok_or_else(|| format!("{source:?}: script missing"))
    }

    fn command(&mut self, cmd: &redis::Cmd) -> Result<Answer, String> {
        answer(cmd.query::<Value>(&mut self.con))
    }

    /// A plain command's reply (a read of what a scenario left).
    pub(crate) fn raw(&mut self, cmd: &redis::Cmd) -> Result<Value, String> {
        cmd.query(&mut self.con).map_err(io("command"))
    }

    /// Sends `op` as the client does.
    pub(crate) fn run(&mut self, op: &Op) -> Result<Answer, String> {
        let meta = format!("{HOLDER}\x1f");
        match op {
            Op::SetNxGet { name, token, lease } => {
                let key = self.key(LockRef::Mutex(*name)).to_owned();
                let value = lock_value(&token_hex(*token), HOLDER, "").ok_or("token")?;
                let mut cmd = redis::cmd("SET");
                cmd.arg(&key)
                    .arg(value)
                    .arg("NX")
                    .arg("PX")
                    .arg(lease)
                    .arg("GET");
                self.command(&cmd)
            }
            Op::FencedFast {
                name,
                token,
                lease,
                incr,
            } => {
                let key = self.key(LockRef::Mutex(*name)).to_owned();
                let counter = self.counter(&key).to_owned();
                let value = lock_value(&token_hex(*token), HOLDER, "").ok_or("token")?;
                let fence = self
                    .scripts
                    .get(&source_key(Source::Fence))
                    .ok_or("script missing")?;
                // Loaded first: a NOSCRIPT inside the MULTI would fail that command alone.
                redis::cmd("SCRIPT")
                    .arg("LOAD")
                    .arg(
                        self.texts
                            .get(&source_key(Source::Fence))
                            .ok_or("script missing")?,
                    )
                    .exec(&mut self.con)
                    .map_err(io("SCRIPT LOAD"))?;
                let mut pipe = redis::pipe();
                pipe.atomic();
                pipe.cmd("SET")
                    .arg(&key)
                    .arg(value)
                    .arg("NX")
                    .arg("PX")
                    .arg(lease)
                    .arg("GET");
                if *incr {
                    pipe.cmd("INCR").arg(&counter);
                } else {
                    pipe.cmd("EVALSHA")
                        .arg(fence.get_hash())
                        .arg(1)
                        .arg(&key)
                        .arg(token_hex(*token))
                        .arg(&counter);
                }
                pipe.cmd("CLIENT").arg("GETNAME");
                answer(pipe.query::<Value>(&mut self.con))
            }
            Op::ExistsQueue { name } => {
                let key = self.key(LockRef::Mutex(*name)).to_owned();
                self.command(redis::cmd("EXISTS").arg(format!("{key}:queue")))
            }
            Op::Acquire { name, entry, mode } => {
                let key = self.key(LockRef::Mutex(*name)).to_owned();
                let value = lock_value(&token_hex(entry.token), HOLDER, "").ok_or("token")?;
                let queued = mutex_entry(
                    &token_hex(entry.token),
                    &client_hex(entry.client),
                    entry.lease,
                    HOLDER,
                    "",
                )
                .ok_or("token")?;
                let (mode, queued) = match mode {
                    Mode::Single => ("", String::new()),
                    Mode::Wait => ("wait", queued),
                    Mode::Again => ("again", queued),
                    Mode::Join => ("join", queued),
                    Mode::Last => ("last", queued),
                };
                let counter = self.counter(&key).to_owned();
                let args = [value, entry.lease.to_string(), mode.into(), queued, counter];
                self.call(Source::Acquire, &[&key], &args)
            }
            Op::Release {
                name,
                token,
                leaving,
                how,
            } => {
                let key = self.key(LockRef::Mutex(*name)).to_owned();
                let owner = if *how == ReleaseHow::Force {
                    // `force_unlock` names no owner.
                    String::new()
                } else if self.by_value.contains(token) && leaving.is_none() {
                    lock_value(&token_hex(*token), HOLDER, "").ok_or("token")?
                } else {
                    token_hex(*token)
                };
                let mut args = vec![owner, self.counter(&key).to_owned()];
                if let Some(entry) = leaving {
                    args.push(
                        mutex_entry(
                            &token_hex(entry.token),
                            &client_hex(entry.client),
                            entry.lease,
                            HOLDER,
                            "",
                        )
                        .ok_or("token")?,
                    );
                }
                match how {
                    ReleaseHow::Own => {}
                    ReleaseHow::Handoff | ReleaseHow::Force => {
                        if leaving.is_none() {
                            args.push(String::new());
                        }
                        args.push(
                            if *how == ReleaseHow::Force {
                                "force"
                            } else {
                                "handoff"
                            }
                            .into(),
                        );
                    }
                }
                self.call(Source::Release, &[&key], &args)
            }
            Op::NativeRelease { name, token } => {
                let key = self.key(LockRef::Mutex(*name)).to_owned();
                let value = lock_value(&token_hex(*token), HOLDER, "").ok_or("token")?;
                let answer = self.command(redis::cmd("DELIFEQ").arg(&key).arg(value))?;
                // A key of another type answers WRONGTYPE, which the client takes as 0 (it
                // runs release.lua next, which reports the key).
                let answer = match answer {
                    Err((code, _)) if code == "WRONGTYPE" => Ok(Value::Int(0)),
                    other => other,
                };
                Ok(answer)
            }
            Op::Fence { name, token } => {
                let key = self.key(LockRef::Mutex(*name)).to_owned();
                let args = [token_hex(*token), self.counter(&key).to_owned()];
                self.call(Source::Fence, &[&key], &args)
            }
            Op::Extend { items } => {
                let mut keys = Vec::new();
                let mut args = Vec::new();
                for item in items {
                    keys.push(self.key(item.lock).to_owned());
                    let owner = match item.lock {
                        LockRef::Mutex(_) => token_hex(item.token),
                        LockRef::Shared(_) => format!("S{}", token_hex(item.token)),
                    };
                    args.push(owner);
                    args.push(item.lease.to_string());
                }
                let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
                self.call(Source::Extend, &keys, &args)
            }
            Op::SharedAcquire {
                name,
                entry,
                limit,
                mode,
            } => {
                let key = self.key(LockRef::Shared(*name)).to_owned();
                let queued = shared_entry(
                    &token_hex(entry.token),
                    &client_hex(entry.client),
                    entry.lease,
                    entry.weight,
                    HOLDER,
                    "",
                )
                .ok_or("token")?;
                let (mode, queued) = match mode {
                    Mode::Single => ("", String::new()),
                    Mode::Wait => ("wait", queued),
                    Mode::Again => ("again", queued),
                    Mode::Join => ("join", queued),
                    Mode::Last => ("last", queued),
                };
                let args = [
                    token_hex(entry.token),
                    entry.weight.to_string(),
                    limit.to_string(),
                    "keep".into(),
                    entry.lease.to_string(),
                    mode.into(),
                    queued,
                    self.counter(&key).to_owned(),
                    meta,
                ];
                self.call(Source::SharedAcquire, &[&key], &args)
            }
            Op::SharedRelease {
                name,
                token,
                leaving,
            } => {
                let key = self.key(LockRef::Shared(*name)).to_owned();
                let mut args = vec![token_hex(*token), self.counter(&key).to_owned()];
                if let Some(entry) = leaving {
                    args.push(
                        shared_entry(
                            &token_hex(entry.token),
                            &client_hex(entry.client),
                            entry.lease,
                            entry.weight,
                            HOLDER,
                            "",
                        )
                        .ok_or("token")?,
                    );
                }
                self.call(Source::SharedRelease, &[&key], &args)
            }
            Op::SetLimit { name, limit } => {
                let key = self.key(LockRef::Shared(*name)).to_owned();
                let args = [limit.to_string(), self.counter(&key).to_owned()];
                self.call(Source::SharedLimit, &[&key], &args)
            }
            Op::RwChange {
                name,
                old,
                new,
                up,
                lease,
            } => {
                let key = self.key(LockRef::Shared(*name)).to_owned();
                let args = [
                    token_hex(*old),
                    token_hex(*new),
                    if *up { "up" } else { "down" }.into(),
                    dlock_model::RW_LIMIT.to_string(),
                    lease.to_string(),
                    self.counter(&key).to_owned(),
                ];
                self.call(Source::RwChange, &[&key], &args)
            }
            Op::ElectionPublish {
                name,
                token,
                fence,
                value,
            } => {
                let key = self.key(LockRef::Mutex(*name)).to_owned();
                let record = format!("{key}:leader");
                let args = [
                    "publish".into(),
                    token_hex(*token),
                    fence.to_string(),
                    "PUBLISH".into(),
                    value.to_string(),
                ];
                self.call(Source::Election, &[&key, &record], &args)
            }
            Op::ElectionResign { name, token, fence } => {
                let key = self.key(LockRef::Mutex(*name)).to_owned();
                let record = format!("{key}:leader");
                let args = [
                    "resign".into(),
                    token_hex(*token),
                    fence.to_string(),
                    "PUBLISH".into(),
                    String::new(),
                ];
                self.call(Source::Election, &[&key, &record], &args)
            }
            Op::ElectionRead { name } => {
                let key = self.key(LockRef::Mutex(*name)).to_owned();
                let record = format!("{key}:leader");
                let args = [self.counter(&key).to_owned()];
                self.call(Source::ElectionRead, &[&key, &record], &args)
            }
            // As `GuardedWrite::exec` sends it, with one command: `RPUSH <data> "<token> <fence>"`.
            Op::Guarded { lock, token, fence } => {
                let key = self.key(*lock).to_owned();
                let data = self.written_key(*lock);
                let (keys, owner, index) = match lock {
                    LockRef::Mutex(_) => (vec![key, data], token_hex(*token), "2"),
                    LockRef::Shared(_) => (
                        vec![key.clone(), format!("{key}:exp"), data],
                        format!("S{}", token_hex(*token)),
                        "3",
                    ),
                };
                let args = [
                    owner,
                    "1".into(),
                    "RPUSH".into(),
                    index.into(),
                    "1".into(),
                    format!("{} {fence}", token_hex(*token)),
                ];
                let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
                self.call(Source::Guarded, &keys, &args)
            }
            // As `Client::fenced_set` sends it.
            Op::FencedSet { key, fence, value } => {
                let (data, fence_key) = Self::fenced_keys(*key)?;
                let args = [fence.to_string(), "set".into(), token_hex(*value)];
                self.call(Source::Fenced, &[&data, &fence_key], &args)
            }
            // As `request_release` sends it.
            Op::Ask { lock } => {
                let key = self.key(*lock).to_owned();
                let kind = match lock {
                    LockRef::Mutex(_) => "M",
                    LockRef::Shared(_) => "S",
                };
                self.call(Source::Ask, &[&key], &[kind.into()])
            }
            // Another program's value, a string, replacing whatever the key held.
            Op::WriteForeign { key } => {
                self.write_foreign(At::Key(*key), Kind::Text)?;
                Ok(Ok(Value::Okay))
            }
            Op::Subscribe { lock, client } => {
                self.subscribe(*lock, *client)?;
                Ok(Ok(Value::Okay))
            }
            Op::Unsubscribe { lock, client } => {
                self.unsubscribe(*lock, *client)?;
                Ok(Ok(Value::Okay))
            }
            Op::Replicate => {
                self.snapshot()?;
                Ok(Ok(Value::Okay))
            }
            Op::Restart { from_replica } => {
                self.restart(*from_replica)?;
                Ok(Ok(Value::Okay))
            }
        }
    }

    fn sub(&mut self, client: ClientId) -> Result<&mut redis::Connection, String> {
        let slot = &mut self.subs[usize::from(client)];
        if slot.is_none() {
            let con = self
                .server
                .connection()
                .map_err(|e| format!("connect: {e}"))?;
            con.set_read_timeout(Some(Duration::from_secs(5)))
                .map_err(io("read timeout"))?;
            *slot = Some(con);
        }
        slot.as_mut().ok_or_else(|| "no connection".to_owned())
    }

    fn subscribe(&mut self, lock: LockRef, client: ClientId) -> Result<(), String> {
        let channel = wake_channel(self.key(lock), &client_hex(client));
        let con = self.sub(client)?;
        con.send_packed_command(&redis::cmd("SUBSCRIBE").arg(&channel).get_packed_command())
            .map_err(io("SUBSCRIBE"))?;
        read_until(con, |v| is_kind(v, "subscribe"), &mut Vec::new())?;
        self.subscribed.insert((lock, client));
        Ok(())
    }

    /// Unsubscribes (awaiting the server's confirmation); the client's connection closes with
    /// its last channel.
    fn unsubscribe(&mut self, lock: LockRef, client: ClientId) -> Result<(), String> {
        let channel = wake_channel(self.key(lock), &client_hex(client));
        let con = self.sub(client)?;
        con.send_packed_command(&redis::cmd("UNSUBSCRIBE").arg(&channel).get_packed_command())
            .map_err(io("UNSUBSCRIBE"))?;
        read_until(con, |v| is_kind(v, "unsubscribe"), &mut Vec::new())?;
        self.subscribed.remove(&(lock, client));
        if !self.subscribed.iter().any(|(_, c)| *c == client) {
            self.subs[usize::from(client)] = None;
        }
        Ok(())
    }

    /// Counts the script calls from now on as `phase`'s (when paths are counted).
    pub(crate) fn count_as(&mut self, phase: Phase) {
        if let Some(tally) = &mut self.coverage {
            tally.phase = phase;
        }
    }

    /// Whether the hold of `token` is released by `DELIFEQ` first, as the client does: the
    /// server has the command and the uncontended `SET` took the hold (the driver leaves out
    /// a hold whose fence the client knows).
    pub(crate) fn native_release(&self, token: Token) -> bool {
        self.native && self.by_value.contains(&token)
    }

    /// Counts one outcome of the native release.
    pub(crate) fn native_outcome(&mut self, what: &'static str) {
        *self.native_outcomes.entry(what).or_default() += 1;
    }

    /// Whether the server has `DELIFEQ`.
    pub(crate) fn has_native(&self) -> bool {
        self.native
    }

    /// The hold of `token` was taken by the uncontended acquire: its release sends the whole
    /// value.
    pub(crate) fn release_by_value(&mut self, token: Token) {
        self.by_value.insert(token);
    }

    /// An operator's read of `lock` (inspect.lua, shared_inspect.lua), as `Client::inspect`
    /// sends it.
    pub(crate) fn inspect(&mut self, lock: LockRef) -> Result<Answer, String> {
        let key = self.key(lock).to_owned();
        match lock {
            LockRef::Mutex(_) => self.call(Source::Inspect, &[&key], &[]),
            LockRef::Shared(_) => self.call(Source::SharedInspect, &[&key], &[]),
        }
    }

    /// Restarts the server, empty or (`from_copy`) from the replica's copy; every connection
    /// is new, the subscriptions are made again (as the clients' reconnections do).
    fn restart(&mut self, from_copy: bool) -> Result<(), String> {
        if from_copy {
            self.copy.restore(&mut self.server)?;
        } else {
            self.server.restart().map_err(|e| format!("restart: {e}"))?;
        }
        self.con = self
            .server
            .connection()
            .map_err(|e| format!("connect: {e}"))?;
        self.epoch += 1;
        name_connection(&mut self.con, self.epoch)?;
        for sub in &mut self.subs {
            *sub = None;
        }
        for (lock, client) in std::mem::take(&mut self.subscribed) {
            self.subscribe(lock, client)?;
        }
        Ok(())
    }

    /// Moves the server clock `units` lease units (and 2 ms, so that no deadline is met
    /// exactly: the model counts a deadline reached as passed).
    pub(crate) fn advance(&mut self, units: u64) -> Result<(), String> {
        self.server
            .jump_clock(Duration::from_millis(units * UNIT + 2))
            .map_err(|e| format!("jump_clock: {e}"))
    }

    /// Moves the server clock `ms` milliseconds (the rate limiter's scenarios, `rate.rs`).
    pub(crate) fn jump_ms(&mut self, ms: u64) -> Result<(), String> {
        self.server
            .jump_clock(Duration::from_millis(ms))
            .map_err(|e| format!("jump_clock: {e}"))
    }

    /// rate.lua (as loaded: mutated, with a mutant) on `key` with `args`.
    pub(crate) fn rate(&mut self, key: &str, args: &[String]) -> Result<Answer, String> {
        self.call(Source::Rate, &[key], args)
    }

    /// The messages every live subscription received since the last drain:
    /// `(lock, client, payload)`, in arrival order per client. A `PING` on each subscription
    /// marks the end: everything published before it arrives before its reply.
    pub(crate) fn drain(&mut self) -> Result<Vec<(LockRef, ClientId, Vec<u8>)>, String> {
        let mut out = Vec::new();
        for client in 0..CLIENTS {
            let Some(con) = self.subs[usize::from(client)].as_mut() else {
                continue;
            };
            con.send_packed_command(&redis::cmd("PING").get_packed_command())
                .map_err(io("PING"))?;
            let mut messages = Vec::new();
            read_until(con, |v| is_kind(v, "pong"), &mut messages)?;
            for (channel, payload) in messages {
                let (lock, to) = self
                    .lock_of_channel(&channel)
                    .ok_or_else(|| format!("a message on an unknown channel {channel}"))?;
                if to != client {
                    return Err(format!("client {client} heard {channel}"));
                }
                out.push((lock, client, payload));
            }
        }
        Ok(out)
    }
}

/// Names the connection after its epoch (`CLIENT GETNAME` in a fenced `MULTI` reads it back).
fn name_connection(con: &mut redis::Connection, epoch: u32) -> Result<(), String> {
    redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg(format!("conform:{epoch}"))
        .exec(con)
        .map_err(io("CLIENT SETNAME"))
}

/// The epoch of a connection name `conform:<epoch>`.
pub(crate) fn epoch_of(name: &Value) -> Option<u32> {
    match name {
        Value::BulkString(b) => std::str::from_utf8(b)
            .ok()?
            .strip_prefix("conform:")?
            .parse()
            .ok(),
        _ => None,
    }
}

/// The native release's outcomes the default run must reach (issue #48): `DELIFEQ` answered 1,
/// or 0 and release.lua then handed the lock on, found the lease expired, or found another
/// holder.
pub(crate) const NATIVE_OUTCOMES: [&str; 4] = [
    "1 (released)",
    "0, then handed on",
    "0, then expired",
    "0, then held by another",
];

/// Whether the server has `DELIFEQ`: asked with `COMMAND INFO`, as the client asks (an array
/// with the command's entry, or nil in its place).
fn has_delifeq(con: &mut redis::Connection) -> Result<bool, String> {
    let reply: Value = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("DELIFEQ")
        .query(con)
        .map_err(io("COMMAND INFO DELIFEQ"))?;
    Ok(matches!(reply, Value::Array(items) if items.first().is_some_and(|i| *i != Value::Nil)))
}

pub(crate) fn answer(result: redis::RedisResult<Value>) -> Result<Answer, String> {
    match result {
        Ok(value) => Ok(Ok(value)),
        Err(e) => match e.code() {
            Some(code) => Ok(Err((code.to_owned(), e.detail().unwrap_or("").to_owned()))),
            None => Err(format!("redis: {e}")),
        },
    }
}

/// Whether a pub/sub reply is of `kind` (`subscribe`, `unsubscribe`, `pong`).
fn is_kind(value: &Value, kind: &str) -> bool {
    match value {
        Value::Array(items) | Value::Push { data: items, .. } => {
            matches!(items.first(), Some(Value::BulkString(k)) if k.as_slice() == kind.as_bytes())
        }
        _ => false,
    }
}

/// Reads replies until one matches `done`, keeping the messages received before it.
fn read_until(
    con: &mut redis::Connection,
    done: impl Fn(&Value) -> bool,
    messages: &mut Vec<(String, Vec<u8>)>,
) -> Result<(), String> {
    loop {
        let value = con.recv_response().map_err(io("subscription"))?;
        if done(&value) {
            return Ok(());
        }
        if let Value::Array(items) | Value::Push { data: items, .. } = &value
            && let [
                Value::BulkString(kind),
                Value::BulkString(channel),
                Value::BulkString(payload),
            ] = items.as_slice()
            && kind.as_slice() == b"message"
        {
            messages.push((
                String::from_utf8_lossy(channel).into_owned(),
                payload.clone(),
            ));
            continue;
        }
        if !is_kind(&value, "subscribe") && !is_kind(&value, "unsubscribe") {
            return Err(format!("subscription: unexpected {value:?}"));
        }
    }
}
