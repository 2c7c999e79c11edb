#!/usr/bin/env bash
# Refreshes the kernel fact files the validation tests run from (tests/facts/):
# this host's, and those of the kernel lab's freshly booted Debian 6.1, 6.12,
# PREEMPT_RT 6.1, unstable's 7.2 (scripts/lab-kernel) and arm64 6.12 guests (`trace-recipe facts` run first thing after boot, so the top-level ring
# buffer is still unexpanded). Needs root and the kernel lab
# (../shared/kernel-lab/README.md); takes a few minutes under emulation.
#
# Usage: sudo scripts/refresh-facts.sh
set -euo pipefail
cd "$(dirname "$0")/.."
lab=${KERNEL_LAB_SCRIPT:-../shared/kernel-lab/run-in-kernel.sh}
cargo build --release -q
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/payload" tests/facts
cp target/release/trace-recipe "$work/payload/"
cat > "$work/payload/facts.sh" <<'GUEST'
cd /payload && ./trace-recipe facts -o "$KLAB_OUT/facts.json.zst"
GUEST
# The lab and the host's facts are read under the tracefs lock the tests hold.
exec 9>/tmp/trace-recipe-tracefs.lock
flock 9
target/release/trace-recipe facts -o tests/facts/host.json.zst
# The RT kernel: the versioned package linux-image-rt-amd64 depends on.
rt=$(apt-cache depends linux-image-rt-amd64 2>/dev/null | awk '/Depends: linux-image-6/{print $2; exit}')
# Debian unstable's newest 7.2, fetched into the lab's cache by scripts/lab-kernel.
k72=$(scripts/lab-kernel sid 7.2 amd64)
for spec in "6.1:" "6.12:linux-image-6.12.117+deb12-amd64" "6.1-rt:${rt:-linux-image-6.1.0-56-rt-amd64}" "7.2:$k72"; do
  tag=${spec%%:*} pkg=${spec#*:}
  "$lab" --smp 1 --timeout 900 ${pkg:+--kernel-package "$pkg"} --out "$work/$tag" \
    "$work/payload" -- sh /payload/facts.sh
  cp "$work/$tag/facts.json.zst" "tests/facts/debian-$tag.json.zst"
done
# Debian 12's arm64 6.12 under qemu-system-aarch64 (run-in-foreign-kernel.sh),
# with trace-recipe cross-built for it (.cargo/config.toml, docs/src/kernel-lab.md).
foreign=${KERNEL_LAB_FOREIGN_SCRIPT:-../shared/kernel-lab/run-in-foreign-kernel.sh}
arm=$(apt-cache pkgnames linux-image-6.12 | grep -E '^linux-image-6\.12\.[0-9]+\+deb12-arm64-unsigned$' | sort -V | tail -n 1)
cargo build --release -q --target aarch64-unknown-linux-gnu
cp target/aarch64-unknown-linux-gnu/release/trace-recipe "$work/payload/"
"$foreign" --arch aarch64 --kernel-package "${arm:-linux-image-6.12.117+deb12-arm64-unsigned}" \
  --debs "libc6 libgcc-s1" --smp 1 --timeout 900 --out "$work/arm64-6.12" \
  "$work/payload" -- sh /payload/facts.sh
cp "$work/arm64-6.12/facts.json.zst" tests/facts/debian-arm64-6.12.json.zst
ls -l tests/facts
