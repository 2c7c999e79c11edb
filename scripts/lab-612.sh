# Sourced by the kernel-lab benches (scripts/bench-report.sh,
# bench-capture-lab.sh, bench-answers-lab.sh): lab_612 prints the package of
# Debian 12's newest 6.12 amd64 kernel that apt knows, or the one the suite
# pins when apt knows none (no package lists).
lab_612() {
  local pkg
  pkg=$(apt-cache pkgnames linux-image-6.12 2>/dev/null | grep -E '^linux-image-6\.12\.[0-9]+\+deb12-amd64$' | sort -V | tail -1)
  echo "${pkg:-linux-image-6.12.117+deb12-amd64}"
}
