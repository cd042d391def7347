//! A wall clock a test can move, for one `redis-server` process: [`ServerOptions::movable_clock`]
//! and [`RedisServer::jump_clock`](crate::RedisServer::jump_clock).
//!
//! The server runs with `clock_shim.c` preloaded (`LD_PRELOAD`), which adds the offset held in
//! a file of the server's directory to every wall-clock reading; the machine's clock is never
//! touched. The shim is compiled once per machine with the system C compiler (`$CC`, else `cc`:
//! the linker Rust already needs) into the temp dir, named by a hash of its source, and reused.
//!
//! Why not libfaketime: it deadlocks while starting a `redis-server` linked with jemalloc (as
//! Debian's is), a known, unfixed clash (libfaketime issues #130, #327). The shim reads the
//! clocks with raw system calls and allocates nothing, so it has no such clash.

use std::collections::hash_map::DefaultHasher;
use std::ffi::OsString;
use std::fs;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::HarnessError;

/// The shim's source, compiled on first use.
const SOURCE: &str = include_str!("clock_shim.c");
/// The file in a server's directory that holds its clock offset, in microseconds.
pub(crate) const OFFSET_FILE: &str = "clock-offset-us";

/// The compiled shim, built once per process (and reused across processes by its name).
fn shim() -> Result<&'static Path, HarnessError> {
    static SHIM: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    SHIM.get_or_init(|| build().map_err(|e| e.to_string()))
        .as_deref()
        .map_err(|e| HarnessError::new(e.clone()))
}

fn build() -> Result<PathBuf, HarnessError> {
    let mut hasher = DefaultHasher::new();
    SOURCE.hash(&mut hasher);
    let dir = std::env::temp_dir();
    let target = dir.join(format!("dlock-testkit-clock-{:016x}.so", hasher.finish()));
    if target.exists() {
        return Ok(target);
    }
    let scratch = tempfile::TempDir::with_prefix_in("dlock-testkit-clock-", &dir).map_err(|e| {
        HarnessError::new("cannot create a temp dir for the clock shim").with_source(e)
    })?;
    let source = scratch.path().join("clock_shim.c");
    let built = scratch.path().join("clock_shim.so");
    fs::write(&source, SOURCE)
        .map_err(|e| HarnessError::new("cannot write the clock shim's source").with_source(e))?;
    let compiler = std::env::var_os("CC").unwrap_or_else(|| OsString::from("cc"));
    let mut cmd = Command::new(&compiler);
    cmd.args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&built)
        .arg(&source);
    let output = cmd.output().map_err(|e| {
        HarnessError::new(format!(
            "cannot run the C compiler `{}` to build the clock shim (set CC, or install gcc: \
             apt-get install -y gcc)",
            compiler.to_string_lossy()
        ))
        .with_source(e)
    })?;
    if !output.status.success() {
        return Err(HarnessError::new(format!(
            "the C compiler could not build the clock shim ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    // Another process may have installed the same shim meanwhile: a rename replaces it
    // atomically with identical content.
    fs::rename(&built, &target)
        .map_err(|e| HarnessError::new("cannot install the clock shim").with_source(e))?;
    Ok(target)
}

/// The environment a server with a movable clock starts with; creates its offset file (0) if
/// missing.
pub(crate) fn env(dir: &Path) -> Result<Vec<(OsString, OsString)>, HarnessError> {
    let offset = dir.join(OFFSET_FILE);
    if !offset.exists() {
        write_offset(dir, 0)?;
    }
    Ok(vec![
        ("LD_PRELOAD".into(), shim()?.into()),
        ("DLOCK_CLOCK_OFFSET_FILE".into(), offset.into()),
    ])
}

/// The offset a server's clock runs ahead by, in microseconds.
pub(crate) fn read_offset(dir: &Path) -> i64 {
    fs::read_to_string(dir.join(OFFSET_FILE))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// Sets the offset (microseconds ahead of the real clock). Written to a new file and renamed,
/// so the shim never reads half a number.
pub(crate) fn write_offset(dir: &Path, micros: i64) -> Result<(), HarnessError> {
    let part = dir.join(format!("{OFFSET_FILE}.part"));
    fs::write(&part, micros.to_string())
        .and_then(|()| fs::rename(&part, dir.join(OFFSET_FILE)))
        .map_err(|e| HarnessError::new("cannot write the clock offset").with_source(e))
}
