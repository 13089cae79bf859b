#!/usr/bin/env bash
# tunnelgate-cni under a real caller: Podman 4.3 with its CNI backend (netns/containers.sh) runs busybox
# containers on bridge networks whose conflists chain tunnelgate-cni after the bridge; each container
# is put behind a WireGuard tunnel of its own (isolate mode) whose peer is wireguard-go on the
# "internet" host, and reaches that host only through it.
#
#   container (podman's /run/netns/netns-UUID)                     the tunnel tgcXXXXXXXXXXXX: 10.8.0.N
#   │  eth0 10.89.3x.y fd00:89:3x::y (bridge; blocked by the container's kill switch)
#   C  the host: podman, the bridges tgbr30 (plain) tgbr31 (vpn) tgbr32 (many), the tunnels' owners
#   │  and their WireGuard sockets (ListenPort 5200N, from 10.231.0.2); forwards, so that a leak from a
#   │  container would reach R
#   R  router: routes the bridges' networks back to C; counts, on c0/c1, everything that is not a
#   │  tunnel's carrier (C:5200N -> 198.18.0.10:51820/udp) as a leak (the lab's leak counters, netns/lib.sh tg_lab_leak_*)
#   I  wireguard-go "wgiNNN" on 198.18.0.10:51820, 10.8.0.1/24 fd00:8::1/64, one peer per container;
#      dnsmasq on 10.8.0.1 (the tunnels' DNS: probe.tunnel.example -> 198.18.0.30); hosts .30 ::30
#
# Asserted: a container on a plain bridge reaches I directly, and the leak counter sees it (the
# control); a container on the vpn network has the tunnel's interface and address, reaches I over
# IPv4 and IPv6 through the tunnel (I's WireGuard interface counts it), its resolv.conf names the
# tunnel's DNS server first and a lookup is answered by it (dnsmasq saw the query come from the
# tunnel's address), and every way out the leak generator tries from its namespace leaves no packet
# at R but the carrier's (IPv4 and IPv6); a container sharing its network (--network container:X) is
# behind the same tunnel; killing the tunnel's owner cuts the container off without a leak; `podman
# rm` leaves C's kernel state, the host's namespace names, /etc/netns, the plugin's state directory
# and tunnelgate's state as before and no tunnel process; ten containers started at once on one
# network each get a tunnel of their own (named after the container: tunnel.podName), each reaching I
# through its own peer, and all ten go at `podman rm`.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../containers.sh"
WGI=wgi$((RANDOM % 100000))
tg_defer rm -f "/var/run/wireguard/$WGI.sock"
tg_begin --cni --needs podman,wireguard-go,wg,dnsmasq
STATE=$TG_TMP/cni-state
# Whatever a failed DEL left: the plugin's names for namespaces (their owners end with C below).
failed_del_names_down() {
  local r
  for r in "$STATE"/*.record; do
    [ -e "$r" ] && ip netns del "$(jq -r .namespaceName "$r")" 2>/dev/null
  done
  return 0
}
tg_defer failed_del_names_down
tg_defer tg_containers_down
TUNNELS=$TG_TMP/tunnels

in_c sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
for n in 30 31 32; do
  ip -n "$NS_R" route add "10.89.$n.0/24" via "$C_ETH0_4"
  ip -n "$NS_R" -6 route add "fd00:89:$n::/64" via "$C_ETH0_6"
done

# --- The peer, its DNS server, the tunnels' configurations -----------------------------------------
tg_vpn_peer_start "$WGI" "$TUNNELS"
tg_vpn_tunnel vpn0 2
tg_vpn_tunnel side 3
for i in $(seq 1 10); do tg_vpn_tunnel "vpn$i" $((10 + i)); done

# --- Podman, the networks ----------------------------------------------------------------------------
tg_podman_setup "$NS_C"
tg_podman_image
ln -s "$CNI" "$TG_PODMAN_DIR/cni-bin/tunnelgate-cni"
plugin() { # TUNNEL-JSON
  printf '{"type": "tunnelgate-cni", "tunnel": %s, "tunnelDirectory": "%s", "stateDirectory": "%s", "tunnelgate": "%s"}' \
    "$1" "$TUNNELS" "$STATE" "$TG"
}
tg_podman_network plain tgbr30 10.89.30.0/24 10.89.30.1 fd00:89:30::/64 fd00:89:30::1
tg_podman_network vpn tgbr31 10.89.31.0/24 10.89.31.1 fd00:89:31::/64 fd00:89:31::1 "$(plugin '"vpn0"')"
tg_podman_network many tgbr32 10.89.32.0/24 10.89.32.1 fd00:89:32::/64 fd00:89:32::1 "$(plugin '{"podName": true}')"
run() { tg_podman run -d --pull=never "$@" "$TG_IMAGE" sleep 280; }
netns_of() { tg_podman inspect -f '{{.NetworkSettings.SandboxKey}}' "$1" 2>/dev/null; }
inode_of() { stat -L -c %i "$(netns_of "$1")" 2>/dev/null; }
tun_of() { # CONTAINER: its tunnel's interface (the plugin's, tgc…)
  tg_podman exec "$1" ip -o link show 2>/dev/null | awk -F': ' '$2 ~ /^tgc/ { print $2; exit }'
}
# leak_from CONTAINER PHASE: the leak generator in the container's namespace, and a check that it
# made its attempts.
leak_from() {
  check "[$2] the generator made its attempts in the container's namespace" tg_leak_generate_in "$(netns_of "$1")"
}
leak_generate() { tg_leak_generate_in "$(netns_of "$1")"; }

# --- Control: a container without a tunnel reaches I directly, and R counts it ----------------------
tg_lab_leak_declare "${TG_VPN_CARRIERS[@]}"
tg_run run --name bare --network plain
check_rc "control: a container on the plain bridge" 0
wait_for "control: its IPv6 address is usable" 10 tg_podman exec bare sh -c '! ip -6 addr show dev eth0 | grep -q tentative'
check "control: it reaches $INCLUDED4 directly" tg_podman exec bare ping -c 1 -W 2 "$INCLUDED4"
tg_lab_leaks_reset
leak_from bare control
_tg_leak_settle
check "control: R counts what it sent ($(tg_lab_leak_count) packets): the counter can see a container's leak" \
  test "$(tg_lab_leak_count)" -gt 0
tg_podman rm -f --time 1 bare >/dev/null

# --- One container behind its tunnel -----------------------------------------------------------------
tg_run tg_podman run --rm --pull=never --network vpn "$TG_IMAGE" true
check_rc "a short-lived container on the vpn network: up, run, removed" 0
bridges_settled() { tg_bridge_settled "$NS_C" tgbr30 && tg_bridge_settled "$NS_C" tgbr31; }
wait_for "the bridges have no port left" 10 bridges_settled
tg_snapshot "$NS_C" "$TG_TMP/c-before"
tg_host_files_snapshot "$TG_TMP/files-before" "$STATE"

tg_run run --name c0 --network vpn
check_rc "podman run on the vpn network (bridge, then tunnelgate-cni)" 0
tun=$(tun_of c0)
check_match "the container has the tunnel's interface" '^tgc[0-9a-f]{12}$' "$tun"
check_match "... with the tunnel's address" 'inet 10\.8\.0\.2/24' "$(tg_podman exec c0 ip -4 addr show dev "$tun" 2>&1)"
check "the tunnel's owner runs in C, not in the container" test -n "$(tg_tunnel_pids "$NS_C")"
check_match "the container's routes lead into the tunnel" "dev $tun" "$(tg_podman exec c0 ip route get "$INCLUDED4" 2>&1)"
rx=$(tg_vpn_peer_rx)
check "the container reaches $INCLUDED4" tg_podman exec c0 ping -c 1 -W 3 "$INCLUDED4"
check "the container reaches $INCLUDED6 over IPv6" tg_podman exec c0 ping -6 -c 1 -W 3 "$INCLUDED6"
check "... through the tunnel: wireguard-go in I received them (RX $rx -> $(tg_vpn_peer_rx))" test "$(tg_vpn_peer_rx)" -gt "$rx"
check_match "the container's resolv.conf names the tunnel's DNS server first" '^nameserver 10\.8\.0\.1$' \
  "$(tg_podman exec c0 grep -m 1 '^nameserver' /etc/resolv.conf 2>&1)"
check_match "a lookup in the container is answered by the tunnel's DNS server" "$(tg_re "$INCLUDED4")" \
  "$(tg_podman exec c0 nslookup probe.tunnel.example 10.8.0.1 2>&1)"
check_match "... which saw the query come from the tunnel's address" 'probe\.tunnel\.example from 10\.8\.0\.2' \
  "$(cat "$TG_TMP/dnsmasq.log" 2>&1)"
check_match "a lookup with the container's own resolver configuration is answered too" "$(tg_re "$INCLUDED4")" \
  "$(tg_podman exec c0 nslookup probe.tunnel.example 2>&1)"
tg_lab_leaks_reset
leak_from c0 vpn
check_lab_no_leaks "[vpn: every way out of the container] nothing left C's physical interfaces but the carrier 5-tuples"
check "[vpn] the tunnel's own carrier traffic was counted ($(tg_lab_carrier_packets) packets)" test "$(tg_lab_carrier_packets)" -gt 0
check_fails "[vpn] the container cannot reach the bridge's gateway around the tunnel" \
  tg_podman exec c0 ping -c 1 -W 1 -I eth0 10.89.31.1

# A container sharing c0's network is behind c0's tunnel.
tg_run run --name side --network container:c0
check_rc "a container with --network container:c0" 0
check_eq "... is in c0's network namespace" "$(inode_of c0)" \
  "$(stat -L -c %i "/proc/$(tg_podman inspect -f '{{.State.Pid}}' side)/ns/net" 2>&1)"
check_match "... its routes lead into c0's tunnel" "dev $tun" "$(tg_podman exec side ip route get "$INCLUDED4" 2>&1)"
rx=$(tg_vpn_peer_rx)
check "... it reaches $INCLUDED4" tg_podman exec side ping -c 1 -W 3 "$INCLUDED4"
check "... through the tunnel (RX $rx -> $(tg_vpn_peer_rx))" test "$(tg_vpn_peer_rx)" -gt "$rx"
tg_lab_leaks_reset
tg_podman exec side sh -c "ping -c 1 -W 1 -I eth0 $INCLUDED4; wget -q -T 1 -O /dev/null http://$LAN4:8080/" >/dev/null 2>&1
check_lab_no_leaks "[side: its attempts around the tunnel] nothing left C's physical interfaces but the carrier 5-tuples"
tg_podman rm -f --time 1 side >/dev/null

# The tunnel's owner killed: the container is cut off, and nothing leaks.
pid=$(tg_tunnel_pids "$NS_C")
kill -KILL $pid
wait_for "the tunnel's owner is gone" 5 tg_exited "$pid"
# The server forgets the client: else its passive keepalive (10 s after the last data it received)
# reaches C's closed port 52002 later on, and C's ICMP port-unreachable to the carrier counts at R.
ip netns exec "$NS_I" wg set "$WGI" peer "$(tg_vpn_public_key vpn0)" remove
tg_lab_leaks_reset
check_fails "owner killed: the container reaches nothing" tg_podman exec c0 ping -c 1 -W 1 "$INCLUDED4"
leak_from c0 "owner killed"
check_lab_no_leaks "[owner killed: every way out of the container] nothing left C's physical interfaces but the carrier 5-tuples"

c0_inode=$(inode_of c0)
tg_run tg_podman rm -f --time 1 c0
check_rc "podman rm c0" 0
wait_for "the bridge has no port left" 10 tg_bridge_settled "$NS_C" tgbr31
tg_snapshot "$NS_C" "$TG_TMP/c-after"
tg_host_files_snapshot "$TG_TMP/files-after" "$STATE"
check_same_snapshot "podman rm: C's kernel state is as before" "$TG_TMP/c-before" "$TG_TMP/c-after"
check_same_snapshot "podman rm: namespace names, /etc/netns and the plugin's state are as before" \
  "$TG_TMP/files-before" "$TG_TMP/files-after"
check_fails "podman rm: tunnelgate's state for the container's namespace is gone" test -e "/run/tunnelgate/net-$c0_inode"
check_eq "podman rm: no tunnel process is left" "" "$(tg_tunnel_pids "$NS_C")"
check_fails "podman rm: WireGuard's API socket of the tunnel is gone" test -e "/var/run/wireguard/$tun.sock"

# --- Ten containers at once, each behind its own tunnel --------------------------------------------
tg_run tg_podman run --rm --pull=never --name vpn1 --network many "$TG_IMAGE" true
check_rc "a short-lived container on the many network" 0
wait_for "the bridge has no port left" 10 tg_bridge_settled "$NS_C" tgbr32
tg_snapshot "$NS_C" "$TG_TMP/c-before"
tg_host_files_snapshot "$TG_TMP/files-before" "$STATE"
started=$(_tg_now_ms)
runs=()
for i in $(seq 1 10); do
  run --name "vpn$i" --network many >"$TG_TMP/run-$i.out" 2>&1 &
  runs+=($!)
done
wait "${runs[@]}"
check "ten podman runs at once, all started ($(( ($(_tg_now_ms) - started) / 1000 )) s)" \
  test "$(tg_podman ps --filter network=many --format '{{.Names}}' | wc -l)" -eq 10
declare -A tuns=()
for i in $(seq 1 10); do tuns[$(tun_of "vpn$i")]=$i; done
check_eq "ten tunnels of ten names" 10 "${#tuns[@]}"
check_eq "ten tunnel owners in C" 10 "$(tg_tunnel_pids "$NS_C" | wc -l)"
tg_lab_leaks_reset
ok=0
for i in $(seq 1 10); do
  grep -q "inet 10\.8\.0\.$((10 + i))/24" <<<"$(tg_podman exec "vpn$i" ip -4 addr show 2>/dev/null)" &&
    tg_podman exec "vpn$i" ping -c 1 -W 3 "$INCLUDED4" >/dev/null 2>&1 && ok=$((ok + 1))
done
check_eq "each container has its own tunnel's address and reaches $INCLUDED4" 10 "$ok"
check_eq "wireguard-go has a handshake with each of the ten" 10 \
  "$(ip netns exec "$NS_I" wg show "$WGI" latest-handshakes | awk '$2 > 0' | grep -c -F -f <(for i in $(seq 1 10); do tg_vpn_public_key "vpn$i"; done))"
generated=0
for i in $(seq 1 10); do leak_generate "vpn$i" && generated=$((generated + 1)); done
check_eq "the generator made its attempts in each of the ten" 10 "$generated"
check_lab_no_leaks "[ten containers: their pings and every way out of each] nothing left C's physical interfaces but the carrier 5-tuples"
tg_run tg_podman rm -f --time 1 $(for i in $(seq 1 10); do echo "vpn$i"; done)
check_rc "podman rm of the ten" 0
wait_for "the bridge has no port left" 10 tg_bridge_settled "$NS_C" tgbr32
tg_snapshot "$NS_C" "$TG_TMP/c-after"
tg_host_files_snapshot "$TG_TMP/files-after" "$STATE"
check_same_snapshot "podman rm of the ten: C's kernel state is as before" "$TG_TMP/c-before" "$TG_TMP/c-after"
check_same_snapshot "podman rm of the ten: namespace names, /etc/netns and the plugin's state are as before" \
  "$TG_TMP/files-before" "$TG_TMP/files-after"
check_eq "podman rm of the ten: no tunnel process is left" "" "$(tg_tunnel_pids "$NS_C")"

tg_summary
