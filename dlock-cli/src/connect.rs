//! Where Redis is: the URLs (`--url`, else `DLOCK_REDIS_URL`), whether they are a cluster
//! (`--cluster`, several URLs, or asked of the server), the clients built on them — and
//! [`Secrets`], which keeps every password out of what `dlock` prints.

use std::time::Duration;

use dlock_core::Client;
use dlock_scheduler::Scheduler;
use redis::IntoConnectionInfo;

use crate::cli::Global;
use crate::failure::Failure;

/// The passwords (and user names) of the URLs given, to be scrubbed from all output.
#[derive(Debug, Default)]
pub(crate) struct Secrets {
    words: Vec<String>,
}

/// Secrets shorter than this are not scrubbed word by word (it would mangle ordinary text);
/// URLs are always printed redacted ([`redact_url`]), so this is a second line of defence.
const MIN_SCRUBBED: usize = 3;

impl Secrets {
    /// The secrets of `urls`: each URL's user info, password and user name as written and as
    /// the `redis` crate decodes them.
    pub(crate) fn of(urls: &[String]) -> Self {
        let mut words = Vec::new();
        for url in urls {
            if let Some(userinfo) = userinfo(url) {
                words.push(userinfo.to_owned());
                words.extend(userinfo.split(':').map(str::to_owned));
            }
            if let Ok(info) = url.as_str().into_connection_info() {
                let settings = info.redis_settings();
                words.extend(settings.password().map(str::to_owned));
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

/// `url` fit to print: the user info and any query (which may carry a password) replaced.
pub(crate) fn redact_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let (rest, query) = match rest.split_once('?') {
        Some((rest, _)) => (rest, "?***"),
        None => (rest, ""),
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let host = match authority.rsplit_once('@') {
        Some((_, host)) => format!("***@{host}"),
        None => authority.to_owned(),
    };
    if scheme.is_empty() {
        format!("{host}{path}{query}")
    } else {
        format!("{scheme}://{host}{path}{query}")
    }
}

/// The Redis to talk to, checked.
#[derive(Debug)]
pub(crate) struct Target {
    urls: Vec<String>,
    cluster: bool,
    prefix: String,
    timeout: Duration,
}

impl Target {
    /// The URLs of `--url` (else `DLOCK_REDIS_URL`), each checked, and whether they are the
    /// seeds of a cluster: `--cluster`, several URLs, or (one URL) what the server says.
    ///
    /// # Errors
    /// A usage failure when no URL is given or one is not a Redis URL; an error when the server
    /// cannot be reached within the timeout.
    pub(crate) async fn resolve(global: &Global) -> Result<Self, Failure> {
        if global.url.is_empty() {
            return Err(Failure::usage(
                "no Redis given: pass --url redis://host:port/ or set DLOCK_REDIS_URL",
            ));
        }
        for url in &global.url {
            if let Err(e) = url.as_str().into_connection_info() {
                return Err(Failure::usage(format!(
                    "`{}` is not a Redis URL ({e}); write redis://[user][:password@]host[:port][/db]",
                    redact_url(url)
                )));
            }
        }
        let cluster = match global.url.as_slice() {
            _ if global.cluster => true,
            [one] => is_cluster(one, global.timeout).await?,
            _ => true,
        };
        Ok(Self {
            urls: global.url.clone(),
            cluster,
            prefix: global.prefix.clone(),
            timeout: global.timeout,
        })
    }

    /// A dlock client on the target, with the prefix and timeouts given.
    ///
    /// # Errors
    /// A usage failure for a bad prefix.
    pub(crate) fn client(&self) -> Result<Client, Failure> {
        let builder = if self.cluster {
            Client::cluster_builder(self.urls.iter().map(String::as_str))
        } else {
            Client::builder(self.urls[0].as_str())
        };
        Ok(builder
            .key_prefix(self.prefix.as_str())
            .command_timeout(self.timeout)
            .connect_timeout(self.timeout)
            .build()?)
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

/// Asks the server at `url` whether it is a cluster node (`INFO cluster`), within `timeout`:
/// also how an unreachable Redis is found out quickly.
async fn is_cluster(url: &str, timeout: Duration) -> Result<bool, Failure> {
    let shown = redact_url(url);
    let unreachable = |why: String| {
        Failure::error(format!(
            "cannot reach Redis at {shown}: {why}; check the URL (--url or DLOCK_REDIS_URL) and \
             that the server runs"
        ))
    };
    let asked = tokio::time::timeout(timeout, async {
        let client = redis::Client::open(url)?;
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout));
        let mut con = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        redis::cmd("INFO")
            .arg("cluster")
            .query_async::<String>(&mut con)
            .await
    })
    .await;
    let why = match asked {
        Ok(Ok(info)) => return Ok(info.lines().any(|l| l.trim() == "cluster_enabled:1")),
        Ok(Err(e)) if e.is_connection_refusal() => return Err(unreachable(e.to_string())),
        Ok(Err(e)) if !e.is_timeout() => e.to_string(),
        Ok(Err(_)) | Err(_) => format!("no answer within {timeout:?}"),
    };
    // A plain URL at a TLS port, `rediss://` at a plain one, or a port that is not Redis: the
    // library's probe says which (one `PING`, within the timeout).
    Err(match dlock_core::__private::port_hint(url, timeout).await {
        Some(hint) => unreachable(format!("{hint} ({why})")),
        None => unreachable(why),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_printed_without_secrets() {
        assert_eq!(
            redact_url("redis://:hunter22@127.0.0.1:6379/0"),
            "redis://***@127.0.0.1:6379/0"
        );
        assert_eq!(redact_url("redis://admin:p@ss@host/"), "redis://***@host/");
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
    fn secrets_are_scrubbed_from_any_text() {
        let secrets = Secrets::of(&["redis://admin:hunter22@h:1/".to_owned()]);
        let text = "auth as admin with hunter22 failed at redis://admin:hunter22@h:1/";
        let scrubbed = secrets.scrub(text);
        assert!(!scrubbed.contains("hunter22"), "{scrubbed}");
        assert!(!scrubbed.contains("admin"), "{scrubbed}");
        // Too short to scrub word by word without mangling the text.
        assert_eq!(
            Secrets::of(&["redis://:ab@h/".to_owned()]).scrub("ab"),
            "ab"
        );
    }
}
