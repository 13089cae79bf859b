#!/usr/bin/env bash
# Gateway mode: tunnelgate runs in the router R with a `forwarding` section for the LAN; the LAN host
# L, which routes through R, then reaches the tunnel's routes through R's tunnel (masqueraded), and
# nothing else through R. ip_forward is turned on for it and back to what it was on down.
#
#   L (192.168.231.2, default via R) ── R (tunnelgate, tggw) ── I (carrier .10, included .30, excluded .20)
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
tg_begin

# R starts as a host that does not forward: the tunnel must turn forwarding on, and off again.
ip netns exec "$NS_R" sysctl -qw net.ipv4.ip_forward=0 net.ipv6.conf.all.forwarding=0
sysctls() { ip netns exec "$NS_R" sysctl -n net.ipv4.ip_forward net.ipv4.conf.lan0.forwarding net.ipv4.conf.inet0.forwarding net.ipv6.conf.all.forwarding net.ipv4.conf.all.src_valid_mark | tr '\n' ' '; }
sysctls_before=$(sysctls)

cfg=$TG_TMP/gw.json
cat >"$cfg" <<CFG
{"name": "tggw", "tunnelRemoteAddress": "$CARRIER4", "mtu": 1400,
 "ipv4Settings": {"addresses": ["10.7.0.2"], "subnetMasks": ["255.255.255.0"], "includedRoutes": ["$INCLUDED4/32"]},
 "ipv6Settings": {"addresses": ["fd00:7::2"], "networkPrefixLengths": [64], "includedRoutes": ["$INCLUDED6/128"]},
 "carrierEndpoints": ["$CARRIER4"],
 "forwarding": {"sources": ["$LAN_NET4", "$LAN_NET6"]}}
CFG
tg_snapshot "$NS_R" "$TG_TMP/before"
tg_watch_echo "$NS_I" "$INCLUDED4" "$INCLUDED6" "$EXCLUDED4"

tg_run ip netns exec "$NS_R" "$TG" up "$cfg" --detach
check_rc "up --detach in the router with a forwarding section" 0
# IPv4 forwarding only on the interface the sources arrive by (and the tunnel's); IPv6 has no per-interface
# forwarding in the kernel, so `all`.
check_eq "IPv4 forwarding on lan0 only (not global, not inet0), IPv6 forwarding on, src_valid_mark too" "0 1 0 1 1 " "$(sysctls)"
check_eq "IPv4 forwarding on the tunnel's interface (for replies)" 1 "$(ip netns exec "$NS_R" sysctl -n net.ipv4.conf.tggw.forwarding)"
check_match "the plan says which sysctls it sets" 'sysctl -w net\.ipv4\.conf\.lan0\.forwarding=1' "$(ip netns exec "$NS_R" "$TG" plan "$cfg" 2>&1)"
check_match "R masquerades the LAN behind the tunnel" 'ip saddr 192\.168\.231\.0/24 oifname "tggw" .*masquerade' \
  "$(ip netns exec "$NS_R" nft list table inet tunnelgate-tggw)"

tx() { ip -n "$NS_R" -s link show dev tggw | awk '/TX:/ { getline; print $2 }'; }
masq() { ip netns exec "$NS_R" nft list chain inet tunnelgate-tggw postrouting | awk '/saddr 192/ { for (i = 1; i < NF; i++) if ($i == "packets") print $(i + 1) }'; }
tx0=$(tx)
ip netns exec "$NS_L" ping -n -c 3 -i 0.2 -W 0.3 "$INCLUDED4" >/dev/null 2>&1
ip netns exec "$NS_L" ping -n -c 3 -i 0.2 -W 0.3 "$INCLUDED6" >/dev/null 2>&1
check "the LAN host's packets for the tunnel's routes go into R's tunnel (TX $tx0 -> $(tx))" test "$(tx)" -ge $((tx0 + 6))
check "... masqueraded behind the tunnel's address (masquerade rule matched $(masq) packets)" test "$(masq)" -ge 1
check_eq "none of them reached I directly (IPv4)" 0 "$(tg_echo_count "$NS_I" "$INCLUDED4")"
check_eq "none of them reached I directly (IPv6)" 0 "$(tg_echo_count "$NS_I" "$INCLUDED6")"
ip netns exec "$NS_L" ping -n -c 1 -W 0.3 "$EXCLUDED4" >/dev/null 2>&1
check_eq "the LAN host's packets for other destinations are not forwarded around the tunnel" 0 "$(tg_echo_count "$NS_I" "$EXCLUDED4")"
check_ping "R itself still reaches the carrier" "$NS_R" "$CARRIER4"
check_route "replies to the LAN leave R directly, not into the tunnel" "$NS_R" "$LAN4" lan0

tg_run ip netns exec "$NS_R" "$TG" down tggw
check_rc "down" 0
check_eq "the sysctls are back to what they were" "$sysctls_before" "$(sysctls)"
tg_snapshot "$NS_R" "$TG_TMP/after"
check_same_snapshot "after down R's kernel state equals the state before up" "$TG_TMP/before" "$TG_TMP/after"

# Two tunnels that both need lan0's forwarding: the first one down must not turn it off under the second.
sed 's/"tggw"/"tggw2"/; s/10\.7\.0\.2/10.7.1.2/; s/fd00:7::2/fd00:7:1::2/' "$cfg" >"$TG_TMP/gw2.json"
tg_run ip netns exec "$NS_R" "$TG" up "$cfg" --detach
tg_run ip netns exec "$NS_R" "$TG" up "$TG_TMP/gw2.json" --detach
check_rc "a second forwarding tunnel" 0
tg_run ip netns exec "$NS_R" "$TG" down tggw
check_eq "lan0's forwarding stays on while the second tunnel needs it" 1 "$(ip netns exec "$NS_R" sysctl -n net.ipv4.conf.lan0.forwarding)"
tg_run ip netns exec "$NS_R" "$TG" down tggw2
check_eq "lan0's forwarding is back to 0 when the last one goes" 0 "$(ip netns exec "$NS_R" sysctl -n net.ipv4.conf.lan0.forwarding)"

tg_summary
