# shellcheck shell=bash
# netns/resolved-env.sh: a real systemd-resolved, with its own system bus, inside one network namespace of a
# scenario, on a machine that runs neither systemd nor resolved. Sourced after lib.sh, never run.
#
#   network namespace NS (from tg_topology_up)
#   └─ private mount namespace (unshare --mount), held open by a `sleep` ($TG_RESOLVED_HOLDER):
#        /run/dbus      tmpfs: dbus-daemon with this file's config listens on /run/dbus/system_bus_socket,
#                       the standard system-bus path, so sd-bus clients (tunnelgate, resolved,
#                       resolvectl) find it as they would on a systemd host
#        /run/systemd   tmpfs: resolved's state directory /run/systemd/resolve and its configuration
#                       /run/systemd/resolved.conf.d/50-tunnelgate-test.conf
#        /etc/resolv.conf  /etc/netns/NS/resolv.conf, bind-mounted by `ip netns exec` as for any process of NS
#
# Nothing is installed: Debian's systemd-resolved and libsystemd-shared are unpacked by
# Scripts/fetch-resolved.sh into $TG_TMP (installing the package would point the host's /etc/resolv.conf
# at a stub nobody serves). What resolved needs to start outside systemd, learnt by starting it:
#   - not to run as root: as root it looks up the user systemd-resolve (which this host lacks) to drop to;
#     started as another user it skips that. It runs as nobody (65534), through setpriv, with the three
#     capabilities of its unit file's AmbientCapabilities=: CAP_NET_BIND_SERVICE (the stub listener on
#     127.0.0.53:53), CAP_NET_RAW (sockets bound to a link), CAP_SETPCAP;
#   - /run/systemd/resolve to exist and be that user's (the unit's RuntimeDirectory=);
#   - the system bus at /run/dbus/system_bus_socket, with a policy that lets it own
#     org.freedesktop.resolve1 (Debian's allows only systemd-resolve; the private bus here allows all);
#   - LD_LIBRARY_PATH to the unpacked libsystemd-shared (its RUNPATH names the system's directory);
#   - nothing else: without NOTIFY_SOCKET and WATCHDOG_USEC, sd_notify and the watchdog are no-ops; no
#     networkd, so no link is "managed" and every link accepts per-link DNS from D-Bus.
# A caller with CAP_NET_ADMIN (root) may change any link's settings without polkit.
#
# Every process lives in NS, so tg_topology_down ends them; the mounts go with the mount namespace.

TG_RESOLVED_HOLDER=""
TG_RESOLVED_PID=""
TG_RESOLVED_DIR=""
TG_RESOLVED_ROOT=""
TG_RESOLVED_LIBDIR=""

# tg_resolved_env NS: unpacks resolved, builds the private mount namespace in NS and starts its system bus.
# /etc/netns/NS/resolv.conf must exist first if the namespace's processes are to see it.
tg_resolved_env() {
  local ns=$1 dir
  dir=$TG_TMP/resolved
  mkdir -p "$dir"
  # resolved runs as nobody: its binary and libraries must be readable by everyone.
  chmod 755 "$TG_TMP" "$dir"
  TG_RESOLVED_DIR=$dir
  TG_RESOLVED_ROOT=$dir/root
  TG_RESOLVED_LIBDIR=$(bash "$TG_ROOT/Scripts/fetch-resolved.sh" "$TG_RESOLVED_ROOT" 2>"$dir/fetch.log") ||
    tg_bail "systemd-resolved is downloaded (apt-get download) and unpacked" "$(cat "$dir/fetch.log")"
  command -v dbus-daemon >/dev/null || tg_bail "dbus-daemon is installed (Scripts/setup.sh)"
  local mountpoint
  for mountpoint in /run/dbus /run/systemd; do
    # Mount points only; the host's contents stay untouched (the tmpfs is in the private namespace).
    [ -d "$mountpoint" ] || mkdir -p "$mountpoint" || tg_bail "mkdir $mountpoint (a mount point)"
  done

  cat >"$dir/bus.conf" <<'EOF'
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=/run/dbus/system_bus_socket</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
EOF
  cat >"$dir/env.sh" <<EOF
set -e
mount -t tmpfs -o mode=0755 tunnelgate-test-dbus /run/dbus
mount -t tmpfs -o mode=0755 tunnelgate-test-systemd /run/systemd
mkdir -p /run/systemd/resolve /run/systemd/resolved.conf.d
chown 65534:65534 /run/systemd/resolve
cp "$dir/resolved.conf" /run/systemd/resolved.conf.d/50-tunnelgate-test.conf
dbus-daemon --config-file="$dir/bus.conf" --nofork --nopidfile >"$dir/dbus.log" 2>&1 &
touch "$dir/ready"
exec sleep infinity
EOF
  [ -f "$dir/resolved.conf" ] || tg_resolved_config ""
  ip netns exec "$ns" unshare --mount --propagation private bash "$dir/env.sh" >"$dir/env.log" 2>&1 &
  TG_RESOLVED_HOLDER=$!
  _tg_poll 10 test -e "$dir/ready" || tg_bail "the private mount namespace for resolved is set up" "$(cat "$dir/env.log")"
  _tg_poll 10 tg_in_resolved_env test -S /run/dbus/system_bus_socket ||
    tg_bail "the private system bus listens on /run/dbus/system_bus_socket" "$(cat "$dir/dbus.log" "$dir/env.log")"
}

