#!/usr/bin/env bash
# The published crates proven from their packages (issue 47), `make package`'s steps:
#
# 1. `cargo package` of the seven published crates: cargo builds each package, unpacked, against
#    the ones just packaged (a local registry under target/package). The verify builds use the
#    workspace's target directory, so the dependencies they share with it are not built again
#    (a crate whose features differ from the workspace's is built once more, then kept).
# 2. scripts/check-packages.py: each package holds the Lua scripts its crate loads, its README
#    and both licenses.
# 3. packaging/user, a crate outside the workspace that asks for `dlock-core = "0.1"` … as a
#    user does, patched to the packages unpacked under target/packaged/crates: built and tested
#    (a program locking on a real redis-server, a #[tokio::test] with dlock-testkit), with the
#    workspace's Cargo.lock as its starting point and the workspace's target directory, so it
#    reuses what is built.
#
# Each step prints its time. Needs what `make test` needs (redis-server, cargo, python3).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
cargo=${CARGO:-cargo}
packages=(dlock-cron dlock-macros dlock-core dlock-testkit dlock-scheduler dlock-cli dlock-tower)
target=${CARGO_TARGET_DIR:-$root/target}

step() {
  local name=$1 started=$SECONDS
  shift
  echo "==> package: $name"
  "$@"
  echo "==> package: $name took $((SECONDS - started)) s"
}

# cargo unpacks the packages of its local registry into $CARGO_HOME/registry/src/-<hash>/, the
# hash made from the registry's path, and never unpacks a version again that it finds there: a
# clone at a path used before (a CI work dir) would verify against the previous run's sources of
# the same version (dlock-cli against an older dlock-scheduler). Those unnamed registries hold
# only this workspace's packages; their copies of ours go.
cargo_home=${CARGO_HOME:-$HOME/.cargo}
for p in "${packages[@]}"; do
  rm -rf "$cargo_home"/registry/src/-*/"$p"-* "$cargo_home"/registry/cache/-*/"$p"-*
done

package_args=()
for p in "${packages[@]}"; do package_args+=(-p "$p"); done
# --allow-dirty: `make test` runs on a work tree with edits too; what is checked is the content.
step "cargo package (verified)" "$cargo" package --allow-dirty "${package_args[@]}"
step "package contents" python3 scripts/check-packages.py "${packages[@]}"

unpack() {
  local out=$target/packaged
  rm -rf "$out/crates" "$out/user"
  mkdir -p "$out/crates"
  for p in "${packages[@]}"; do
    local version
    version=$("$cargo" pkgid --offline -p "$p" | sed 's/.*[#@]//')
    # -m: the files get the time of unpacking, not the fixed time cargo stores in a package
    # (2006); with that one, cargo would take the previous run's build of a changed package
    # for fresh, and test stale code.
    tar -m -xzf "$target/package/$p-$version.crate" -C "$out/crates"
  done
  cp -R packaging/user "$out/user"
  cp Cargo.lock "$out/user/Cargo.lock"
}
step "unpack the packages" unpack

step "a user crate built and tested from the packages" \
  env CARGO_TARGET_DIR="$target" "$cargo" test --manifest-path "$target/packaged/user/Cargo.toml"
