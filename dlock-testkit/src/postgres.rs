//! [`PostgresServer`]: one PostgreSQL server (`postgres`) in its own temp dir, reached only
//! through a Unix socket in that dir, stopped by pid on drop.
//!
//! The server refuses to run as root, and tests run as root in CI: under root, `initdb` and
//! `postgres` run as the `postgres` OS user (the child drops its privileges before `exec`), and
//! the temp dir is handed to that user. Under any other user they run as that user.
//!
//! `initdb` takes seconds; it runs once per PostgreSQL version and user into a template cluster
//! kept in the system temp dir (`dlock-testkit-pg-template-…`, made in a scratch dir and renamed
//! into place, so that concurrent test processes never see half of one), and each server starts
//! from a copy of it.
//!
//! Invariants: while `child` is `Some`, the postmaster we spawned runs in its own process group
//! (so that its backends can be killed with it); the temp dir outlives it (`Drop` stops the
//! server before the fields drop).

use std::env;
use std::fmt;
use std::fs;
use std::os::unix::fs::{PermissionsExt, chown};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use tempfile::TempDir;

use crate::port::free_port;
use crate::process::command_line;
use crate::{ChildGuard, HarnessError};

/// Environment variable naming the directory that holds `initdb` and `postgres`.
pub const POSTGRES_BIN_ENV: &str = "DLOCK_POSTGRES_BIN";

/// Where Debian's `postgresql-15` package puts the server's programs.
const DEBIAN_BIN_DIR: &str = "/usr/lib/postgresql/15/bin";
/// How long a server may take to accept connections.
const START_LIMIT: Duration = Duration::from_secs(30);
/// How long `initdb` may take (once per version and user, for the template).
const INITDB_LIMIT: Duration = Duration::from_secs(120);
/// How long a stopping server may take before its process group is SIGKILLed.
const STOP_LIMIT: Duration = Duration::from_secs(5);
/// How often start-up is checked.
const POLL: Duration = Duration::from_millis(5);
/// The server's log (its stderr), in the temp dir.
const LOG_FILE: &str = "postgres.log";
/// The superuser `initdb` creates, and the database every server has.
const SUPERUSER: &str = "postgres";
/// Settings for a server whose data is thrown away: no waiting for the disk.
const THROWAWAY: &[(&str, &str)] = &[
    ("fsync", "off"),
    ("synchronous_commit", "off"),
    ("full_page_writes", "off"),
];

/// One PostgreSQL server for a test, listening only on a Unix socket in its own temp dir
/// (`listen_addresses = ''`), with `trust` authentication for the superuser `postgres` and
/// `fsync` off (its data is thrown away).
///
/// Dropping it stops the server by pid (SIGINT, PostgreSQL's fast shutdown, which also ends the
/// sessions still open; after 5 s SIGKILL to its whole process group), reaps it, and removes
/// the directory. If the test process itself is killed, the server outlives it, as a
/// [`crate::RedisServer`] does.
///
/// # Requirements
///
/// PostgreSQL's server programs (`initdb`, `postgres`): in `$DLOCK_POSTGRES_BIN`, else in
/// `/usr/lib/postgresql/15/bin` (Debian's `postgresql-15`), else in `pg_config --bindir`. Under
/// root, an OS user named `postgres` to run them as (the package creates it).
/// [`PostgresServer::check_requirements`] tells whether they are there, so that a test can say
/// it is skipped instead of failing.
///
/// # Example
///
/// ```no_run
/// use dlock_testkit::PostgresServer;
///
/// if let Err(missing) = PostgresServer::check_requirements() {
///     eprintln!("SKIPPED: {}", missing.message());
///     return Ok(());
/// }
/// let server = PostgresServer::start()?;
/// // e.g. tokio_postgres::connect(&server.url(), tokio_postgres::NoTls)
/// println!("{}", server.url());
/// # Ok::<(), dlock_testkit::HarnessError>(())
/// ```
pub struct PostgresServer {
    child: Option<ChildGuard>,
    port: u16,
    dir: TempDir,
}

