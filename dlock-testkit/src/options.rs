//! [`ServerOptions`]: how a `redis-server` is configured, and the command line built from it.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The server log, in the server's directory.
pub(crate) const LOG_FILE: &str = "redis.log";
/// A cluster node's own record of its identity, slots and peers, in its directory.
pub(crate) const NODES_CONF_FILE: &str = "nodes.conf";

use crate::HarnessError;
use crate::tls::Authority;

/// Settings the harness owns: it must know them (port, files) or relies on them (foreground
/// process). Setting them through [`ServerOptions::arg`] is rejected.
const RESERVED: &[&str] = &[
    "port",
    "bind",
    "dir",
    "logfile",
    "daemonize",
    "cluster-enabled",
    "cluster-config-file",
];

/// Configuration of a [`RedisServer`](crate::RedisServer) beyond the harness defaults.
///
/// Every server runs with `--port P --bind 127.0.0.1 --save "" --appendonly no --dir <tmp>
/// --logfile <tmp>/redis.log --daemonize no --protected-mode no`, plus `--cluster-enabled yes
/// --cluster-config-file <tmp>/nodes.conf --cluster-node-timeout 5000` for cluster nodes. Extra
/// arguments come last, so they override the defaults that are not reserved (`save`,
/// `appendonly`, `protected-mode`, `cluster-node-timeout`, …). Each value is passed as one
/// argument, as with `redis-server --name value`.
///
/// If `requirepass` is set, [`RedisServer::url`](crate::RedisServer::url) carries the password
/// and the harness authenticates with it.
///
/// # Example
///
/// ```no_run
/// use dlock_testkit::{RedisServer, ServerOptions};
///
/// let server = RedisServer::start_with(
///     ServerOptions::new()
///         .arg("maxmemory", "10mb")
///         .arg("maxmemory-policy", "noeviction"),
/// )?;
/// # Ok::<(), dlock_testkit::HarnessError>(())
/// ```
#[derive(Clone, Default)]
pub struct ServerOptions {
    args: Vec<(String, String)>,
    cluster: bool,
    movable_clock: bool,
    tls: Option<ClientCerts>,
    /// The CA that issues the TLS server's certificate, shared by the servers of one
    /// deployment; none: the server makes its own.
    authority: Option<Arc<Authority>>,
    /// The server binary to run instead of the harness's (`$DLOCK_REDIS_SERVER`).
    binary: Option<PathBuf>,
}

/// Whether a TLS server asks clients for a certificate (`tls-auth-clients`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ClientCerts {
    /// `optional`: a client may present one (mutual TLS) or not.
    Optional,
    /// `yes`: a client without a certificate signed by the CA is refused.
    Required,
}

