#!/usr/bin/env bash
# Kernel engine against a stream, in the kernel lab (Debian 6.12 under QEMU,
# one CPU; issue 34 item 9): bench/answers-kernel.toml answers "which
# syscalls cost the most time?" over `dd bs=64 count=100000` (100,000 reads
# and 100,000 writes of /dev/zero and /dev/null) three times each way, taking
# turns: by the kernel's hist triggers with nothing streamed, and from the
# stream of raw_syscalls events. Per run: the recorder's CPU and the bytes it
# read from trace_pipe_raw (report.json `recorder`), the calls answered, the
# events lost, and how long tracing was on; then the workload untraced.
#
# The boot holds the tracefs lock the tests hold, as tests/lab.rs does.
# Needs qemu-system-x86, busybox-static, cpio, python3.
# Usage: sudo scripts/bench-answers-lab.sh
set -euo pipefail
cd "$(dirname "$0")/.."
LAB=${KERNEL_LAB_SCRIPT:-$PWD/../shared/kernel-lab/run-in-kernel.sh}
. scripts/lab-612.sh
PKG=$(lab_612)
cargo build --release -q
WORK=$(mktemp -d /var/tmp/trace-recipe-answers-lab.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
P=$WORK/payload
mkdir -p "$P"
strip -o "$P/trace-recipe" target/release/trace-recipe
cp bench/answers-kernel.toml "$P/"
exec 9>/tmp/trace-recipe-tracefs.lock
flock 9
"$LAB" --smp 1 --timeout 1200 --kernel-package "$PKG" --out "$WORK/out" "$P" -- sh -c '
  cd /payload
  for i in 1 2 3; do
    for e in kernel trace; do
      t=false; [ $e = trace ] && t=true
      ./trace-recipe run answers-kernel.toml --set engine=$e --set trace_dat=$t -q -o "$KLAB_OUT/$e-$i" \
        -- dd if=/dev/zero of=/dev/null bs=64 count=100000 2> /dev/null || echo "$e-$i failed" >&2
    done
  done
  for i in 1 2 3; do
    s=$(cut -d" " -f1 /proc/uptime)
    dd if=/dev/zero of=/dev/null bs=64 count=100000 2> /dev/null
    echo "$s $(cut -d" " -f1 /proc/uptime)" >> "$KLAB_OUT/untraced.txt"
  done' > "$WORK/lab.log" 2>&1 || { cat "$WORK/lab.log"; exit 1; }
python3 - "$WORK/out" <<'PY'
import json, sys
out = sys.argv[1]
print("run        engine  recorder cpu s  bytes read  calls answered  lost events  tracing on s")
for i in (1, 2, 3):
    for e in ("kernel", "trace"):
        d = json.load(open(f"{out}/{e}-{i}/report.json"))
        rec, a = d.get("recorder") or {}, d["answers"]["syscall_time"]
        print(f"{e}-{i:<6} {a['engine']:7} {rec.get('cpu_s', 0):14.3f} {rec.get('bytes', 0):11d} {a['total']['count']:15d} {d.get('lost_total', 0):12d} {d.get('duration_s', 0):13.2f}")
for l in open(f"{out}/untraced.txt"):
    s, e = map(float, l.split())
    print(f"untraced workload: {e - s:.2f} s")
PY
