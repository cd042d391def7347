//! The Makefile's entry points as a newcomer meets them: `make demo` (and `make demo-counter`)
//! show cargo's progress while a fresh clone compiles for minutes, instead of building under
//! `cargo run --quiet` with nothing on the screen; and they install only what they need (no
//! browser: scripts/ensure-deps.sh on a PATH of stubs).

/// The recipe lines of `target` in the workspace's Makefile.
fn recipe(makefile: &str, target: &str) -> Vec<String> {
    let head = format!("{target}:");
    makefile
        .lines()
        .skip_while(|line| !line.starts_with(&head))
        .skip(1)
        .take_while(|line| line.starts_with('\t'))
        .map(|line| line.trim().to_owned())
        .collect()
}

#[test]
fn the_demos_show_their_build() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../Makefile");
    let makefile = std::fs::read_to_string(path).unwrap();
    for target in ["demo", "demo-counter"] {
        let lines = recipe(&makefile, target);
        let run = lines
            .iter()
            .position(|l| l.contains(" run "))
            .unwrap_or_else(|| panic!("`{target}` runs nothing: {lines:?}"));
        let build = lines[..run]
            .iter()
            .position(|l| l.contains(" build ") && !l.contains("--quiet"));
        assert!(
            build.is_some() || !lines[run].contains("--quiet"),
            "`make {target}` builds under --quiet, silently for minutes: {lines:?}"
        );
    }
}

/// The arguments `make <target>` passes to scripts/ensure-deps.sh, as `make -n` prints them.
fn ensure_deps_args(target: &str) -> Vec<Vec<String>> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let out = std::process::Command::new("make")
        .args(["-n", "--no-print-directory", "-C", root, target])
        .output()
        .unwrap();
    assert!(out.status.success(), "make -n {target}: {out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let (_, args) = line.split_once("scripts/ensure-deps.sh")?;
            Some(args.split_whitespace().map(str::to_owned).collect())
        })
        .collect()
}

/// Runs scripts/ensure-deps.sh with `args` on a PATH of stubs: root (`id -u` is 0), Redis 7
/// and cargo present, no Chromium, and an `apt-get` that records what it is asked to install.
/// Returns what `apt-get` was asked, and the script's stderr.
fn ensure_deps_on_stubs(args: &[String]) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let log = dir.path().join("apt-get.log");
    let stub = |name: &str, body: &str| {
        let path = bin.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    stub("apt-get", &format!("echo \"$@\" >> {}", log.display()));
    stub("id", "echo 0");
    stub(
        "redis-server",
        "echo 'Redis server v=7.2.4 sha=00000000:0 malloc=libc bits=64'",
    );
    stub("redis-cli", "exit 0");
    stub("cargo", "exit 0");
    stub("rustup", "exit 0");
    // The few programs the script runs besides the stubs; Chromium stays out of reach.
    for tool in ["sed", "tr", "awk", "mkdir", "grep", "cat", "chmod", "rm"] {
        for dir in ["/usr/bin", "/bin"] {
            let path = std::path::Path::new(dir).join(tool);
            if path.exists() {
                std::os::unix::fs::symlink(&path, bin.join(tool)).unwrap();
                break;
            }
        }
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/ensure-deps.sh");
    let out = std::process::Command::new("/bin/bash")
        .arg(script)
        .args(args)
        .env_clear()
        .env("PATH", &bin)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "ensure-deps.sh {args:?} failed: {stderr}"
    );
    (std::fs::read_to_string(&log).unwrap_or_default(), stderr)
}

/// Issue 47: `make demo` installed Chromium (and PostgreSQL), which only `make test`'s browser
/// and PostgreSQL tests use. The demos, the benchmark and `make check` now ask for no browser;
/// `make test` and `make test-scheduler` still do (the control: the stubs would show it).
#[test]
fn the_demo_installs_no_browser() {
    for target in ["demo", "demo-counter", "bench", "check"] {
        let calls = ensure_deps_args(target);
        assert!(!calls.is_empty(), "`make {target}` installs nothing");
        for args in calls {
            let (installed, stderr) = ensure_deps_on_stubs(&args);
            assert!(
                !installed.contains("chromium") && !stderr.contains("chromium"),
                "`make {target}` (ensure-deps.sh {args:?}) reaches for Chromium: \
                 apt-get {installed:?}; stderr {stderr:?}"
            );
        }
    }
    for target in ["test", "test-scheduler"] {
        let calls = ensure_deps_args(target);
        let installed: String = calls
            .iter()
            .map(|args| ensure_deps_on_stubs(args).0)
            .collect();
        assert!(
            installed.contains("chromium"),
            "`make {target}` no longer installs the browser its test needs: {installed:?}"
        );
    }
}
