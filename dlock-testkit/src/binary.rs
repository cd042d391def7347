//! Locating the `redis-server` and `redis-cli` executables.
//!
//! Order: the environment variable ([`REDIS_SERVER_ENV`] / [`REDIS_CLI_ENV`]), else `PATH`, else
//! `/usr/bin`. A variable that is set but wrong is an error, not a silent fallback: a developer who
//! pointed the tests at a particular build must not unknowingly test another one.
//!
//! `locate` takes the variable's value and `PATH` as parameters, so the lookup is tested without
//! mutating the process environment (which is process-global and racy in a multi-threaded test
//! binary).

use std::env;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::HarnessError;

/// Environment variable naming the `redis-server` executable to use.
pub const REDIS_SERVER_ENV: &str = "DLOCK_REDIS_SERVER";

/// Environment variable naming the `redis-cli` executable to use.
pub const REDIS_CLI_ENV: &str = "DLOCK_REDIS_CLI";

/// One executable the harness needs.
struct Tool {
    file_name: &'static str,
    env_var: &'static str,
    fallback: &'static str,
}

const SERVER: Tool = Tool {
    file_name: "redis-server",
    env_var: REDIS_SERVER_ENV,
    fallback: "/usr/bin/redis-server",
};

const CLI: Tool = Tool {
    file_name: "redis-cli",
    env_var: REDIS_CLI_ENV,
    fallback: "/usr/bin/redis-cli",
};

/// Finds the `redis-server` binary: `$DLOCK_REDIS_SERVER`, else `PATH`, else
/// `/usr/bin/redis-server`.
///
/// # Errors
///
/// When no executable is found, or `DLOCK_REDIS_SERVER` is set but names no executable file. The
/// message reads "redis-server not found: install Redis 7 (Debian: apt-get install -y
/// redis-server redis-tools; in the dlock repository: make deps) or set DLOCK_REDIS_SERVER".
///
/// # Example
///
/// ```no_run
/// let path = dlock_testkit::redis_server_binary()?;
/// println!("using {}", path.display());
/// # Ok::<(), dlock_testkit::HarnessError>(())
/// ```
pub fn redis_server_binary() -> Result<PathBuf, HarnessError> {
    locate_from_env(&SERVER)
}

/// Finds the `redis-cli` binary: `$DLOCK_REDIS_CLI`, else `PATH`, else `/usr/bin/redis-cli`.
///
/// # Errors
///
/// When no executable is found, or `DLOCK_REDIS_CLI` is set but names no executable file. The
/// message reads "redis-cli not found: install Redis 7 (Debian: apt-get install -y
/// redis-server redis-tools; in the dlock repository: make deps) or set DLOCK_REDIS_CLI".
///
/// # Example
///
/// ```no_run
/// let path = dlock_testkit::redis_cli_binary()?;
/// println!("using {}", path.display());
/// # Ok::<(), dlock_testkit::HarnessError>(())
/// ```
pub fn redis_cli_binary() -> Result<PathBuf, HarnessError> {
    locate_from_env(&CLI)
}

/// `tool`, looked up with the process's environment.
fn locate_from_env(tool: &Tool) -> Result<PathBuf, HarnessError> {
    locate(
        tool,
        env::var_os(tool.env_var).as_deref(),
        env::var_os("PATH").as_deref(),
    )
}

fn locate(
    tool: &Tool,
    value: Option<&OsStr>,
    path_var: Option<&OsStr>,
) -> Result<PathBuf, HarnessError> {
    if let Some(value) = value.filter(|v| !v.is_empty()) {
        let candidate = Path::new(value);
        // A bare name ("redis-server-7.2") is looked up in PATH, like a shell would.
        let found = if candidate.components().count() == 1 {
            search_path(value, path_var)
        } else {
            Some(candidate.to_path_buf()).filter(|p| is_executable(p))
        };
        return found.ok_or_else(|| {
            HarnessError::new(format!(
                "{}; {}={} is not an executable file",
                not_found_message(tool),
                tool.env_var,
                candidate.display()
            ))
        });
    }
    search_path(OsStr::new(tool.file_name), path_var)
        .or_else(|| Some(PathBuf::from(tool.fallback)).filter(|p| is_executable(p)))
        .ok_or_else(|| HarnessError::new(not_found_message(tool)))
}

fn not_found_message(tool: &Tool) -> String {
    format!(
        "{} not found: install Redis 7 (Debian: apt-get install -y redis-server redis-tools; in \
         the dlock repository: make deps) or set {}",
        tool.file_name, tool.env_var
    )
}

fn search_path(file_name: &OsStr, path_var: Option<&OsStr>) -> Option<PathBuf> {
    env::split_paths(path_var?)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(file_name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOWHERE: Tool = Tool {
        file_name: "dlock-no-such-tool",
        env_var: "DLOCK_NO_SUCH_TOOL",
        fallback: "/nonexistent/dlock-no-such-tool",
    };

    #[test]
    fn missing_everywhere_gives_the_helpful_message() {
        let error = locate(&NOWHERE, None, Some(OsStr::new("/nonexistent:/also-not")))
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            error.as_deref(),
            Some(
                "dlock-no-such-tool not found: install Redis 7 (Debian: apt-get install -y \
                 redis-server redis-tools; in the dlock repository: make deps) or set \
                 DLOCK_NO_SUCH_TOOL"
            )
        );
    }

    #[test]
    fn wrong_override_is_an_error_not_a_fallback() {
        let error = locate(&SERVER, Some(OsStr::new("/nonexistent")), None)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.starts_with("redis-server not found: install Redis 7 (Debian: "));
        assert!(error.ends_with("DLOCK_REDIS_SERVER=/nonexistent is not an executable file"));

        let error = locate(&CLI, Some(OsStr::new("/nonexistent")), None)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.starts_with(
            "redis-cli not found: install Redis 7 (Debian: apt-get install -y redis-server \
             redis-tools; in the dlock repository: make deps) or set DLOCK_REDIS_CLI"
        ));
        assert!(error.ends_with("DLOCK_REDIS_CLI=/nonexistent is not an executable file"));
    }

    #[test]
    fn empty_override_means_unset_and_bare_names_use_path() {
        let path = Some(OsStr::new("/usr/bin"));
        let expected = Some(PathBuf::from("/usr/bin/redis-server"));
        assert_eq!(locate(&SERVER, Some(OsStr::new("")), path).ok(), expected);
        assert_eq!(
            locate(&SERVER, Some(OsStr::new("redis-server")), path).ok(),
            expected
        );
    }

    #[test]
    fn non_executable_files_are_skipped() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::TempDir::new()?;
        let file = dir.path().join("dlock-no-such-tool");
        fs::write(&file, "not a program")?;
        assert!(locate(&NOWHERE, None, Some(dir.path().as_os_str())).is_err());
        assert!(locate(&NOWHERE, Some(file.as_os_str()), None).is_err());
        Ok(())
    }
}
