#!/usr/bin/env bash
# Isolate mode: `tunnelgate up CONFIG --netns NS` run in C puts the tunnel's interface into L (the
# "container"), which then reaches nothing but the tunnel; tunnelgate itself stays in C.
#
#   C (tunnelgate runs here, TUN descriptor held here)
#   L (the container: eth0 to R, default via R)  ──▶  after up: tgiso in L, every route of L into tgiso,
#                                                     eth0 blocked, DNS in /etc/netns/L/resolv.conf;
#                                                     after down: exactly as before
#   X (a second container, eth0 to R)             ──▶  isolated at the same time behind its own tunnel
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
tg_begin

cfg=$TG_TMP/iso.json
cat >"$cfg" <<CFG
{"name": "tgiso", "tunnelRemoteAddress": "$CARRIER4", "mtu": 1400,
 "ipv4Settings": {"addresses": ["10.9.0.2"], "subnetMasks": ["255.255.255.0"], "includedRoutes": ["0.0.0.0/0"]},
 "ipv6Settings": {"addresses": ["fd00:9::2"], "networkPrefixLengths": [64], "includedRoutes": ["::/0"]},
 "dnsSettings": {"servers": ["10.9.0.1"], "searchDomains": ["corp.example"]},
 "carrierEndpoints": ["$CARRIER4"]}
CFG
# A second container, X, beside L: both are isolated at once, each behind its own tunnel.
NS_X=${NS_L%-l}-x
tg_netns_add "$NS_X"
ip -n "$NS_X" link add eth0 type veth peer name x0 netns "$NS_R"
ip -n "$NS_X" addr add 192.168.232.2/24 dev eth0
ip -n "$NS_R" addr add 192.168.232.1/24 dev x0
ip -n "$NS_X" link set eth0 up
ip -n "$NS_R" link set x0 up
ip -n "$NS_X" route add default via 192.168.232.1
wait_for "X reaches the router" 5 ip netns exec "$NS_X" ping -c 1 -W 0.5 192.168.232.1
# The before-snapshot must not catch eth0's link-local address still tentative (DAD), or the after one differs.
wait_for "X's links are up with their IPv6 addresses settled" 5 _tg_settled "$NS_X"
sed 's/"tgiso"/"tgx"/; s/10\.9\.0\./10.10.0./g; s/fd00:9::/fd00:10::/; /dnsSettings/d' "$cfg" >"$TG_TMP/x.json"
tg_snapshot "$NS_X" "$TG_TMP/x-before"

check_ping "before: the container reaches the router" "$NS_L" "$R_LAN4"
check_ping "before: the container reaches $INCLUDED4" "$NS_L" "$INCLUDED4"
tg_snapshot "$NS_L" "$TG_TMP/l-before"
tg_snapshot "$NS_C" "$TG_TMP/c-before"
tg_watch_echo "$NS_R" "$R_LAN4" "$R_LAN6"

tg_run ip netns exec "$NS_C" "$TG" up "$cfg" --netns "$NS_L" --detach
check_rc "up --netns L --detach" 0
check "tgiso lives in L" ip -n "$NS_L" link show dev tgiso
check_fails "tgiso is not in C" ip -n "$NS_C" link show dev tgiso
check_match "tgiso in L has its address" 'inet 10\.9\.0\.2/24 ' "$(ip -n "$NS_L" addr show dev tgiso 2>&1)"
check_match "tgiso in L has MTU 1400" ' mtu 1400 ' "$(ip -n "$NS_L" link show dev tgiso 2>&1)"
check_eq "the tunnelgate process runs in C, not in L" "" "$(tg_tunnel_pids "$NS_L")"
check "the tunnelgate process runs in C" test -n "$(tg_tunnel_pids "$NS_C")"
check_route "in L, $INCLUDED4 goes into the tunnel" "$NS_L" "$INCLUDED4" tgiso
check_route "in L, $INCLUDED6 goes into the tunnel" "$NS_L" "$INCLUDED6" tgiso
check "L has the kill switch" ip netns exec "$NS_L" nft list table inet tunnelgate-tgiso
check_fails "C has no kill switch (its carriers must keep working)" ip netns exec "$NS_C" nft list table inet tunnelgate-tgiso
check_match "L's own resolv.conf (which ip netns exec mounts) names the tunnel's DNS server" 'nameserver 10\.9\.0\.1' \
  "$(cat "/etc/netns/$NS_L/resolv.conf" 2>&1)"
