#!/bin/sh
# Kernel lab guest side: check and run every lab recipe and every recipe of
# recipes/, then record what tracefs looks like afterwards. Results go to
# $KLAB_OUT/NAME/{check.txt,check.rc,run.txt,run.rc,run/}; the host asserts.
cd /payload
mkdir -p /run
# Arguments: `faults` (also the fault and kill trials), `rt` (also the recipes
# of lab/rt/, for the PREEMPT_RT kernel's latency tracers), `answers` (also
# the recipes of recipes/ whose summary's answer needs this kernel), `both` (also
# lab/answers/both.toml: answers computed by both engines; needs null_blk).
faults= rt= answers= both=
for a in "$@"; do
  case "$a" in faults) faults=1 ;; rt) rt=1 ;; answers) answers=1 ;; both) both=1 ;; esac
done
uname -r > "$KLAB_OUT/release.txt"
# Where a boot's time goes: each step's start as "UPTIME STEP" in steps.txt
# (docs/src/testing.md, the suite's time budget).
mark() { echo "$(cut -d' ' -f1 /proc/uptime) $*" >> "$KLAB_OUT/steps.txt"; }
mark facts
# The kernel's facts first, as freshly booted: the host checks every recipe
# offline against them and must reach the guest's verdicts.
./trace-recipe facts -o "$KLAB_OUT/facts.json.zst" > "$KLAB_OUT/facts.txt" 2>&1
# Still fresh: one run of a tracer recipe (at the top level on 6.1, whose
# instances lack function_graph; in an instance on 6.12), and the guest's
# tracefs before and after it, top level and options: the host asserts that
# they differ in exactly what the run declared irreversible.
# The guest's tracefs as `FILE: LINE` lines: every readable file at the top
# level, every option, every event's enable, filter and trigger, the
# instances; not what changes by itself (trace data, counters, statistics,
# error_log, the per-CPU files). `tracefs_state nobuf` leaves out
# buffer_size_kb, whose first allocation no one can undo (a run declares it).
tracefs_state() {
  cd "$TRACEFS" || return
  for f in *; do
    [ -f "$f" ] && [ -r "$f" ] || continue
    case "$f" in
      trace|trace_pipe|trace_marker|trace_marker_raw|printk_formats|saved_cmdlines|saved_tgids|\
      available_*|README|error_log|touched_functions|enabled_functions|dyn_ftrace_total_info|\
      *_profile|stack_trace|snapshot|free_buffer|\
      buffer_total_size_kb|trace_options|kallsyms|function_profile_enabled) continue ;;
      buffer_size_kb) [ "$1" = nobuf ] && continue ;;
    esac
    grep -H '' "$f" 2>/dev/null
  done
  grep -H '' options/* events/enable events/*/enable events/*/*/enable \
    events/*/*/filter events/*/*/trigger 2>/dev/null | grep -v ':#'
  # hwlat's and osnoise/timerlat's global parameters (RT kernel).
  for f in hwlat_detector/* osnoise/*; do
    [ -f "$f" ] && [ -r "$f" ] && grep -H '' "$f" 2>/dev/null
  done
  echo "stack_tracer_enabled:$(cat /proc/sys/kernel/stack_tracer_enabled 2>/dev/null)"
  echo "instances:$(ls instances | tr '\n' ' ')"
  echo "journals:$(ls /run/trace-recipe 2>/dev/null | grep journal | tr '\n' ' ')"
  cd /payload || return
}
mark fresh-run
tracefs_state > "$KLAB_OUT/fresh-before.txt"
# The whole state once more without buffer_size_kb (whose first allocation no
# one can undo): the host compares it with the state after every run.
tracefs_state nobuf > "$KLAB_OUT/boot-state.txt"
./trace-recipe run lab/function-graph.toml -o "$KLAB_OUT/fresh-run" > "$KLAB_OUT/fresh-run.txt" 2>&1
echo $? > "$KLAB_OUT/fresh-run.rc"
tracefs_state > "$KLAB_OUT/fresh-after.txt"
# 6.18 and older open a path in do_filp_open, 7.2 in do_file_open (the same
# arguments): the lab's recipes name the kernel's. Each run's folder keeps the
# recipe as run (recipe.toml), which the host checks offline.
if grep -qx do_file_open "$TRACEFS/available_filter_functions"; then
  sed -i 's/do_filp_open/do_file_open/g' lab/*.toml
fi
# The RT boot runs what PREEMPT_RT changes (the latency tracers of lab/rt/) and
# the stack tracer; every other lab recipe, and the check of every recipe of
# recipes/, runs on 6.1, the same release.
lab="lab/*.toml recipes/*.toml"
[ -n "$rt" ] && lab="lab/stack.toml lab/stack-filter.toml lab/rt/*.toml"
for r in $lab; do
  n=$(basename "$r" .toml)
  case "$r" in recipes/*) n="recipe-$n" ;; esac
  o="$KLAB_OUT/$n"
  mkdir -p "$o"
  cp "$r" "$o/recipe.toml"
  mark "check $r"
  ./trace-recipe check "$r" > "$o/check.txt" 2>&1
  echo $? > "$o/check.rc"
  case "$r" in
    lab/*)
      mark "run $r"
      start=$(cut -d' ' -f1 /proc/uptime)
      ./trace-recipe run "$r" -o "$o/run" > "$o/run.txt" 2>&1
      echo $? > "$o/run.rc"
      end=$(cut -d' ' -f1 /proc/uptime)
      echo "$start $end" > "$o/uptime.txt"
      ;;
  esac
done
mark "func-args"
# --- func-args (issue 35 item 4): the same calls as the kernel lists them ---
# Where the kernel has the option (6.15+), lab/func-args.toml runs once more
# while the top-level buffer traces vfs_read with func-args too: the kernel's
# `trace` file then prints the very calls the run's trace.dat holds (same
# registers), which the host compares with our listing of them. Tracing is
# stopped before `trace` is read (changing the tracer empties the buffer);
# everything set here is set back.
if [ -f "$TRACEFS/options/func-args" ] && [ -f lab/func-args.toml ]; then
  o="$KLAB_OUT/func-args"
  echo vfs_read > "$TRACEFS/set_ftrace_filter"
  echo 1 > "$TRACEFS/options/func-args"
  echo function > "$TRACEFS/current_tracer"
  ./trace-recipe run lab/func-args.toml -o "$o/paired" > "$o/paired.txt" 2>&1
  echo $? > "$o/paired.rc"
  echo 0 > "$TRACEFS/tracing_on"
  cat "$TRACEFS/trace" > "$o/kernel-trace.txt"
  echo nop > "$TRACEFS/current_tracer"
  echo 1 > "$TRACEFS/tracing_on"
  echo 0 > "$TRACEFS/options/func-args"
  echo > "$TRACEFS/set_ftrace_filter"
  echo > "$TRACEFS/trace"
fi
# --- end func-args ---
mark "call-graphs and ftrig"
# Not in the RT boot (its lab recipes are the latency tracers and the stack
# tracer): the call graphs of the run's own opens, kprobe offsets, a module's
# functions and the function triggers at a fault, as on 6.1.
if [ -z "$rt" ]; then
# The run's own threads stay out of the trace: recipes/call-graph-depth.toml
# (function_graph of do_sys_openat2, no workload) must hold no graph of ours.
o="$KLAB_OUT/recipe-call-graph-depth"
./trace-recipe run recipes/call-graph-depth.toml --duration 3s -o "$o/run" > "$o/run.txt" 2>&1
echo $? > "$o/run.rc"
# The same with [scope] include_self = true: the run's own opens are graphed.
o="$KLAB_OUT/recipe-call-graph-depth-self"
mkdir -p "$o"
awk '{ print } /^\[scope\]$/ { print "include_self = true" }' recipes/call-graph-depth.toml > /tmp/call-graph-self.toml
./trace-recipe run /tmp/call-graph-self.toml --duration 3s -o "$o/run" > "$o/run.txt" 2>&1
echo $? > "$o/run.rc"
# --- ftrig (issue 22 items 7 and 8): kprobe offsets, module functions ---
# lab/kprobe-where.toml probes do_sys_openat2 at the first instruction boundary
# after its entry; the loop above tried offset 4 (the fentry call after endbr64,
# on kernels built with IBT); else 5 (after the 5-byte fentry call), or 9.
# (x86 only: the arm64 payload, tests/lab/arm64.sh, has neither recipe.)
if [ -f lab/kprobe-where.toml ]; then
o="$KLAB_OUT/kprobe-where"
echo 4 > "$o/offset.txt"
for off in 5 9; do
  [ "$(cat "$o/run.rc")" = 0 ] && break
  rm -rf "$o/run"
  ./trace-recipe run lab/kprobe-where.toml --set offset=$off -o "$o/run" > "$o/run.txt" 2>&1
  echo $? > "$o/run.rc"
  echo $off > "$o/offset.txt"
done
# The functions of module virtio_ring, which lab/function-mod.toml traces
# (`:mod:virtio_ring`; 6.12 has it built in, and the recipe fails its check there).
grep ' \[virtio_ring\]$' "$TRACEFS/available_filter_functions" | cut -d' ' -f1 > "$KLAB_OUT/function-mod/module-functions.txt"
fi
# --- end ftrig ---
mark "stop-at-fault"
# The function triggers stacktrace + traceoff at a fault (tests/lab/segv.c),
# on every kernel: the fault's stack must reach the run's instance.
o="$KLAB_OUT/recipe-stop-at-fault"
./trace-recipe run recipes/stop-at-fault.toml -o "$o/run" -- sh -c 'sleep 1; /payload/segv; exec sleep 50' > "$o/run.txt" 2>&1
echo $? > "$o/run.rc"
fi
mark "rt recipes"
# Recipes of recipes/ that are otherwise only checked, run once (RT boot):
# the function tracer with func_stack_trace, and timerlat.
if [ -n "$rt" ]; then
  o="$KLAB_OUT/recipe-function-callers"
  mkdir -p "$o"
  # dd reads with read(2); busybox cat would use sendfile(2), not vfs_read.
  ./trace-recipe run recipes/function-callers.toml --set function=vfs_read --duration 20s \
    -o "$o/run" -- dd if=/payload/lab/marker.txt of=/dev/null bs=16 > "$o/run.txt" 2>&1
  echo $? > "$o/run.rc"
  # recipes/timerlat.toml, shortened: per-CPU IRQ and thread timer latency.
  o="$KLAB_OUT/recipe-timerlat"
  mkdir -p "$o"
  ./trace-recipe run recipes/timerlat.toml --duration 4s -o "$o/run" > "$o/run.txt" 2>&1
  echo $? > "$o/run.rc"
fi
mark "answers"
# The recipes whose summary's first section needs function_graph, kprobes or
# the function tracer, run once (6.12 boot, guest.sh answers) with a workload
# that gives their question an answer: opens (call-graph-depth), failing opens
# (kretprobe-returns), a read of the payload over virtio plus serial output,
# whose interrupts the system-wide irq-handler-time records, reads
# (function-callers); stop-at-fault's run (a fault) is the one above.
if [ -n "$answers" ]; then
  o="$KLAB_OUT/answer-call-graph-depth"
  mkdir -p "$o"
  ./trace-recipe run recipes/call-graph-depth.toml -o "$o/run" -- cat /payload/lab/marker.txt > "$o/run.txt" 2>&1
  echo $? > "$o/run.rc"
  o="$KLAB_OUT/answer-kretprobe-returns"
  mkdir -p "$o"
  ./trace-recipe run recipes/kretprobe-returns.toml -o "$o/run" -- sh -c 'cat /nonexistent-a; cat /nonexistent-b; cat /payload/lab/marker.txt; true' > "$o/run.txt" 2>&1
  echo $? > "$o/run.rc"
  o="$KLAB_OUT/answer-irq-handler-time"
  mkdir -p "$o"
  (sleep 1; cat /payload/trace-recipe > /dev/null; for i in 1 2 3 4 5; do echo "irq-handler-time $i" > /dev/ttyS0; done) &
  ./trace-recipe run recipes/irq-handler-time.toml --duration 4s -o "$o/run" > "$o/run.txt" 2>&1
  echo $? > "$o/run.rc"
  wait
  o="$KLAB_OUT/answer-function-callers"
  mkdir -p "$o"
  ./trace-recipe run recipes/function-callers.toml --set function=vfs_read --duration 20s \
    -o "$o/run" -- dd if=/payload/lab/marker.txt of=/dev/null bs=16 > "$o/run.txt" 2>&1
  echo $? > "$o/run.rc"
  # perf-tools' funccount and funcslower (the host's Debian scripts, run by
  # the payload's bash) beside recipes/funccount.toml and funcslower.toml on
  # the same workloads. funccount counts in the function profiler
  # (function_profile_enabled), which Debian's kernels are built without
  # (CONFIG_FUNCTION_PROFILER): there it fails at once, saying so, and the
  # top level's own function tracer counts beside the recipe's run instead.
  # Either way both see the same 1000 writes to /dev/null (write_null).
  # funcslower and the recipe both set the global tracing_thresh, so they
  # take turns, each timing three sync(2) calls (ksys_sync) over 10 us.
  mkdir -p /var/tmp
  o="$KLAB_OUT/answer-funccount"
  mkdir -p "$o"
  if [ -f "$TRACEFS/function_profile_enabled" ]; then
    ./bash perf-tools/funccount -d 60 write_null > "$o/perf-tools.txt" 2>&1 &
    fc=$!
    i=0
    while [ "$(cat "$TRACEFS/function_profile_enabled")" != 1 ] && [ "$i" -lt 300 ]; do
      sleep 0.1
      i=$((i + 1))
    done
    # funccount turns profiling off and on once more before its interval.
    sleep 1
  else
    ./bash perf-tools/funccount -d 1 write_null > "$o/perf-tools.txt" 2>&1
    fc=
    echo write_null > "$TRACEFS/set_ftrace_filter"
    echo function > "$TRACEFS/current_tracer"
  fi
  ./trace-recipe run recipes/funccount.toml --set functions=write_null -o "$o/run" \
    -- dd if=/dev/zero of=/dev/null bs=1 count=1000 > "$o/run.txt" 2>&1
  echo $? > "$o/run.rc"
  if [ -n "$fc" ]; then
    # End funccount's interval now rather than after its 60 s: its sleep.
    kill $(pgrep -P "$fc" sleep) 2>/dev/null
    wait "$fc"
  else
    echo 0 > "$TRACEFS/tracing_on"
    grep -c ' write_null <-' "$TRACEFS/trace" > "$o/kernel-count.txt"
    echo nop > "$TRACEFS/current_tracer"
    echo 1 > "$TRACEFS/tracing_on"
    echo > "$TRACEFS/set_ftrace_filter"
    echo > "$TRACEFS/trace"
  fi
  o="$KLAB_OUT/answer-funcslower"
  mkdir -p "$o"
  (
    i=0
    while [ "$(cat "$TRACEFS/current_tracer")" != function_graph ] && [ "$i" -lt 300 ]; do
      sleep 0.1
      i=$((i + 1))
    done
    sleep 1
    sync; sync; sync
  ) &
  ./bash perf-tools/funcslower -d 10 ksys_sync 10 > "$o/perf-tools.txt" 2>&1
  wait
  ./trace-recipe run recipes/funcslower.toml --set functions=ksys_sync --set thresh_us=10 \
    -o "$o/run" -- sh -c 'sync; sync; sync' > "$o/run.txt" 2>&1
  echo $? > "$o/run.rc"
  # recipes/opensnoop.toml and execsnoop.toml (eprobes): two failing opens
  # and one that succeeds; two programs exec'd by a shell (busybox's applets
  # would re-exec /proc/self/exe: the payload's bash and chrt).
  o="$KLAB_OUT/answer-opensnoop"
  mkdir -p "$o"
  ./trace-recipe run recipes/opensnoop.toml -o "$o/run" \
    -- sh -c 'cat /nonexistent-a; cat /nonexistent-b; cat /payload/lab/marker.txt; true' > "$o/run.txt" 2>&1
  echo $? > "$o/run.rc"
  o="$KLAB_OUT/answer-execsnoop"
  mkdir -p "$o"
  ./trace-recipe run recipes/execsnoop.toml -o "$o/run" \
    -- sh -c '/payload/bash -c true; /payload/chrt -m > /dev/null; true' > "$o/run.txt" 2>&1
  echo $? > "$o/run.rc"
fi
mark "both"
# Every answer shape computed by the kernel's hist triggers while the same run
# records its events (guest.sh both): the host answers them again from
# trace.dat and compares (lab/answers/both.toml; /dev/nullb0 is null_blk's,
# loaded for this boot).
if [ -n "$both" ]; then
  o="$KLAB_OUT/answers-both"
  mkdir -p "$o"
  ./trace-recipe run lab/answers/both.toml -o "$o/run" > "$o/run.txt" 2>&1
  echo $? > "$o/run.rc"
fi
mark "fault trials"
# Fault and kill trials: for a kprobe, a function tracer and a hist trigger,
# fail each step of the plan (the run undoes what it did) and SIGKILL the run at
# each step (its guard undoes it); after each, the guest's whole tracefs
# (tracefs_state) must be as before the trials. buffer_size_kb is left out: its
# first expansion cannot be undone and is declared by the run.
# They run in one boot (guest.sh faults): under emulation a run takes ~10 s.
# The kprobe run fails and is killed at every step; the function tracer and
# hist runs at their last step (when every earlier step has to be undone).
baseline=$(tracefs_state nobuf)
# On the RT kernel: the stack tracer (global files and a sysctl), a latency
# tracer and osnoise (global osnoise/ files), at their last two steps.
trials=
[ -n "$faults" ] && trials="lab/kprobe-fetch.toml lab/function-filter.toml lab/hist-trigger.toml"
[ -n "$rt" ] && trials="lab/stack-filter.toml lab/rt/wakeup-rt.toml lab/rt/osnoise.toml"
for r in $trials; do
  n=$(./trace-recipe check --plan "$r" 2>/dev/null | grep -cE '^ *[0-9]+\. ')
  s=1
  while [ "$s" -le "$n" ]; do
    modes=
    case "$r" in
      *kprobe*) modes="FAIL KILL" ;;
      */rt/*|*/stack-filter.toml) [ "$s" -ge $((n - 1)) ] && modes="FAIL KILL" ;;
      *) [ "$s" = "$n" ] && modes="FAIL KILL" ;;
    esac
    for mode in $modes; do
      env "TRACE_RECIPE_TEST_${mode}_STEP=$s" ./trace-recipe run "$r" -o /tmp/fault-run > /tmp/fault.txt 2>&1
      rc=$?
      # A killed run is rolled back by its guard once it is gone: wait for the journal.
      i=0
      while ls /run/trace-recipe/*.journal > /dev/null 2>&1 && [ "$i" -lt 200 ]; do
        sleep 0.1
        i=$((i + 1))
      done
      rm -rf /tmp/fault-run
      now=$(tracefs_state nobuf)
      if [ "$now" = "$baseline" ]; then
        c=clean
      else
        c=dirty
        echo "$baseline" > /tmp/before.txt
        echo "$now" > /tmp/now.txt
        diff /tmp/before.txt /tmp/now.txt > "$KLAB_OUT/fault-$(basename "$r" .toml)-$mode-$s.txt"
      fi
      echo "$(basename "$r" .toml) $mode $s/$n $rc $c $(cut -d' ' -f1 /proc/uptime)" >> "$KLAB_OUT/faults.txt"
    done
    s=$((s + 1))
  done
done
mark "final state"
tracefs_state nobuf > "$KLAB_OUT/final-state.txt"
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
  echo "tracing_max_latency: $(cat "$TRACEFS/tracing_max_latency" 2>/dev/null)"
  echo "stack_max_size: $(cat "$TRACEFS/stack_max_size" 2>/dev/null)"
  echo "stack_tracer_enabled: $(cat /proc/sys/kernel/stack_tracer_enabled 2>/dev/null)"
  echo "stack_trace_filter: $(grep -v '^#' "$TRACEFS/stack_trace_filter" 2>/dev/null)"
  echo "journals: $(ls /run/trace-recipe 2>/dev/null | grep journal)"
} > "$KLAB_OUT/after.txt"
mark done
echo done > "$KLAB_OUT/done"
