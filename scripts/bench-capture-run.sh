#!/bin/sh
# The capture bench itself, in POSIX sh so that it runs on a host and in the
# kernel lab's busybox guest alike (scripts/bench-capture.sh,
# scripts/bench-capture-lab.sh call it; it is not meant to be run by hand).
#
# For each load rate and each reader: the same events (bench/capture.toml:
# sched_switch, sched_wakeup, read/write syscalls), the same per-CPU buffer
# size, the same pid scope (the load's shell and its children: set_event_pid
# with event-fork), the same load. Readers:
#   trace-recipe  `trace-recipe run bench/capture.toml -- sh -c LOAD`
#   trace-cmd     `trace-cmd record -b KB -e ... -F -c sh -c LOAD` (top-level buffer)
#   dd            an instance made by hand, one `dd bs=4096` of each CPU's
#                 trace_pipe_raw (the floor of effort), made into a trace.dat by
#                 `trace-cmd restore`
# Counting, the same for all three: captured = events in the reader's trace.dat
# (`trace-recipe report --format json`); lost = per CPU dropped events +
# max(overrun, lost-event marks in the sub-buffers) (report.json's lost_total;
# for dd the stats are read from its instance before it is removed).
# CPU, user + sys, two figures per reader. `recorder`: what reads the ring
# buffer: trace-recipe's reader threads (report.json recorder.cpu_s),
# trace-cmd's per-CPU recorder processes (its reaped children minus the load,
# sampled, see run_trace_cmd), the dd loops. `tool`: the reader's whole process
# tree minus the load's own CPU: trace-cmd's includes its setup and writing
# trace.dat; trace-recipe's also validation, apply, writing trace.dat and
# decoding every event for its reports; dd's is its recorder.
#
# Usage: bench-capture-run.sh BIN KB READERS...   (env: TRACEFS, WORK, RATES)
set -eu
BIN=$1
KB=$2
shift 2
T=${TRACEFS:-/sys/kernel/tracing}
W=${WORK:-/tmp/bench-capture}
RATES=${RATES:-"low mid high"}
HERE=$(cd "$(dirname "$0")" && pwd)
RECIPE=${RECIPE:-$HERE/../bench/capture.toml}
mkdir -p "$W"
: > "$W/rows.txt"
: > "$W/sys.txt"
NCPU=$(ls -d "$T"/per_cpu/cpu* | wc -l)
EVENTS="sched:sched_switch sched:sched_wakeup syscalls:sys_enter_read syscalls:sys_exit_read syscalls:sys_enter_write syscalls:sys_exit_write"

# The load at a rate, as a script: low and mid are a fixed number of bursts
# (so their event total is the same for every reader); high is one dd per CPU
# writing 64-byte blocks as fast as it can for 4 s. It records its start and
# end (/proc/uptime) and its own CPU time (with its children's).
cat > "$W/load.sh" << EOF
t0=\$(cut -d' ' -f1 /proc/uptime)
i=0
case \$1 in
  low) while [ \$i -lt 40 ]; do dd if=/dev/zero of=/dev/null bs=64 count=100 2>/dev/null; sleep 0.05; i=\$((i+1)); done ;;
  mid) while [ \$i -lt 40 ]; do dd if=/dev/zero of=/dev/null bs=64 count=5000 2>/dev/null; sleep 0.05; i=\$((i+1)); done ;;
  high) while [ \$i -lt $NCPU ]; do timeout 4 dd if=/dev/zero of=/dev/null bs=64 count=1000000000 2>/dev/null & i=\$((i+1)); done; wait ;;
esac
echo "\$t0 \$(cut -d' ' -f1 /proc/uptime)" > $W/load.time
cat /proc/\$\$/stat > $W/load.stat
EOF

# CPU seconds (user + sys, own + waited-for children) in a /proc/PID/stat copy.
cpu_in() {
  awk -v hz=100 '{ sub(/^.*\) /, ""); print ($12 + $13 + $14 + $15) / hz }' "$1"
}

# `total_events lost_total` of a trace.dat; the number of its syscalls events
# goes to $W/sys.count (for the counting check).
counts() {
  "$BIN" report "$1" --format json --analysis counts > "$W/counts.json"
  awk -F'[:,]' '/"syscalls:sys_/ { n += $3 } END { print n + 0 }' "$W/counts.json" > "$W/sys.count"
  awk -F'[:,]' '/"total_events"/ { e = $2 + 0 } /"lost_total"/ { l = $2 + 0 } END { print e, l }' "$W/counts.json"
}

