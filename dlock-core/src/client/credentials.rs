//! What the builder applies to each address: TLS (the CA, the client certificate, the
//! development-only "insecure") and a Sentinel client's credentials for its data nodes and its
//! sentinels. Kept apart from the builder's flow (`builder.rs`), and never printed.

use crate::error::{Error, Result};

/// What a `rediss://` connection trusts and presents ([`ClientBuilder::tls_ca_pem`] …).
#[derive(Clone, Default)]
pub(super) struct TlsSettings {
    /// PEM: the CA that signs the servers' certificates, instead of the system's roots.
    pub(super) ca: Option<Vec<u8>>,
    /// PEM: the client certificate and its key (mutual TLS).
    pub(super) identity: Option<(Vec<u8>, Vec<u8>)>,
    /// Accept any server certificate (development only).
    pub(super) insecure: bool,
}

impl TlsSettings {
    pub(super) fn is_set(&self) -> bool {
        self.ca.is_some() || self.identity.is_some() || self.insecure
    }

    /// The CA and client certificate, when either is given.
    pub(super) fn certificates(&self) -> Option<redis::TlsCertificates> {
        if self.ca.is_none() && self.identity.is_none() {
            return None;
        }
        Some(redis::TlsCertificates {
            client_tls: self
                .identity
                .as_ref()
                .map(|(cert, key)| redis::ClientTlsConfig {
                    client_cert: cert.clone(),
                    client_key: key.clone(),
                }),
            root_cert: self.ca.clone(),
        })
    }

    /// `info` with these settings, when it is a `rediss://` address (the key and certificates
    /// go into the connection info, which the `redis` crate never prints).
    pub(super) fn apply(&self, info: redis::ConnectionInfo) -> Result<redis::ConnectionInfo> {
        let tls = matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. });
        if !tls {
            if self.is_set() {
                return Err(Error::invalid(
                    "TLS settings (tls_ca_pem, tls_client_cert_pem, tls_insecure_dev_only) need \
                     a rediss:// URL",
                ));
            }
            return Ok(info);
        }
        install_crypto_provider();
        let info = if self.insecure {
            match info.addr().clone() {
                redis::ConnectionAddr::TcpTls { host, port, .. } => {
                    info.set_addr(redis::ConnectionAddr::TcpTls {
                        host,
                        port,
                        insecure: true,
                        tls_params: None,
                    })
                }
                _ => info,
            }
        } else {
            info
        };
        let Some(certs) = self.certificates() else {
            return Ok(info);
        };
        redis::Client::build_with_tls(info, certs)
            .map(|client| client.get_connection_info().clone())
            .map_err(|e| {
                Error::invalid(format!(
                    "cannot use these TLS certificates (PEM expected): {e}"
                ))
            })
    }
}

/// The `redis` crate turns rustls on without a crypto provider: dlock installs `ring`'s as the
/// process default before its first TLS connection, unless the application installed one.
fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Lost a race with another installer: theirs is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// A Sentinel client's credentials: the data nodes' (the master) and the sentinels' (which
/// override those in the sentinel URLs). Never printed.
#[derive(Default)]
pub(super) struct SentinelAuth {
    pub(super) node_username: Option<String>,
    pub(super) node_password: Option<String>,
    pub(super) node_db: Option<i64>,
    pub(super) sentinel_username: Option<String>,
    pub(super) sentinel_password: Option<String>,
}

impl SentinelAuth {
    /// The sentinels with their credentials (these override the URLs'), and the data nodes'
    /// login.
    pub(super) fn apply(
        &self,
        sentinels: Vec<redis::ConnectionInfo>,
    ) -> (Vec<redis::ConnectionInfo>, redis::RedisConnectionInfo) {
        let sentinels = sentinels
            .into_iter()
            .map(|info| {
                let mut settings = info.redis_settings().clone();
                if let Some(user) = &self.sentinel_username {
                    settings = settings.set_username(user);
                }
                if let Some(password) = &self.sentinel_password {
                    settings = settings.set_password(password);
                }
                info.set_redis_settings(settings)
            })
            .collect();
        let mut node = redis::RedisConnectionInfo::default();
        if let Some(user) = &self.node_username {
            node = node.set_username(user);
        }
        if let Some(password) = &self.node_password {
            node = node.set_password(password);
        }
        if let Some(db) = self.node_db {
            node = node.set_db(db);
        }
        (sentinels, node)
    }

    /// The name of the first setting given, for the error of a non-Sentinel builder.
    pub(super) fn first_set(&self) -> Option<&'static str> {
        let Self {
            node_username,
            node_password,
            node_db,
            sentinel_username,
            sentinel_password,
        } = self;
        [
            (node_username.is_some(), "node_username"),
            (node_password.is_some(), "node_password"),
            (node_db.is_some(), "node_db"),
            (sentinel_username.is_some(), "sentinel_username"),
            (sentinel_password.is_some(), "sentinel_password"),
        ]
        .into_iter()
        .find_map(|(set, name)| set.then_some(name))
    }
}