/// What running a server needs, found once per call.
struct Requirements {
    bin_dir: PathBuf,
    /// The user and group to run as (under root), else `None`: the current user.
    run_as: Option<(u32, u32)>,
}

impl PostgresServer {
    /// Checks that a server can be started here: the server programs are found, and under
    /// root there is a `postgres` user to run them as.
    ///
    /// # Errors
    ///
    /// What is missing and how to install it ([`HarnessError::message`] is one sentence, fit
    /// for a "skipped" line).
    ///
    /// # Example
    ///
    /// ```no_run
    /// match dlock_testkit::PostgresServer::check_requirements() {
    ///     Ok(()) => println!("PostgreSQL tests will run"),
    ///     Err(missing) => println!("SKIPPED: {}", missing.message()),
    /// }
    /// ```
    pub fn check_requirements() -> Result<(), HarnessError> {
        requirements().map(|_| ())
    }

    /// Starts a server with the harness's settings and waits until it accepts connections.
    ///
    /// # Errors
    ///
    /// As [`start_with`](Self::start_with).
    pub fn start() -> Result<PostgresServer, HarnessError> {
        Self::start_with(&[])
    }

    /// Starts a server with `settings` (`-c name=value`, after the harness's own: `fsync`,
    /// `synchronous_commit` and `full_page_writes` off, which `("fsync", "on")` and so on
    /// override) and waits (up to 30 s) until it accepts connections: until its
    /// `postmaster.pid` says `ready`, as `pg_ctl` waits.
    ///
    /// # Errors
    ///
    /// As [`check_requirements`](Self::check_requirements); also when the temp dir or the
    /// template cluster cannot be made, or the server exits or is not ready in time (the error
    /// has the command line and the tail of the server's log).
    ///
    /// # Example
    ///
    /// ```no_run
    /// let durable = dlock_testkit::PostgresServer::start_with(&[("fsync", "on")])?;
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn start_with(settings: &[(&str, &str)]) -> Result<PostgresServer, HarnessError> {
        let needs = requirements()?;
        let template = template(&needs)?;
        let dir = TempDir::with_prefix("dlock-pg-")
            .map_err(|e| HarnessError::new("cannot create a temp dir").with_source(e))?;
        let data = dir.path().join("data");
        copy_tree(&template, &data, needs.run_as)?;
        fs::set_permissions(&data, fs::Permissions::from_mode(0o700))
            .map_err(|e| HarnessError::new("cannot restrict the data dir").with_source(e))?;
        hand_over(dir.path(), needs.run_as)?;
        // The port only names the socket (`.s.PGSQL.<port>` in the temp dir): nothing listens
        // on TCP. A free one keeps the name unlike any other server's.
        let port = free_port(false)?;
        let log_path = dir.path().join(LOG_FILE);
        let log = fs::File::create(&log_path)
            .map_err(|e| HarnessError::new("cannot create the server log").with_source(e))?;
        let stderr = log
            .try_clone()
            .map_err(|e| HarnessError::new("cannot open the server log").with_source(e))?;
        let mut cmd = Command::new(needs.bin_dir.join("postgres"));
        cmd.arg("-D").arg(&data).arg("-k").arg(dir.path()).args([
            "-p",
            &port.to_string(),
            "-c",
            "listen_addresses=",
        ]);
        for (name, value) in THROWAWAY.iter().chain(settings) {
            cmd.arg("-c").arg(format!("{name}={value}"));
        }
        cmd.current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(stderr)
            // Its own process group: a stop that has to SIGKILL takes the backends too.
            .process_group(0);
        run_as(&mut cmd, needs.run_as);
        let command = command_line(&cmd);
        let mut child = ChildGuard::spawn(cmd)?;
        let started = Instant::now();
        loop {
            if postmaster_ready(&data, child.pid()) {
                break;
            }
            let failed = |why: String| {
                HarnessError::new(why)
                    .with_command(command.clone())
                    .with_file_tail("server log", &log_path)
            };
            match child.wait_timeout(Duration::ZERO) {
                Ok(Some(status)) => {
                    return Err(failed(format!("postgres exited at start-up with {status}")));
                }
                Ok(None) => {}
                Err(e) => return Err(e),
            }
            if started.elapsed() > START_LIMIT {
                return Err(failed(format!(
                    "postgres did not accept connections within {} s",
                    START_LIMIT.as_secs()
                )));
            }
            thread::sleep(POLL);
        }
        Ok(PostgresServer {
            child: Some(child),
            port,
            dir,
        })
    }

