#!/usr/bin/env bash
# Reader bench: trace-cmd report vs `trace-recipe report` (text listing and
# summary) on a large trace.dat of real events, side by side: wall and CPU
# time, events/s, ratios, peak RSS. Peak RSS is also shown on a file about a
# fifth of the size, to show it does not grow with the file.
#
# The traces are recorded here (root, tracefs) with bench/heavy.toml: sched and
# read/write syscall events of one `dd bs=64` per CPU into 64 MiB per-CPU
# buffers, stopped at 600 MiB (big) and 120 MiB (small) of raw data. They are
# kept out of git under $BENCH_DIR (default /var/tmp/trace-recipe-bench) and
# reused by later runs; delete the folder to record afresh.
#
# Usage: sudo scripts/bench-report.sh        (needs trace-cmd and GNU time)
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_DIR=${BENCH_DIR:-/var/tmp/trace-recipe-bench}
for tool in trace-cmd /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "bench-report: needs $tool (apt-get install trace-cmd time)" >&2; exit 1; }
done
cargo build --release -q
BIN=$PWD/target/release/trace-recipe
# Each dd ends by itself within 60 s: stopping the run ends the workload's
# shell, not its children.
LOAD='n=$(nproc); i=0; while [ $i -lt $n ]; do timeout 60 dd if=/dev/zero of=/dev/null bs=64 count=50000000 2>/dev/null & i=$((i+1)); done; wait'

record() { # NAME MAX_MB
  local dir=$BENCH_DIR/$1
  if [ ! -s "$dir/trace.dat" ]; then
    rm -rf "$dir"; mkdir -p "$BENCH_DIR"
    echo "recording $dir/trace.dat ($2 MiB of raw data)..." >&2
    "$BIN" run bench/heavy.toml --set "max_mb=$2" -o "$dir" -- sh -c "$LOAD" >/dev/null
  fi
  echo "$dir/trace.dat"
}
# Recording touches tracefs: hold the lock the test suites hold, so no test
# sees this bench's instance in its before/after snapshots.
exec 9>/tmp/trace-recipe-tracefs.lock
flock 9
BIG=$(record big 600)
SMALL=$(record small 120)
flock -u 9

# measure LABEL CMD... → "wall user sys maxrss_kb"
measure() {
  local out; out=$(mktemp)
  /usr/bin/time -f "%e %U %S %M" -o "$out" "$@" >/dev/null
  cat "$out"; rm -f "$out"
}
total_events() { "$BIN" report "$1" --format json --analysis counts | awk -F'[:,]' '/"total_events"/ {print $2+0}'; }
events=$(total_events "$BIG")
size=$(stat -c %s "$BIG")
echo
echo "machine: $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "date:    $(date -u +%Y-%m-%dT%H:%MZ)"
echo "file:    $BIG: $((size / 1048576)) MiB, $events events"
echo
printf "%-32s %8s %8s %12s %9s %9s %9s\n" reader "wall s" "cpu s" "events/s" "x wall" "x cpu" "RSS MiB"
tc=""
for which in trace-cmd text summary; do
  case $which in
    trace-cmd) r=$(measure trace-cmd report -i "$BIG") ;;
    text) r=$(measure "$BIN" report "$BIG" --format text) ;;
    summary) r=$(measure "$BIN" report "$BIG" --format summary) ;;
  esac
  read -r wall user sys rss <<<"$r"
  [ -z "$tc" ] && { tcw=$wall; tcc=$(awk "BEGIN {print $user + $sys}"); tc=1; }
  awk -v n="$which" -v w="$wall" -v u="$user" -v s="$sys" -v r="$rss" -v e="$events" -v tw="$tcw" -v tc="$tcc" \
    'BEGIN { c = u + s; printf "%-32s %8.2f %8.2f %12.0f %9.1f %9.1f %9.1f\n", n, w, c, e / w, tw / w, tc / c, r / 1024 }' 
done
echo
small_events=$(total_events "$SMALL")
echo "peak RSS by file size (MiB):"
printf "  %-10s %10s %10s %10s %10s\n" file MiB events text summary
for f in "$SMALL" "$BIG"; do
  t=$(measure "$BIN" report "$f" --format text | awk '{print $4}')
  s=$(measure "$BIN" report "$f" --format summary | awk '{print $4}')
  ev=$([ "$f" = "$BIG" ] && echo "$events" || echo "$small_events")
  awk -v f="$(basename "$(dirname "$f")")" -v m="$(( $(stat -c %s "$f") / 1048576 ))" -v e="$ev" -v t="$t" -v s="$s" \
    'BEGIN { printf "  %-10s %10d %10d %10.1f %10.1f\n", f, m, e, t / 1024, s / 1024 }' 
done
echo "targets (issue 9): text >= 10x trace-cmd, summary >= 30x (wall and CPU), RSS < 100 MiB and flat"