check_match "... and ip netns exec L sees it" 'nameserver 10\.9\.0\.1' "$(ip netns exec "$NS_L" cat /etc/resolv.conf)"

tg_run ip netns exec "$NS_C" "$TG" up "$TG_TMP/x.json" --netns "$NS_X" --detach
check_rc "a second container X isolated at the same time" 0
check_route "in X, $INCLUDED4 goes into its own tunnel" "$NS_X" "$INCLUDED4" tgx
check_route "in L, $INCLUDED4 still goes into L's tunnel" "$NS_L" "$INCLUDED4" tgiso
check_fails "X cannot reach the router around its tunnel" ip netns exec "$NS_X" ping -c 1 -W 0.3 -I eth0 192.168.232.1
tg_run ip netns exec "$NS_C" "$TG" down tgx --netns "$NS_X"
check_rc "down tgx --netns X" 0
tg_snapshot "$NS_X" "$TG_TMP/x-after"
check_same_snapshot "X is back to its state before up" "$TG_TMP/x-before" "$TG_TMP/x-after"

base4=$(tg_echo_count "$NS_R" "$R_LAN4")
base6=$(tg_echo_count "$NS_R" "$R_LAN6")
ip netns exec "$NS_L" ping -n -c 1 -W 0.3 "$R_LAN4" >/dev/null 2>&1
ip netns exec "$NS_L" ping -n -c 1 -W 0.3 -I eth0 "$R_LAN4" >/dev/null 2>&1
ip netns exec "$NS_L" ping -n -c 1 -W 0.3 -I eth0 "$R_LAN6" >/dev/null 2>&1
check_eq "the container's pings to the router never arrive (IPv4)" "$base4" "$(tg_echo_count "$NS_R" "$R_LAN4")"
check_eq "the container's pings to the router never arrive (IPv6)" "$base6" "$(tg_echo_count "$NS_R" "$R_LAN6")"
before=$(ip -n "$NS_L" -s link show dev tgiso | awk '/TX:/ { getline; print $2 }')
ip netns exec "$NS_L" ping -n -c 3 -i 0.2 -W 0.3 "$INCLUDED4" >/dev/null 2>&1
after=$(ip -n "$NS_L" -s link show dev tgiso | awk '/TX:/ { getline; print $2 }')
check "the container's traffic goes into the tunnel (tgiso TX $before -> $after)" test "$after" -ge $((before + 3))
check_ping "C, where tunnelgate runs, still reaches the carrier" "$NS_C" "$CARRIER4"

check_match "status --netns from C shows the tunnel" 'tgiso: connected' "$(ip netns exec "$NS_C" "$TG" status tgiso --netns "$NS_L")"
check_match "status inside L shows the tunnel" 'in namespace' "$(ip netns exec "$NS_L" "$TG" status tgiso)"

tg_run ip netns exec "$NS_C" "$TG" down tgiso --netns "$NS_L"
check_rc "down tgiso --netns L" 0
wait_for "the detached tunnelgate process has exited" 10 tg_no_tunnel_process "$NS_C"
tg_snapshot "$NS_L" "$TG_TMP/l-after"
tg_snapshot "$NS_C" "$TG_TMP/c-after"
check_same_snapshot "L is back to its state before up" "$TG_TMP/l-before" "$TG_TMP/l-after"
check_same_snapshot "C is back to its state before up" "$TG_TMP/c-before" "$TG_TMP/c-after"
check_ping "after down: the container reaches the router again" "$NS_L" "$R_LAN4"
check_fails "after down: L's resolv.conf that tunnelgate created is gone again" test -e "/etc/netns/$NS_L/resolv.conf"

# A namespace that does not exist is a clear error and changes nothing.
tg_run ip netns exec "$NS_C" "$TG" up "$cfg" --netns "no-such-ns-$$"
check_rc "up --netns of a missing namespace fails" 1
check_match "... saying which namespace" "no network namespace named no-such-ns-$$" "$TG_ERR"

tg_summary
