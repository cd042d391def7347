//! Which server the tests run on: Redis or Valkey, and its version.
//!
//! The binary is the one [`redis_server_binary`] finds (`$DLOCK_REDIS_SERVER`, e.g.
//! `.deps/valkey-9.1/bin/valkey-server` after `scripts/ensure-deps.sh`); its flavour is read
//! from its own `--version` line ("Redis server v=7.0.15 …", "Valkey server v=9.1.2 …"), never
//! from a second variable that could disagree with the binary. It exists so that a test can say
//! by name why it does not run on a server ([`ServerFlavour::tls_skip_reason`]), not to pick
//! features: dlock itself must not sniff versions (issue #48).
//!
//! The answer is read once per process: every server a test binary starts uses the same binary.

use std::fmt;
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use crate::{HarnessError, redis_server_binary};

/// The fork a server binary belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerKind {
    /// Redis (`redis-server`).
    Redis,
    /// Valkey (`valkey-server`).
    Valkey,
}

/// A server binary's fork and version, read from its `--version`.
///
/// # Example
///
/// ```no_run
/// let flavour = dlock_testkit::server_flavour()?;
/// println!("testing on {flavour}"); // "Valkey 9.1.2"
/// if let Some(why) = flavour.tls_skip_reason() {
///     println!("SKIPPED: {why}");
/// }
/// # Ok::<(), dlock_testkit::HarnessError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerFlavour {
    kind: ServerKind,
    version: (u32, u32, u32),
}

impl ServerFlavour {
    /// Redis or Valkey.
    pub fn kind(&self) -> ServerKind {
        self.kind
    }

    /// The server's own version (Valkey's, not the `redis_version` it reports for
    /// compatibility): `(major, minor, patch)`.
    pub fn version(&self) -> (u32, u32, u32) {
        self.version
    }

    /// Whether this is Valkey.
    pub fn is_valkey(&self) -> bool {
        self.kind == ServerKind::Valkey
    }

    /// Why TLS tests do not run on this server, or `None` when they do.
    ///
    /// By name: the Valkey builds the project tests on (the wheels `scripts/ensure-deps.sh`
    /// pins) are built without TLS and refuse `--tls-port` ("Failed finding TLS support").
    /// A Valkey built with TLS would be skipped too; say so in the test's output.
    pub fn tls_skip_reason(&self) -> Option<String> {
        self.is_valkey().then(|| {
            format!("TLS tests do not run on {self}: the Valkey builds tested here have no TLS")
        })
    }

    /// Reads a `--version` line. `None` when it names neither Redis nor Valkey or has no
    /// `v=<major>.<minor>.<patch>`.
    fn parse(line: &str) -> Option<Self> {
        let kind = if line.starts_with("Redis server ") {
            ServerKind::Redis
        } else if line.starts_with("Valkey server ") {
            ServerKind::Valkey
        } else {
            return None;
        };
        let version = line
            .split_whitespace()
            .find_map(|word| word.strip_prefix("v="))?;
        let mut parts = version.split('.').map(|part| part.parse::<u32>().ok());
        let (major, minor, patch) = (parts.next()??, parts.next()??, parts.next()??);
        Some(Self {
            kind,
            version: (major, minor, patch),
        })
    }
}

impl fmt::Display for ServerFlavour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.kind {
            ServerKind::Redis => "Redis",
            ServerKind::Valkey => "Valkey",
        };
        let (major, minor, patch) = self.version;
        write!(f, "{name} {major}.{minor}.{patch}")
    }
}

/// The flavour of the server binary the harness starts ([`redis_server_binary`]), read from
/// its `--version` once per process.
///
/// # Errors
///
/// When no server binary is found, it cannot be run, or its `--version` names neither Redis
/// nor Valkey (the message quotes the line).
pub fn server_flavour() -> Result<ServerFlavour, HarnessError> {
    static FLAVOUR: OnceLock<Result<ServerFlavour, String>> = OnceLock::new();
    FLAVOUR
        .get_or_init(|| {
            redis_server_binary()
                .and_then(|binary| flavour_of(&binary))
                .map_err(|e| e.to_string())
        })
        .clone()
        .map_err(HarnessError::new)
}

/// Runs `<binary> --version` and reads it.
fn flavour_of(binary: &Path) -> Result<ServerFlavour, HarnessError> {
    let output = Command::new(binary)
        .arg("--version")
        .output()
        .map_err(|e| {
            HarnessError::new(format!("could not run {} --version", binary.display()))
                .with_source(e)
        })?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().next().unwrap_or_default().trim();
    ServerFlavour::parse(line).ok_or_else(|| {
        HarnessError::new(format!(
            "{} --version names neither Redis nor Valkey with a version: {line:?}",
            binary.display()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_version_lines_of_redis_and_valkey() {
        let redis = ServerFlavour::parse(
            "Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=ae4d7c9",
        );
        assert_eq!(
            redis,
            Some(ServerFlavour {
                kind: ServerKind::Redis,
                version: (7, 0, 15)
            })
        );
        let valkey = ServerFlavour::parse(
            "Valkey server v=9.1.2 sha=13710afe:0 malloc=libc bits=64 build=3b081598bf4f676e",
        );
        assert_eq!(
            valkey.map(|f| f.to_string()).as_deref(),
            Some("Valkey 9.1.2")
        );
        assert_eq!(valkey.map(|f| f.is_valkey()), Some(true));
    }

    #[test]
    fn tls_is_skipped_by_name_on_valkey_only() {
        let redis = ServerFlavour::parse("Redis server v=7.0.15 sha=0");
        let valkey = ServerFlavour::parse("Valkey server v=8.1.8 sha=0");
        assert_eq!(redis.and_then(|f| f.tls_skip_reason()), None);
        assert_eq!(
            valkey.and_then(|f| f.tls_skip_reason()).as_deref(),
            Some("TLS tests do not run on Valkey 8.1.8: the Valkey builds tested here have no TLS")
        );
    }

    #[test]
    fn other_servers_and_broken_versions_are_not_guessed() {
        for line in [
            "",
            "KeyDB server v=6.3.4 sha=0",
            "Redis server sha=0",
            "Redis server v=7.x.1 sha=0",
            "Valkey server v=9.1 sha=0",
        ] {
            assert_eq!(ServerFlavour::parse(line), None, "{line:?}");
        }
    }

    #[test]
    fn the_harness_binary_has_a_flavour() -> Result<(), HarnessError> {
        // Whatever $DLOCK_REDIS_SERVER names (Redis 7 by default, or a Valkey from .deps/).
        let flavour = server_flavour()?;
        assert!(flavour.version().0 >= 7, "{flavour}");
        Ok(())
    }

    #[test]
    fn a_binary_that_is_not_a_server_says_what_it_printed() {
        let error = flavour_of(Path::new("/bin/true"))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            error.starts_with("/bin/true --version names neither Redis nor Valkey"),
            "{error}"
        );
    }
}
