#!/usr/bin/env bash
# `tunnelgate up CONFIG --netns podman:NAME` (issue 17 point 1): a Podman container found by its name
# through `podman inspect` (the run's private configuration, in tunnelgate's environment), put behind a
# tunnel of its own, found again by the same argument, and the tunnel ended by `podman rm`.
#
#   container (podman's netns-UUID)  eth0 10.89.42.x on bridge tgbr42 in C (blocked by the kill switch)
#   C  podman (CNI backend, private to this run) and the tunnel's owner run here; forwards, default via R
#   R  router: routes 10.89.42.0/24 back to C; counts every packet from C that is not a carrier
#   I  wireguard-go and the tunnels' DNS server (netns/containers.sh): $INCLUDED4
#
# Asserted: up --netns podman:NAME puts the TUN in the container, whose routes lead into it and whose
# packets reach I through the tunnel with no leak; status by podman:NAME and by the container's
# /proc/PID/ns/net; an unknown container is refused with podman's reason and nothing changes; `podman
# rm -f` with the tunnel up ends it (the container's process exited: status says so), C is as before
# and no tunnelgate process is left.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../containers.sh"
[ -x /bin/busybox ] || tg_bail "busybox-static is installed" "install it with Scripts/setup.sh"

WGI=wgi$((RANDOM % 100000))
cleanup() {
  tg_containers_down
  rm -f "/var/run/wireguard/$WGI.sock"
}
tg_begin --needs podman,wireguard-go,dnsmasq
tg_defer cleanup
TUNNELS=$TG_TMP/tunnels
# tunnelgate as podman runs (containers.sh): C's network, this mount namespace, the run's podman environment.
in_c() { nsenter --net="/run/netns/$NS_C" "$@"; }
ip netns exec "$NS_C" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
ip -n "$NS_R" route add 10.89.42.0/24 via "$C_ETH0_4"
tg_vpn_peer_start "$WGI" "$TUNNELS"
tg_vpn_tunnel tgp2 2
tg_lab_leak_declare "${TG_VPN_CARRIERS[@]}"

tg_podman_setup "$NS_C"
tg_podman_image
tg_podman_network pnetns tgbr42 10.89.42.0/24 10.89.42.1 fd00:89:42::/64 fd00:89:42::1
tg_run tg_podman run --rm --pull=never --network pnetns "$TG_IMAGE" true
check_rc "a first container on the CNI bridge runs and is removed" 0
wait_for "the bridge has no port left and C no tentative address" 10 tg_bridge_settled "$NS_C" tgbr42
tg_snapshot "$NS_C" "$TG_TMP/c-before"

tg_run tg_podman run -d --name pweb --pull=never --network pnetns "$TG_IMAGE" sleep 280
check_rc "podman run -d --name pweb" 0
pid=$(tg_podman inspect -f '{{.State.Pid}}' pweb 2>/dev/null)
check "control: pweb reaches $INCLUDED4 directly" tg_podman exec pweb ping -c 1 -W 2 "$INCLUDED4"

tg_snapshot "$NS_C" "$TG_TMP/c-running"
tg_run in_c "$TG" up "$TUNNELS/tgp2.conf" --netns podman:tg-no-such-container --detach
check_rc "up --netns podman:NO-SUCH fails" 1
check_match "... with podman's reason" 'podman inspect tg-no-such-container failed: .*no such' "$TG_ERR"
tg_snapshot "$NS_C" "$TG_TMP/c-refused"
check_same_snapshot "... and nothing changed in C" "$TG_TMP/c-running" "$TG_TMP/c-refused"

tg_run in_c "$TG" up "$TUNNELS/tgp2.conf" --netns podman:pweb --detach
check_rc "up tgp2.conf --netns podman:pweb --detach" 0
check_match "the TUN is in the container" 'inet 10\.8\.0\.2/24' "$(tg_podman exec pweb ip -4 addr show dev tgp2 2>&1)"
check_match "the container's routes lead into it" 'dev tgp2' "$(tg_podman exec pweb ip route get "$INCLUDED4" 2>&1)"
rx=$(tg_vpn_peer_rx)
check "pweb reaches $INCLUDED4" tg_podman exec pweb ping -c 1 -W 3 "$INCLUDED4"
check "... through the tunnel (RX $rx -> $(tg_vpn_peer_rx))" test "$(tg_vpn_peer_rx)" -gt "$rx"
tg_lab_leaks_reset
check "the generator made its attempts in pweb's namespace" tg_leak_generate_in "/proc/$pid/ns/net"
check_lab_no_leaks "[up --netns podman:pweb: every way out of the container] nothing left C's physical interfaces but the carrier 5-tuples"
check_match "status finds it by podman:pweb" 'tgp2: connected' "$(in_c "$TG" status tgp2 --netns podman:pweb 2>&1)"
check_match "... and by /proc/PID/ns/net" 'tgp2: connected' "$(in_c "$TG" status tgp2 --netns "/proc/$pid/ns/net" 2>&1)"

tg_run tg_podman rm -f --time 2 pweb
check_rc "podman rm -f pweb (its tunnel up)" 0
wait_for "the container's process gone: its tunnel ends by itself, no tunnelgate process left" 15 tg_no_tunnel_process "$NS_C"
check_match "status tgp2 in C says why" "went away: process $pid, whose namespace it is, exited" "$(in_c "$TG" status tgp2 2>&1)"
check_fails "WireGuard's API socket of tgp2 is gone" test -e /var/run/wireguard/tgp2.sock
wait_for "the bridge has no port left" 10 tg_bridge_settled "$NS_C" tgbr42
tg_snapshot "$NS_C" "$TG_TMP/c-after"
check_same_snapshot "C is as before the container and its tunnel" "$TG_TMP/c-before" "$TG_TMP/c-after"

tg_summary
