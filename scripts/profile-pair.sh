#!/usr/bin/env bash
# Load-independent profile of the W1 acquire/release pair (its method and first results:
# docs/benchmarks/2026-11-24-w1-profile.md): per pair = (full run − `--quick` run) ÷ 18,900
# pairs, which cancels start-up and warm-up. Wall-clock rates are not used: on this shared
# 2-vCPU VM they are noise.
#
#   scripts/profile-pair.sh [SUBJECT ...]        (default: floor rslock dlock)
#
# Environment: RUNTIME=multi_thread|current_thread (default multi_thread), FENCE=no|read|warm
# (default no), BIN (default target/release/dlock-bench, built if missing), OUT (default
# target/profile). Needs valgrind (callgrind) and redis-server; perf (`linux-perf`) for the
# syscall and wake-up counts, which are skipped without it.
#
# Per subject it prints, per pair:
#   client instr      callgrind, the whole client process (every thread)
#   pair+driver instr callgrind counting only inside the pair future and the connection's driver
#                     task: the part a multi-thread runtime's scheduling (parking, spinning on a
#                     contended lock, which depend on timing) does not move
#   redis instr       callgrind on a second redis-server, zeroed and dumped around each run
#   vol/invol cs      context switches of the pinned client, all threads (wait4 rusage)
#   futex, wakeups,
#   sock reads/writes perf stat of the pinned client (futex, sched_wakeup, recvfrom, writev)
#   allocs            allocator calls in the measured window (the bench's counting allocator)
set -euo pipefail

