//! [`Relay`]: a small user-space TCP relay inside one node of a [`Network`], for latency and
//! jitter (this kernel has no `tc netem`).
//!
//! The relay is a thread of the test process that enters the node's network namespace
//! (`setns`: a network namespace is per thread, so the rest of the process stays where it
//! was) and runs a current-thread Tokio runtime there. It listens on the node's address and
//! forwards each connection to an upstream address of the network, holding every chunk it reads
//! for `delay` plus a random `jitter` before writing it on. Chunks of one direction keep their
//! order (a chunk is never due before the one before it), as TCP would deliver them.
//!
//! Bounded: at most [`MAX_CONNECTIONS`] connections at once (more are refused by closing
//! them), and at most [`MAX_CHUNKS`] chunks held per direction (the reader waits for room,
//! so TCP's flow control pushes back on the sender). Put it in the node of the sender whose
//! packets it delays: what it holds has not crossed the router yet, so a cut made meanwhile
//! stops it (a relay in the receiver's node would deliver what it already took in).

use std::fs::File;
use std::net::SocketAddrV4;
use std::sync::Arc;
use std::sync::mpsc as std_mpsc;
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nix::sched::{CloneFlags, setns};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio::time::Instant;

use super::{Network, NodeId};
use crate::HarnessError;

/// Most connections one relay carries at once.
pub(crate) const MAX_CONNECTIONS: usize = 64;
/// Most chunks held per direction of one connection.
pub(crate) const MAX_CHUNKS: usize = 256;
/// Largest chunk read at once.
const CHUNK: usize = 16 * 1024;
/// How long a connection to the upstream may take (a cut drops the SYN silently).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause after a failed `accept` (out of descriptors, say), so that it is not retried hot.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// How long a [`Relay`] holds what it forwards: `delay`, plus a uniformly random part of
/// `jitter` drawn per chunk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Latency {
    /// The fixed part.
    pub delay: Duration,
    /// The largest random part added to it.
    pub jitter: Duration,
}

/// A TCP relay running in a node of a [`Network`] (see [`Network::relay`]). Dropping it stops
/// the relay and closes every connection it carries.
pub struct Relay {
    listen: SocketAddrV4,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Relay {
    /// Where it listens: the node's address and the port asked for.
    pub fn address(&self) -> SocketAddrV4 {
        self.listen
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self { listen, .. } = self;
        f.debug_struct("Relay").field("listen", listen).finish()
    }
}

impl Network {
    /// Starts a TCP relay in `node`, listening on `port` of the node's address and forwarding
    /// to `upstream` (an address in the network, e.g. a server's
    /// `SocketAddrV4::new(net.address(master), SERVER_PORT)`), with `latency` added to each
    /// direction. Clients that connect to the relay instead of the server see the delay; the
    /// nemeses cut the relay's links like any other.
    ///
    /// # Errors
    ///
    /// When the node is not in the network, its namespace cannot be entered, or the port
    /// cannot be bound there.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # use std::{net::SocketAddrV4, time::Duration};
    /// # use dlock_testkit::{Latency, Network, ServerOptions, SERVER_PORT};
    /// # let mut net = Network::start()?;
    /// let master = net.add_node("master")?;
    /// net.start_server(master, ServerOptions::new())?;
    /// let upstream = SocketAddrV4::new(net.address(master), SERVER_PORT);
    /// let latency = Latency { delay: Duration::from_millis(20), jitter: Duration::from_millis(10) };
    /// let relay = net.relay(master, 6380, upstream, latency)?; // redis://10.77.1.2:6380/ is slow
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn relay(
        &self,
        node: NodeId,
        port: u16,
        upstream: SocketAddrV4,
        latency: Latency,
    ) -> Result<Relay, HarnessError> {
        let ns_path = format!("/run/netns/{}", self.namespace(node)?);
        let listen = SocketAddrV4::new(self.address(node), port);
        let (ready_tx, ready_rx) = std_mpsc::channel::<Result<(), String>>();
        let (stop_tx, stop_rx) = oneshot::channel();
        let thread = thread::Builder::new()
            .name(format!("relay-{listen}"))
            .spawn(move || run(&ns_path, listen, upstream, latency, &ready_tx, stop_rx))
            .map_err(|e| HarnessError::new("cannot start the relay's thread").with_source(e))?;
        let mut relay = Relay {
            listen,
            stop: Some(stop_tx),
            thread: Some(thread),
        };
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(relay),
            Ok(Err(why)) => Err(HarnessError::new(format!("relay on {listen}: {why}"))),
            Err(_) => {
                relay.stop.take();
                Err(HarnessError::new(format!(
                    "relay on {listen}: its thread ended before it listened"
                )))
            }
        }
    }
}

