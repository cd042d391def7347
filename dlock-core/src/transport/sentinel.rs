//! Redis Sentinel: which server is the master of a monitored name now, asked of the sentinels,
//! and the sentinels' news of a failover (`+switch-master`). [`crate::transport::conn::ConnSlot`] uses both
//! to follow a failover; this file knows nothing of connections' generations or locks.
//!
//! Why not the `redis` crate's `sentinel` module: its lookup returns one error for all the
//! sentinels it asked (we must name each sentinel's reason), connects without our timeouts, and
//! hands out plain multiplexed connections, while dlock needs a [`redis::aio::ConnectionManager`]
//! with push messages and its own generations. What it does is small: per sentinel,
//! `SENTINEL GET-MASTER-ADDR-BY-NAME <name>`, then `ROLE` on the node it names — a sentinel can
//! still name the old master, or a replica not yet promoted, while a failover is under way.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo, Value};

use crate::error::ErrorKind;

/// The channel on which sentinels announce a new master: `<name> <old ip> <old port> <new ip>
/// <new port>`.
const SWITCH_CHANNEL: &str = "+switch-master";

/// How to find the master of `master_name`: the sentinels (with their credentials), how to log
/// into the data nodes, and the bound on asking.
pub(crate) struct SentinelSpec {
    pub(crate) master_name: String,
    sentinels: Vec<ConnectionInfo>,
    /// Credentials, database and protocol of the data nodes (never printed).
    node: RedisConnectionInfo,
    /// How the data nodes are reached: as the sentinels are, plain or TLS. For TLS, an address
    /// whose trusted CA, client certificate and verification the named master's address takes
    /// (only its host and port differ).
    node_transport: ConnectionAddr,
    tcp: redis::io::tcp::TcpSettings,
    /// Bound on one whole resolution (every sentinel is asked at once).
    timeout: Duration,
}

/// The master a resolution found, verified by `ROLE`.
#[derive(Clone)]
pub(crate) struct Resolved {
    /// How to connect to it (the data nodes' credentials included).
    pub(crate) info: ConnectionInfo,
    /// `host:port`, for logs, errors and comparing masters.
    pub(crate) addr: String,
}

impl SentinelSpec {
    pub(crate) fn new(
        master_name: String,
        sentinels: Vec<ConnectionInfo>,
        node: RedisConnectionInfo,
        node_transport: ConnectionAddr,
        tcp: redis::io::tcp::TcpSettings,
        timeout: Duration,
    ) -> Self {
        Self {
            master_name,
            sentinels,
            node,
            node_transport,
            tcp,
            timeout,
        }
    }

    /// Asks every sentinel at once for the master and returns the first one verified as a
    /// master by `ROLE`, within the connect timeout.
    ///
    /// # Errors
    /// The kind and text of the error: [`ErrorKind::InvalidInput`] when every sentinel
    /// answered that it does not know the name; [`ErrorKind::Authentication`] when a sentinel
    /// or the master it names refused the credentials; otherwise [`ErrorKind::Connection`] naming each
    /// sentinel and its reason (unreachable, no answer in time, the node it names is
    /// unreachable or not a master).
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads; its connections close when dropped.
    pub(crate) async fn resolve(&self) -> std::result::Result<Resolved, (ErrorKind, String)> {
        let mut asks: FuturesUnordered<_> = self
            .sentinels
            .iter()
            .enumerate()
            .map(|(index, sentinel)| async move {
                let asked = tokio::time::timeout(self.timeout, self.ask(sentinel)).await;
                let asked = asked.unwrap_or_else(|_| {
                    Err(Why::Other(format!("no answer within {:?}", self.timeout)))
                });
                (index, asked)
            })
            .collect();
        let mut reasons: Vec<Option<Why>> = self.sentinels.iter().map(|_| None).collect();
        while let Some((index, asked)) = asks.next().await {
            match asked {
                Ok(resolved) => return Ok(resolved),
                Err(why) => reasons[index] = Some(why),
            }
        }
        let unknown = reasons.iter().all(|r| matches!(r, Some(Why::Unknown)));
        let listed = self
            .sentinels
            .iter()
            .zip(&reasons)
            .map(|(sentinel, why)| {
                let why = match why {
                    Some(Why::Unknown) => {
                        format!("does not know a master named `{}`", self.master_name)
                    }
                    Some(Why::Refused(why) | Why::Other(why)) => why.clone(),
                    None => "not asked".to_owned(),
                };
                format!("sentinel {}: {why}", sentinel.addr())
            })
            .collect::<Vec<_>>()
            .join("; ");
        if unknown {
            return Err((
                ErrorKind::InvalidInput,
                format!(
                    "no sentinel monitors a master named `{}` ({listed}); check the master \
                     name (`sentinel monitor <name> …` in the sentinels' configuration)",
                    self.master_name
                ),
            ));
        }
        if reasons.iter().any(|r| matches!(r, Some(Why::Refused(_)))) {
            return Err((
                ErrorKind::Authentication,
                format!(
                    "no sentinel named a reachable master for `{}` ({listed}); Redis refused the \
                     user name or password (or none was given): the data nodes' go into \
                     `node_username` / `node_password`, the sentinels' into their URLs",
                    self.master_name
                ),
            ));
        }
        Err((
            ErrorKind::Connection,
            format!(
                "no sentinel named a reachable master for `{}` ({listed})",
                self.master_name
            ),
        ))
    }

