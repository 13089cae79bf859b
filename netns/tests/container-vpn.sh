#!/usr/bin/env bash
# The VPN container (issue 17 point 6, gluetun's pattern): the image of Scripts/vpn-image.sh (a Debian 12
# root with the Tunnelgate package, imported with podman import, no registry) runs `tunnelgate up wg0`
# in its own network namespace with --cap-add NET_ADMIN and --device /dev/net/tun only (no
# --privileged); another container joins it with --network container:vpn and is behind its tunnel and
# kill switch.
#
#   ┌─ C: podman (CNI backend, private to this run), bridge tgbr43 10.89.43.0/24 fd00:89:43::/64 ──┐
#   │  vpn  (the image): eth0 10.89.43.x, TUN wg0 10.8.0.3, includeAllNetworks                    │
#   │  app  (busybox, --network container:vpn): the same namespace                                 │
#   └──────── C forwards, default via R ─────────────────────────────────────────────────────────┘
#   R  router: routes 10.89.43.0/24 back to C; counts every packet from C that is not the carrier
#      (vpn's 10.89.43.x:52003 -> 198.18.0.10:51820/udp)
#   I  wireguard-go on 198.18.0.10:51820 (netns/containers.sh), the tunnel's peer; $INCLUDED4 behind it
#
# Asserted: the image's entry point and health check are those the script sets, and it holds no Swift
# toolchain; the container comes up with the tunnel's TUN and kill switch in its namespace and is
# healthy (podman healthcheck run); the plane's uid cannot read the mounted key or the engine's state
# (its sandbox has no mount namespace there: file modes keep them); the joined container reaches $INCLUDED4 only through the tunnel
# (the peer's RX grows; the leak counter on R stays 0 while the generator tries every way out); killing
# the packet plane (the runtime) leaves the kill switch holding: the joined container is cut off, the
# leak counter still 0, the health check unhealthy; `podman rm -f` of both leaves C as it was and no
# tunnelgate process on the machine.
#
# The package is built from this tree (Scripts/package-deb.sh: the release build, which Scripts/test.sh
# makes before the scenarios) unless TG_VPN_DEB names one; the Debian packages come from the machine's
# own sources, cached in .build/vpn-image/cache.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../containers.sh"
started=$(_tg_now_ms)
budget=${TG_VPN_BUDGET:-280}
WGI=wgi$((RANDOM % 100000))
VPN_IMAGE=localhost/tunnelgate-vpn:test
tg_defer rm -f "/var/run/wireguard/$WGI.sock"
[ -x /bin/busybox ] || tg_bail "busybox-static is installed" "Scripts/setup.sh installs it"
[ -c /dev/net/tun ] || tg_bail "/dev/net/tun exists"
tg_begin --needs podman,runc,wireguard-go,wg,mmdebstrap,dpkg-deb,python3
tg_defer tg_containers_down

# --- The package and the image ------------------------------------------------------------------------
tg_vpn_package
tg_podman_setup "$NS_C"
tg_podman_image
t0=$(_tg_now_ms)
tg_run bash "$TG_ROOT/Scripts/vpn-image.sh" podman "$VPN_IMAGE" --deb "$deb"
check_rc "Scripts/vpn-image.sh podman builds and imports the image ($(( ($(_tg_now_ms) - t0) / 1000 )) s)" 0 ||
  tg_bail "no VPN image" "$(printf '%s\n' "$TG_ERR" | tail -n 20)"
inspect() { tg_podman image inspect --format "$1" "$VPN_IMAGE" 2>&1; }
check_eq "its entry point is the container's entry point script" '[/usr/lib/tunnelgate/container/entrypoint]' \
  "$(inspect '{{.Config.Entrypoint}}')"
check_eq "its health check runs the health check script" '["CMD","/usr/lib/tunnelgate/container/healthcheck"]' \
  "$(tg_podman image inspect --format '{{json .HealthCheck.Test}}' "$VPN_IMAGE" 2>&1)"
