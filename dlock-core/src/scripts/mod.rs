//! The Lua scripts, one file each with its KEYS/ARGV/returns contract on top, hashed once; how a
//! call is built; and one typed reply per script, decoded in one place.
//!
//! A call is an `EVALSHA` command written straight into one [`Cmd`] buffer (keys and arguments
//! included, no intermediate copies); if the server does not know the script (first use, or a
//! Redis restart) it is loaded with `SCRIPT LOAD` and the call is sent once more. On a cluster the
//! load goes to every primary. `common.lua` (the lock-value check and the hand-off to the oldest
//! live waiter) is prepended to the scripts that need it. The formats the scripts read and
//! write, with their versions, are in [`wire`].

// Read only by the conformance test (`__private::conformance`).
#[cfg(feature = "__conformance")]
pub(crate) mod layout;
mod replies;
pub(crate) mod wire;

pub(crate) use replies::{
    AcquireReply, ElectionReply, ExtendStatus, FastReply, FenceReply, InspectReply, LeaderRead,
    RaiseReply, ReleaseReply, RwChangeReply, SharedInspectReply, SharedReply, int, ints, text,
};

use std::borrow::Cow;
use std::sync::LazyLock;

use redis::{Cmd, Script, ToRedisArgs, Value};

use crate::error::Error;

/// Every script dlock runs, named. [`Source::text`] assembles its text (the shared functions
/// prepended), and the statics below are built from that text, so the conformance test
/// (`__private::conformance`) loads exactly what the client runs.
/// `pub` for `__private::conformance` (the `__conformance` feature), the crate's own otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "__conformance"), allow(unreachable_pub))]
pub enum Source {
    /// `acquire.lua` (with `lock_value.lua` and `common.lua`).
    Acquire,
    /// `release.lua` (with `lock_value.lua` and `common.lua` at its marker).
    Release,
    /// `fence.lua` (with `lock_value.lua` and `common.lua`).
    Fence,
    /// `fence_raise.lua`.
    FenceRaise,
    /// `extend.lua`.
    Extend,
    /// `shared_acquire.lua` (with `lock_value.lua`, `common.lua`, `shared.lua` and `admission.lua`).
    SharedAcquire,
    /// `shared_release.lua` (with `lock_value.lua`, `common.lua`, `shared.lua` and `admission.lua`).
    SharedRelease,
    /// `shared_limit.lua` (with `lock_value.lua`, `common.lua`, `shared.lua` and `admission.lua`).
    SharedLimit,
    /// `rw_change.lua` (with `lock_value.lua`, `common.lua`, `shared.lua` and `admission.lua`).
    RwChange,
    /// `shared_inspect.lua`.
    SharedInspect,
    /// `election.lua`.
    Election,
    /// `election_read.lua`.
    ElectionRead,
    /// `inspect.lua`.
    Inspect,
    /// `guarded.lua` (with `lock_value.lua` and `shared.lua`).
    Guarded,
    /// `fenced.lua`.
    Fenced,
    /// `ask.lua` (with `lock_value.lua` and `shared.lua`).
    Ask,
    /// `rate.lua`.
    Rate,
}

#[cfg_attr(not(feature = "__conformance"), allow(unreachable_pub))]
impl Source {
    /// Every script, once.
    pub const ALL: [Self; 17] = [
        Self::Acquire,
        Self::Release,
        Self::Fence,
        Self::FenceRaise,
        Self::Extend,
        Self::SharedAcquire,
        Self::SharedRelease,
        Self::SharedLimit,
        Self::RwChange,
        Self::SharedInspect,
        Self::Election,
        Self::ElectionRead,
        Self::Inspect,
        Self::Guarded,
        Self::Fenced,
        Self::Ask,
        Self::Rate,
    ];

