//! The reply paths of each shipped script, found in its text: every `return` (a value or an
//! error reply) that the script can reach, in its own file or in a shared file prepended to it
//! (`lock_value.lua`, `common.lua`, `shared.lua`, `admission.lua`). A function of a shared file
//! counts for a script only when the script calls it (directly or through another function):
//! fence.lua carries `hand_off` but never calls it.
//!
//! A path is named `<file> <function>: <the return's first line>` (the function is `main` for
//! the script's body), with ` #n` when one function returns the same text more than once; the
//! name survives edits elsewhere in the file. [`Site::line`] is its line in the assembled text,
//! where the conformance test sets a debugger breakpoint (`redis_side/debug.rs`).
//!
//! The parser relies on the scripts' layout, and says so when a script leaves it: top-level
//! functions open with `local function <name>(` at column 0 and close with the first `end` at
//! column 0 (outside a function, such an `end` closes a block of the main chunk), and a
//! `return` starts its line.

use std::collections::{BTreeMap, BTreeSet};

use dlock_core::__private::conformance::Source;

/// The shared files a script's text may be prepended with, in the order `scripts/mod.rs`
/// assembles them.
const SHARED_FILES: [(&str, &str); 4] = [
    (
        "lock_value.lua",
        include_str!("../../../dlock-core/src/scripts/lock_value.lua"),
    ),
    (
        "common.lua",
        include_str!("../../../dlock-core/src/scripts/common.lua"),
    ),
    (
        "shared.lua",
        include_str!("../../../dlock-core/src/scripts/shared.lua"),
    ),
    (
        "admission.lua",
        include_str!("../../../dlock-core/src/scripts/admission.lua"),
    ),
];

/// The scripts whose paths the conformance test counts, with their own file (fence_raise.lua
/// runs on the quorum's three servers, `quorum.rs`).
pub(crate) const SCRIPTS: [(Source, &str, &str); 17] = [
    (
        Source::Acquire,
        "acquire.lua",
        include_str!("../../../dlock-core/src/scripts/acquire.lua"),
    ),
    (
        Source::Release,
        "release.lua",
        include_str!("../../../dlock-core/src/scripts/release.lua"),
    ),
    (
        Source::Extend,
        "extend.lua",
        include_str!("../../../dlock-core/src/scripts/extend.lua"),
    ),
    (
        Source::Fence,
        "fence.lua",
        include_str!("../../../dlock-core/src/scripts/fence.lua"),
    ),
    (
        Source::FenceRaise,
        "fence_raise.lua",
        include_str!("../../../dlock-core/src/scripts/fence_raise.lua"),
    ),
    (
        Source::SharedAcquire,
        "shared_acquire.lua",
        include_str!("../../../dlock-core/src/scripts/shared_acquire.lua"),
    ),
    (
        Source::SharedRelease,
        "shared_release.lua",
        include_str!("../../../dlock-core/src/scripts/shared_release.lua"),
    ),
    (
        Source::SharedLimit,
        "shared_limit.lua",
        include_str!("../../../dlock-core/src/scripts/shared_limit.lua"),
    ),
    (
        Source::RwChange,
        "rw_change.lua",
        include_str!("../../../dlock-core/src/scripts/rw_change.lua"),
    ),
    (
        Source::Election,
        "election.lua",
        include_str!("../../../dlock-core/src/scripts/election.lua"),
    ),
    (
        Source::ElectionRead,
        "election_read.lua",
        include_str!("../../../dlock-core/src/scripts/election_read.lua"),
    ),
    (
        Source::Guarded,
        "guarded.lua",
        include_str!("../../../dlock-core/src/scripts/guarded.lua"),
    ),
    (
        Source::Fenced,
        "fenced.lua",
        include_str!("../../../dlock-core/src/scripts/fenced.lua"),
    ),
    (
        Source::Ask,
        "ask.lua",
        include_str!("../../../dlock-core/src/scripts/ask.lua"),
    ),
    (
        Source::Rate,
        "rate.lua",
        include_str!("../../../dlock-core/src/scripts/rate.lua"),
    ),
    (
        Source::Inspect,
        "inspect.lua",
        include_str!("../../../dlock-core/src/scripts/inspect.lua"),
    ),
    (
        Source::SharedInspect,
        "shared_inspect.lua",
        include_str!("../../../dlock-core/src/scripts/shared_inspect.lua"),
    ),
];

/// One reply path of a script.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Site {
    /// The file it is written in.
    pub file: &'static str,
    /// Its name: `<file> <function>: <first line>[ #n]`.
    pub id: String,
    /// Its line (1-based) in the script's assembled text.
    pub line: usize,
}

/// The script's own file name and text.
pub(crate) fn own(source: Source) -> Option<(&'static str, &'static str)> {
    SCRIPTS
        .iter()
        .find(|(s, _, _)| *s == source)
        .map(|(_, name, text)| (*name, *text))
}

/// A line without its comment (`--` outside a string literal).
fn code(line: &str) -> &str {
    let mut quote = None;
    let bytes = line.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match quote {
            Some(q) if b == q && (i == 0 || bytes[i - 1] != b'\\') => quote = None,
            Some(_) => {}
            None if b == b'\'' || b == b'"' => quote = Some(b),
            None if b == b'-' && bytes.get(i + 1) == Some(&b'-') => return &line[..i],
            None => {}
        }
    }
    line
}

