#!/usr/bin/env bash
# Records this folder's trace.dat files: boots Debian's kernels (x86-64 6.1,
# 6.1 PREEMPT_RT, 6.12 and 7.2, arm64 6.12, s390x 6.1 big-endian) under QEMU
# with the kernel lab's run-in-foreign-kernel.sh, each with Debian 12's
# trace-cmd of its own architecture, runs guest.sh there and keeps every file
# trace-cmd wrote, packed per kernel as TARGET.tar.zst (TARGET-NAME.dat
# inside), and the guest's uname and trace-cmd version as TARGET.txt.
# tests/corpus.rs lists each file with our reader and with the host's
# trace-cmd and compares the two line for line.
#
#   crates/tracedat/tests/lab-corpus/make.sh [TARGET...]
#
# TARGET: x86_64, aarch64 (Debian 12's newest 6.12), s390x (Debian 12's 6.1),
# x86_64-6.1, x86_64-rt-6.1 (PREEMPT_RT) and x86_64-7.2 (Debian unstable's,
# through scripts/lab-kernel); all of them by default.
#
# Needs what the lab's README-foreign.md names (qemu-system-x86/-arm/-misc,
# busybox-static, cpio, xz-utils, zstd; dpkg --add-architecture arm64 and
# s390x, apt-get update). About two minutes per kernel on 2 cores (TCG).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lab=${KERNEL_LAB:-$here/../../../../../shared/kernel-lab}
out=${LAB_CORPUS_OUT:-/var/tmp/lab-corpus}
debs="trace-cmd libtraceevent1 libtracefs1 libzstd1 libc6 zlib1g libtraceevent1-plugin"

newest_612() { # FLAVOUR: the newest Debian 12 6.12 kernel package of FLAVOUR
  apt-cache pkgnames linux-image-6.12 | grep -E "^linux-image-6\.12\.[0-9]+\+deb12-$1\$" |
    sort -t. -k3 -n | tail -1
}

depends_of() { # METAPACKAGE: the versioned kernel package it depends on
  apt-cache depends "$1" | sed -n 's/.*Depends: \(linux-image-[^:]*\).*/\1/p' | head -1
}

kernel_of() { # TARGET
  case $1 in
    x86_64) newest_612 amd64 ;;
    aarch64) newest_612 arm64-unsigned ;;
    s390x) depends_of linux-image-s390x:s390x ;;
    x86_64-6.1) depends_of linux-image-amd64 ;;
    x86_64-rt-6.1) depends_of linux-image-rt-amd64 ;;
    # Debian unstable's, put into the lab's cache by scripts/lab-kernel.
    x86_64-7.2) "$here/../../../../scripts/lab-kernel" sid 7.2 ;;
  esac
}

[ $# -gt 0 ] || set -- x86_64 aarch64 s390x x86_64-6.1 x86_64-rt-6.1 x86_64-7.2
for target in "$@"; do
  arch=${target%%-*}
  pkg=$(kernel_of "$target")
  [ -n "$pkg" ] || { echo "make.sh: apt knows no kernel for $target (apt-get update?)" >&2; exit 1; }
  payload=$(mktemp -d)
  cp "$here/guest.sh" "$payload/guest.sh"
  echo "make.sh: $target: $pkg" >&2
  # x86-64 guests get one vCPU: with two, enabling every event (`-e all`)
  # killed 6.12 three boots of four with an int3 oops in the scheduler (the
  # kernel's text patching under QEMU's multi-threaded TCG). The other
  # architectures' files hold two CPUs.
  smp=2
  [ "$arch" = x86_64 ] && smp=1
  for try in 1 2; do
    rm -rf "${out:?}/$target" && mkdir -p "$out/$target"
    "$lab/run-in-foreign-kernel.sh" --arch "$arch" --kernel-package "$pkg" --debs "$debs" \
      --smp "$smp" --mem 2048 --timeout 1200 --out "$out/$target" "$payload" -- sh /payload/guest.sh ||
      echo "make.sh: $target: boot $try failed" >&2
    [ -f "$out/$target/done" ] && break
  done
  rm -rf "$payload"
  [ -f "$out/$target/done" ] || { echo "make.sh: $target: the guest did not finish" >&2; exit 1; }
  # One tar of the kernel's files, zstd over all of them (their kallsyms and
  # formats are the same): TARGET.tar.zst, TARGET-NAME.dat inside.
  (cd "$out/$target" && for f in *.dat; do ln -f "$f" "$target-$f"; done &&
    tar --sort=name --owner=0 --group=0 --mtime=@0 -cf "$out/$target.tar" "$target"-*.dat &&
    rm -f "$target"-*.dat)
  zstd -q -19 --long=27 -f "$out/$target.tar" -o "$here/$target.tar.zst"
  rm -f "$out/$target.tar"
  { cat "$out/$target/uname"; cat "$out/$target/trace-cmd-version"; } > "$here/$target.txt"
done