    /// A connection string for the superuser on the default database, in the key-value form
    /// libpq and tokio-postgres read: `host='<socket dir>' port=<port> user=postgres
    /// dbname=postgres`.
    pub fn url(&self) -> String {
        format!(
            "host={} port={} user={SUPERUSER} dbname={SUPERUSER}",
            quote(&self.dir.path().to_string_lossy()),
            self.port
        )
    }

    /// The directory of the server's socket (and of its data and log).
    pub fn socket_dir(&self) -> &Path {
        self.dir.path()
    }

    /// The number in the socket's name (`.s.PGSQL.<port>`); nothing listens on TCP.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The postmaster's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(ChildGuard::pid)
    }

    /// The server's log so far; empty if unreadable.
    pub fn log(&self) -> String {
        fs::read(self.dir.path().join(LOG_FILE))
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default()
    }

    /// Stops the server: SIGINT (fast shutdown: open sessions are ended, nothing waits for
    /// clients), then after [`STOP_LIMIT`] SIGKILL to its process group; reaps it.
    fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if child.signal(Signal::SIGINT).is_ok()
            && matches!(child.wait_timeout(STOP_LIMIT), Ok(Some(_)))
        {
            return;
        }
        let _ = child.signal_group(Signal::SIGKILL);
        child.kill();
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        self.stop();
    }
}

impl fmt::Debug for PostgresServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self { child, port, dir } = self;
        f.debug_struct("PostgresServer")
            .field("dir", &dir.path())
            .field("port", port)
            .field("pid", &child.as_ref().map(ChildGuard::pid))
            .finish()
    }
}

fn requirements() -> Result<Requirements, HarnessError> {
    let bin_dir = bin_dir()?;
    let run_as = if nix::unistd::geteuid().is_root() {
        match nix::unistd::User::from_name(SUPERUSER) {
            Ok(Some(user)) => Some((user.uid.as_raw(), user.gid.as_raw())),
            Ok(None) => {
                return Err(HarnessError::new(
                    "running as root, which PostgreSQL refuses, and there is no `postgres` OS user \
                     to run it as: install postgresql-15 (it creates the user; \
                     scripts/ensure-deps.sh does) or `useradd --system --user-group postgres`",
                ));
            }
            Err(e) => {
                return Err(
                    HarnessError::new("cannot look up the `postgres` OS user").with_source(e)
                );
            }
        }
    } else {
        None
    };
    Ok(Requirements { bin_dir, run_as })
}

