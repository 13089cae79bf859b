#!/usr/bin/env bash
# Docker has no CNI: a container started by dockerd is put behind a tunnel with `tunnelgate up CONFIG
# --netns PATH`, PATH being the container's namespace as dockerd names it (its SandboxKey, a file under
# dockerd's exec root) or as its process does (/proc/PID/ns/net) (issue 17 point 1; netns-any.sh has the
# other forms). dockerd gives a container's namespace net.ipv6.conf.default.disable_ipv6=1, so a TUN
# moved there arrives with IPv6 off: tunnelgate sets disable_ipv6=0 on it when the settings have
# ipv6Settings. TG_NETNS_BY_NAME=1 runs the scenario with the paths named under /run/netns by the test
# (a bind mount, as `ip netns attach` makes) instead, as it ran before --netns took a path.
#
#   container (dockerd's exec-root/netns/ID)                       the tunnel tgdN: 10.8.0.N
#   │  eth0 10.89.40.x fd00:89:40::x on docker0 (blocked by the kill switch)
#   C  the host: dockerd (--iptables=false --ip-forward=false --ip-masq=false), the tunnels' owners and
#   │  their WireGuard sockets (ListenPort 5200N from 10.231.0.2); forwards, so a leak would reach R
#   R  router: routes docker0's networks back to C; counts every packet from C that is not a carrier
#   I  wireguard-go and the tunnels' DNS server (netns/containers.sh, The tunnels' peer)
#
# Asserted: the control (a container's leak is counted at R); `up --netns SANDBOXKEY`: the TUN in the
# container, its routes into it, I reached over IPv4 and IPv6 through the tunnel, DNS answered by the
# tunnel's server from the tunnel's address and the container's own resolver's server unreachable, no
# leak from every way out; `status` and `down` find the tunnel by the same path; `up --netns
# /proc/PID/ns/net` for a second container; a container with --network container:X behind X's
# tunnel; `up --netns docker:NAME` (dockerd's API socket): the TUN in the container, through the
# tunnel, status by docker:NAME and by /proc/PID/ns/net, an unknown container refused; `docker rm` of
# containers whose tunnels are up ends the tunnels (their processes exit; status says why) and leaves C
# as before with no tunnel process.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../containers.sh"

WGI=wgi$((RANDOM % 100000))
NAMED=()   # names this run gave namespaces (TG_NETNS_BY_NAME)
cleanup() {
  local n
  for n in "${NAMED[@]}"; do [ -e "/run/netns/$n" ] && ip netns del "$n" 2>/dev/null; done
  tg_containers_down
  rm -f "/var/run/wireguard/$WGI.sock"
}
tg_begin --needs dockerd,wireguard-go,dnsmasq
tg_defer cleanup
TUNNELS=$TG_TMP/tunnels

ip netns exec "$NS_C" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
ip -n "$NS_R" route add 10.89.40.0/24 via "$C_ETH0_4"
ip -n "$NS_R" -6 route add fd00:89:40::/64 via "$C_ETH0_6"
tg_vpn_peer_start "$WGI" "$TUNNELS"
# The tunnels are named tgdN (the file's name is the tunnel's).
tg_vpn_tunnel tgd2 2
tg_vpn_tunnel tgd3 3
tg_vpn_tunnel tgd4 4
tg_lab_leak_declare "${TG_VPN_CARRIERS[@]}"

tg_dockerd_start "$NS_C" 10.89.40.1/24 --ipv6 --fixed-cidr-v6 fd00:89:40::/64
tg_docker_image
# The baseline: docker0 made and settled (a first container has come and gone).
tg_docker run --rm --pull=never "$TG_IMAGE" true >/dev/null 2>&1
wait_for "docker0 has no port left" 10 tg_bridge_settled "$NS_C" docker0
tg_snapshot "$NS_C" "$TG_TMP/c-before"
run() { tg_docker run -d --pull=never "$@" "$TG_IMAGE" sleep 280; }
sandbox_of() { tg_docker inspect -f '{{.NetworkSettings.SandboxKey}}' "$1" 2>/dev/null; }
pid_of() { tg_docker inspect -f '{{.State.Pid}}' "$1" 2>/dev/null; }
in_c() { ip netns exec "$NS_C" "$@"; }
# tg_netns PATH: sets $ns, what this run passes to --netns for PATH: PATH itself, or (TG_NETNS_BY_NAME=1)
# a name the test gives it under /run/netns (kept in NAMED for the cleanup: no subshell here).
tg_netns() {
  ns=$1
  if [ "${TG_NETNS_BY_NAME:-0}" = 1 ]; then
    ns=tgdocker-$(stat -L -c %i "$1")
    if [ ! -e "/run/netns/$ns" ]; then
      touch "/run/netns/$ns" && mount --bind "$1" "/run/netns/$ns" && NAMED+=("$ns")
    fi
  fi
}

