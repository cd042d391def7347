//! Replica acknowledgement of grants ([`crate::Durability`]): before an acquire returns its
//! guard, replicas acknowledge the grant (`WAIT`) or fsync it to their AOF (`WAITAOF`).
//!
//! Two facts of Redis decide the design. `WAIT` blocks the connection it is sent on, so it
//! never goes on the client's shared connection, which carries every other lock, the wake-ups
//! and the watchdog's renewals. And `WAIT` counts only the writes made *by its own connection*
//! (the offset of that client's last propagated write). So a task of its own
//! ([`Acknowledger`]) keeps a dedicated connection and, there, first makes a write of its own:
//! the owner-checked extend of the granted locks (`extend.lua`, one `PEXPIRE` each), sent only
//! after the grants' replies arrived. The replication stream is ordered and the master wrote
//! each grant into it before answering the acquire, so a replica that acknowledged the extend
//! has the grant. The extend also gives back the lease the wait takes, and finds a lock that
//! was lost meanwhile (it then writes nothing, and the lock is reported lost, never
//! acknowledged).
//!
//! Coalescing: the task takes every request queued since its last round (each sent after its
//! grant's reply arrived, hence before this round's extend) and covers them all with one extend
//! (up to [`PER_CALL`] locks per script call) and one wait per distinct requirement. Requests
//! that arrive during a round wait for the next one. A request whose caller went away is
//! skipped: the caller's guard was dropped, which releases its lock.
//!
//! Standalone servers only (and Sentinel, through the connection's hook): on a cluster each
//! lock's node would need its own extend and wait (`MutexOptions::mutex_settings` refuses).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Value};
use tokio::sync::{mpsc, oneshot};

use crate::error::{Error, ErrorKind, Result};
use crate::options::Durability;
use crate::runtime::{Task, lock};
use crate::scripts::{self, Call, ExtendStatus, unexpected};
use crate::timing;
use crate::token::ExtendOwner;
use crate::transport::Transport;
use crate::transport::conn::ConnSlot;
use crate::transport::native::has_command;

/// Locks per `extend.lua` call (the script's documented batch size).
const PER_CALL: usize = 100;

/// What one round found for one granted lock.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ack {
    /// When the round's extend was sent: the lease runs from then on (when `status` is
    /// `Extended`).
    pub(crate) sent: Instant,
    /// What the owner-checked extend found.
    pub(crate) status: ExtendStatus,
    /// Whether the master's own AOF fsynced it (`WAITAOF` only).
    pub(crate) local: bool,
    /// How many replicas acknowledged it (or fsynced it, with `WAITAOF`).
    pub(crate) replicas: u32,
}

impl Ack {
    /// `None` when the acknowledgement meets `want`; otherwise the error that says by how much
    /// it fell short, for the lock called `name`.
    pub(crate) fn shortfall(&self, name: &str, want: Durability) -> Option<Error> {
        let what = match want {
            Durability::None => return None,
            Durability::Replicas { n, timeout } => {
                if self.replicas >= n {
                    return None;
                }
                format!(
                    "{} of the {n} replicas asked for acknowledged the grant within {timeout:?} \
                     (WAIT)",
                    self.replicas
                )
            }
            Durability::Aof {
                local,
                replicas,
                timeout,
            } => {
                if self.replicas >= replicas && (self.local || !local) {
                    return None;
                }
                let local_part = if local {
                    format!(
                        "the master's own AOF {} it, ",
                        if self.local {
                            "fsynced"
                        } else {
                            "did not fsync"
                        }
                    )
                } else {
                    String::new()
                };
                format!(
                    "{local_part}{} of the {replicas} replicas asked for fsynced it to their AOF \
                     within {timeout:?} (WAITAOF)",
                    self.replicas
                )
            }
        };
        Some(Error::new(
            ErrorKind::NotDurable,
            format!(
                "lock `{name}` was granted, but {what}; it was released again (owner-checked) \
                 rather than held without the durability asked for. Check the replicas \
                 (INFO replication on the master), give them longer, or ask for fewer"
            ),
        ))
    }
}

/// One granted lock waiting for its acknowledgement.
struct Request {
    lock: Arc<str>,
    owner: ExtendOwner,
    /// The lease the extend sets.
    ttl: Duration,
    want: Durability,
    reply: oneshot::Sender<Result<Ack>>,
}

