#!/bin/sh
# Kernel lab guest side of the flight recorder (lab::persistent_6_12), booted
# with `reserve_mem=8M:4096:trace trace_instance=boot_map@trace` and QEMU's
# reset keeping RAM. Boot 1 arms boot_map with lab/persist/persistent.toml,
# runs a known program, writes a marker and reboots (`b`) or panics (`c`, the
# argument); boot 2 (the marker file $KLAB_OUT/phase1 says so) collects.
cd /payload
mkdir -p /run
B=$TRACEFS/instances/boot_map
export TRACE_RECIPE_BOOT_STATE="$KLAB_OUT/state"
# The instance's settings as `FILE:LINE` lines (not its data or last_boot_info).
state() {
  cd "$B" || return
  grep -H '' tracing_on current_tracer trace_clock set_event set_event_pid \
    events/enable events/*/enable events/*/*/enable events/*/*/filter \
    events/*/*/trigger options/* 2>/dev/null | grep -v ':#'
  cd /payload || return
}
if [ ! -e "$KLAB_OUT/phase1" ]; then
  state > "$KLAB_OUT/state-fresh.txt"
  grep ' _stext$' /proc/kallsyms > "$KLAB_OUT/stext1"
  ./trace-recipe check lab/persist/persistent.toml > "$KLAB_OUT/check.txt" 2>&1
  echo $? > "$KLAB_OUT/check.rc"
  ./trace-recipe run lab/persist/persistent.toml -o "$KLAB_OUT/armed" > "$KLAB_OUT/arm.txt" 2>&1
  echo $? > "$KLAB_OUT/arm.rc"
  ./trace-recipe status > "$KLAB_OUT/status-armed.txt" 2>&1
  state > "$KLAB_OUT/state-armed.txt"
  # The known program, under a name of its own.
  ln -s /payload/trace-recipe /tmp/flight-known
  /tmp/flight-known --version > /dev/null
  echo flight-marker-before-reboot > "$B/trace_marker"
  echo "${1:-b}" > "$KLAB_OUT/phase1"
  sync
  echo "${1:-b}" > /proc/sysrq-trigger
  sleep 30
else
  grep ' _stext$' /proc/kallsyms > "$KLAB_OUT/stext2"
  cat "$B/last_boot_info" > "$KLAB_OUT/last_boot_info" 2>&1
  state > "$KLAB_OUT/state-booted.txt"
  # Arming again before collecting would clear the last boot's trace: refused.
  ./trace-recipe run lab/persist/persistent.toml -o "$KLAB_OUT/too-soon" > "$KLAB_OUT/too-soon.txt" 2>&1
  echo $? > "$KLAB_OUT/too-soon.rc"
  ./trace-recipe collect-boot -o "$KLAB_OUT/collected" > "$KLAB_OUT/collect.txt" 2>&1
  echo $? > "$KLAB_OUT/collect.rc"
  state > "$KLAB_OUT/state-released.txt"
  ls "$TRACEFS/instances" > "$KLAB_OUT/instances.txt"
  ls "$KLAB_OUT/state" > "$KLAB_OUT/state-dir.txt" 2>&1
  ./trace-recipe status > "$KLAB_OUT/status-after.txt" 2>&1
  # Armed and collected in the same boot: the release undoes the arming.
  ./trace-recipe run lab/persist/persistent.toml -o "$KLAB_OUT/rearmed" > "$KLAB_OUT/rearm.txt" 2>&1
  echo $? > "$KLAB_OUT/rearm.rc"
  state > "$KLAB_OUT/state-rearmed.txt"
  ./trace-recipe collect-boot -o "$KLAB_OUT/same-boot" > "$KLAB_OUT/collect2.txt" 2>&1
  echo $? > "$KLAB_OUT/collect2.rc"
  state > "$KLAB_OUT/state-released2.txt"
  ./trace-recipe collect-boot --instance nosuch -o "$KLAB_OUT/nosuch" > "$KLAB_OUT/nosuch.txt" 2>&1
  echo $? > "$KLAB_OUT/nosuch.rc"
  echo done > "$KLAB_OUT/done"
fi
