#!/usr/bin/env bash
# Run-overhead bench: wall time of a whole `trace-recipe run` (validate, apply,
# record, roll back, write trace.dat and reports) around `true`, median of N
# runs (default 5), for a 3-event recipe (bench/run-small.toml, target 0.3 s)
# and a 755-step plan (bench/run-755.toml, target 0.5 s). Prints each median
# and its ratio to the target (<= 1.00 meets it). A benchmark, not a test: the
# machine is shared, so figures move with other load.
#
# Usage: sudo scripts/bench-run.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-5}
cargo build --release -q
BIN=$PWD/target/release/trace-recipe
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
# Runs write tracefs: hold the lock the test suites hold, so no test sees this
# bench's instances in its before/after snapshots.
exec 9>/tmp/trace-recipe-tracefs.lock
flock 9

steps() { "$BIN" check --plan "$1" | grep -cE '^ *[0-9]+\. '; }
# median of N wall times (s) of `run RECIPE -- true`
median_wall() {
  local recipe=$1 i t0 t1
  for ((i = 0; i < N; i++)); do
    t0=$(date +%s.%N)
    "$BIN" run "$recipe" -o "$OUT/$i" -- true >/dev/null 2>&1 || { echo "bench-run: run of $recipe failed" >&2; exit 1; }
    t1=$(date +%s.%N)
    rm -rf "$OUT/$i"
    awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}'
  done | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'
}

echo "machine: $(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "date:    $(date -u +%Y-%m-%dT%H:%MZ), $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "runs:    median of $N, each around \`true\`, release build"
echo
printf "%-24s %7s %10s %9s %9s\n" recipe steps "wall s" "target s" "x target"
for spec in bench/run-small.toml:0.3 bench/run-755.toml:0.5; do
  recipe=${spec%%:*} target=${spec##*:}
  # +1: the workload's set_event_pid step, which `check --plan` shows only
  # when the recipe names its workload.
  n=$(($(steps "$recipe") + 1))
  m=$(median_wall "$recipe")
  printf "%-24s %7d %10.3f %9.1f %9.2f\n" "$(basename "$recipe" .toml)" "$n" "$m" "$target" "$(awk -v m="$m" -v t="$target" 'BEGIN {print m / t}')"
done
