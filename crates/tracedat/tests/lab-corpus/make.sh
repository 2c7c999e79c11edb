#!/usr/bin/env bash
# Records this folder's trace.dat files: boots Debian's x86-64 6.12, arm64
# 6.12 and s390x 6.1 (big-endian) kernels under QEMU with the kernel lab's
# run-in-foreign-kernel.sh, each with Debian 12's trace-cmd of its own
# architecture, runs guest.sh there and keeps every file trace-cmd wrote,
# packed per architecture as ARCH.tar.zst (ARCH-NAME.dat inside), and the
# guest's uname and trace-cmd version as ARCH.txt. tests/corpus.rs lists each
# file with our reader and with the host's trace-cmd and compares the two
# line for line.
#
#   crates/tracedat/tests/lab-corpus/make.sh [ARCH...]   (default: x86_64 aarch64 s390x)
#
# Needs what the lab's README-foreign.md names (qemu-system-x86/-arm/-misc,
# busybox-static, cpio, xz-utils, zstd; dpkg --add-architecture arm64 and
# s390x, apt-get update). About 5 minutes per architecture on 2 cores (TCG).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lab=${KERNEL_LAB:-$here/../../../../../shared/kernel-lab}
out=${LAB_CORPUS_OUT:-/var/tmp/lab-corpus}
debs="trace-cmd libtraceevent1 libtracefs1 libzstd1 libc6 zlib1g libtraceevent1-plugin"

newest_612() { # FLAVOUR: the newest Debian 12 6.12 kernel package of FLAVOUR
  apt-cache pkgnames linux-image-6.12 | grep -E "^linux-image-6\.12\.[0-9]+\+deb12-$1\$" |
    sort -t. -k3 -n | tail -1
}

kernel_of() { # ARCH
  case $1 in
    x86_64) newest_612 amd64 ;;
    aarch64) newest_612 arm64-unsigned ;;
    # The metapackage's kernel (linux-image-6.1.0-N-s390x).
    s390x) apt-cache depends linux-image-s390x:s390x | sed -n 's/.*Depends: \(linux-image-[^:]*\).*/\1/p' | head -1 ;;
  esac
}

[ $# -gt 0 ] || set -- x86_64 aarch64 s390x
for arch in "$@"; do
  pkg=$(kernel_of "$arch")
  [ -n "$pkg" ] || { echo "make.sh: apt knows no kernel for $arch (apt-get update?)" >&2; exit 1; }
  payload=$(mktemp -d)
  cp "$here/guest.sh" "$payload/guest.sh"
  rm -rf "${out:?}/$arch"
  mkdir -p "$out/$arch"
  echo "make.sh: $arch: $pkg" >&2
  "$lab/run-in-foreign-kernel.sh" --arch "$arch" --kernel-package "$pkg" --debs "$debs" \
    --smp 2 --mem 2048 --timeout 1200 --out "$out/$arch" "$payload" -- sh /payload/guest.sh
  rm -rf "$payload"
  [ -f "$out/$arch/done" ] || { echo "make.sh: $arch: the guest did not finish" >&2; exit 1; }
  # One tar of the architecture's files, zstd over all of them (their
  # kallsyms and formats are the same): ARCH.tar.zst, ARCH-NAME.dat inside.
  (cd "$out/$arch" && for f in *.dat; do ln -f "$f" "$arch-$f"; done &&
    tar --sort=name --owner=0 --group=0 --mtime=@0 -cf "$out/$arch.tar" "$arch"-*.dat &&
    rm -f "$arch"-*.dat)
  zstd -q -19 --long=27 -f "$out/$arch.tar" -o "$here/$arch.tar.zst"
  rm -f "$out/$arch.tar"
  { cat "$out/$arch/uname"; cat "$out/$arch/trace-cmd-version"; } > "$here/$arch.txt"
done
