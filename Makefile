# The entry points the README names; CI (.ci/run) runs `make test`.
# Each target installs what it needs first (scripts/ensure-deps.sh).

CARGO ?= cargo
export CARGO_TERM_COLOR ?= never

.PHONY: deps demo demo-counter test lint modules fmt doc unit bench clean

deps:
	@scripts/ensure-deps.sh

## Command 1: the demo — three replicas run the lottery job; each draw happens on one of them.
demo: deps
	$(CARGO) run --quiet -p lottery

## The mutex demo: several processes take turns at one lock and lose no update.
demo-counter: deps
	$(CARGO) run --quiet -p counter

## Command 2: every check CI runs — format, lints, docs, all tests and doc tests.
test: deps lint modules doc unit

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --all-features -- -D warnings

## Every import inside each crate points down: no module cycle (the checker tests itself first).
modules:
	python3 scripts/check-module-cycles.py --self-test
	python3 scripts/check-module-cycles.py

doc:
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps --all-features

unit:
	$(CARGO) test --workspace --all-features

fmt:
	$(CARGO) fmt --all

## The benchmark of WORKLOADS.md (dlock beside a raw-Redis floor, on its own redis-server).
## `make bench BENCH_ARGS="--quick"` for a smoke run; results also in target/bench/results.json.
BENCH_ARGS ?=
bench: deps
	$(CARGO) run --release --quiet -p dlock-bench -- $(BENCH_ARGS)

clean:
	$(CARGO) clean
