//! [`NetServer`]: a `redis-server` (or a sentinel) inside one node of a
//! [`Network`](crate::Network).
//!
//! The server listens on the node's address (`ip netns exec <ns> redis-server --bind <addr>`),
//! where clients in other nodes reach it through the router, and the nemeses can cut them off.
//! The harness itself talks to it through a Unix socket in the server's temp dir: a socket is a
//! file, reachable from the test process in the host namespace, and no nemesis touches it. So
//! setup, assertions and failover checks keep working while the node is partitioned.
//!
//! `ip netns exec` executes the server in place (no fork), so the child's pid is the server's:
//! readiness is checked by pid (`INFO server`) as for every other server of the kit.

use std::ffi::OsString;
use std::fmt;
use std::fs::{self, OpenOptions};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::launch::{STDIO_FILE, served_by};
use crate::options::LOG_FILE;
use crate::{ChildGuard, HarnessError, Paused};

/// The control socket, in the server's directory.
const SOCKET_FILE: &str = "control.sock";
/// How long a server may take to answer on its socket after it was spawned.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause between readiness probes.
const PROBE_INTERVAL: Duration = Duration::from_millis(20);
/// Read and write timeout of the harness's commands on the control socket.
const CONTROL_TIMEOUT: Duration = Duration::from_secs(5);

/// What a [`NetServer`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    Server,
    Sentinel,
}

/// What to start in a node: the process and where it listens.
pub(crate) struct Spec {
    pub(crate) ns: String,
    pub(crate) role: Role,
    pub(crate) addr: SocketAddrV4,
    pub(crate) program: PathBuf,
    pub(crate) args: Vec<OsString>,
    pub(crate) env: Vec<(OsString, OsString)>,
    pub(crate) password: Option<String>,
}

/// A `redis-server` or a sentinel in one node of a [`Network`](crate::Network): clients in
/// other nodes reach it at [`url`](Self::url); the test reaches it through
/// [`connection`](Self::connection), which no network fault cuts.
///
/// The network kills it (SIGKILL, reaped) and removes its directory when it drops.
pub struct NetServer {
    child: Option<ChildGuard>,
    role: Role,
    addr: SocketAddrV4,
    password: Option<String>,
    command: Command,
    dir: TempDir,
}

