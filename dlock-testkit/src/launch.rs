//! Spawning one `redis-server` process on a given port and waiting until it is ready.
//!
//! Ready means: our child is still alive, and the server on the port answers `PING` with `PONG`
//! *and* reports our child's pid in `INFO server`. The pid check matters when the port race is
//! lost to another `redis-server` (a parallel test): that server would answer `PONG` too.
//!
//! The server's stdout/stderr go to `redis.stdio.log` in its directory rather than to
//! `/dev/null`: `redis-server` reports configuration errors ("FATAL CONFIG FILE ERROR") on
//! stderr before it opens its log file, and a failed start must show why.

use std::ffi::OsString;
use std::fs::{self, OpenOptions};
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::options::LOG_FILE;
use crate::{ChildGuard, HarnessError, ServerOptions};

/// The server's stdout and stderr, in the server's directory.
pub(crate) const STDIO_FILE: &str = "redis.stdio.log";

/// How long a server may take to answer `PING` after it was spawned.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// Connect (and connection setup) timeout of one readiness probe.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);
/// Pause between readiness probes.
const PROBE_INTERVAL: Duration = Duration::from_millis(20);

/// Why a launch failed, and so whether it is worth retrying.
pub(crate) enum LaunchError {
    /// Another process holds the port: retry with another port, or the same one later.
    PortTaken(HarnessError),
    /// Anything else (bad configuration, crash, timeout): a retry would fail the same way.
    Failed(HarnessError),
}

/// Spawns `binary` as a server on `port` with files in `dir`, and waits until it is ready.
/// `dir` may hold the logs of earlier runs (a restart): only what this run logged is examined.
pub(crate) fn launch(
    binary: &Path,
    port: u16,
    dir: &Path,
    options: &ServerOptions,
) -> Result<ChildGuard, LaunchError> {
    let env = options.env(dir).map_err(LaunchError::Failed)?;
    launch_args(
        binary,
        options.command_args(port, dir),
        &env,
        port,
        dir,
        options.password(),
    )
}

/// Spawns `binary` with `args`, which must make it listen on `port` and log to `dir/redis.log`
/// (a sentinel's config file does that for [`crate::RedisSentinels`]), and waits until it is
/// ready, exactly as [`launch`] does.
pub(crate) fn launch_args(
    binary: &Path,
    args: Vec<OsString>,
    env: &[(OsString, OsString)],
    port: u16,
    dir: &Path,
    password: Option<&str>,
) -> Result<ChildGuard, LaunchError> {
    let log = dir.join(LOG_FILE);
    let stdio_path = dir.join(STDIO_FILE);
    let log_offset = fs::metadata(&log).map_or(0, |m| m.len());

    let mut cmd = Command::new(binary);
    cmd.args(args);
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    let command = crate::process::command_line(&cmd);
    let failed = |message: String| {
        HarnessError::new(message)
            .with_command(command.clone())
            .with_file_tail("server log", &log)
            .with_file_tail("server stdout/stderr", &stdio_path)
    };

    let stdio = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&stdio_path)
        .and_then(|out| Ok((out.try_clone()?, out)))
        .map_err(|e| {
            LaunchError::Failed(
                failed(format!("cannot open {}", stdio_path.display())).with_source(e),
            )
        })?;
    cmd.stdin(Stdio::null()).stdout(stdio.0).stderr(stdio.1);
    let mut child = ChildGuard::spawn(cmd).map_err(LaunchError::Failed)?;

    match wait_ready(&mut child, port, password) {
        Ok(()) => Ok(child),
        Err(Startup::Exited(status)) => {
            let error = failed(format!(
                "redis-server for port {port} exited during startup ({status})"
            ));
            Err(
                if logged_since(&log, log_offset, "Address already in use") {
                    LaunchError::PortTaken(error)
                } else {
                    LaunchError::Failed(error)
                },
            )
        }
        // Dropping `child` kills and reaps it.
        Err(Startup::NotReady(reason)) => Err(LaunchError::Failed(failed(reason))),
    }
}

/// Why a spawned server is not ready.
enum Startup {
    Exited(ExitStatus),
    NotReady(String),
}

/// Polls until `child` answers on `port`, exits, or [`READY_TIMEOUT`] passes.
fn wait_ready(child: &mut ChildGuard, port: u16, password: Option<&str>) -> Result<(), Startup> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        match child.child_mut().try_wait() {
            Ok(None) => {}
            Ok(Some(status)) => return Err(Startup::Exited(status)),
            Err(e) => {
                return Err(Startup::NotReady(format!(
                    "cannot query the status of redis-server for port {port}: {e}"
                )));
            }
        }
        let last_probe = match probe(port, password, child.pid()) {
            Ok(()) => return Ok(()),
            Err(reason) => reason,
        };
        if Instant::now() >= deadline {
            return Err(Startup::NotReady(format!(
                "redis-server for port {port} was not ready within {} s (last probe: \
                 {last_probe})",
                READY_TIMEOUT.as_secs()
            )));
        }
        thread::sleep(PROBE_INTERVAL);
    }
}