/// A client's acknowledgements: the task that runs the rounds on its dedicated connection
/// (started on first use, and again in the current runtime when the one it ran in has ended),
/// and what is known of the server.
pub(crate) struct Acknowledger {
    slot: Arc<ConnSlot>,
    command_timeout: Duration,
    task: Task,
    queue: StdMutex<Option<mpsc::UnboundedSender<Request>>>,
    /// The server was found to have `WAITAOF` (`COMMAND INFO`).
    waitaof_known: AtomicBool,
}

impl std::fmt::Debug for Acknowledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Acknowledger")
            .field("running", &self.task.is_running())
            .finish_non_exhaustive()
    }
}

impl Acknowledger {
    pub(crate) fn new(slot: Arc<ConnSlot>, command_timeout: Duration) -> Self {
        Self {
            slot,
            command_timeout,
            task: Task::default(),
            queue: StdMutex::new(None),
            waitaof_known: AtomicBool::new(false),
        }
    }

    /// Checks, before anything is acquired, that the server can give what `want` asks for:
    /// `Durability::Aof` needs the `WAITAOF` command, asked of the server itself
    /// (`COMMAND INFO WAITAOF` on the shared connection, until the answer was yes once), never
    /// read off a version string (a fork may report a version without the command). A user
    /// refused `COMMAND` goes on: the first `WAITAOF` then says what the server thinks of it.
    pub(crate) async fn check_server(&self, transport: &Transport, want: Durability) -> Result<()> {
        if !matches!(want, Durability::Aof { .. }) || self.waitaof_known.load(Ordering::Relaxed) {
            return Ok(());
        }
        let mut ask = redis::cmd("COMMAND");
        ask.arg("INFO").arg("WAITAOF");
        let reply: Value = match transport.query(&ask, "COMMAND INFO WAITAOF").await {
            Ok(reply) => reply,
            Err(e) if e.kind() == ErrorKind::Permission => return Ok(()),
            Err(e) => return Err(e),
        };
        if has_command(&reply) {
            self.waitaof_known.store(true, Ordering::Relaxed);
            return Ok(());
        }
        Err(Error::invalid(
            "Durability::Aof waits with WAITAOF, and the server has no such command (COMMAND \
             INFO WAITAOF; Redis has it since 7.2); nothing was acquired. Upgrade the server, \
             or use Durability::Replicas (WAIT)",
        ))
    }

    /// Waits until the grant of `lock` to `owner` meets `want`, after extending its lease to
    /// `ttl` on the dedicated connection (see the module docs).
    ///
    /// # Errors
    /// [`ErrorKind::Connection`] / [`ErrorKind::Timeout`] when the dedicated connection fails
    /// (the wait is bounded by `want`'s timeout plus the command timeout); a server error of
    /// `WAIT` / `WAITAOF`; [`ErrorKind::NoRuntime`] outside a runtime.
    ///
    /// # Cancel safety
    /// Cancel safe: the round goes on without the caller, whose answer is dropped. The caller
    /// owns the lock meanwhile and releases it (its guard's drop).
    pub(crate) async fn confirm(
        &self,
        lock: Arc<str>,
        owner: ExtendOwner,
        ttl: Duration,
        want: Durability,
    ) -> Result<Ack> {
        let (reply, answer) = oneshot::channel();
        self.send(Request {
            lock,
            owner,
            ttl,
            want,
            reply,
        })?;
        answer.await.map_err(|_| {
            Error::new(
                ErrorKind::Connection,
                "replica acknowledgement: the task that waits for replicas ended before it \
                 answered (its runtime shut down); retry",
            )
        })?
    }

    /// Queues `request` for the task, starting the task in this runtime if none runs.
    fn send(&self, request: Request) -> Result<()> {
        let mut queue = lock(&self.queue);
        let request = match queue.as_ref().filter(|_| self.task.is_running()) {
            Some(sender) => match sender.send(request) {
                Ok(()) => return Ok(()),
                Err(mpsc::error::SendError(request)) => request,
            },
            None => request,
        };
        let (sender, receiver) = mpsc::unbounded_channel();
        let (slot, timeout) = (self.slot.clone(), self.command_timeout);
        if !self.task.start(|| serve(receiver, slot, timeout)) {
            return Err(Error::no_runtime("an acquire with durability"));
        }
        // The receiver lives in the task just started: the send cannot fail.
        let _ = sender.send(request);
        *queue = Some(sender);
        Ok(())
    }
}

