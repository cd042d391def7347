#!/usr/bin/env bash
# Runs one test binary of the workspace exactly as `make unit` built it:
#
#   scripts/run-unit-test.sh <test target name> [test binary arguments...]
#
# `cargo test --workspace --all-features --test <name>` resolves the dependency graph's features
# for that one target, which differ from `make unit`'s (every target of every member: some
# dev-dependencies add features), so it built the whole graph a second time (about 90 s of
# make test on a fresh clone). This asks cargo for `make unit`'s own build (`--no-run`: nothing
# is compiled when unit ran) and runs the binary from its package's folder, as cargo would.
set -euo pipefail
name=${1:?usage: scripts/run-unit-test.sh <test target> [arguments...]}
shift
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
found=$("${CARGO:-cargo}" test --workspace --all-features --no-run --message-format=json \
  | python3 -c '
import json, os, sys
name = sys.argv[1]
hits = set()
for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    target = msg.get("target") or {}
    if msg.get("reason") == "compiler-artifact" and msg.get("executable") \
            and target.get("name") == name and "test" in target.get("kind", []):
        hits.add((msg["executable"], os.path.dirname(msg["manifest_path"])))
if len(hits) != 1:
    sys.exit(f"run-unit-test: {len(hits)} test binaries named {name!r}: {sorted(hits)}")
print("\t".join(hits.pop()))
' "$name")
binary=${found%%$'\t'*}
package_dir=${found#*$'\t'}
cd "$package_dir"
exec "$binary" "$@"