impl ServerOptions {
    /// The harness defaults: a standalone server with no extra arguments.
    ///
    /// # Example
    ///
    /// ```no_run
    /// let server = dlock_testkit::RedisServer::start_with(dlock_testkit::ServerOptions::new())?;
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a configuration argument, passed as `--name value` (a leading `--` on `name` is
    /// accepted). Later arguments override earlier ones.
    ///
    /// # Example
    ///
    /// ```no_run
    /// let options = dlock_testkit::ServerOptions::new().arg("maxmemory", "10mb");
    /// ```
    #[must_use]
    pub fn arg(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let name = name.into();
        let name = name.strip_prefix("--").unwrap_or(&name).to_owned();
        self.args.push((name, value.into()));
        self
    }

    /// Runs this server binary instead of the one the harness finds
    /// ([`crate::redis_server_binary`]): for a test about one particular server (a Redis older
    /// than 7 that dlock must refuse, from `.deps/` after `scripts/ensure-deps.sh`), whatever
    /// `$DLOCK_REDIS_SERVER` names for the rest of the run.
    ///
    /// # Example
    ///
    /// ```no_run
    /// let options = dlock_testkit::ServerOptions::new().binary(".deps/redis-6.2/bin/redis-server");
    /// ```
    #[must_use]
    pub fn binary(mut self, path: impl Into<PathBuf>) -> Self {
        self.binary = Some(path.into());
        self
    }

    /// The binary given with [`ServerOptions::binary`], if any.
    pub(crate) fn chosen_binary(&self) -> Option<&Path> {
        self.binary.as_deref()
    }

    /// Runs the server as a Redis Cluster node (`cluster-enabled yes`). Used by
    /// [`RedisCluster`](crate::RedisCluster); a lone cluster node serves no slots.
    ///
    /// # Example
    ///
    /// ```no_run
    /// let options = dlock_testkit::ServerOptions::new().cluster(true);
    /// assert!(options.is_cluster());
    /// ```
    #[must_use]
    pub fn cluster(mut self, enabled: bool) -> Self {
        self.cluster = enabled;
        self
    }

    /// Runs the server with a wall clock the test can move with
    /// [`RedisServer::jump_clock`](crate::RedisServer::jump_clock) (a clock shim preloaded into
    /// this one process; the machine's clock is never changed). Key expiry, `TIME` and scripts
    /// see the moved clock. Needs a C compiler (`cc`, or `$CC`) the first time.
    ///
    /// # Example
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use dlock_testkit::{RedisServer, ServerOptions};
    ///
    /// let server = RedisServer::start_with(ServerOptions::new().movable_clock())?;
    /// server.jump_clock(Duration::from_secs(60))?; // every lease there ran out
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    #[must_use]
    pub fn movable_clock(mut self) -> Self {
        self.movable_clock = true;
        self
    }

    /// Adds a TLS port next to the plain one (which the harness keeps using): a private CA, a
    /// server certificate for `localhost`/`127.0.0.1` and a client certificate are made at
    /// start-up ([`RedisServer::tls`](crate::RedisServer::tls),
    /// [`RedisServer::tls_url`](crate::RedisServer::tls_url)). Clients may present the client
    /// certificate (mutual TLS) or not.
    ///
    /// # Example
    ///
    /// ```no_run
    /// let server = dlock_testkit::RedisServer::start_with(dlock_testkit::ServerOptions::new().tls())?;
    /// println!("{}", server.tls_url().expect("TLS is on"));
    /// # Ok::<(), dlock_testkit::HarnessError>(())
    /// ```
    #[must_use]
    pub fn tls(mut self) -> Self {
        self.tls = Some(ClientCerts::Optional);
        self
    }

    /// [`ServerOptions::tls`], and the TLS port refuses clients without a certificate signed by
    /// the server's CA (mutual TLS required).
    #[must_use]
    pub fn tls_client_cert_required(mut self) -> Self {
        self.tls = Some(ClientCerts::Required);
        self
    }

    /// These options, with TLS certificates issued by `authority` (shared with other servers)
    /// rather than by a CA of the server's own.
    pub(crate) fn with_authority(mut self, authority: Arc<Authority>) -> Self {
        self.authority = Some(authority);
        self
    }

    /// These options with `leading`'s arguments before their own (defaults they override).
    pub(crate) fn with_leading_args(mut self, leading: &ServerOptions) -> Self {
        let mut args = leading.args.clone();
        args.append(&mut self.args);
        self.args = args;
        self
    }

    /// The shared CA, set by [`ServerOptions::with_authority`].
    pub(crate) fn authority(&self) -> Option<&Arc<Authority>> {
        self.authority.as_ref()
    }

    /// The value of `tls-auth-clients` for these options' TLS servers (and their sentinels).
    pub(crate) fn tls_auth_clients(&self) -> &'static str {
        match self.tls {
            Some(ClientCerts::Required) => "yes",
            _ => "optional",
        }
    }

    /// Whether the server gets a TLS port.
    pub fn has_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// These options plus the TLS arguments of a server whose TLS files are `files` and whose
    /// TLS port is `port`.
    pub(crate) fn with_tls_args(&self, port: u16, files: &crate::tls::ServerFiles) -> Self {
        let mut options = self.clone();
        let auth = self.tls_auth_clients();
        for (name, value) in [
            ("tls-port", port.to_string()),
            ("tls-cert-file", files.cert.display().to_string()),
            ("tls-key-file", files.key.display().to_string()),
            ("tls-ca-cert-file", files.ca.display().to_string()),
            ("tls-auth-clients", auth.to_owned()),
        ] {
            options.args.push((name.to_owned(), value));
        }
        options
    }

    /// Whether the server's clock can be moved ([`ServerOptions::movable_clock`]).
    pub fn has_movable_clock(&self) -> bool {
        self.movable_clock
    }

    /// The environment the server starts with (the clock shim, when its clock is movable).
    pub(crate) fn env(&self, dir: &Path) -> Result<Vec<(OsString, OsString)>, HarnessError> {
        if self.movable_clock {
            crate::clock::env(dir)
        } else {
            Ok(Vec::new())
        }
    }

