#!/usr/bin/env bash
# Capture bench on this host: trace-recipe's recorder against a plain
# page-sized `dd bs=4096` reader of each CPU's trace_pipe_raw (the floor of
# effort), same events, buffer size, pid scope and load, at three rates from
# idle to saturating (scripts/bench-capture-run.sh says how each is counted).
# `trace-cmd record` is left out here: it fails on this host's kernel; the
# kernel lab runs all three (scripts/bench-capture-lab.sh).
#
# Usage: sudo scripts/bench-capture.sh [BUFFER_KB]   (default 1024)
set -euo pipefail
cd "$(dirname "$0")/.."
KB=${1:-1024}
cargo build --release -q
WORK=$(mktemp -d /var/tmp/trace-recipe-capture.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
# Hold the lock the test suites hold, so no test sees the bench's instances.
exec 9>/tmp/trace-recipe-tracefs.lock
flock 9
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "kernel:  $(uname -r)"
echo "date:    $(date -u +%Y-%m-%dT%H:%MZ)"
echo "buffer:  buffer_size_kb=$KB per CPU"
echo
WORK=$WORK sh scripts/bench-capture-run.sh "$PWD/target/release/trace-recipe" "$KB" trace-recipe dd