impl NetServer {
    /// Spawns `spec` in its namespace, with its Unix socket in `dir`, and waits until it
    /// answers there with its own pid.
    pub(crate) fn launch(spec: Spec, dir: TempDir) -> Result<NetServer, HarnessError> {
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &spec.ns])
            .arg(&spec.program)
            .args(spec.args);
        command.envs(spec.env);
        let mut server = NetServer {
            child: None,
            role: spec.role,
            addr: spec.addr,
            password: spec.password,
            command,
            dir,
        };
        server.spawn()?;
        Ok(server)
    }

    /// Spawns the process (again) and waits until it is ready.
    fn spawn(&mut self) -> Result<(), HarnessError> {
        let stdio_path = self.dir.path().join(STDIO_FILE);
        let stdio = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&stdio_path)
            .and_then(|out| Ok((out.try_clone()?, out)))
            .map_err(|e| {
                HarnessError::new(format!("cannot open {}", stdio_path.display())).with_source(e)
            })?;
        let mut cmd = Command::new(self.command.get_program());
        cmd.args(self.command.get_args());
        for (key, value) in self.command.get_envs() {
            if let Some(value) = value {
                cmd.env(key, value);
            }
        }
        cmd.stdin(Stdio::null()).stdout(stdio.0).stderr(stdio.1);
        let mut child = ChildGuard::spawn(cmd)?;
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Ok(Some(status)) = child.child_mut().try_wait() {
                return Err(
                    self.failed(format!("{} exited during startup ({status})", self.what()))
                );
            }
            match self.probe(child.pid()) {
                Ok(()) => break,
                Err(why) if Instant::now() >= deadline => {
                    return Err(self.failed(format!(
                        "{} did not answer on its socket within {} s: {why}",
                        self.what(),
                        READY_TIMEOUT.as_secs()
                    )));
                }
                Err(_) => thread::sleep(PROBE_INTERVAL),
            }
        }
        self.child = Some(child);
        Ok(())
    }

    /// `Ok` when the socket answers `PING` and names `pid` in `INFO server`.
    fn probe(&self, pid: u32) -> Result<(), String> {
        let mut con = self.connection().map_err(|e| e.message().to_owned())?;
        match served_by(&mut con)? {
            Some(server_pid) if server_pid == pid.to_string() => Ok(()),
            other => Err(format!(
                "the socket is served by process {other:?}, not {pid}"
            )),
        }
    }

    fn what(&self) -> String {
        let kind = match self.role {
            Role::Server => "redis-server",
            Role::Sentinel => "sentinel",
        };
        format!("{kind} {}", self.addr)
    }

    fn failed(&self, message: String) -> HarnessError {
        HarnessError::new(message)
            .with_command(crate::process::command_line(&self.command))
            .with_file_tail("server log", &self.dir.path().join(LOG_FILE))
            .with_file_tail("server stdout/stderr", &self.dir.path().join(STDIO_FILE))
    }

    /// The Unix socket the harness talks through (pass it to a server's `unixsocket`).
    pub(crate) fn socket_path(dir: &Path) -> PathBuf {
        dir.join(SOCKET_FILE)
    }

    /// The address clients in the network connect to: the node's address and the port
    /// (6379 for a server, 26379 for a sentinel: every node has ports of its own).
    pub fn addr(&self) -> SocketAddrV4 {
        self.addr
    }

    /// The node's address.
    pub fn ip(&self) -> Ipv4Addr {
        *self.addr.ip()
    }

    /// `redis://[:password@]<node address>:<port>/`: the URL for clients inside the network
    /// (a worker started with [`Network::command`](crate::Network::command)). The test process
    /// itself has no route to it: it uses [`connection`](Self::connection).
    pub fn url(&self) -> String {
        match &self.password {
            Some(password) => format!("redis://:{password}@{}/", self.addr),
            None => format!("redis://{}/", self.addr),
        }
    }

    /// A synchronous connection for the test's setup and assertions, through the server's
    /// Unix socket: it works whatever the network's faults are.
    ///
    /// # Errors
    ///
    /// When the server does not answer (killed, paused), with the tail of its log.
    pub fn connection(&self) -> Result<redis::Connection, HarnessError> {
        let socket = Self::socket_path(self.dir.path());
        let mut url = format!("redis+unix://{}", socket.display());
        if let Some(password) = &self.password {
            url.push_str(&format!(
                "?pass={}",
                crate::launch::percent_encode(password)
            ));
        }
        let connected = redis::Client::open(url).and_then(|client| {
            let con = client.get_connection()?;
            con.set_read_timeout(Some(CONTROL_TIMEOUT))?;
            con.set_write_timeout(Some(CONTROL_TIMEOUT))?;
            Ok(con)
        });
        connected.map_err(|e| {
            HarnessError::new(format!("cannot reach {} through its socket", self.what()))
                .with_file_tail("server log", &self.dir.path().join(LOG_FILE))
                .with_source(e)
        })
    }

    /// Runs `cmd` on a new [`connection`](Self::connection); the error says what failed.
    pub(crate) fn query<T: redis::FromRedisValue>(
        &self,
        cmd: &redis::Cmd,
    ) -> Result<T, HarnessError> {
        cmd.query(&mut self.connection()?).map_err(|e| {
            HarnessError::new(format!("a command failed on {}", self.what())).with_source(e)
        })
    }

    /// The process id; `None` after [`kill`](Self::kill).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(ChildGuard::pid)
    }

    /// Kills the process (SIGKILL) and reaps it: a crash. Idempotent.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.cont();
            child.kill();
        }
    }

    /// Starts the killed process again with the same command line and files (a server comes
    /// back with what it last saved; the harness's servers save nothing by themselves).
    ///
    /// # Errors
    ///
    /// When it is still running, or does not come up (the error has its log tail).
    pub fn restart(&mut self) -> Result<(), HarnessError> {
        if self.child.is_some() {
            return Err(HarnessError::new(format!(
                "{} is running: kill it before restarting it",
                self.what()
            )));
        }
        self.spawn()
    }

    /// Freezes the process (SIGSTOP) until the guard drops: a hung server, whose peers see
    /// open connections that answer nothing.
    ///
    /// # Errors
    ///
    /// When it is not running.
    pub fn pause(&self) -> Result<Paused<'_>, HarnessError> {
        self.child
            .as_ref()
            .ok_or_else(|| {
                HarnessError::new(format!("{} is not running (it was killed)", self.what()))
            })?
            .pause()
    }

    /// The server's log (all its runs); empty if unreadable.
    pub fn log(&self) -> String {
        fs::read(self.dir.path().join(LOG_FILE))
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default()
    }

    /// The server's directory (logs, the control socket, a sentinel's config).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for NetServer {
    fn drop(&mut self) {
        self.kill();
    }
}

impl fmt::Debug for NetServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            child,
            role,
            addr,
            password: _,
            command: _,
            dir,
        } = self;
        f.debug_struct("NetServer")
            .field("role", role)
            .field("addr", addr)
            .field("pid", &child.as_ref().map(ChildGuard::pid))
            .field("dir", &dir.path())
            .finish_non_exhaustive()
    }
}
