#!/bin/sh
# Kernel lab, arm64 guest (lab::arm64_6_12, booted by
# ../shared/kernel-lab/run-in-foreign-kernel.sh): tests/lab/guest.sh on the
# recipes that apply to arm64 (the payload holds only those), then a trace.dat
# recorded by the guest's own trace-cmd (Debian's arm64 package), which the
# host reads with its trace-cmd and with ours.
cd /payload || exit 1
sh ./guest.sh
# The boot is complete (`done`, which the host looks for) only after trace-cmd.
mv "$KLAB_OUT/done" "$KLAB_OUT/guest-done"
o="$KLAB_OUT/trace-cmd"
mkdir -p "$o"
# In /tmp (tmpfs): trace-cmd writes a file per CPU beside its output.
(cd /tmp && trace-cmd record -q -o /tmp/trace-cmd.dat -e sched -e syscalls sleep 1) > "$o/record.txt" 2>&1
echo $? > "$o/record.rc"
cp /tmp/trace-cmd.dat "$o/trace.dat"
echo done > "$KLAB_OUT/done"