/// The task: rounds, one at a time, until the client is gone (its sender dropped).
async fn serve(
    mut requests: mpsc::UnboundedReceiver<Request>,
    slot: Arc<ConnSlot>,
    command_timeout: Duration,
) {
    let mut conn = None;
    while let Some(first) = requests.recv().await {
        let mut batch = vec![first];
        while let Ok(next) = requests.try_recv() {
            batch.push(next);
        }
        batch.retain(|request| !request.reply.is_closed());
        if batch.is_empty() {
            continue;
        }
        tracing::debug!(
            grants = batch.len(),
            "dlock: waiting for replicas to acknowledge"
        );
        match round(&mut conn, &slot, command_timeout, &batch).await {
            Ok(answers) => {
                for (request, answer) in batch.into_iter().zip(answers) {
                    let _ = request.reply.send(answer);
                }
            }
            Err(e) => {
                // A failed connection is opened anew by the next round.
                conn = None;
                for request in batch {
                    let _ = request.reply.send(Err(e.duplicate()));
                }
            }
        }
    }
}

/// One round: the extend of every lock of `batch`, then one wait per distinct requirement.
/// `Err` when the extend fails (for every request); a failed wait fails its requests only.
async fn round(
    conn: &mut Option<MultiplexedConnection>,
    slot: &ConnSlot,
    command_timeout: Duration,
    batch: &[Request],
) -> Result<Vec<Result<Ack>>> {
    let reused = conn.is_some();
    let mut fresh = match conn.take() {
        Some(con) => con,
        None => connect(slot, command_timeout).await?,
    };
    let (sent, statuses) = match extend_all(&mut fresh, batch, command_timeout).await {
        Ok(extended) => extended,
        // A connection that sat idle may have been closed by the server (its `timeout`) or
        // lost with a master: once more on a new one (the extend is absolute, so running it
        // twice is harmless, and the wait below counts the new connection's write).
        Err(e) if reused && e.is_connection() => {
            fresh = connect(slot, command_timeout).await?;
            extend_all(&mut fresh, batch, command_timeout).await?
        }
        Err(e) => return Err(e),
    };
    let con = conn.insert(fresh);
    let mut waits: Vec<(Durability, Result<(bool, u32)>)> = Vec::new();
    for (request, status) in batch.iter().zip(&statuses) {
        if status.is_extended() && !waits.iter().any(|(w, _)| *w == request.want) {
            let counted = wait(con, request.want, command_timeout).await;
            if counted.as_ref().is_err_and(Error::may_have_taken_effect) {
                // A blocked reply may still come on this connection: start a fresh one.
                *conn = None;
                waits.push((request.want, counted));
                break;
            }
            waits.push((request.want, counted));
        }
    }
    let answers = batch.iter().zip(statuses).map(|(request, status)| {
        let ack = Ack {
            sent,
            status,
            local: false,
            replicas: 0,
        };
        if !status.is_extended() {
            return Ok(ack);
        }
        match waits.iter().find(|(w, _)| *w == request.want) {
            Some((_, Ok((local, replicas)))) => Ok(Ack {
                local: *local,
                replicas: *replicas,
                ..ack
            }),
            Some((_, Err(e))) => Err(e.duplicate()),
            None => Err(Error::new(
                ErrorKind::Connection,
                "replica acknowledgement: the connection failed during an earlier wait of the \
                 same round; retry",
            )),
        }
    });
    Ok(answers.collect())
}

/// Opens the dedicated connection (no response timeout of its own: `WAIT` blocks for as long
/// as it was asked to, and each request is bounded here).
async fn connect(slot: &ConnSlot, command_timeout: Duration) -> Result<MultiplexedConnection> {
    let client = slot.dedicated_client().ok_or_else(|| {
        Error::invalid("replica acknowledgement is not available on a Redis Cluster")
    })?;
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(command_timeout))
        .set_response_timeout(None);
    let what = "replica acknowledgement: connect";
    match tokio::time::timeout(
        command_timeout,
        client.get_multiplexed_async_connection_with_config(&config),
    )
    .await
    {
        Ok(Ok(con)) => Ok(con),
        Ok(Err(e)) => Err(Error::from_redis(what, e)),
        Err(_) => Err(Error::timeout(what, command_timeout)),
    }
}

/// Extends every lock of `batch` ([`PER_CALL`] per call): when the first call was sent, and
/// what each lock's extend found.
async fn extend_all(
    con: &mut MultiplexedConnection,
    batch: &[Request],
    command_timeout: Duration,
) -> Result<(Instant, Vec<ExtendStatus>)> {
    let sent = Instant::now();
    let mut statuses = Vec::with_capacity(batch.len());
    for chunk in batch.chunks(PER_CALL) {
        statuses.extend(extend(con, chunk, command_timeout).await?);
    }
    Ok((sent, statuses))
}