cd "$(dirname "$0")/.."
RUNTIME=${RUNTIME:-multi_thread}
FENCE=${FENCE:-no}
BIN=${BIN:-target/release/dlock-bench}
OUT=${OUT:-target/profile}
PAIRS=18900 # (1,000 + 20,000) − (100 + 2,000): W1's full run less its --quick run
CPU=1       # WORKLOADS.md's pinned CPU
SUBJECTS=("$@")
[ ${#SUBJECTS[@]} -gt 0 ] || SUBJECTS=(floor rslock dlock)

[ -x "$BIN" ] || cargo build --release -p dlock-bench
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# A native server pinned like W1 1-CPU's, and one under callgrind for its instruction counts.
PORT=$(free_port)
taskset -c $CPU redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no \
  --daemonize yes --pidfile "$OUT/redis.pid" --logfile "$OUT/redis.log"
CG_PORT=$(free_port)
# Names uncompressed, so that each dump (redis-cg.out.N) names its functions itself:
# scripts/callgrind-diff.py compares two of them per function. Debian's redis-server has no
# symbols; for that, put a redis-server built from the same version's source first on PATH.
valgrind --tool=callgrind --compress-strings=no --callgrind-out-file="$OUT/redis-cg.out" \
  redis-server --port "$CG_PORT" --bind 127.0.0.1 --save '' --appendonly no \
  >"$OUT/redis-cg.log" 2>&1 &
CG_PID=$!
cleanup() {
  kill "$(cat "$OUT/redis.pid")" 2>/dev/null || true
  kill "$CG_PID" 2>/dev/null || true
}
trap cleanup EXIT
for _ in $(seq 100); do
  redis-cli -p "$PORT" ping >/dev/null 2>&1 && redis-cli -p "$CG_PORT" ping >/dev/null 2>&1 && break
  sleep 0.2
done

client() { # SUBJECT PORT full|quick: the profiled command
  local quick=()
  [ "$3" = quick ] && quick=(--quick)
  echo "$BIN" w1-one --url "redis://127.0.0.1:$2/" --subject "$1" --runtime "$RUNTIME" \
    --fence "$FENCE" "${quick[@]}"
}

collected() { grep -o 'Collected : [0-9]*' "$1" | grep -o '[0-9]*$'; }

per_pair() { python3 -c "print(f'{($1 - $2) / $PAIRS:.2f}')"; }

HAVE_PERF=0
perf stat -e syscalls:sys_enter_futex true >/dev/null 2>&1 && HAVE_PERF=1
EVENTS=syscalls:sys_enter_futex,sched:sched_wakeup,syscalls:sys_enter_recvfrom,syscalls:sys_enter_writev

printf '%-14s %13s %17s %12s %8s %8s %7s %8s %6s %7s %7s\n' subject "client instr" "pair+driver instr" \
  "redis instr" "vol cs" "invol cs" futex wakeups reads writes allocs
for s in "${SUBJECTS[@]}"; do
  declare -A c=() t=() r=() vol=() inv=() perf=()
  for m in full quick; do
    # shellcheck disable=SC2046
    taskset -c $CPU valgrind --tool=callgrind --callgrind-out-file="$OUT/$s.$m.cg" \
      $(client "$s" "$PORT" $m) >"$OUT/$s.$m.result" 2>"$OUT/$s.$m.cg.log"
    c[$m]=$(collected "$OUT/$s.$m.cg.log")
    # shellcheck disable=SC2046
    taskset -c $CPU valgrind --tool=callgrind --callgrind-out-file="$OUT/$s.$m.toggled.cg" \
      '--toggle-collect=dlock_bench::subject::Subject::pair::*' \
      '--toggle-collect=<futures_util::stream::stream::forward::Forward<*>::poll' \
      $(client "$s" "$PORT" $m) >/dev/null 2>"$OUT/$s.$m.toggled.log"
    t[$m]=$(collected "$OUT/$s.$m.toggled.log")
    callgrind_control -z "$CG_PID" >/dev/null 2>&1
    # shellcheck disable=SC2046
    $(client "$s" "$CG_PORT" $m) >/dev/null
    callgrind_control -d "$s.$m" "$CG_PID" >/dev/null 2>&1
    sleep 1
    dump=$(ls -t "$OUT"/redis-cg.out.* | head -1)
    r[$m]=$(awk '/^totals:/ {print $2; exit}' "$dump")
    # shellcheck disable=SC2046
    read -r vol[$m] inv[$m] < <(python3 - $(client "$s" "$PORT" $m) <<'EOF'
import os, sys
pid = os.fork()
if pid == 0:
    fd = os.open(os.devnull, os.O_WRONLY); os.dup2(fd, 1)
    os.execvp("taskset", ["taskset", "-c", "1"] + sys.argv[1:])
_, status, ru = os.wait4(pid, 0)
print(ru.ru_nvcsw, ru.ru_nivcsw)
EOF
)
    if [ $HAVE_PERF = 1 ]; then
      # shellcheck disable=SC2046
      taskset -c $CPU perf stat -x, -e $EVENTS -o "$OUT/$s.$m.perf" $(client "$s" "$PORT" $m) >/dev/null
      perf[$m]=$(awk -F, '/^[0-9]/ {printf "%s ", $1}' "$OUT/$s.$m.perf")
    fi
  done
  allocs=$(grep -o '"client_allocs":[0-9.]*' "$OUT/$s.full.result" | cut -d: -f2)
  read -r -a pf <<<"${perf[full]:-0 0 0 0}"
  read -r -a pq <<<"${perf[quick]:-0 0 0 0}"
  printf '%-14s %13s %17s %12s %8s %8s %7s %8s %6s %7s %7.2f\n' "$s" \
    "$(per_pair "${c[full]}" "${c[quick]}")" "$(per_pair "${t[full]}" "${t[quick]}")" \
    "$(per_pair "${r[full]}" "${r[quick]}")" \
    "$(per_pair "${vol[full]}" "${vol[quick]}")" "$(per_pair "${inv[full]}" "${inv[quick]}")" \
    "$(per_pair "${pf[0]}" "${pq[0]}")" "$(per_pair "${pf[1]}" "${pq[1]}")" \
    "$(per_pair "${pf[2]}" "${pq[2]}")" "$(per_pair "${pf[3]}" "${pq[3]}")" "$allocs"
  unset c t r vol inv perf
done
echo "callgrind files, results and perf counts: $OUT (callgrind_annotate --inclusive=yes FILE)"
