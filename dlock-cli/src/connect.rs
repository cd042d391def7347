//! Where Redis is: the URLs (`--url`, else `DLOCK_REDIS_URL`), the password kept out of them
//! (`DLOCK_REDIS_PASSWORD`), TLS files, whether the URLs are a cluster (`--cluster`, several
//! URLs, or asked of the server) or sentinels (`--sentinel NAME`), the clients built on them —
//! and [`Secrets`], which keeps every password out of the messages `dlock` prints.

use std::path::Path;
use std::time::Duration;

use dlock_core::{Client, ClientBuilder};
use dlock_scheduler::Scheduler;
use redis::{ConnectionInfo, IntoConnectionInfo};

use crate::cli::Global;
use crate::explain;
use crate::failure::Failure;

/// The passwords of the URLs given (and of `DLOCK_REDIS_PASSWORD`), to be scrubbed from
/// messages (errors and notes). A user name is not a secret, and the data `dlock` prints
/// (tables, JSON) is never rewritten: a lock or a prefix may well contain the user's name.
#[derive(Debug, Default)]
pub(crate) struct Secrets {
    words: Vec<String>,
}

/// Secrets shorter than this are not scrubbed word by word (it would mangle ordinary text);
/// URLs are always printed redacted ([`redact_url`]), so this is a second line of defence.
const MIN_SCRUBBED: usize = 3;

impl Secrets {
    /// The passwords of `urls`, as written and as the `redis` crate decodes them, and
    /// `password`.
    pub(crate) fn of(urls: &[String], password: Option<&str>) -> Self {
        let mut words: Vec<String> = password.map(str::to_owned).into_iter().collect();
        for url in urls {
            if let Some((_, written)) = userinfo(url).and_then(|u| u.split_once(':')) {
                words.push(written.to_owned());
            }
            if let Ok(info) = url.as_str().into_connection_info() {
                words.extend(info.redis_settings().password().map(str::to_owned));
            }
        }
        words.retain(|w| w.len() >= MIN_SCRUBBED);
        // Longest first, so that a password containing another secret is replaced whole.
        words.sort_by_key(|w| std::cmp::Reverse(w.len()));
        words.dedup();
        Self { words }
    }

    /// `text` with every secret replaced by `***`.
    pub(crate) fn scrub(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for word in &self.words {
            if text.contains(word.as_str()) {
                text = text.replace(word.as_str(), "***");
            }
        }
        text
    }
}

/// The user info of a URL (`user:password` in `redis://user:password@host`), if any.
fn userinfo(url: &str) -> Option<&str> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?']).next().unwrap_or(rest);
    authority.rsplit_once('@').map(|(userinfo, _)| userinfo)
}

/// `url` fit to print: the password and any query (which may carry one) replaced by `***`;
/// the user name is kept.
pub(crate) fn redact_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let (rest, query) = match rest.split_once('?') {
        Some((rest, _)) => (rest, "?***"),
        None => (rest, ""),
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let host = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:***@{host}"),
            None => format!("{userinfo}@{host}"),
        },
        None => authority.to_owned(),
    };
    if scheme.is_empty() {
        format!("{host}{path}{query}")
    } else {
        format!("{scheme}://{host}{path}{query}")
    }
}

/// What the URLs are.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Mode {
    /// One URL, not told: a server or a cluster node, asked with `INFO cluster`.
    Detect,
    Cluster,
    /// Sentinels of the master of this name.
    Sentinel(String),
}

/// The TLS files, read.
#[derive(Clone, Default)]
struct Tls {
    ca: Option<Vec<u8>>,
    identity: Option<(Vec<u8>, Vec<u8>)>,
    insecure: bool,
}

/// The Redis to talk to, checked. (No `Debug`: it holds the password and the client key.)
#[derive(Clone)]
pub(crate) struct Target {
    nodes: Vec<ConnectionInfo>,
    /// `host:port` of each URL, for messages.
    addresses: String,
    mode: Mode,
    password: Option<String>,
    tls: Tls,
    prefix: String,
    timeout: Duration,
}