/// Prepares `dir` for a run with empty data: deletes everything but the logs and the files named
/// in `keep`, and marks the restart in the server log.
pub(crate) fn wipe_data(dir: &Path, keep: &[&str]) -> Result<(), HarnessError> {
    let wipe_error = |e| HarnessError::new(format!("cannot wipe {}", dir.display())).with_source(e);
    for entry in fs::read_dir(dir).map_err(wipe_error)? {
        let entry = entry.map_err(wipe_error)?;
        let name = entry.file_name();
        // The clock offset stays: a moved clock stays moved across a restart, as a host's does.
        if name == LOG_FILE
            || name == STDIO_FILE
            || name == crate::clock::OFFSET_FILE
            || name == crate::tls::TLS_DIR
            || keep.iter().any(|k| name == *k)
        {
            continue;
        }
        let path = entry.path();
        let removed = if entry.file_type().map_err(wipe_error)?.is_dir() {
            fs::remove_dir_all(&path)
        } else {
            fs::remove_file(&path)
        };
        removed.map_err(wipe_error)?;
    }
    // Best effort: only helps a human reading the log.
    if let Ok(mut log) = OpenOptions::new().append(true).open(dir.join(LOG_FILE)) {
        let _ = writeln!(log, "--- dlock-testkit: restart with empty data ---");
    }
    Ok(())
}

/// One readiness probe: `PING` answers `PONG`, and `INFO server` names process `pid`.
fn probe(port: u16, password: Option<&str>, pid: u32) -> Result<(), String> {
    let url = server_url(port, password);
    let client = redis::Client::open(url).map_err(|e| e.to_string())?;
    let mut con = client
        .get_connection_with_timeout(PROBE_TIMEOUT)
        .map_err(|e| format!("connect: {e}"))?;
    con.set_read_timeout(Some(PROBE_TIMEOUT))
        .and_then(|()| con.set_write_timeout(Some(PROBE_TIMEOUT)))
        .map_err(|e| e.to_string())?;
    let pong: String = redis::cmd("PING")
        .query(&mut con)
        .map_err(|e| format!("PING: {e}"))?;
    if pong != "PONG" {
        return Err(format!("PING answered {pong:?}"));
    }
    match served_by(&mut con)? {
        Some(server_pid) if server_pid == pid.to_string() => Ok(()),
        other => Err(format!(
            "port {port} is served by process {}, not by our child {pid}",
            other.as_deref().unwrap_or("?")
        )),
    }
}

/// The process that serves `con`: `INFO server`'s `process_id`, or `None` if it names none.
/// (A readiness probe checks it against the child it started, so that a port or socket served
/// by another process is never taken for ours.)
pub(crate) fn served_by(con: &mut redis::Connection) -> Result<Option<String>, String> {
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query(con)
        .map_err(|e| format!("INFO server: {e}"))?;
    Ok(info
        .lines()
        .find_map(|line| line.strip_prefix("process_id:"))
        .map(|pid| pid.trim().to_owned()))
}

/// `redis://[:password@]127.0.0.1:port/`, the password percent-encoded.
pub(crate) fn server_url(port: u16, password: Option<&str>) -> String {
    match password {
        Some(password) => format!("redis://:{}@127.0.0.1:{port}/", percent_encode(password)),
        None => format!("redis://127.0.0.1:{port}/"),
    }
}

pub(crate) fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Whether `needle` appears in what was appended to `path` after byte `offset`.
fn logged_since(path: &Path, offset: u64, needle: &str) -> bool {
    let Ok(bytes) = fs::read(path) else {
        return false;
    };
    let start = usize::try_from(offset).map_or(bytes.len(), |o| o.min(bytes.len()));
    String::from_utf8_lossy(&bytes[start..]).contains(needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_port_is_reported_as_retryable() -> Result<(), Box<dyn std::error::Error>> {
        let squatter = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))?;
        let port = squatter.local_addr()?.port();
        let dir = tempfile::TempDir::new()?;
        let binary = crate::redis_server_binary()?;
        match launch(&binary, port, dir.path(), &ServerOptions::new()) {
            Err(LaunchError::PortTaken(error)) => {
                assert!(error.to_string().contains("Address already in use"));
            }
            Err(LaunchError::Failed(error)) => return Err(error.into()),
            Ok(child) => return Err(format!("started on a taken port: {child:?}").into()),
        }
        Ok(())
    }

    #[test]
    fn urls_encode_passwords() {
        assert_eq!(server_url(6379, None), "redis://127.0.0.1:6379/");
        assert_eq!(
            server_url(6379, Some("p@ss word")),
            "redis://:p%40ss%20word@127.0.0.1:6379/"
        );
    }

    #[test]
    fn only_new_log_lines_count() -> Result<(), std::io::Error> {
        let dir = tempfile::TempDir::new()?;
        let path = dir.path().join("log");
        fs::write(&path, "old: Address already in use\nnew: ready\n")?;
        assert!(logged_since(&path, 0, "Address already in use"));
        assert!(!logged_since(&path, 28, "Address already in use"));
        Ok(())
    }
}