    /// Asks one sentinel for the master and checks the node it names.
    async fn ask(&self, sentinel: &ConnectionInfo) -> std::result::Result<Resolved, Why> {
        let client = redis::Client::open(sentinel.clone())
            .map_err(|e| Why::Other(format!("unusable address ({e})")))?;
        let mut con = client
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| {
                if crate::error::is_authentication(&e) {
                    Why::Refused(format!("refuses the credentials of its URL ({e})"))
                } else {
                    Why::Other(format!("unreachable ({e})"))
                }
            })?;
        let named: Option<(String, u16)> = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(&self.master_name)
            .query_async(&mut con)
            .await
            .map_err(|e| {
                Why::Other(format!(
                    "did not answer SENTINEL GET-MASTER-ADDR-BY-NAME ({e}); is it a sentinel?"
                ))
            })?;
        let (host, port) = named.ok_or(Why::Unknown)?;
        let addr = format!("{host}:{port}");
        let info = self
            .node_addr(host, port)
            .into_connection_info()
            .map_err(|e| Why::Other(format!("named an unusable master {addr} ({e})")))?
            .set_redis_settings(self.node.clone())
            .set_tcp_settings(self.tcp.clone());
        let role = node_role(&info).await.map_err(|e| {
            let why = format!("names {addr} as the master, which cannot be asked ({e})");
            if crate::error::is_authentication(&e) {
                Why::Refused(why)
            } else {
                Why::Other(why)
            }
        })?;
        if role != "master" {
            return Err(Why::Other(format!(
                "names {addr} as the master, which says it is a {role} (a failover under way)"
            )));
        }
        Ok(Resolved { info, addr })
    }

    /// The address of the data node at `host:port`: TLS with the sentinels' TLS settings (CA,
    /// client certificate, verification) when the sentinels are reached over TLS, else plain.
    fn node_addr(&self, host: String, port: u16) -> ConnectionAddr {
        match self.node_transport.clone() {
            ConnectionAddr::TcpTls {
                insecure,
                tls_params,
                ..
            } => ConnectionAddr::TcpTls {
                host,
                port,
                insecure,
                tls_params,
            },
            _ => ConnectionAddr::Tcp(host, port),
        }
    }

    /// Whether the node at `resolved` still says it is a master (the sentinels could not be
    /// asked, but the master in use may be fine).
    pub(crate) async fn still_master(&self, resolved: &Resolved) -> bool {
        let role = tokio::time::timeout(self.timeout, node_role(&resolved.info)).await;
        matches!(role, Ok(Ok(role)) if role == "master")
    }

    /// Listens for `+switch-master` of this master on one sentinel at a time, calling
    /// `on_switch` for each announcement and once after every (re)subscription (a switch may
    /// have been missed meanwhile); moves on to the next sentinel when one goes away. Ends when
    /// `on_switch` returns `false` (the client is gone), or when the task is aborted.
    pub(crate) async fn watch_switches(self: Arc<Self>, on_switch: impl Fn() -> bool) {
        let mut next = 0usize;
        let mut failed_in_a_row = 0usize;
        loop {
            let sentinel = &self.sentinels[next % self.sentinels.len()];
            next = next.wrapping_add(1);
            match tokio::time::timeout(self.timeout, subscribe_switches(sentinel)).await {
                Ok(Ok(mut pubsub)) => {
                    failed_in_a_row = 0;
                    if !on_switch() {
                        return;
                    }
                    let mut messages = pubsub.on_message();
                    while let Some(message) = messages.next().await {
                        let payload: String = message.get_payload().unwrap_or_default();
                        if payload.split(' ').next() == Some(self.master_name.as_str()) {
                            tracing::info!(
                                switch = %payload,
                                "dlock: a sentinel announced a new master"
                            );
                            if !on_switch() {
                                return;
                            }
                        }
                    }
                    tracing::debug!(
                        sentinel = %sentinel.addr(),
                        "dlock: lost the sentinel that announces failovers; trying the next"
                    );
                }
                Ok(Err(e)) => {
                    failed_in_a_row += 1;
                    tracing::debug!(sentinel = %sentinel.addr(), error = %e, "dlock: cannot listen to this sentinel");
                }
                Err(_) => failed_in_a_row += 1,
            }
            // A pause only once every sentinel failed in turn: the next one is tried at once.
            if failed_in_a_row >= self.sentinels.len() {
                failed_in_a_row = 0;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// Why one sentinel did not give a master.
enum Why {
    /// It does not know the name.
    Unknown,
    /// It, or the master it names, refused the log-in (`WRONGPASS`, `NOAUTH`: a wrong or
    /// missing password).
    Refused(String),
    Other(String),
}

/// The first element of `ROLE` (`master`, `slave`, `sentinel`) of the node at `info`.
async fn node_role(info: &ConnectionInfo) -> redis::RedisResult<String> {
    let client = redis::Client::open(info.clone())?;
    let mut con = client.get_multiplexed_async_connection().await?;
    let role: Value = redis::cmd("ROLE").query_async(&mut con).await?;
    let first = match role {
        Value::Array(items) => items.into_iter().next(),
        _ => None,
    };
    match first {
        Some(Value::BulkString(bytes)) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
        Some(Value::SimpleString(text)) => Ok(text),
        _ => Err((
            redis::ErrorKind::UnexpectedReturnType,
            "ROLE: unexpected reply",
        )
            .into()),
    }
}

/// A pub/sub connection to `sentinel`, subscribed to `+switch-master`.
async fn subscribe_switches(sentinel: &ConnectionInfo) -> redis::RedisResult<redis::aio::PubSub> {
    let client = redis::Client::open(sentinel.clone())?;
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.subscribe(SWITCH_CHANNEL).await?;
    Ok(pubsub)
}