check_eq "it is one layer (the imported root; the health check is metadata)" 1 "$(inspect '{{len .RootFS.Layers}}')"
check_eq "its environment lets the plane start without a mount namespace" TUNNELGATE_PLANE_MOUNT_NAMESPACE=off \
  "$(tg_podman image inspect --format '{{range .Config.Env}}{{println .}}{{end}}' "$VPN_IMAGE" 2>&1 | grep '^TUNNELGATE_')"
# one-off IMAGE-COMMAND ARGS...: a throwaway container of the image with no network and no health check.
one_off() {
  local command=$1
  shift
  tg_podman run --rm --pull=never --network none --no-healthcheck --entrypoint "$command" "$VPN_IMAGE" "$@"
}
check_eq "its tunnelgate is the package's version" "$(dpkg-deb -f "$deb" Version)" "$(one_off /usr/sbin/tunnelgate --version 2>&1)"
check_eq "it holds no Swift toolchain or runtime library" "" \
  "$(one_off /usr/bin/find / -xdev \( -name 'libswift*' -o -path /opt/swift \) -print 2>&1)"

# --- The peer and the tunnel's configuration -------------------------------------------------------------
ip netns exec "$NS_C" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
ip -n "$NS_R" route add 10.89.43.0/24 via "$C_ETH0_4"
ip -n "$NS_R" -6 route add fd00:89:43::/64 via "$C_ETH0_6"
tg_vpn_container_config "$WGI"
tg_run tg_podman run --rm --pull=never --network none --no-healthcheck -v "$ETC:/etc/tunnelgate:ro" \
  --entrypoint /usr/sbin/tunnelgate "$VPN_IMAGE" validate /etc/tunnelgate/wg0.json
check_rc "the image's tunnelgate finds the mounted configuration valid" 0

tg_podman_network tgvpn tgbr43 10.89.43.0/24 10.89.43.1 fd00:89:43::/64 fd00:89:43::1
tg_run tg_podman run --rm --pull=never --network tgvpn "$TG_IMAGE" true
check_rc "a first container on the bridge runs and is removed" 0
wait_for "the bridge has no port left and C no tentative address" 10 tg_bridge_settled "$NS_C" tgbr43
tg_snapshot "$NS_C" "$TG_TMP/c-before"

# --- The VPN container ------------------------------------------------------------------------------
# Without the image's TUNNELGATE_PLANE_MOUNT_NAMESPACE=off the plane's sandbox needs CAP_SYS_ADMIN, which
# the container does not have: up fails, saying so, and the container ends.
vpn_run() { # ARGS...: the VPN container's options, as every run below has them, then ARGS
  tg_podman run --pull=never --network tgvpn --cap-add NET_ADMIN --device /dev/net/tun \
    --sysctl net.ipv4.conf.all.src_valid_mark=1 -v "$ETC:/etc/tunnelgate:ro" "$@"
}
tg_run vpn_run --rm --no-healthcheck -e TUNNELGATE_PLANE_MOUNT_NAMESPACE=on "$VPN_IMAGE"
check_rc "with TUNNELGATE_PLANE_MOUNT_NAMESPACE=on the container's up fails (exit 1)" 1
check_match "... naming the sandbox step that needs CAP_SYS_ADMIN" \
  'starting the packet plane \(unshare\(CLONE_NEWNS\)\) failed: Operation not permitted' "$TG_ERR"
