#!/usr/bin/env bash
# Starts or stops the fleet test's SSH "hosts": one sshd per loopback address
# 127.0.0.2, 127.0.0.3, 127.0.0.4 (port 2222), each with its own host key,
# root login by key only, keys and authorized_keys in DIR. All share this kernel.
#   sshd.sh start DIR   writes DIR/client_key and starts the three sshd
#   sshd.sh stop DIR    stops them (by the pids in DIR/*.pid)
set -euo pipefail
cmd=$1 dir=$2
addrs=(127.0.0.2 127.0.0.3 127.0.0.4)
case "$cmd" in
start)
  mkdir -p "$dir" /run/sshd
  [ -f "$dir/client_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$dir/client_key"
  cp "$dir/client_key.pub" "$dir/authorized_keys"
  for i in 0 1 2; do
    a=${addrs[$i]} h=h$((i + 1))
    [ -f "$dir/$h.key" ] || ssh-keygen -q -t ed25519 -N '' -f "$dir/$h.key"
    cat > "$dir/$h.conf" <<CONF
ListenAddress $a:2222
HostKey $dir/$h.key
PidFile $dir/$h.pid
AuthorizedKeysFile $dir/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
MaxStartups 50
MaxSessions 50
Subsystem sftp internal-sftp
CONF
    /usr/sbin/sshd -f "$dir/$h.conf"
  done
  for h in h1 h2 h3; do
    for _ in $(seq 50); do [ -s "$dir/$h.pid" ] && break; sleep 0.1; done
  done
  ;;
stop)
  for h in h1 h2 h3; do
    [ -s "$dir/$h.pid" ] && kill "$(cat "$dir/$h.pid")" 2>/dev/null || true
    rm -f "$dir/$h.pid"
  done
  ;;
*)
  echo "usage: $0 start|stop DIR" >&2
  exit 2
  ;;
esac