# --- Control ---------------------------------------------------------------------------------------------
tg_run run --name c0
check_rc "docker run c0 on docker0" 0
path=$(sandbox_of c0)
check_match "c0's namespace is a path under dockerd's exec root" "^$TG_DOCKER_DIR/exec/netns/" "$path"
wait_for "c0's IPv6 address is usable" 10 tg_docker exec c0 sh -c '! ip -6 addr show dev eth0 | grep -q tentative'
check "control: c0 reaches $INCLUDED4 directly" tg_docker exec c0 ping -c 1 -W 2 "$INCLUDED4"
tg_lab_leaks_reset
check "control: the generator made its attempts in c0's namespace" tg_leak_generate_in "$path"
_tg_leak_settle
check "control: R counts what c0 sent ($(tg_lab_leak_count) packets)" test "$(tg_lab_leak_count)" -gt 0

# --- up --netns SANDBOXKEY -----------------------------------------------------------------------------
tg_netns "$path"
tg_run in_c "$TG" up "$TUNNELS/tgd2.conf" --netns "$ns" --detach
check_rc "tunnelgate up tgd2.conf --netns $ns --detach (the container's SandboxKey)" 0
check_match "the TUN is in the container" 'inet 10\.8\.0\.2/24' "$(tg_docker exec c0 ip -4 addr show dev tgd2 2>&1)"
check_match "the container's routes lead into it" 'dev tgd2' "$(tg_docker exec c0 ip route get "$INCLUDED4" 2>&1)"
check "the tunnel's owner runs in C" test -n "$(tg_tunnel_pids "$NS_C")"
rx=$(tg_vpn_peer_rx)
check "the container reaches $INCLUDED4" tg_docker exec c0 ping -c 1 -W 3 "$INCLUDED4"
check "the container reaches $INCLUDED6 over IPv6" tg_docker exec c0 ping -6 -c 1 -W 3 "$INCLUDED6"
check "... through the tunnel (RX $rx -> $(tg_vpn_peer_rx))" test "$(tg_vpn_peer_rx)" -gt "$rx"
check_match "a lookup of the tunnel's DNS server is answered" "$(tg_re "$INCLUDED4")" \
  "$(tg_docker exec c0 nslookup probe.tunnel.example 10.8.0.1 2>&1)"
check_match "... which saw it come from the tunnel's address" 'probe\.tunnel\.example from 10\.8\.0\.2' "$(cat "$TG_TMP/dnsmasq.log")"
own=$(tg_docker exec c0 sed -n 's/^nameserver //p' /etc/resolv.conf 2>/dev/null | grep -vx 10.8.0.1 | head -n 1)
if [ -n "$own" ]; then
  check_fails "the container's own resolver ($own, from dockerd's resolv.conf) is unreachable behind the kill switch" \
    tg_docker exec c0 nslookup probe.tunnel.example "$own"
fi
tg_lab_leaks_reset
check "the generator made its attempts in c0's namespace" tg_leak_generate_in "$path"
check_lab_no_leaks "[up --netns SANDBOXKEY: every way out of the container] nothing left C's physical interfaces but the carrier 5-tuples"
check_match "status finds the tunnel by the same path" 'tgd2: connected' "$(in_c "$TG" status tgd2 --netns "$ns" 2>&1)"