/// Which file each line of `text` (the assembled script) comes from; checks that the lines
/// not of a shared file are exactly the script's own file.
fn files_of(
    (own_name, own_text): (&'static str, &str),
    shared: &[(&'static str, &str)],
    text: &str,
) -> Result<Vec<&'static str>, String> {
    let mut owner: Vec<Option<&'static str>> = vec![None; text.len()];
    for &(name, part) in shared {
        if let Some(at) = text.find(part) {
            owner[at..at + part.len()].fill(Some(name));
        }
    }
    let rest: String = text
        .char_indices()
        .filter(|(i, _)| owner[*i].is_none())
        .map(|(_, c)| c)
        .collect();
    if rest != own_text.replacen("--@common\n", "", 1) {
        return Err(format!(
            "{own_name}: the assembled text holds more than the script and the shared files \
             known here (tests/conformance/coverage/sites.rs SHARED_FILES, scheduler/coverage.rs)"
        ));
    }
    let mut out = Vec::new();
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        out.push(owner[at].unwrap_or(own_name));
        at += line.len();
    }
    Ok(out)
}

/// A top-level function or the main chunk: its name and lines (0-based).
struct Block {
    name: String,
    lines: Vec<usize>,
}

/// The top-level functions of `lines` and the main chunk (named `main`).
fn blocks(lines: &[&str]) -> Result<Vec<Block>, String> {
    let mut main = Block {
        name: "main".into(),
        lines: Vec::new(),
    };
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in lines.iter().enumerate() {
        let line = line.trim_end();
        if let Some(rest) = line.strip_prefix("local function ") {
            if open.is_some() {
                return Err(format!("line {}: a function opens inside another", i + 1));
            }
            let name = rest.split('(').next().unwrap_or("").trim().to_owned();
            open = Some(Block {
                name,
                lines: vec![i],
            });
        } else if line == "end"
            && let Some(mut block) = open.take()
        {
            block.lines.push(i);
            out.push(block);
        } else if let Some(block) = &mut open {
            block.lines.push(i);
        } else {
            main.lines.push(i);
        }
    }
    if let Some(block) = open {
        return Err(format!("function {} never closes at column 0", block.name));
    }
    out.push(main);
    Ok(out)
}

/// Whether `code` calls the function `name` (`name(` not preceded by an identifier character
/// or a dot).
fn calls(code: &str, name: &str) -> bool {
    let pattern = format!("{name}(");
    code.match_indices(&pattern).any(|(at, _)| {
        code[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '.' || c == ':'))
    })
}

/// The blocks the main chunk can reach: the closure of the calls from it.
fn reachable<'b>(blocks: &'b [Block], lines: &[&str]) -> BTreeSet<&'b str> {
    let body = |b: &Block| -> String {
        b.lines
            .iter()
            .map(|&i| code(lines[i]))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let names: Vec<&str> = blocks.iter().map(|b| b.name.as_str()).collect();
    let mut reached: BTreeSet<&str> = BTreeSet::from(["main"]);
    let mut todo = vec!["main"];
    while let Some(name) = todo.pop() {
        for block in blocks.iter().filter(|b| b.name == name) {
            let code = body(block);
            for &callee in names.iter().filter(|n| **n != "main") {
                if calls(&code, callee) && reached.insert(callee) {
                    todo.push(callee);
                }
            }
        }
    }
    reached
}

/// The reply paths `source` can reach, in the order of its text.
pub(crate) fn sites(source: Source) -> Result<Vec<Site>, String> {
    let own = own(source).ok_or("not a counted script")?;
    sites_in(&source.text(), own, &SHARED_FILES)
}

/// The reply paths of the assembled `text` of a script whose own file is `own` (name, text),
/// the rest of it being `shared` files (the scheduler's scripts use it with `common.lua`).
pub(crate) fn sites_in(
    text: &str,
    own: (&'static str, &str),
    shared: &[(&'static str, &str)],
) -> Result<Vec<Site>, String> {
    let files = files_of(own, shared, text)?;
    let lines: Vec<&str> = text.lines().collect();
    let blocks = blocks(&lines)?;
    let reached = reachable(&blocks, &lines);
    let mut out = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for block in blocks.iter().filter(|b| reached.contains(b.name.as_str())) {
        for &i in &block.lines {
            let line = code(lines[i]).trim();
            if line != "return" && !line.starts_with("return ") {
                if line.split_whitespace().any(|w| w == "return") {
                    return Err(format!(
                        "{}: a `return` inside line {} ({line}): put each return on a line of \
                         its own, so that its path can be counted",
                        files[i],
                        i + 1
                    ));
                }
                continue;
            }
            let base = format!("{} {}: {line}", files[i], block.name);
            let n = seen.entry(base.clone()).or_default();
            *n += 1;
            out.push((base, *n, files[i], i + 1));
        }
    }
    let mut sites: Vec<Site> = out
        .iter()
        .map(|(base, n, file, line)| {
            let repeated = seen.get(base).copied().unwrap_or(0) > 1;
            Site {
                file,
                id: if repeated {
                    format!("{base} #{n}")
                } else {
                    base.clone()
                },
                line: *line,
            }
        })
        .collect();
    sites.sort_by_key(|s| s.line);
    Ok(sites)
}