/// The relay's thread: enters the namespace, binds, says so on `ready`, serves until `stop`.
fn run(
    ns_path: &str,
    listen: SocketAddrV4,
    upstream: SocketAddrV4,
    latency: Latency,
    ready: &std_mpsc::Sender<Result<(), String>>,
    stop: oneshot::Receiver<()>,
) {
    let entered = File::open(ns_path)
        .map_err(|e| format!("cannot open {ns_path}: {e}"))
        .and_then(|f| {
            setns(f, CloneFlags::CLONE_NEWNET).map_err(|e| format!("setns {ns_path}: {e}"))
        });
    if let Err(why) = entered {
        let _ = ready.send(Err(why));
        return;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send(Err(format!("cannot build a runtime: {e}")));
            return;
        }
    };
    runtime.block_on(async move {
        let listener = match TcpListener::bind(listen).await {
            Ok(l) => l,
            Err(e) => {
                let _ = ready.send(Err(format!("cannot bind: {e}")));
                return;
            }
        };
        let _ = ready.send(Ok(()));
        tokio::select! {
            () = serve(listener, upstream, latency) => {}
            _ = stop => {}
        }
    });
    // Dropping the runtime drops every connection's tasks, and with them the sockets.
}

async fn serve(listener: TcpListener, upstream: SocketAddrV4, latency: Latency) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut seed = seed();
    loop {
        let Ok((client, _)) = listener.accept().await else {
            tokio::time::sleep(ACCEPT_BACKOFF).await;
            continue;
        };
        // Over the bound: the connection is closed at once (dropped).
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            continue;
        };
        seed = next(seed);
        let conn_seed = seed;
        tokio::spawn(async move {
            let _slot = slot;
            let connect = TcpStream::connect(upstream);
            let Ok(Ok(server)) = tokio::time::timeout(CONNECT_TIMEOUT, connect).await else {
                return;
            };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            let (cr, cw) = client.into_split();
            let (sr, sw) = server.into_split();
            let up = pump(cr, sw, latency, conn_seed);
            let down = pump(sr, cw, latency, next(conn_seed));
            tokio::join!(up, down);
        });
    }
}

/// Forwards `from` to `to`, each chunk held until it is due.
async fn pump<R, W>(mut from: R, mut to: W, latency: Latency, mut seed: u64)
where
    R: AsyncReadExt + Unpin + Send + 'static,
    W: AsyncWriteExt + Unpin,
{
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(MAX_CHUNKS);
    let reader = tokio::spawn(async move {
        let mut last_due = Instant::now();
        loop {
            let mut buf = vec![0u8; CHUNK];
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            buf.truncate(n);
            seed = next(seed);
            let jitter = if latency.jitter.is_zero() {
                Duration::ZERO
            } else {
                let nanos = u64::try_from(latency.jitter.as_nanos()).unwrap_or(u64::MAX);
                Duration::from_nanos(seed % nanos.saturating_add(1))
            };
            // Never before the chunk ahead of it: one direction keeps its order.
            let due = (Instant::now() + latency.delay + jitter).max(last_due);
            last_due = due;
            if tx.send((due, buf)).await.is_err() {
                return;
            }
        }
    });
    while let Some((due, chunk)) = rx.recv().await {
        tokio::time::sleep_until(due).await;
        if to.write_all(&chunk).await.is_err() {
            break;
        }
    }
    reader.abort();
    let _ = to.shutdown().await;
}

/// A seed from the clock: the relay's jitter needs no reproducibility.
fn seed() -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    // Low 64 bits; never 0 (xorshift's fixed point).
    u64::try_from(nanos & u128::from(u64::MAX)).unwrap_or(1) | 1
}

/// xorshift64: enough for jitter.
fn next(mut x: u64) -> u64 {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}
