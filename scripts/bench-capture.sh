#!/usr/bin/env bash
# Capture bench: trace-recipe's recorder vs a plain `cat per_cpu/cpuN/trace_pipe_raw
# > file` per CPU, same events (bench/heavy.toml: sched + read/write syscalls),
# same per-CPU buffer size, same pid scope (the load and its children), same
# duration, at two event rates: one `dd bs=64` and one per CPU. Prints events
# captured, events lost and the readers' CPU time.
#
# Both are counted the same way: events = events in a trace.dat read back by
# `trace-recipe report` (ours: the run's own; cat's: made from its raw files by
# `trace-cmd restore`), lost = per_cpu stats overrun + dropped events, plus
# lost-event marks in the pages. CPU: ours = recorder.cpu_s in report.json (the
# reader threads), cat = user + sys of the cat processes (GNU time).
# The cat instance is removed at the end whatever happens.
#
# Usage: sudo scripts/bench-capture.sh [SECONDS] [BUFFER_KB]   (default 5, 4096)
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-5}
KB=${2:-4096}
T=/sys/kernel/tracing
cargo build --release -q
BIN=$PWD/target/release/trace-recipe
WORK=$(mktemp -d /var/tmp/trace-recipe-capture.XXXXXX)
# Hold the lock the test suites hold, so no test sees the bench's instances.
exec 9>/tmp/trace-recipe-tracefs.lock
flock 9
I=$T/instances/bench-cat-$$
cleanup() {
  if [ -d "$I" ]; then
    echo 0 > "$I/tracing_on"
    echo > "$I/set_event_pid" || true
    echo 0 > "$I/events/enable" || true
    rmdir "$I"
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
EVENTS="sched/sched_switch sched/sched_wakeup sched/sched_waking syscalls/sys_enter_read syscalls/sys_exit_read syscalls/sys_enter_write syscalls/sys_exit_write"
load() { # N: dd processes, each ending by itself shortly after the tracing time
  echo "i=0; while [ \$i -lt $1 ]; do timeout $((SECS + 2)) dd if=/dev/zero of=/dev/null bs=64 count=1000000000 2>/dev/null & i=\$((i+1)); done; wait"
}

ours() { # N
  local out=$WORK/ours-$1
  "$BIN" run bench/heavy.toml --set "duration=${SECS}s" --set max_mb=100000 --set "size_kb=$KB" \
    -o "$out" -- sh -c "$(load "$1")" >/dev/null 2>&1 || true
  local j=$out/report.json
  num() { awk -F'[:,]' -v k="\"$1\"" '$1 ~ k {gsub(/ /, "", $2); print $2; exit}' "$j"; }
  echo "$(num total_events) $(num lost_total) $(num cpu_s)"
  rm -rf "$out"
}

cat_baseline() { # N
  mkdir "$I"
  echo "$KB" > "$I/buffer_size_kb"
  for e in $EVENTS; do echo 1 > "$I/events/$e/enable"; done
  echo 1 > "$I/options/event-fork"
  local pids=() cpu
  for cpu in $(seq 0 $(($(nproc) - 1))); do
    /usr/bin/time -f "%U %S" -o "$WORK/cat$cpu.time" cat "$I/per_cpu/cpu$cpu/trace_pipe_raw" > "$WORK/cat$cpu.raw" &
    pids+=($!)
  done
  # The load scopes itself (its pid into set_event_pid) and starts tracing.
  sh -c "echo \$\$ > $I/set_event_pid; echo 1 > $I/tracing_on; $(load "$1")" &
  local loadpid=$!
  sleep "$SECS"
  echo 0 > "$I/tracing_on"
  wait "$loadpid" 2>/dev/null || true
  sleep 1 # let the readers drain what is left
  for p in "${pids[@]}"; do
    pkill -TERM -P "$p" cat 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  local lost=0 cpu_s=0 f raws=()
  for cpu in $(seq 0 $(($(nproc) - 1))); do
    f=$I/per_cpu/cpu$cpu/stats
    lost=$((lost + $(awk '/^overrun:/ {print $2}' "$f") + $(awk '/^dropped events:/ {print $3}' "$f")))
    cpu_s=$(awk -v a="$cpu_s" '/^[0-9.]+ [0-9.]+$/ {print a + $1 + $2}' "$WORK/cat$cpu.time")
    raws+=("$WORK/cat$cpu.raw")
  done
  cleanup_instance
  trace-cmd restore -i "$WORK/head.dat" -o "$WORK/cat.dat" "${raws[@]}" >/dev/null 2>&1
  local j; j=$("$BIN" report "$WORK/cat.dat" --format json --analysis counts)
  local events in_pages
  events=$(awk -F'[:,]' '/"total_events"/ {print $2+0}' <<<"$j")
  in_pages=$(awk -F'[:,]' '/"lost_total"/ {print $2+0}' <<<"$j")
  rm -f "$WORK"/cat*
  echo "$events $((lost + in_pages)) $cpu_s"
}
cleanup_instance() {
  echo > "$I/set_event_pid"
  for e in $EVENTS; do echo 0 > "$I/events/$e/enable"; done
  rmdir "$I"
}

# Headers (formats, header_page) for turning cat's raw files into a trace.dat.
trace-cmd restore -c -o "$WORK/head.dat" >/dev/null 2>&1
echo "machine: $(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "date:    $(date -u +%Y-%m-%dT%H:%MZ)"
echo "each:    ${SECS} s of tracing, buffer_size_kb=$KB"
echo
printf "%-6s %-14s %12s %10s %8s %10s %14s\n" load reader events lost lost% "cpu s" "cpu ms/Mevent"
for n in 1 "$(nproc)"; do
  for who in trace-recipe cat; do
    if [ "$who" = cat ]; then r=$(cat_baseline "$n"); else r=$(ours "$n"); fi
    read -r ev lo cs <<<"$r"
    awk -v n="$n dd" -v w="$who" -v e="$ev" -v l="$lo" -v c="$cs" \
      'BEGIN { printf "%-6s %-14s %12d %10d %8.3f %10.3f %14.1f\n", n, w, e, l, (e + l) ? 100 * l / (e + l) : 0, c, e ? 1e9 * c / e : 0 }'
  done
done