# A container sharing c0's network.
tg_run run --name side --network container:c0
check_rc "docker run --network container:c0" 0
check_match "... its routes lead into c0's tunnel" 'dev tgd2' "$(tg_docker exec side ip route get "$INCLUDED4" 2>&1)"
rx=$(tg_vpn_peer_rx)
check "... it reaches $INCLUDED4" tg_docker exec side ping -c 1 -W 3 "$INCLUDED4"
check "... through the tunnel (RX $rx -> $(tg_vpn_peer_rx))" test "$(tg_vpn_peer_rx)" -gt "$rx"
tg_docker rm -f side >/dev/null

tg_run in_c "$TG" down tgd2 --netns "$ns"
check_rc "tunnelgate down tgd2 --netns PATH" 0
wait_for "the tunnel's owner has exited" 10 tg_no_tunnel_process "$NS_C"
check "after down: c0 reaches $INCLUDED4 directly again" tg_docker exec c0 ping -c 1 -W 2 "$INCLUDED4"

# --- up --netns /proc/PID/ns/net, then docker rm with the tunnel up ---------------------------------------
tg_run run --name c1
check_rc "docker run c1" 0
tg_netns "/proc/$(pid_of c1)/ns/net"
tg_run in_c "$TG" up "$TUNNELS/tgd3.conf" --netns "$ns" --detach
check_rc "tunnelgate up tgd3.conf --netns /proc/PID/ns/net --detach" 0
check "c1 reaches $INCLUDED4 through its tunnel" tg_docker exec c1 ping -c 1 -W 3 "$INCLUDED4"
check_match "... by the tunnel's route" 'dev tgd3' "$(tg_docker exec c1 ip route get "$INCLUDED4" 2>&1)"

# --- up --netns docker:NAME (dockerd's API socket, $DOCKER_HOST) -------------------------------------------
tg_run run --name c2
check_rc "docker run c2" 0
tg_run in_c "$TG" up "$TUNNELS/tgd4.conf" --netns docker:c2 --detach
check_rc "tunnelgate up tgd4.conf --netns docker:c2 --detach" 0
check_match "... the TUN is in c2" 'inet 10\.8\.0\.4/24' "$(tg_docker exec c2 ip -4 addr show dev tgd4 2>&1)"
rx=$(tg_vpn_peer_rx)
check "c2 reaches $INCLUDED4" tg_docker exec c2 ping -c 1 -W 3 "$INCLUDED4"
check "... through the tunnel (RX $rx -> $(tg_vpn_peer_rx))" test "$(tg_vpn_peer_rx)" -gt "$rx"
check_match "status finds it by docker:c2" 'tgd4: connected' "$(in_c "$TG" status tgd4 --netns docker:c2 2>&1)"
check_match "... and by c2's /proc/PID/ns/net" 'tgd4: connected' "$(in_c "$TG" status tgd4 --netns "/proc/$(pid_of c2)/ns/net" 2>&1)"
tg_run in_c "$TG" status tgd4 --netns docker:tg-no-such-container
check_rc "status --netns docker:NO-SUCH fails" 1
check_match "... saying dockerd has no such container" 'has no container tg-no-such-container' "$TG_ERR"
c2pid=$(pid_of c2)

tg_run tg_docker rm -f c0 c1 c2
check_rc "docker rm -f c0 c1 c2 (c1's and c2's tunnels still up)" 0
wait_for "c2's process gone, its tunnel ends by itself" 15 bash -c "! pgrep -f 'tunnelgate up [^ ]*tgd4[.]conf' >/dev/null"
check_match "status tgd4 in C says why" "went away: process $c2pid, whose namespace it is, exited" "$(in_c "$TG" status tgd4 2>&1)"
[ "${TG_NETNS_BY_NAME:-0}" = 1 ] && for n in "${NAMED[@]}"; do ip netns del "$n" 2>/dev/null; done
wait_for "c1's namespace gone, its tunnel ends by itself: no tunnel process left" 15 tg_no_tunnel_process "$NS_C"
wait_for "docker0 has no port left" 10 tg_bridge_settled "$NS_C" docker0
tg_snapshot "$NS_C" "$TG_TMP/c-after"
check_same_snapshot "C is as before the tunnels" "$TG_TMP/c-before" "$TG_TMP/c-after"
check_fails "WireGuard's API socket of tgd3 is gone" test -e /var/run/wireguard/tgd3.sock

tg_summary