# CPU of the command's whole process tree minus the load's: `tree CMD...`.
tree() {
  sh -c '"$@"; cat /proc/$$/stat > '"$W/tree.stat" sh "$@"
  awk -v a="$(cpu_in "$W/tree.stat")" -v b="$(cpu_in "$W/load.stat")" 'BEGIN { print a - b }' > "$W/tree.cpu"
}

# Each reader prints: captured lost recorder_cpu_s tool_cpu_s.
run_trace_recipe() {
  rm -rf "$W/tr"
  tree "$BIN" run "$RECIPE" --buffer-size-kb "$KB" -o "$W/tr" -q -- sh "$W/load.sh" "$1" > "$W/tr.log" 2>&1 || true
  c=$(awk -F'[:,]' '/"cpu_s"/ { print $2 + 0; exit }' "$W/tr/report.json")
  echo "$(counts "$W/tr/trace.dat") $c $(cat "$W/tree.cpu")"
  rm -rf "$W/tr"
}

run_trace_cmd() {
  rm -f "$W/tc.dat" "$W/tc.pid" "$W/tc.last"
  ev=""
  for e in $EVENTS; do ev="$ev -e $e"; done
  # trace-cmd's per-CPU recorders are processes it forks and reaps before it
  # writes trace.dat; the load is its child too. So its recorders' CPU is the
  # children's CPU of the main trace-cmd process (cutime + cstime in its
  # /proc/PID/stat, sampled every 20 ms until it exits) minus the load's.
  # shellcheck disable=SC2086
  tree sh -c 'trace-cmd record -q -b "$1" -o "$2/tc.dat" '"$ev"' -F -c sh "$2/load.sh" "$3" > "$2/tc.log" 2>&1 & echo $! > "$2/tc.pid"; wait $!' sh "$KB" "$W" "$1" &
  tp=$!
  while [ ! -s "$W/tc.pid" ]; do sleep 0.01; done
  pid=$(cat "$W/tc.pid")
  while read -r st 2> /dev/null < "/proc/$pid/stat"; do
    echo "$st" > "$W/tc.last"
    sleep 0.02
  done
  wait $tp || true
  rec=$(awk -v hz=100 -v load="$(cpu_in "$W/load.stat")" '{ sub(/^.*\) /, ""); print ($14 + $15) / hz - load }' "$W/tc.last")
  echo "$(counts "$W/tc.dat") $rec $(cat "$W/tree.cpu")"
  rm -f "$W/tc.dat"
}

run_dd() {
  I=$T/instances/bench-dd-$$
  mkdir "$I"
  echo "$KB" > "$I/buffer_size_kb"
  echo 1 > "$I/options/event-fork"
  echo 1 > "$I/tracing_on"
  # A read of an empty trace_pipe_raw returns end-of-file at once (6.18 and
  # the lab's 6.12 alike), so each reader is a loop: `dd bs=4096` until the
  # buffer is empty, 10 ms of sleep, again; after tracing stops, one last dd
  # drains what is left. Each loop saves its CPU time (with its dd's) at the end.
  rm -f "$W/dd.stop"
  pids=""
  cpu=0
  while [ "$cpu" -lt "$NCPU" ]; do
    sh -c "while [ ! -e $W/dd.stop ]; do dd if=$I/per_cpu/cpu$cpu/trace_pipe_raw bs=4096 2> /dev/null; sleep 0.01; done; dd if=$I/per_cpu/cpu$cpu/trace_pipe_raw bs=4096 2> /dev/null; cat /proc/\$\$/stat > $W/dd$cpu.stat" > "$W/dd$cpu.raw" &
    pids="$pids $!"
    cpu=$((cpu + 1))
  done
  # The load scopes itself and enables the events.
  en=""
  for e in $EVENTS; do en="$en echo 1 > $I/events/$(echo "$e" | tr : /)/enable;"; done
  sh -c "echo \$\$ > $I/set_event_pid; $en exec sh $W/load.sh $1"
  echo 0 > "$I/tracing_on"
  touch "$W/dd.stop"
  # shellcheck disable=SC2086
  wait $pids 2> /dev/null || true
  c=$(cat "$W"/dd*.stat | awk -v hz=100 '{ sub(/^.*\) /, ""); s += ($12 + $13 + $14 + $15) / hz } END { print s }')
  dropped=0
  left=0
  ovr=0
  cpu=0
  raws=""
  while [ "$cpu" -lt "$NCPU" ]; do
    s=$I/per_cpu/cpu$cpu/stats
    dropped=$((dropped + $(awk '/^dropped events:/ { print $3 }' "$s")))
    ovr=$((ovr + $(awk '/^overrun:/ { print $2 }' "$s")))
    left=$((left + $(awk '/^entries:/ { print $2 }' "$s")))
    raws="$raws $W/dd$cpu.raw"
    cpu=$((cpu + 1))
  done
  echo > "$I/set_event_pid"
  for e in $EVENTS; do echo 0 > "$I/events/$(echo "$e" | tr : /)/enable"; done
  rmdir "$I"
  # shellcheck disable=SC2086
  trace-cmd restore -i "$W/head.dat" -o "$W/dd.dat" $raws > /dev/null 2>&1
  # The restored file has no stats: its lost_total is the marks alone. Events
  # still in the buffer when dd was stopped (`entries`) count as lost.
  # shellcheck disable=SC2046
  set -- $(counts "$W/dd.dat")
  echo "$1 $((dropped + (ovr > $2 ? ovr : $2) + left)) $c $c"
  rm -f "$W"/dd*.raw "$W"/dd*.stat "$W/dd.dat" "$W/dd.stop"
}

