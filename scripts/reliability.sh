#!/usr/bin/env bash
# Proves the rollback promise with numbers: fault injection at every step, SIGKILL
# at every step, kills at named points (recording, drain, between undos, in the
# guard's replay), failures after apply and failing undos, 200 randomized kill trials, 8 concurrent runs x 10 rounds, the
# hostile-input corpus, the trace.dat reader's differential test against trace-cmd at
# a larger size, and fuzzing of both parsers. Prints one line per figure.
# Needs root (real tracefs). FUZZ_SECONDS (default 60) is the time per fuzz target.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "scripts/reliability.sh needs root (it drives the real tracefs)" >&2; exit 1; }
[ -e /sys/kernel/tracing/trace ] || mount -t tracefs nodev /sys/kernel/tracing
command -v trace-cmd >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq trace-cmd >/dev/null; }

log=$(mktemp)
TRACE_RECIPE_TRIALS=${TRIALS:-200} TRACE_RECIPE_ROUNDS=${ROUNDS:-10} \
  cargo test --release --test tests -- --nocapture --test-threads=1 \
  reliability:: hostile:: teardown:: run::a_failure_at_every_step >"$log" 2>&1 || { cat "$log"; exit 1; }

echo "trace-recipe reliability, $(date -u +%Y-%m-%d), kernel $(uname -r), $(nproc) CPUs"
grep -o 'FIGURE .*' "$log" | sed 's/^FIGURE /  /'

# The differential test of the trace.dat reader at 20 records per event (the
# normal run: 2) and a seed of the day: every format of three kernels in
# three layouts against trace-cmd report.
dlog=$(mktemp)
TRACEDAT_DIFF_RECORDS=${DIFF_RECORDS:-20} TRACEDAT_DIFF_SEED=$(date -u +%Y%m%d) \
  cargo test --release -p tracedat --test differential -- --nocapture >"$dlog" 2>&1 || { grep -v '^trace-recipe: note' "$dlog"; exit 1; }
echo "  $(grep -o 'differential: .*' "$dlog") (${DIFF_RECORDS:-20} records per event, seed $(date -u +%Y%m%d))"

# Fuzzing is part of the proof: scripts/fuzz builds the targets or fails
# (never a silent skip), and fails on a crash with the artifact's path.
FUZZ_SECONDS=${FUZZ_SECONDS:-60} scripts/fuzz | sed 's/^scripts\/fuzz: /  fuzz /'
