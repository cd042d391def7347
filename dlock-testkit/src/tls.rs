//! TLS for a test server ([`ServerOptions::tls`](crate::ServerOptions::tls)): a private CA made
//! at start-up with `rcgen` (one per server, or one per TLS replica set with its sentinels, or
//! per TLS cluster), a server certificate for `localhost` and `127.0.0.1` and a client
//! certificate (mutual TLS) it signs, written into the server's directory. No certificate is
//! committed to the repository, and none outlives the server.

use std::fs;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use crate::HarnessError;

/// The directory, inside a server's, that holds its TLS files (kept across restarts).
pub(crate) const TLS_DIR: &str = "tls";

/// The certificates of a TLS test server, in PEM.
#[derive(Clone)]
pub struct TlsMaterial {
    /// The private CA that signed the server's and the client's certificates: what a client
    /// trusts to verify the server.
    pub ca_pem: String,
    /// A client certificate signed by the CA, for mutual TLS.
    pub client_cert_pem: String,
    /// The client certificate's private key.
    pub client_key_pem: String,
}

impl std::fmt::Debug for TlsMaterial {
    /// The private key is never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsMaterial")
            .field("ca_pem", &format!("{} bytes", self.ca_pem.len()))
            .field(
                "client_cert_pem",
                &format!("{} bytes", self.client_cert_pem.len()),
            )
            .field("client_key_pem", &"<redacted>")
            .finish()
    }
}

/// A CA of its own, unrelated to any server's: for tests of a client that trusts the wrong CA.
///
/// # Errors
/// When the key or the certificate cannot be made.
pub fn unrelated_ca_pem() -> Result<String, HarnessError> {
    Ok(new_ca("dlock-testkit unrelated CA")?.0.pem())
}

fn failed(what: &str) -> impl FnOnce(rcgen::Error) -> HarnessError + '_ {
    move |e| HarnessError::new(format!("cannot make the test {what}: {e}"))
}

fn new_ca(name: &str) -> Result<(rcgen::Certificate, CertificateParams, KeyPair), HarnessError> {
    let key = KeyPair::generate().map_err(failed("CA key"))?;
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(failed("CA"))?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.distinguished_name.push(DnType::CommonName, name);
    let cert = params.self_signed(&key).map_err(failed("CA"))?;
    Ok((cert, params, key))
}

/// A certificate for `names` (subject alternative names) and `common_name`, for `usage`,
/// signed by `issuer`, with its new key.
fn leaf(
    issuer: &Issuer<'_, KeyPair>,
    names: Vec<String>,
    common_name: &str,
    usage: &[ExtendedKeyUsagePurpose],
) -> Result<(rcgen::Certificate, KeyPair), HarnessError> {
    let key = KeyPair::generate().map_err(failed("leaf key"))?;
    let mut params = CertificateParams::new(names).map_err(failed("leaf certificate"))?;
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.extended_key_usages = usage.to_vec();
    let cert = params
        .signed_by(&key, issuer)
        .map_err(failed("leaf certificate"))?;
    Ok((cert, key))
}

/// The files a TLS server starts with: `(cert, key, ca)` paths.
pub(crate) struct ServerFiles {
    pub(crate) cert: PathBuf,
    pub(crate) key: PathBuf,
    pub(crate) ca: PathBuf,
}

/// A private CA that issues the certificates of every server of one deployment (a replica set
/// and its sentinels, a cluster's nodes), so that they trust each other and a client trusts
/// them all with one CA. Made at test time; its key never leaves the test process.
pub(crate) struct Authority {
    issuer: Issuer<'static, KeyPair>,
    material: TlsMaterial,
}

impl std::fmt::Debug for Authority {
    /// The CA's key is never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority")
            .field("material", &self.material)
            .finish_non_exhaustive()
    }
}

impl Authority {
    /// A new CA, and a client certificate it signs (mutual TLS).
    pub(crate) fn new() -> Result<Self, HarnessError> {
        let (ca_cert, ca_params, ca_key) = new_ca("dlock-testkit CA")?;
        let issuer = Issuer::new(ca_params, ca_key);
        let (client_cert, client_key) = leaf(
            &issuer,
            Vec::new(),
            "dlock-test-client",
            &[ExtendedKeyUsagePurpose::ClientAuth],
        )?;
        let material = TlsMaterial {
            ca_pem: ca_cert.pem(),
            client_cert_pem: client_cert.pem(),
            client_key_pem: client_key.serialize_pem(),
        };
        Ok(Self { issuer, material })
    }

    /// What a client needs: the CA, and the client certificate and key.
    pub(crate) fn material(&self) -> &TlsMaterial {
        &self.material
    }

    /// Makes a server certificate for `localhost` and `127.0.0.1` under `dir/tls`, with the
    /// CA. It serves clients and is presented as a client certificate too, as Redis does on
    /// its own outgoing TLS connections (a replica to its master, a sentinel to a node, a
    /// cluster bus link).
    pub(crate) fn issue_server(&self, dir: &Path) -> Result<ServerFiles, HarnessError> {
        let (server_cert, server_key) = leaf(
            &self.issuer,
            vec!["localhost".to_owned(), "127.0.0.1".to_owned()],
            "localhost",
            &[
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        )?;
        let tls = dir.join(TLS_DIR);
        fs::create_dir_all(&tls)
            .map_err(|e| HarnessError::new("cannot create the TLS dir").with_source(e))?;
        let files = ServerFiles {
            cert: tls.join("server.crt"),
            key: tls.join("server.key"),
            ca: tls.join("ca.crt"),
        };
        for (path, pem) in [
            (&files.cert, server_cert.pem()),
            (&files.key, server_key.serialize_pem()),
            (&files.ca, self.material.ca_pem.clone()),
        ] {
            fs::write(path, pem)
                .map_err(|e| HarnessError::new("cannot write a TLS file").with_source(e))?;
        }
        Ok(files)
    }
}
