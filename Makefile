# The entry points the README names; CI (.ci/run) runs `make test`.
# Each target installs what it needs first (scripts/ensure-deps.sh).

CARGO ?= cargo
export CARGO_TERM_COLOR ?= never

.PHONY: deps demo test lint fmt doc unit bench clean

deps:
	@scripts/ensure-deps.sh

## Command 1: the demo (several processes, one lock).
demo: deps
	$(CARGO) run --quiet -p counter

## Command 2: every check CI runs — format, lints, docs, all tests and doc tests.
test: deps lint doc unit

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --all-features -- -D warnings

doc:
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps --all-features

unit:
	$(CARGO) test --workspace --all-features

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