# tg_resolved_config GLOBAL_DNS: resolved.conf for the next tg_resolved_start: GLOBAL_DNS (the "LAN"
# resolver) as the global server, no fallback servers (nothing may leave for the Internet), no cache (each
# query reaches a server), no LLMNR, mDNS, DNSSEC or DNS-over-TLS, no /etc/hosts.
tg_resolved_config() {
  mkdir -p "$TG_TMP/resolved"
  cat >"$TG_TMP/resolved/resolved.conf" <<EOF
[Resolve]
DNS=$1
FallbackDNS=
Domains=
LLMNR=no
MulticastDNS=no
DNSSEC=no
DNSOverTLS=no
Cache=no
DNSStubListener=yes
ReadEtcHosts=no
EOF
  if [ -n "$TG_RESOLVED_HOLDER" ]; then
    tg_in_resolved_env cp "$TG_TMP/resolved/resolved.conf" /run/systemd/resolved.conf.d/50-tunnelgate-test.conf
  fi
}

# tg_in_resolved_env CMD...: runs CMD in the namespace's private mount namespace (and in NS).
tg_in_resolved_env() {
  nsenter -t "$TG_RESOLVED_HOLDER" --mount --net -- "$@"
}

# tg_resolved_start: starts resolved (log: $TG_RESOLVED_DIR/resolved.log, at debug level) and returns once
# org.freedesktop.resolve1 answers on the private bus.
tg_resolved_start() {
  tg_in_resolved_env env LD_LIBRARY_PATH="$TG_RESOLVED_LIBDIR" SYSTEMD_LOG_LEVEL=debug SYSTEMD_LOG_TARGET=console \
    setpriv --reuid=65534 --regid=65534 --clear-groups \
    --inh-caps=+net_bind_service,+net_raw,+setpcap --ambient-caps=+net_bind_service,+net_raw,+setpcap \
    "$TG_RESOLVED_ROOT/lib/systemd/systemd-resolved" >>"$TG_RESOLVED_DIR/resolved.log" 2>&1 &
  TG_RESOLVED_PID=$!
  _tg_poll 10 tg_resolvectl status ||
    tg_bail "systemd-resolved starts and answers on the private bus" "$(tail -n 30 "$TG_RESOLVED_DIR/resolved.log")"
}

# tg_resolved_stop: ends resolved (SIGTERM) and waits for it.
tg_resolved_stop() {
  [ -n "$TG_RESOLVED_PID" ] || return 0
  kill -TERM "$TG_RESOLVED_PID" 2>/dev/null
  _tg_poll 5 tg_exited "$TG_RESOLVED_PID" || kill -KILL "$TG_RESOLVED_PID" 2>/dev/null
  wait "$TG_RESOLVED_PID" 2>/dev/null
  TG_RESOLVED_PID=""
}

# tg_resolvectl ARGS...: the unpacked resolvectl, against the private bus. Observes; never configures
# what tunnelgate configures.
tg_resolvectl() {
  tg_in_resolved_env env LD_LIBRARY_PATH="$TG_RESOLVED_LIBDIR" SYSTEMD_COLORS=0 \
    "$TG_RESOLVED_ROOT/usr/bin/resolvectl" --no-pager "$@"
}
