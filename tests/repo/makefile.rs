//! The Makefile's entry points as a newcomer meets them: `make demo` (and `make demo-counter`)
//! show cargo's progress while a fresh clone compiles for minutes, instead of building under
//! `cargo run --quiet` with nothing on the screen.

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