    /// The script's text as it is loaded into Redis.
    pub fn text(self) -> Cow<'static, str> {
        // What each script's text is made of: `lock_value.lua` (reading a mutex's value),
        // `common.lua` (changing a mutex), `shared.lua` (a shared lock's layout and checks),
        // `admission.lua` (its admission). A script carries only what it calls: each function
        // its text defines is made anew on every call.
        const COMMON: &str = concat!(include_str!("lock_value.lua"), include_str!("common.lua"));
        const SHARED: &str = concat!(
            include_str!("lock_value.lua"),
            include_str!("common.lua"),
            include_str!("shared.lua"),
            include_str!("admission.lua")
        );
        const CHECKS: &str = concat!(include_str!("lock_value.lua"), include_str!("shared.lua"));
        let text: &'static str = match self {
            Self::Acquire => concat!(
                include_str!("lock_value.lua"),
                include_str!("common.lua"),
                include_str!("acquire.lua")
            ),
            // `common.lua` goes at the script's `--@common` marker, after its fast path.
            Self::Release => {
                return Cow::Owned(include_str!("release.lua").replacen("--@common\n", COMMON, 1));
            }
            Self::Fence => concat!(
                include_str!("lock_value.lua"),
                include_str!("common.lua"),
                include_str!("fence.lua")
            ),
            Self::FenceRaise => include_str!("fence_raise.lua"),
            Self::Extend => include_str!("extend.lua"),
            Self::SharedAcquire => {
                return Cow::Owned(format!("{SHARED}{}", include_str!("shared_acquire.lua")));
            }
            Self::SharedRelease => {
                return Cow::Owned(format!("{SHARED}{}", include_str!("shared_release.lua")));
            }
            Self::SharedLimit => {
                return Cow::Owned(format!("{SHARED}{}", include_str!("shared_limit.lua")));
            }
            Self::RwChange => {
                return Cow::Owned(format!("{SHARED}{}", include_str!("rw_change.lua")));
            }
            Self::SharedInspect => include_str!("shared_inspect.lua"),
            Self::Election => include_str!("election.lua"),
            Self::ElectionRead => include_str!("election_read.lua"),
            Self::Inspect => include_str!("inspect.lua"),
            Self::Guarded => {
                return Cow::Owned(format!("{CHECKS}{}", include_str!("guarded.lua")));
            }
            Self::Fenced => include_str!("fenced.lua"),
            Self::Ask => {
                return Cow::Owned(format!("{CHECKS}{}", include_str!("ask.lua")));
            }
            Self::Rate => include_str!("rate.lua"),
        };
        Cow::Borrowed(text)
    }

    /// The script as the client runs it (hashed once).
    pub fn script(self) -> &'static Script {
        match self {
            Self::Acquire => &ACQUIRE,
            Self::Release => &RELEASE,
            Self::Fence => &FENCE,
            Self::FenceRaise => &FENCE_RAISE,
            Self::Extend => &EXTEND,
            Self::SharedAcquire => &SHARED_ACQUIRE,
            Self::SharedRelease => &SHARED_RELEASE,
            Self::SharedLimit => &SHARED_LIMIT,
            Self::RwChange => &RW_CHANGE,
            Self::SharedInspect => &SHARED_INSPECT,
            Self::Election => &ELECTION,
            Self::ElectionRead => &ELECTION_READ,
            Self::Inspect => &INSPECT,
            Self::Guarded => &GUARDED,
            Self::Fenced => &FENCED,
            Self::Ask => &ASK,
            Self::Rate => &RATE,
        }
    }
}

/// A script built from its [`Source`].
fn built(source: Source) -> Script {
    Script::new(&source.text())
}

/// Takes a free mutex, or reports its remaining lease and queues the caller.
pub(crate) static ACQUIRE: LazyLock<Script> = LazyLock::new(|| built(Source::Acquire));

/// Owner-checked release that hands the lock to the oldest live waiter. `common.lua` goes at
/// the script's `--@common` marker, after its fast path (see the script).
pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| built(Source::Release));

/// Issues (or returns) the fencing token of the caller's hold (`next_fence` of `common.lua`).
pub(crate) static FENCE: LazyLock<Script> = LazyLock::new(|| built(Source::Fence));

/// Raises a slot's fence counter to a quorum lock's fence, owner-checked (round 2, `kinds/quorum/`).
pub(crate) static FENCE_RAISE: LazyLock<Script> = LazyLock::new(|| built(Source::FenceRaise));

/// Owner-checked lease extension of one or many locks (the watchdog's batches).
pub(crate) static EXTEND: LazyLock<Script> = LazyLock::new(|| built(Source::Extend));

/// Takes permits of a shared lock (a semaphore), or queues the caller (`shared.lua`).
pub(crate) static SHARED_ACQUIRE: LazyLock<Script> = LazyLock::new(|| built(Source::SharedAcquire));

/// Gives back one holder's permits of a shared lock and admits the waiters that now fit.
pub(crate) static SHARED_RELEASE: LazyLock<Script> = LazyLock::new(|| built(Source::SharedRelease));

/// Sets a shared lock's limit and admits the waiters that fit under it.
pub(crate) static SHARED_LIMIT: LazyLock<Script> = LazyLock::new(|| built(Source::SharedLimit));

/// Downgrades a read-write lock's writer to a reader, or upgrades its sole reader to the writer.
pub(crate) static RW_CHANGE: LazyLock<Script> = LazyLock::new(|| built(Source::RwChange));

/// Reads the holders of a shared lock, for operators.
pub(crate) static SHARED_INSPECT: LazyLock<Script> = LazyLock::new(|| built(Source::SharedInspect));

/// Owner-checked writes of an election's leader record and its notices (`kinds/election/`).
pub(crate) static ELECTION: LazyLock<Script> = LazyLock::new(|| built(Source::Election));

/// Reads an election's leader record, checked against its lock.
pub(crate) static ELECTION_READ: LazyLock<Script> = LazyLock::new(|| built(Source::ElectionRead));

/// Reads the holder, fence and queue length of a lock.
pub(crate) static INSPECT: LazyLock<Script> = LazyLock::new(|| built(Source::Inspect));