/// `$DLOCK_POSTGRES_BIN`, else Debian's directory, else `pg_config --bindir`: the first that
/// holds both `initdb` and `postgres`. A variable that is set but wrong is an error.
fn bin_dir() -> Result<PathBuf, HarnessError> {
    let has_both = |dir: &Path| {
        ["initdb", "postgres"]
            .iter()
            .all(|p| executable(&dir.join(p)))
    };
    if let Some(dir) = env::var_os(POSTGRES_BIN_ENV).filter(|v| !v.is_empty()) {
        let dir = PathBuf::from(dir);
        return if has_both(&dir) {
            Ok(dir)
        } else {
            Err(HarnessError::new(format!(
                "{POSTGRES_BIN_ENV}={} holds no executable initdb and postgres: point it at \
                 PostgreSQL's bin directory (e.g. {DEBIAN_BIN_DIR}) or unset it",
                dir.display()
            )))
        };
    }
    if has_both(Path::new(DEBIAN_BIN_DIR)) {
        return Ok(PathBuf::from(DEBIAN_BIN_DIR));
    }
    let pg_config = Command::new("pg_config")
        .arg("--bindir")
        .stderr(Stdio::null())
        .output();
    let looked = match pg_config {
        Ok(out) if out.status.success() => {
            let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
            if has_both(&dir) {
                return Ok(dir);
            }
            format!(
                "`pg_config --bindir` names {}, which has none",
                dir.display()
            )
        }
        _ => "no working pg_config on PATH".to_owned(),
    };
    Err(HarnessError::new(format!(
        "PostgreSQL's server programs (initdb, postgres) not found: {POSTGRES_BIN_ENV} is unset, \
         {DEBIAN_BIN_DIR} has none, {looked}. Install PostgreSQL 15 (Debian, as root: \
         scripts/ensure-deps.sh, or apt-get install -y postgresql-15) or set {POSTGRES_BIN_ENV} \
         to the directory that holds initdb and postgres"
    )))
}