# Headers (formats, header_page) for turning dd's raw files into a trace.dat.
trace-cmd restore -c -o "$W/head.dat" > /dev/null 2>&1
printf "%-5s %-13s %10s %9s %8s %10s %9s %9s %10s %10s\n" rate reader captured lost "lost %" "events/s" "rec cpu" "tool cpu" "rec ms/Mev" "tool ms/Mev"
for rate in $RATES; do
  for who in "$@"; do
    case $who in
      trace-recipe) r=$(run_trace_recipe "$rate") ;;
      trace-cmd) r=$(run_trace_cmd "$rate") ;;
      dd) r=$(run_dd "$rate") ;;
    esac
    echo "$rate $who $(cat "$W/sys.count")" >> "$W/sys.txt"
    echo "$rate $who $r $(cat "$W/load.time")" | tee -a "$W/rows.txt" | awk '{
      cap = $3; lost = $4; all = cap + lost; secs = $8 - $7
      printf "%-5s %-13s %10d %9d %8.3f %10d %9.3f %9.3f %10.1f %10.1f\n", $1, $2, cap, lost, (all ? 100 * lost / all : 0), ((secs > 0) ? all / secs : 0), $5, $6, (cap ? 1e3 * $5 / (cap / 1e6) : 0), (cap ? 1e3 * $6 / (cap / 1e6) : 0)
    }'
  done
done

# The counting check, at the lowest rate, where nobody should lose anything.
# The load is the same fixed number of bursts for every reader, so its
# read/write syscall events (only the load's pids make them) must agree within
# 0.5 %; sched_switch/sched_wakeup vary with scheduling (and with which
# reader's threads the load switches with), so the totals are shown, not held
# to a margin.
low=$(echo "$RATES" | cut -d' ' -f1)
trusted=0
awk -v low="$low" -v sysfile="$W/sys.txt" '
  BEGIN { while ((getline l < sysfile) > 0) { split(l, f, " "); if (f[1] == low) { s[f[2]] = f[3]; if (!smin || f[3] < smin) smin = f[3]; if (f[3] > smax) smax = f[3] } } }
  $1 == low { t = $3 + $4; if (!min || t < min) min = t; if (t > max) max = t; lost += $4 }
  END {
    ok = smin > 0 && (smax - smin) / smin <= 0.005 && lost == 0
    printf "counting check at rate %s: syscall events %d-%d (within 0.5 %%: %s), lost %d, all events %d-%d (%.1f %% apart)\n", low, smin, smax, ((smin > 0 && (smax - smin) / smin <= 0.005) ? "yes" : "no"), lost, min, max, (min ? 100 * (max - min) / min : 0)
    if (ok) print "counting check: the counts agree"
    else { print "counting check FAILED: these figures cannot be trusted"; exit 1 }
  }' "$W/rows.txt" || trusted=1
# The rate at which each reader starts losing events.
awk '{ all = $3 + $4; r = ($8 > $7) ? all / ($8 - $7) : 0
       if ($4 > 0 && (!(($2) in first))) first[$2] = r; if (!(($2) in seen)) order[n++] = $2; seen[$2] = 1 }
  END { for (i = 0; i < n; i++) { w = order[i]
          if (w in first) printf "%s starts losing at about %d events/s\n", w, first[w]
          else printf "%s lost nothing at any rate\n", w } }' "$W/rows.txt"
exit $trusted