tg_run vpn_run --rm --no-healthcheck -e TUNNELGATE_PLANE_MOUNT_NAMESPACE=maybe "$VPN_IMAGE"
check_rc "a value other than on or off is refused (exit 1)" 1
check_match "... naming the variable and the value" 'TUNNELGATE_PLANE_MOUNT_NAMESPACE=maybe: not on or off' "$TG_ERR"
wait_for "the bridge has no port left" 10 tg_bridge_settled "$NS_C" tgbr43
# /proc/sys is read-only in a container: the one parameter the tunnel needs (src_valid_mark) is set by
# podman, and tunnelgate, finding it set, writes nothing.
tg_run vpn_run -d --name vpn "$VPN_IMAGE"
check_rc "podman run -d --name vpn --cap-add NET_ADMIN --device /dev/net/tun (no --privileged)" 0
vpn_pid=$(tg_podman inspect -f '{{.State.Pid}}' vpn 2>/dev/null)
vpn_ns=$(tg_podman inspect -f '{{.NetworkSettings.SandboxKey}}' vpn 2>/dev/null)
vpn4=$(nsenter --net="$vpn_ns" ip -4 -o addr show dev eth0 2>/dev/null | awk '{ sub(/\/.*/, "", $4); print $4; exit }')
[ -n "$vpn4" ] || tg_bail "the VPN container runs, with an IPv4 address on eth0" "$(tg_podman logs vpn 2>&1 | tail -n 20)"
cap_eff=$(awk '/^CapEff/ { print $2 }' "/proc/$vpn_pid/status" 2>/dev/null)
check_match "its engine has NET_ADMIN (CapEff $cap_eff)" '^1$' "$(( 0x${cap_eff:-0} >> 12 & 1 ))"
check_match "... and no SYS_ADMIN" '^0$' "$(( 0x${cap_eff:-200000} >> 21 & 1 ))"
in_vpn() { tg_podman exec vpn "$@"; }
connected() { [[ $(in_vpn /usr/sbin/tunnelgate status wg0 2>/dev/null) == "wg0: connected"* ]]; }
if ! wait_for "the tunnel in the container connects (tunnelgate status wg0)" 20 connected; then
  _tg_detail "$(tg_podman logs vpn 2>&1 | tail -n 20)"
fi
check_match "the TUN is in the container's namespace" 'inet 10\.8\.0\.3/24' "$(nsenter --net="$vpn_ns" ip -4 addr show dev wg0 2>&1)"
check_match "the kill switch is in the container's namespace" 'table inet tunnelgate' \
  "$(nsenter --net="$vpn_ns" nft list tables 2>&1)"
check_eq "the container's process is the tunnel's engine (PID 1: tunnelgate up wg0)" "/usr/sbin/tunnelgate up wg0" \
  "$(tr '\0' ' ' <"/proc/$vpn_pid/cmdline" 2>/dev/null | sed 's/ $//')"
check_match "status says the plane runs without its mount namespace (not just 'sandboxed')" \
  'packet plane: pid [0-9]+, uid [0-9]+ \(unprivileged, sandboxed without its mount namespace\)' "$(in_vpn /usr/sbin/tunnelgate status wg0 2>&1)"
tg_run tg_podman healthcheck run vpn
check_rc "podman healthcheck run vpn: healthy (exit 0)" 0
check_eq "... and podman inspect says so" healthy "$(tg_podman inspect -f '{{.State.Health.Status}}' vpn 2>&1)"

# Without its mount namespace the plane sees the container's files; what keeps the engine's from it is
# their modes (docs/operations.md, VPN container). Tried as the plane's uid, with root as the control.
plane_uid=$(in_vpn /usr/sbin/tunnelgate status wg0 --json 2>/dev/null | jq -r '.planeUser // empty')
as_plane() { tg_podman exec --user "${plane_uid:-65534}" vpn "$@"; }
check "control: root in the container reads the mounted key and lists /run/tunnelgate" \
  in_vpn sh -c 'cat /etc/tunnelgate/wg0.key >/dev/null && ls /run/tunnelgate >/dev/null'
check "control: the plane's uid ($plane_uid) runs commands in the container and reads /etc/os-release" \
  as_plane cat /etc/os-release
check_fails "the plane's uid cannot read the mounted key" as_plane cat /etc/tunnelgate/wg0.key
check_fails "... nor list the engine's state directory /run/tunnelgate" as_plane ls /run/tunnelgate
check_fails "... nor write outside the world-writable directories (/etc)" as_plane touch /etc/tg-plane-probe

# --- A container joined to it ---------------------------------------------------------------------------
tg_lab_leak_declare --carrier "$CARRIER4:51820/udp@$vpn4:52003"
tg_run tg_podman run -d --name app --pull=never --network container:vpn "$TG_IMAGE" sleep 280
check_rc "podman run -d --name app --network container:vpn" 0
app_pid=$(tg_podman inspect -f '{{.State.Pid}}' app 2>/dev/null)
check_eq "app is in vpn's network namespace" "$(stat -L -c %i "/proc/$vpn_pid/ns/net")" \
  "$(stat -L -c %i "/proc/$app_pid/ns/net" 2>&1)"