impl Target {
    /// The URLs of `--url` (else `DLOCK_REDIS_URL`), each checked, with `password`
    /// (`DLOCK_REDIS_PASSWORD`) for those that carry none, and the TLS files read.
    ///
    /// # Errors
    /// A usage failure when no URL is given, one is not a Redis URL, a TLS file cannot be read,
    /// or `--tls-cert` comes without `--tls-key` (or the reverse).
    pub(crate) fn resolve(global: &Global, password: Option<String>) -> Result<Self, Failure> {
        if global.url.is_empty() {
            return Err(Failure::usage(
                "no Redis given: pass --url redis://host:port/ or set DLOCK_REDIS_URL",
            ));
        }
        let mut nodes = Vec::new();
        for url in &global.url {
            let mut info = url.as_str().into_connection_info().map_err(|e| {
                Failure::usage(format!(
                    "`{}` is not a Redis URL ({e}); write redis://[user][:password@]host[:port][/db]",
                    redact_url(url)
                ))
            })?;
            // Sentinels keep their own credentials (in their URLs); the variable is the
            // data nodes' password there.
            if let (Some(password), None) = (&password, &global.sentinel)
                && info.redis_settings().password().is_none()
            {
                let settings = info.redis_settings().clone().set_password(password);
                info = info.set_redis_settings(settings);
            }
            nodes.push(info);
        }
        let mode = match (&global.sentinel, global.url.len()) {
            (Some(name), _) => Mode::Sentinel(name.clone()),
            (None, _) if global.cluster => Mode::Cluster,
            (None, 1) => Mode::Detect,
            (None, _) => Mode::Cluster,
        };
        let identity = match (&global.tls_cert, &global.tls_key) {
            (Some(cert), Some(key)) => Some((read(cert, "--tls-cert")?, read(key, "--tls-key")?)),
            (None, None) => None,
            (Some(_), None) => {
                return Err(Failure::usage(
                    "--tls-cert needs the certificate's private key: add --tls-key FILE",
                ));
            }
            (None, Some(_)) => {
                return Err(Failure::usage(
                    "--tls-key needs its certificate: add --tls-cert FILE",
                ));
            }
        };
        let tls = Tls {
            ca: global
                .tls_ca
                .as_deref()
                .map(|ca| read(ca, "--tls-ca"))
                .transpose()?,
            identity,
            insecure: global.tls_insecure,
        };
        let addresses = nodes
            .iter()
            .map(|n| n.addr().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        Ok(Self {
            nodes,
            addresses,
            mode,
            password,
            tls,
            prefix: global.prefix.clone(),
            timeout: global.timeout,
        })
    }

    /// A dlock client on the target, with the prefix, timeouts and TLS settings given,
    /// connected (one `PING`): a server that cannot be reached, refuses the password or the
    /// certificate, or is not Redis, is an error here, saying which. When Redis wants a
    /// password and none was given, it is asked for on the terminal, if there is one.
    ///
    /// # Errors
    /// A usage failure for a bad prefix or TLS settings on a `redis://` URL; an error when
    /// Redis cannot be reached or refuses the client, within the timeout.
    pub(crate) async fn client(&self) -> Result<Client, Failure> {
        match self.client_once().await {
            // Redis wants a password and none was given: on a terminal, ask for it (once).
            Err(refused) if refused.refused_login && self.without_password() => {
                match crate::prompt::password(&self.addresses).await {
                    Some(password) => self.with_password(password).client_once().await,
                    None => Err(refused),
                }
            }
            done => done,
        }
    }

    /// No password anywhere: not in a URL (of the data nodes), not from the environment.
    fn without_password(&self) -> bool {
        self.password.is_none()
            && (matches!(self.mode, Mode::Sentinel(_))
                || self
                    .nodes
                    .iter()
                    .all(|n| n.redis_settings().password().is_none()))
    }

    /// This target with `password` for the data nodes.
    fn with_password(&self, password: String) -> Self {
        let mut target = self.clone();
        if !matches!(target.mode, Mode::Sentinel(_)) {
            target.nodes = target
                .nodes
                .into_iter()
                .map(|info| {
                    let settings = info.redis_settings().clone().set_password(&password);
                    info.set_redis_settings(settings)
                })
                .collect();
        }
        target.password = Some(password);
        target
    }

    async fn client_once(&self) -> Result<Client, Failure> {
        match &self.mode {
            Mode::Cluster => self.connect(self.cluster_builder()).await,
            Mode::Sentinel(name) => {
                let mut builder = Client::sentinel_builder(name.as_str(), self.nodes.clone());
                if let Some(password) = &self.password {
                    builder = builder.node_password(password.as_str());
                }
                self.connect(builder).await
            }
            Mode::Detect => {
                let node = self.nodes[0].clone();
                let client = self.connect(Client::builder(node)).await?;
                if self.is_cluster(&client).await? {
                    self.connect(self.cluster_builder()).await
                } else {
                    Ok(client)
                }
            }
        }
    }

    fn cluster_builder(&self) -> ClientBuilder {
        Client::cluster_builder(self.nodes.clone())
    }

    async fn connect(&self, builder: ClientBuilder) -> Result<Client, Failure> {
        let mut builder = builder
            .key_prefix(self.prefix.as_str())
            .command_timeout(self.timeout)
            .connect_timeout(self.timeout);
        if let Some(ca) = &self.tls.ca {
            builder = builder.tls_ca_pem(ca.clone());
        }
        if let Some((cert, key)) = &self.tls.identity {
            builder = builder.tls_client_cert_pem(cert.clone(), key.clone());
        }
        if self.tls.insecure {
            builder = builder.tls_insecure_dev_only();
        }
        builder
            .connect()
            .await
            .map_err(|e| explain::connect_failure(e, &self.addresses, self.timeout))
    }

    /// Whether the server `client` reaches is a cluster node (`INFO cluster`).
    async fn is_cluster(&self, client: &Client) -> Result<bool, Failure> {
        let mut con = client.connection();
        let asked = tokio::time::timeout(
            self.timeout,
            redis::cmd("INFO")
                .arg("cluster")
                .query_async::<String>(&mut con),
        )
        .await;
        match asked {
            Ok(Ok(info)) => Ok(info.lines().any(|l| l.trim() == "cluster_enabled:1")),
            Ok(Err(e)) => Err(Failure::error(format!(
                "cannot ask Redis at {} whether it is a cluster node (INFO cluster): {e}; give \
                 the user `+info`, or pass --cluster if it is one",
                self.addresses
            ))),
            Err(_) => Err(Failure::error(format!(
                "cannot reach Redis at {}: no answer within {:?}",
                self.addresses, self.timeout
            ))),
        }
    }

    /// A scheduler without jobs on `client`, for the control calls and the ledger; it leaves
    /// the client open.
    ///
    /// # Errors
    /// Never in practice (a scheduler without jobs has nothing to refuse).
    pub(crate) fn admin(client: &Client) -> Result<Scheduler, Failure> {
        Ok(Scheduler::builder(client.clone())
            .shutdown_client(false)
            .build()?)
    }
}

/// The contents of `path`, given as `option`.
fn read(path: &Path, option: &str) -> Result<Vec<u8>, Failure> {
    std::fs::read(path).map_err(|e| {
        Failure::usage(format!(
            "cannot read {option} {}: {e}; give a PEM file",
            path.display()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_printed_without_passwords_but_with_user_names() {
        assert_eq!(
            redact_url("redis://:hunter22@127.0.0.1:6379/0"),
            "redis://:***@127.0.0.1:6379/0"
        );
        assert_eq!(
            redact_url("redis://admin:p@ss@host/"),
            "redis://admin:***@host/"
        );
        assert_eq!(
            redact_url("redis://billing@host:1/"),
            "redis://billing@host:1/"
        );
        assert_eq!(
            redact_url("redis://127.0.0.1:6379/"),
            "redis://127.0.0.1:6379/"
        );
        assert_eq!(
            redact_url("redis+unix:///tmp/r.sock?pass=secret"),
            "redis+unix:///tmp/r.sock?***"
        );
    }

    #[test]
    fn passwords_are_scrubbed_from_messages_and_user_names_are_not() {
        let secrets = Secrets::of(
            &["redis://admin:hunter22@h:1/".to_owned()],
            Some("from-the-env"),
        );
        let text = "auth as admin with hunter22 or from-the-env failed";
        assert_eq!(secrets.scrub(text), "auth as admin with *** or *** failed");
        // Too short to scrub word by word without mangling the text.
        assert_eq!(
            Secrets::of(&["redis://:ab@h/".to_owned()], None).scrub("ab"),
            "ab"
        );
        // A URL with a user and no password has nothing to scrub.
        assert_eq!(
            Secrets::of(&["redis://orders@h/".to_owned()], None).scrub("orders:42"),
            "orders:42"
        );
    }
}