    /// The extra arguments, in order, names without `--`.
    ///
    /// # Example
    ///
    /// ```no_run
    /// let options = dlock_testkit::ServerOptions::new().arg("--maxmemory", "10mb");
    /// assert_eq!(options.args(), [("maxmemory".to_owned(), "10mb".to_owned())]);
    /// ```
    pub fn args(&self) -> &[(String, String)] {
        &self.args
    }

    /// Whether the server runs as a cluster node.
    ///
    /// # Example
    ///
    /// ```no_run
    /// assert!(!dlock_testkit::ServerOptions::new().is_cluster());
    /// ```
    pub fn is_cluster(&self) -> bool {
        self.cluster
    }

    /// The value of `requirepass`, if set (the last one wins, as in Redis).
    pub(crate) fn password(&self) -> Option<&str> {
        self.args
            .iter()
            .rev()
            .find(|(name, _)| name.eq_ignore_ascii_case("requirepass"))
            .map(|(_, value)| value.as_str())
            .filter(|value| !value.is_empty())
    }

    pub(crate) fn validate(&self) -> Result<(), HarnessError> {
        match self
            .args
            .iter()
            .find(|(name, _)| RESERVED.iter().any(|r| name.eq_ignore_ascii_case(r)))
        {
            Some((name, _)) => Err(HarnessError::new(format!(
                "ServerOptions::arg(\"{name}\", ..): `{name}` is set by the harness and cannot be \
                 overridden (reserved: {})",
                RESERVED.join(", ")
            ))),
            None => Ok(()),
        }
    }

    /// The `redis-server` arguments for a server on `port` keeping its files in `dir`.
    pub(crate) fn command_args(&self, port: u16, dir: &Path) -> Vec<OsString> {
        let mut args: Vec<OsString> = Vec::new();
        let mut push = |name: &str, value: OsString| {
            args.push(format!("--{name}").into());
            args.push(value);
        };
        push("port", port.to_string().into());
        push("bind", "127.0.0.1".into());
        push("save", "".into());
        push("appendonly", "no".into());
        push("dir", dir.into());
        push("logfile", dir.join(LOG_FILE).into());
        push("daemonize", "no".into());
        push("protected-mode", "no".into());
        if self.cluster {
            push("cluster-enabled", "yes".into());
            push("cluster-config-file", dir.join(NODES_CONF_FILE).into());
            push("cluster-node-timeout", "5000".into());
        }
        for (name, value) in &self.args {
            push(name, value.into());
        }
        args
    }
}

impl fmt::Debug for ServerOptions {
    /// Values of password settings (`requirepass`, `masterauth`) are redacted.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            args,
            cluster,
            movable_clock,
            tls,
            authority,
            binary,
        } = self;
        let args: Vec<(&str, &str)> = args
            .iter()
            .map(|(name, value)| {
                let secret = ["pass", "auth"]
                    .iter()
                    .any(|s| name.to_ascii_lowercase().contains(s));
                (name.as_str(), if secret { "<redacted>" } else { value })
            })
            .collect();
        f.debug_struct("ServerOptions")
            .field("args", &args)
            .field("cluster", cluster)
            .field("movable_clock", movable_clock)
            .field("tls", tls)
            .field("shared_ca", &authority.is_some())
            .field("binary", binary)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_names_are_rejected_case_insensitively() {
        assert!(
            ServerOptions::new()
                .arg("maxmemory", "1mb")
                .validate()
                .is_ok()
        );
        let error = ServerOptions::new().arg("--PORT", "1").validate().err();
        assert!(error.is_some_and(|e| e.message().contains("set by the harness")));
    }

    #[test]
    fn extra_args_come_after_the_defaults() {
        let args = ServerOptions::new()
            .cluster(true)
            .arg("cluster-node-timeout", "1000")
            .command_args(7000, Path::new("/tmp/x"));
        let args: Vec<String> = args.iter().map(|a| a.to_string_lossy().into()).collect();
        assert_eq!(&args[..4], ["--port", "7000", "--bind", "127.0.0.1"]);
        assert_eq!(&args[args.len() - 2..], ["--cluster-node-timeout", "1000"]);
        assert!(args.contains(&"/tmp/x/redis.log".to_owned()));
    }

    #[test]
    fn debug_redacts_passwords() {
        let options = ServerOptions::new().arg("requirepass", "hunter2");
        assert_eq!(options.password(), Some("hunter2"));
        assert!(!format!("{options:?}").contains("hunter2"));
    }
}