fn executable(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Runs `cmd` as `user` (uid, gid): `std` sets the group, drops the supplementary groups and
/// sets the user in the child, before `exec`.
fn run_as(cmd: &mut Command, user: Option<(u32, u32)>) {
    if let Some((uid, gid)) = user {
        cmd.uid(uid).gid(gid);
    }
}

/// Gives `path` (one entry) to `user`, if one is set.
fn hand_over(path: &Path, user: Option<(u32, u32)>) -> Result<(), HarnessError> {
    let Some((uid, gid)) = user else {
        return Ok(());
    };
    chown(path, Some(uid), Some(gid)).map_err(|e| {
        HarnessError::new(format!(
            "cannot give {} to the postgres user",
            path.display()
        ))
        .with_source(e)
    })
}

/// The template cluster of this PostgreSQL version and user, made by `initdb` on first use.
fn template(needs: &Requirements) -> Result<PathBuf, HarnessError> {
    let initdb = needs.bin_dir.join("initdb");
    let version = Command::new(&initdb)
        .arg("--version")
        .output()
        .map_err(|e| {
            HarnessError::new(format!("cannot run {}", initdb.display())).with_source(e)
        })?;
    let version: String = String::from_utf8_lossy(&version.stdout)
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let uid = needs
        .run_as
        .map_or_else(|| nix::unistd::geteuid().as_raw(), |(uid, _)| uid);
    let home = env::temp_dir().join(format!("dlock-testkit-pg-template-{version}-{uid}"));
    let data = home.join("data");
    if home.join("complete").exists() {
        return Ok(data);
    }
    let scratch = TempDir::with_prefix_in("dlock-testkit-pg-scratch-", env::temp_dir())
        .map_err(|e| HarnessError::new("cannot create a temp dir").with_source(e))?;
    hand_over(scratch.path(), needs.run_as)?;
    let mut cmd = Command::new(&initdb);
    cmd.arg("-D")
        .arg(scratch.path().join("data"))
        .args([
            "-U",
            SUPERUSER,
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        ])
        .current_dir(scratch.path())
        .stdin(Stdio::null());
    run_as(&mut cmd, needs.run_as);
    let command = command_line(&cmd);
    let mut child = ChildGuard::spawn({
        let log = fs::File::create(scratch.path().join("initdb.log"))
            .map_err(|e| HarnessError::new("cannot create the initdb log").with_source(e))?;
        let err = log
            .try_clone()
            .map_err(|e| HarnessError::new("cannot open the initdb log").with_source(e))?;
        cmd.stdout(log).stderr(err);
        cmd
    })?;
    let status = child.wait_timeout(INITDB_LIMIT)?;
    if !status.is_some_and(|s| s.success()) {
        let why = status.map_or_else(
            || format!("initdb did not finish within {} s", INITDB_LIMIT.as_secs()),
            |s| format!("initdb failed with {s}"),
        );
        return Err(HarnessError::new(why)
            .with_command(command)
            .with_file_tail("initdb output", &scratch.path().join("initdb.log")));
    }
    fs::write(scratch.path().join("complete"), b"")
        .map_err(|e| HarnessError::new("cannot mark the template complete").with_source(e))?;
    // Into place in one step; if another process was first, its template is as good.
    let scratch = scratch.keep();
    if fs::rename(&scratch, &home).is_err() {
        let _ = fs::remove_dir_all(&scratch);
        if !home.join("complete").exists() {
            return Err(HarnessError::new(format!(
                "cannot move the template cluster into {}",
                home.display()
            )));
        }
    }
    Ok(data)
}

/// Copies the directory tree `from` to `to` (files and directories, with their permission
/// bits), giving every entry to `user` if one is set.
fn copy_tree(from: &Path, to: &Path, user: Option<(u32, u32)>) -> Result<(), HarnessError> {
    let failed = |e: std::io::Error| {
        HarnessError::new(format!(
            "cannot copy the template cluster {} to {}",
            from.display(),
            to.display()
        ))
        .with_source(e)
    };
    fs::create_dir(to).map_err(failed)?;
    let mode = fs::metadata(from).map_err(failed)?.permissions();
    fs::set_permissions(to, mode).map_err(failed)?;
    hand_over(to, user)?;
    for entry in fs::read_dir(from).map_err(failed)? {
        let entry = entry.map_err(failed)?;
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type().map_err(failed)?.is_dir() {
            copy_tree(&source, &target, user)?;
        } else {
            fs::copy(&source, &target).map_err(failed)?;
            hand_over(&target, user)?;
        }
    }
    Ok(())
}

/// Whether `data/postmaster.pid` names `pid` and says `ready` (its 8th line), as the server
/// writes once it accepts connections.
fn postmaster_ready(data: &Path, pid: u32) -> bool {
    let Ok(text) = fs::read_to_string(data.join("postmaster.pid")) else {
        return false;
    };
    let lines: Vec<&str> = text.lines().collect();
    lines.first().is_some_and(|l| l.trim() == pid.to_string())
        && lines.get(7).is_some_and(|l| l.trim() == "ready")
}

/// A value in a key-value connection string: single-quoted, `\` and `'` escaped.
fn quote(value: &str) -> String {
    format!("'{}'", value.replace('\\', "\\\\").replace('\'', "\\'"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_string_values_are_quoted() {
        assert_eq!(quote("/tmp/a b"), "'/tmp/a b'");
        assert_eq!(quote(r"it's\"), r"'it\'s\\'");
    }

    /// Starts a server, checks it runs and listens on its socket only, and that dropping it
    /// stops the process and removes the directory. Says why when it is skipped.
    #[test]
    fn a_server_starts_and_is_gone_after_drop() -> Result<(), HarnessError> {
        if let Err(missing) = PostgresServer::check_requirements() {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED postgres::tests::a_server_starts_and_is_gone_after_drop: {}",
                missing.message()
            );
            return Ok(());
        }
        let server = PostgresServer::start()?;
        let pid = server.pid().ok_or_else(|| HarnessError::new("no pid"))?;
        let dir = server.socket_dir().to_owned();
        assert!(dir.join(format!(".s.PGSQL.{}", server.port())).exists());
        assert!(server.url().contains(&format!("port={}", server.port())));
        assert!(
            server.log().contains("ready to accept connections"),
            "{}",
            server.log()
        );
        drop(server);
        assert!(!dir.exists(), "the temp dir is removed");
        let alive = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX)),
            None,
        );
        assert!(alive.is_err(), "the postmaster {pid} is gone");
        Ok(())
    }
}
