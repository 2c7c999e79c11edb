#!/bin/sh
# Guest half of crates/tracedat/tests/corpus/make-lab-corpus.sh: records
# trace.dat files with the guest's own trace-cmd (Debian 12's 3.1.6 of the
# guest's architecture) in the ways trace-cmd users record them: every event,
# other clocks, --date, --tsc2nsec (x86 only), a second buffer, start/extract,
# split, convert, a kprobe and a synthetic event, user stack traces and raw
# markers. Each file lands in $KLAB_OUT as NAME.dat with NAME.rc (the exit
# status) and NAME.log (trace-cmd's output).
o=$KLAB_OUT
t=$TRACEFS
cd /tmp || exit 1
# A small workload that exercises the scheduler, syscalls, page faults and
# both markers; runs in about 0.3 s under emulation.
cat > /tmp/work.sh <<'EOF'
#!/bin/sh
for i in 1 2 3; do
  ls / > /dev/null
  cat /proc/version > /dev/null
  echo "lab marker $i" > /sys/kernel/tracing/trace_marker
  # A raw marker: a 4-byte id, then bytes.
  printf '\001\000\000\000raw%s' "$i" > /sys/kernel/tracing/trace_marker_raw
  sleep 0.05
done
EOF
chmod +x /tmp/work.sh

arch=$(uname -m)
# Uncompressed, so that the files of one architecture, packed together
# (make.sh), share their kallsyms and event formats; s390x's file of every
# event keeps trace-cmd's default (v7, zstd): a compressed big-endian file.
rec() { # NAME ARGS... : trace-cmd record -o NAME.dat ARGS /tmp/work.sh
  name=$1; shift
  pack="--compression none"
  [ "$arch" = s390x ] && [ "$name" = all ] && pack=""
  # shellcheck disable=SC2086 # $pack is one option and its value, or none
  trace-cmd record -q -o "/tmp/$name.dat" $pack "$@" /tmp/work.sh > "$o/$name.log" 2>&1
  echo $? > "$o/$name.rc"
  [ -f "/tmp/$name.dat" ] && cp "/tmp/$name.dat" "$o/$name.dat"
  rm -f /tmp/"$name".dat*
}

arch=$(uname -m)
# The markers land in the top-level buffer with any event (ftrace:print
# and ftrace:raw_data cannot be enabled by name).
rec sched-syscalls -e sched -e syscalls
rec all -e all -b 512
rec date --date -e sched -e syscalls:sys_enter_openat
rec clock-mono -C mono -e sched -e irq
rec clock-boot -C boot -e sched -e timer
rec clock-counter -C counter -e sched
rec buffers -e sched -B second -e syscalls -e timer
# exceptions:page_fault_user/kernel are x86's.
faults=""
[ -d "$t/events/exceptions" ] && faults="-e exceptions"
rec userstack -T -O userstacktrace -e syscalls:sys_enter_openat -e kmem $faults
if [ "$arch" = x86_64 ]; then
  rec tsc2nsec --tsc2nsec -e sched -e syscalls:sys_enter_read
  rec clock-tsc -C x86-tsc -e sched
fi
if [ -f "$t/kprobe_events" ]; then
  echo 'p:labopen do_sys_openat2 dfd=$arg1:s32 flags=+0($arg3):x64' >> "$t/kprobe_events"
  echo 'r:labopenret do_sys_openat2 ret=$retval:s32' >> "$t/kprobe_events"
  rec kprobe -e kprobes -e sched:sched_process_exec
  echo '-:labopen' >> "$t/kprobe_events"
  echo '-:labopenret' >> "$t/kprobe_events"
fi
if [ -f "$t/synthetic_events" ] && [ -f "$t/events/sched/sched_waking/hist" ]; then
  echo 'labwake pid_t pid; u64 lat' >> "$t/synthetic_events"
  echo 'hist:keys=pid:ts0=common_timestamp.usecs' >> "$t/events/sched/sched_waking/trigger"
  echo 'hist:keys=next_pid:lat=common_timestamp.usecs-$ts0:onmatch(sched.sched_waking).trace(labwake,next_pid,$lat)' >> "$t/events/sched/sched_switch/trigger"
  rec synthetic -e synthetic -e sched:sched_waking -e sched:sched_switch
  echo '!hist:keys=next_pid:lat=common_timestamp.usecs-$ts0:onmatch(sched.sched_waking).trace(labwake,next_pid,$lat)' >> "$t/events/sched/sched_switch/trigger"
  echo '!hist:keys=pid:ts0=common_timestamp.usecs' >> "$t/events/sched/sched_waking/trigger"
  echo '!labwake' >> "$t/synthetic_events"
fi
# start / extract: the kernel's buffers read after the fact.
trace-cmd start -e sched -e syscalls:sys_exit_read > "$o/extract.log" 2>&1
/tmp/work.sh
trace-cmd stop >> "$o/extract.log" 2>&1
trace-cmd extract --compression none -o /tmp/extract.dat >> "$o/extract.log" 2>&1
echo $? > "$o/extract.rc"
cp /tmp/extract.dat "$o/extract.dat"
trace-cmd reset >> "$o/extract.log" 2>&1
# split (of the sched and syscalls file) and convert (of the file with every
# event) into a v6 file.
if [ -f "$o/sched-syscalls.dat" ]; then
  cp "$o/sched-syscalls.dat" /tmp/sched-syscalls.dat
  trace-cmd split -i /tmp/sched-syscalls.dat -o /tmp/split.dat -e 400 -r > "$o/split.log" 2>&1
  echo $? > "$o/split.rc"
  # split names its pieces split.dat, split.dat.1, ... (or only the first).
  for f in /tmp/split.dat*; do
    [ -f "$f" ] && cp "$f" "$o/$(basename "$f" | sed 's/^split\.dat\.\([0-9]*\)$/split-\1.dat/')"
  done
  rm -f /tmp/sched-syscalls.dat /tmp/split.dat*
fi
if [ -f "$o/all.dat" ]; then
  cp "$o/all.dat" /tmp/all.dat
  trace-cmd convert -i /tmp/all.dat -o /tmp/convert-v6.dat --file-version 6 > "$o/convert-v6.log" 2>&1
  echo $? > "$o/convert-v6.rc"
  [ -f /tmp/convert-v6.dat ] && cp /tmp/convert-v6.dat "$o/convert-v6.dat"
  rm -f /tmp/all.dat /tmp/convert-v6.dat
fi
uname -a > "$o/uname"
trace-cmd version > "$o/trace-cmd-version" 2>&1 || trace-cmd -h 2>&1 | head -3 > "$o/trace-cmd-version"
echo done > "$o/done"