/// Extends the locks of `chunk` to their leases in one `extend.lua` call, owner-checked.
async fn extend(
    con: &mut MultiplexedConnection,
    chunk: &[Request],
    command_timeout: Duration,
) -> Result<Vec<ExtendStatus>> {
    let mut call = Call::new(&scripts::EXTEND, chunk.len());
    for request in chunk {
        call.arg(&*request.lock);
    }
    for request in chunk {
        call.arg(&request.owner).arg(timing::millis(request.ttl));
    }
    let request = async {
        match call.cmd.query_async::<Value>(con).await {
            Err(e) if scripts::is_noscript(&e) => {
                call.script.load_async(con).await?;
                call.cmd.query_async::<Value>(con).await
            }
            reply => reply,
        }
    };
    let what = "replica acknowledgement: extend";
    let reply = match tokio::time::timeout(command_timeout, request).await {
        Ok(Ok(reply)) => reply,
        Ok(Err(e)) => return Err(Error::from_redis(what, e)),
        Err(_) => return Err(Error::timeout(what, command_timeout)),
    };
    // Every key is declared and served by this server: no "not served here" (-2) answer.
    ExtendStatus::decode_batch(&reply, chunk.len())
        .and_then(|statuses| statuses.into_iter().collect::<Option<Vec<_>>>())
        .ok_or_else(|| unexpected(what, &reply))
}

/// Runs the wait `want` asks for on `con`: (the local AOF fsynced it, replicas that have it).
async fn wait(
    con: &mut MultiplexedConnection,
    want: Durability,
    command_timeout: Duration,
) -> Result<(bool, u32)> {
    let (cmd, timeout) = match want {
        Durability::None => return Ok((false, 0)),
        Durability::Replicas { n, timeout } => {
            let mut cmd = redis::cmd("WAIT");
            cmd.arg(n).arg(timing::millis(timeout));
            (cmd, timeout)
        }
        Durability::Aof {
            local,
            replicas,
            timeout,
        } => {
            let mut cmd = redis::cmd("WAITAOF");
            cmd.arg(u32::from(local))
                .arg(replicas)
                .arg(timing::millis(timeout));
            (cmd, timeout)
        }
    };
    let what = if matches!(want, Durability::Aof { .. }) {
        "replica acknowledgement: WAITAOF"
    } else {
        "replica acknowledgement: WAIT"
    };
    let bound = timeout.saturating_add(command_timeout);
    let reply = match tokio::time::timeout(bound, cmd.query_async::<Value>(con)).await {
        Ok(Ok(reply)) => reply,
        Ok(Err(e)) => return Err(Error::from_redis(what, e)),
        Err(_) => return Err(Error::timeout(what, bound)),
    };
    let count = |v: &Value| match v {
        Value::Int(n) => u32::try_from(*n).ok(),
        _ => None,
    };
    let counted = match (&reply, want) {
        (Value::Int(_), Durability::Replicas { .. }) => count(&reply).map(|n| (false, n)),
        (Value::Array(items), Durability::Aof { .. }) => match items.as_slice() {
            [local, replicas] => count(local).zip(count(replicas)).map(|(l, r)| (l > 0, r)),
            _ => None,
        },
        _ => None,
    };
    counted.ok_or_else(|| unexpected(what, &reply))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shortfall_says_how_many_of_how_many_within_what() {
        let ack = Ack {
            sent: Instant::now(),
            status: ExtendStatus::Extended,
            local: false,
            replicas: 1,
        };
        let timeout = Duration::from_millis(250);
        let two = Durability::Replicas { n: 2, timeout };
        let err = ack.shortfall("pay", two).expect("short of 2");
        assert_eq!(err.kind(), ErrorKind::NotDurable);
        let text = err.to_string();
        assert!(text.contains("1 of the 2 replicas"), "{text}");
        assert!(text.contains("250ms"), "{text}");
        assert!(text.contains("released"), "{text}");
        assert!(
            ack.shortfall("pay", Durability::Replicas { n: 1, timeout })
                .is_none()
        );
        let aof = Durability::Aof {
            local: true,
            replicas: 1,
            timeout,
        };
        let text = ack
            .shortfall("pay", aof)
            .expect("local missing")
            .to_string();
        assert!(text.contains("did not fsync"), "{text}");
        let fsynced = Ack { local: true, ..ack };
        assert!(fsynced.shortfall("pay", aof).is_none());
    }
}