/// A batch of writes run only while the caller's hold is its own (`holds/guarded.rs`).
pub(crate) static GUARDED: LazyLock<Script> = LazyLock::new(|| built(Source::Guarded));

/// A write refused when a larger fencing token wrote before (`client/fenced.rs`).
pub(crate) static FENCED: LazyLock<Script> = LazyLock::new(|| built(Source::Fenced));

/// Asks the holders of a lock to give it back (`Client::request_release`); changes no hold.
pub(crate) static ASK: LazyLock<Script> = LazyLock::new(|| built(Source::Ask));

/// One decision of a rate limiter (GCRA on the server's clock, `kinds/rate_limiter.rs`).
pub(crate) static RATE: LazyLock<Script> = LazyLock::new(|| built(Source::Rate));

/// One script call: `EVALSHA <sha> <numkeys> <keys…> <args…>`.
pub(crate) struct Call {
    pub(crate) script: &'static Script,
    pub(crate) cmd: Cmd,
}

impl Call {
    /// Starts a call of `script` with `keys` keys; add exactly that many keys first, then the
    /// arguments, with [`Call::arg`].
    pub(crate) fn new(script: &'static LazyLock<Script>, keys: usize) -> Self {
        let script: &'static Script = script;
        let mut cmd = Cmd::with_capacity(12, 256);
        cmd.arg("EVALSHA").arg(script.get_hash()).arg(keys);
        Self { script, cmd }
    }

    /// Appends a key or an argument.
    pub(crate) fn arg(&mut self, arg: impl ToRedisArgs) -> &mut Self {
        self.cmd.arg(arg);
        self
    }

    /// The same call as `EVAL` with the script's text, which no `NOSCRIPT` can refuse: for a
    /// request whose reply comes after its own timeout, so that loading the script and sending
    /// it again would never happen (a release on a kept connection, `transport/conn/rotate.rs`).
    /// `None` for a script that is not one of [`Source::ALL`] (or an argument that is not plain
    /// bytes; dlock writes none).
    pub(crate) fn eval(&self) -> Option<Cmd> {
        let source = Source::ALL
            .into_iter()
            .find(|source| source.script().get_hash() == self.script.get_hash())?;
        let mut cmd = Cmd::with_capacity(12, 4096);
        cmd.arg("EVAL").arg(&*source.text());
        // After `EVALSHA <sha>`: the number of keys, the keys, the arguments.
        for arg in self.cmd.args_iter().skip(2) {
            let redis::Arg::Simple(bytes) = arg else {
                return None;
            };
            cmd.arg(bytes);
        }
        Some(cmd)
    }
}

/// The error for a script reply dlock does not understand.
pub(crate) fn unexpected(op: &str, reply: &Value) -> Error {
    Error::protocol(format!(
        "{op}: unexpected script reply {reply:?}; is the server Redis 7.0 or newer and the key \
         written only by dlock?"
    ))
}

/// Whether `err` says the server does not know the script.
pub(crate) fn is_noscript(err: &redis::RedisError) -> bool {
    err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn a_calls_eval_form_carries_the_scripts_text_and_the_same_arguments() {
        let mut call = Call::new(&RELEASE, 1);
        call.arg("dlock:{a}").arg("token").arg(7);
        let eval = call.eval().unwrap();
        let args: Vec<Vec<u8>> = eval
            .args_iter()
            .map(|arg| match arg {
                redis::Arg::Simple(bytes) => bytes.to_vec(),
                _ => panic!("a call has only plain arguments"),
            })
            .collect();
        assert_eq!(args[0], b"EVAL");
        assert_eq!(args[1], Source::Release.text().as_bytes());
        let rest: Vec<&[u8]> = args[2..].iter().map(Vec::as_slice).collect();
        assert_eq!(rest, [&b"1"[..], b"dlock:{a}", b"token", b"7"]);
    }

    #[test]
    fn calls_are_evalsha_with_the_scripts_hash() {
        let mut call = Call::new(&EXTEND, 1);
        call.arg("k").arg("tok").arg(5000u64);
        let packed = String::from_utf8(call.cmd.get_packed_command()).unwrap();
        assert!(packed.starts_with("*6\r\n$7\r\nEVALSHA\r\n$40\r\n"));
        assert!(packed.contains(EXTEND.get_hash()));
        assert!(packed.ends_with("$1\r\n1\r\n$1\r\nk\r\n$3\r\ntok\r\n$4\r\n5000\r\n"));
    }

    #[test]
    fn the_release_script_has_its_fast_path_before_the_shared_functions() {
        let code = RELEASE.get_hash();
        assert_eq!(code.len(), 40);
        let text = Source::Release.text();
        let fast = text.find("redis.call('DEL', lock)").unwrap();
        let shared = text.find("local function hand_off").unwrap();
        assert!(fast < shared);
        assert!(!text.contains("--@common"));
    }
}
