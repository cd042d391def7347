//! ARCHITECTURE's "Every Lua script of the workspace" has one row per `.lua` file the
//! repository tracks, and names no file that is gone (issue #46: the table is the answer to
//! "which scripts are held to the model", so a new script must take a row saying where, or why
//! not).

use std::path::Path;
use std::process::Command;

const ARCHITECTURE: &str = include_str!("../../ARCHITECTURE.md");
const HEADING: &str = "### Every Lua script of the workspace";

/// The tracked `.lua` files, relative to the repository root.
fn tracked_scripts(root: &Path) -> Vec<String> {
    let out = Command::new("git")
        .args(["ls-files", "--", "*.lua"])
        .current_dir(root)
        .output()
        .expect("git ls-files runs");
    assert!(out.status.success(), "git ls-files: {out:?}");
    String::from_utf8(out.stdout)
        .expect("paths are UTF-8")
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The first cell of every row of the table, without its backticks.
fn table_rows() -> Vec<String> {
    let start = ARCHITECTURE
        .find(HEADING)
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no {HEADING:?} section"));
    ARCHITECTURE[start..]
        .lines()
        .skip(1)
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2) // the header and its rule
        .map(|l| {
            l.split('|')
                .nth(1)
                .unwrap_or("")
                .trim()
                .trim_matches('`')
                .to_owned()
        })
        .collect()
}

#[test]
fn every_lua_script_has_a_row_and_every_row_a_script() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let scripts = tracked_scripts(&root);
    let rows = table_rows();
    assert!(scripts.len() > 30, "git found the scripts: {scripts:?}");
    let missing: Vec<_> = scripts.iter().filter(|s| !rows.contains(s)).collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's {HEADING:?} lacks a row for {missing:?}: say where each is modelled \
         and conformance-tested, or why not"
    );
    let gone: Vec<_> = rows.iter().filter(|r| !scripts.contains(r)).collect();
    assert!(gone.is_empty(), "rows name no tracked script: {gone:?}");
}
