#!/usr/bin/env bash
# Capture bench in the kernel lab (Debian 6.12 under QEMU, 2 CPUs):
# `trace-cmd record` vs `trace-recipe run` vs a page-sized `dd bs=4096` reader
# of each CPU's trace_pipe_raw, same events, buffer size, pid scope and load,
# at three rates from idle to saturating (scripts/bench-capture-run.sh says how
# each is counted). trace-cmd is this machine's /usr/bin/trace-cmd: the lab
# copies a payload's shared libraries into the guest.
#
# In the same boot, scripts/check-export-trace-cmd.sh runs the command lines
# `check --plan --export trace-cmd` prints for a few recipes and checks their
# trace.dat (printed after the table).
#
# The boot takes both CPUs for minutes; it holds the tracefs lock the tests
# hold, as tests/lab.rs does. Needs qemu-system-x86, busybox-static, cpio.
#
# Usage: sudo [RATES="low mid high"] scripts/bench-capture-lab.sh [BUFFER_KB]   (default 1024)
set -euo pipefail
cd "$(dirname "$0")/.."
KB=${1:-1024}
LAB=${KERNEL_LAB_SCRIPT:-$PWD/../shared/kernel-lab/run-in-kernel.sh}
. scripts/lab-612.sh
PKG=$(lab_612)
cargo build --release -q
WORK=$(mktemp -d /var/tmp/trace-recipe-capture-lab.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
P=$WORK/payload
mkdir -p "$P"
cp target/release/trace-recipe scripts/bench-capture-run.sh bench/capture.toml "$P/"
cp "$(command -v trace-cmd)" "$P/trace-cmd"
cp scripts/check-export-trace-cmd.sh "$P/"
mkdir "$P/recipes"
cp recipes/*.toml "$P/recipes/"
exec 9>/tmp/trace-recipe-tracefs.lock
flock 9
"$LAB" --smp 2 --timeout 1500 --kernel-package "$PKG" --out "$WORK/out" "$P" -- sh -c "{
  echo \"machine: kernel lab guest (QEMU, \$(grep -c ^processor /proc/cpuinfo) CPUs) on a host with $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)\"
  echo \"kernel:  \$(uname -r)\"
  echo \"date:    $(date -u +%Y-%m-%dT%H:%MZ)\"
  echo \"buffer:  buffer_size_kb=$KB per CPU\"
  echo \"trace-cmd: \$(trace-cmd --version 2>&1 | grep version)\"
  echo
  RATES=\"${RATES:-low mid high}\" RECIPE=/payload/capture.toml WORK=/tmp/bench sh /payload/bench-capture-run.sh /payload/trace-recipe $KB trace-cmd trace-recipe dd
} > \$KLAB_OUT/bench.txt 2>&1
  cp /tmp/bench/*.log \$KLAB_OUT/ 2>/dev/null
  sh /payload/check-export-trace-cmd.sh /payload/trace-recipe /payload/recipes /tmp/export > \$KLAB_OUT/export.txt 2>&1" > "$WORK/console.txt" 2>&1 || true
cat "$WORK/out/bench.txt" 2>/dev/null || { tail -30 "$WORK/console.txt"; exit 1; }
echo
echo "check --plan --export trace-cmd, run in the same guest:"
cat "$WORK/out/export.txt" 2>/dev/null || { tail -30 "$WORK/console.txt"; exit 1; }