tg_lab_leaks_reset
rx=$(tg_vpn_peer_rx)
check "app reaches $INCLUDED4" tg_podman exec app ping -c 1 -W 3 "$INCLUDED4"
check "... through the tunnel (the peer's RX $rx -> $(tg_vpn_peer_rx))" test "$(tg_vpn_peer_rx)" -gt "$rx"
check "... the carrier flowed ($(tg_lab_carrier_packets) packets)" test "$(tg_lab_carrier_packets)" -gt 0
check "the generator made its attempts in app's namespace" tg_leak_generate_in "/proc/$app_pid/ns/net"
check_lab_no_leaks "[joined, connected: every way out of app] nothing left C's physical interfaces but the carrier 5-tuples"

# --- The runtime dies ----------------------------------------------------------------------------------
plane=$(in_vpn /usr/sbin/tunnelgate status wg0 --json 2>/dev/null | jq -r '.planePID // empty')
check_match "the packet plane runs in the container (pid $plane there)" '^[0-9]+$' "$plane"
tg_run in_vpn sh -c "kill -KILL $plane"
check_rc "the plane is killed (SIGKILL)" 0
not_connected() { ! connected; }
wait_for "status is no longer connected" 15 not_connected
check_match "status says the kill switch holds after the plane was killed" 'failed closed|kill switch' \
  "$(in_vpn /usr/sbin/tunnelgate status wg0 2>&1)"
tg_lab_leaks_reset
check_fails "app reaches $INCLUDED4 no more" tg_podman exec app ping -c 1 -W 2 "$INCLUDED4"
check "the generator made its attempts in app's namespace" tg_leak_generate_in "/proc/$app_pid/ns/net"
check_lab_no_leaks "[the runtime dead: every way out of app (cut off, not leaked)] nothing left C's physical interfaces but the carrier 5-tuples"
check_eq "the carrier too is quiet: nothing sends it any more" 0 "$(tg_lab_carrier_packets)"
tg_run tg_podman healthcheck run vpn
check_eq "podman healthcheck run vpn: unhealthy" "1 unhealthy" "$TG_RC $TG_OUT"
check_eq "... and podman inspect says so" unhealthy "$(tg_podman inspect -f '{{.State.Health.Status}}' vpn 2>&1)"

# --- podman rm -f leaves nothing -------------------------------------------------------------------------
tg_run tg_podman rm -f --time 5 app
check_rc "podman rm -f app" 0
tg_run tg_podman stop --time 10 vpn
check_rc "podman stop vpn (SIGTERM to its engine, PID 1)" 0
check_no_match "... which ended it within the grace time (no SIGKILL)" 'resorting to SIGKILL' "$TG_ERR"
vpn_log=$(tg_podman logs vpn 2>&1)
check_no_match "... and its teardown restored every parameter (the container's log)" 'restoring sysctl' "$vpn_log"
tg_run tg_podman rm -f --time 2 vpn
check_rc "podman rm -f vpn" 0
check_fails "vpn's engine is gone" test -d "/proc/$vpn_pid"
no_image_tunnelgate() { # no process on the machine runs the image's /usr/sbin/tunnelgate
  local p
  for p in /proc/[0-9]*; do
    [ "$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null | cut -d' ' -f1)" = /usr/sbin/tunnelgate ] && return 1
  done
  return 0
}
wait_for "no tunnelgate process of the image is left on the machine" 10 no_image_tunnelgate
wait_for "the bridge has no port left" 10 tg_bridge_settled "$NS_C" tgbr43
tg_snapshot "$NS_C" "$TG_TMP/c-after"
check_same_snapshot "C is as before the containers" "$TG_TMP/c-before" "$TG_TMP/c-after"
check_fails "the container's namespace is gone ($vpn_ns)" test -e "$vpn_ns"

elapsed=$(( ($(_tg_now_ms) - started) / 1000 ))
if [ "$elapsed" -le "$budget" ]; then
  tg_pass "the scenario took ${elapsed} s (budget ${budget} s)"
else
  tg_fail "the scenario took ${elapsed} s, over its budget of ${budget} s"
fi
tg_summary
