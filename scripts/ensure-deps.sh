#!/usr/bin/env bash
# Makes sure the tools the demo, tests and benchmark need are present on a Debian machine:
# redis-server and redis-cli (installed with apt-get when missing), Chromium for the dashboard's
# browser test (installed with apt-get when missing; without it that test is skipped with a
# message), and the Rust toolchain with rustfmt and clippy. Safe to run repeatedly; does nothing
# when everything is there.
set -euo pipefail

if ! command -v python3 >/dev/null 2>&1; then
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

# Chromium: tests/dashboard_browser.rs drives it headless. Not fatal when it cannot be had: the
# test then says it is skipped, and why.
if [ -z "${DLOCK_CHROMIUM:-}" ] && ! command -v chromium >/dev/null 2>&1 \
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

if ! command -v cargo >/dev/null 2>&1; then
  echo "ensure-deps: cargo is missing: install Rust from https://rustup.rs (1.88 or newer)." >&2
  exit 1
fi
for component in rustfmt clippy; do
  if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1; then
    if command -v rustup >/dev/null 2>&1; then
      rustup component add "$component"
    else
      echo "ensure-deps: cargo $component is missing: rustup component add $component" >&2
      exit 1
    fi
  fi
done
