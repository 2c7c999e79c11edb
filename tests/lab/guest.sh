#!/bin/sh
# Kernel lab guest side: check and run every lab recipe and every recipe of
# recipes/, then record what tracefs looks like afterwards. Results go to
# $KLAB_OUT/NAME/{check.txt,check.rc,run.txt,run.rc,run/}; the host asserts.
cd /payload
mkdir -p /run
uname -r > "$KLAB_OUT/release.txt"
for r in lab/*.toml recipes/*.toml; do
  n=$(basename "$r" .toml)
  case "$r" in recipes/*) n="recipe-$n" ;; esac
  o="$KLAB_OUT/$n"
  mkdir -p "$o"
  ./trace-recipe check "$r" > "$o/check.txt" 2>&1
  echo $? > "$o/check.rc"
  case "$r" in
    lab/*)
      start=$(cut -d' ' -f1 /proc/uptime)
      ./trace-recipe run "$r" -o "$o/run" > "$o/run.txt" 2>&1
      echo $? > "$o/run.rc"
      end=$(cut -d' ' -f1 /proc/uptime)
      echo "$start $end" > "$o/uptime.txt"
      ;;
  esac
done
./trace-recipe status > "$KLAB_OUT/status.txt" 2>&1
echo $? > "$KLAB_OUT/status.rc"
{
  echo "instances: $(ls "$TRACEFS/instances")"
  echo "kprobe_events: $(cat "$TRACEFS/kprobe_events")"
  echo "uprobe_events: $(cat "$TRACEFS/uprobe_events")"
  echo "current_tracer: $(cat "$TRACEFS/current_tracer")"
  echo "max_graph_depth: $(cat "$TRACEFS/max_graph_depth")"
  echo "tracing_thresh: $(cat "$TRACEFS/tracing_thresh")"
  echo "set_ftrace_filter: $(grep -v '^#' "$TRACEFS/set_ftrace_filter")"
  echo "set_graph_function: $(grep -v '^#' "$TRACEFS/set_graph_function")"
  echo "set_event_pid: $(cat "$TRACEFS/set_event_pid")"
  echo "tracing_on: $(cat "$TRACEFS/tracing_on")"
  echo "journals: $(ls /run/trace-recipe 2>/dev/null | grep journal)"
} > "$KLAB_OUT/after.txt"
echo done > "$KLAB_OUT/done"
