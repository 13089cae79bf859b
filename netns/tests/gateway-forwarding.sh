#!/usr/bin/env bash
# Gateway mode forwards only what it was asked to, with a real far end: R hosts tunnel "tggw" (the
# example runtime) with `forwarding.sources` = the LAN; I hosts the far end "tgfar" (the example runtime
# too), which routes the LAN's prefix back into the tunnel as a hostile or careless far end would.
#
#   L (192.168.231.2) ── lan0 R (tunnelgate tggw, 10.61.0.1) inet0 ══ UDP 5400 ══ I (tunnelgate tgfar, 10.61.0.2)
#                          │ c0                                                    198.19.77.1 on I's lo:
#   C (10.231.0.2) ────────┘  (not a configured source)                           "the internet" via the tunnel
#
# Asserted: the LAN host reaches 198.19.77.1 through the tunnel (masqueraded); the far end's TCP to the
# LAN host is not forwarded (no SYN arrives in L), also without includeAllNetworks; C, which is not a
# configured source, is not forwarded into the tunnel; IPv4 forwarding is on for lan0 and the tunnel's
# interface only; TCP SYNs from the LAN arrive at the far end with their MSS clamped to the tunnel's MTU
# (1400 - 40 = 1360), where L sent 1460; R's kernel state is as before after down.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
tg_begin --runtime

tg_secret_file "gateway-forwarding-$RANDOM$RANDOM"
ip netns exec "$NS_R" sysctl -qw net.ipv4.ip_forward=0
ip -n "$NS_I" addr add 198.19.77.1/32 dev lo

# runtime_config FILE NAME ADDRESS BIND PEER INCLUDED-JSON EXTRA-TOP
runtime_config() {
  tg_runtime_config "$1" "$2" "$3" "$4" "$5" --routes "$6" --args ', "--keepalive-ms", "200"' --packet-path callback --tail "$7"
}
runtime_config "$TG_TMP/gw.json" tggw 10.61.0.1 "$R_INET4:5400" "$CARRIER4:5400" '["10.61.0.0/24", "198.19.77.0/24"]' \
  ', "forwarding": {"sources": ["'"$LAN_NET4"'"], "masquerade": true}'
# The far end routes the LAN behind the gateway into the tunnel: what it sends there must go nowhere.
runtime_config "$TG_TMP/far.json" tgfar 10.61.0.2 "$CARRIER4:5400" "$R_INET4:5400" '["10.61.0.0/24", "'"$LAN_NET4"'"]' ''

tg_snapshot "$NS_R" "$TG_TMP/before"
tg_run ip netns exec "$NS_I" "$TG" up "$TG_TMP/far.json" --detach
check_rc "the far end tgfar is up in I" 0
tg_run ip netns exec "$NS_R" "$TG" up "$TG_TMP/gw.json" --detach
check_rc "the gateway tggw is up in R" 0
wait_for "the tunnel carries traffic (R pings the far end)" 10 ip netns exec "$NS_R" ping -n -c 1 -W 1 10.61.0.2

fwd() { ip netns exec "$NS_R" sysctl -n "net.ipv4.conf.$1.forwarding"; }
check_eq "IPv4 forwarding: on for lan0 and tggw, off for c0, inet0 and globally" "1 1 0 0 0" \
  "$(fwd lan0) $(fwd tggw) $(fwd c0) $(fwd inet0) $(ip netns exec "$NS_R" sysctl -n net.ipv4.ip_forward)"

# Counters in L (SYNs that arrive for port 8080) and in I (echo requests and SYNs by MSS).
ip netns exec "$NS_L" nft -f - <<'NFT' || tg_bail "nft: counters in L"
table inet tgfwd {
  chain input {
    type filter hook input priority -10; policy accept;
    tcp dport 8080 tcp flags syn counter comment "syn from the tunnel"
  }
}
NFT
ip netns exec "$NS_I" nft -f - <<'NFT' || tg_bail "nft: counters in I"
table inet tgfwd {
  chain input {
    type filter hook input priority -10; policy accept;
    ip daddr 198.19.77.1 tcp dport 9 tcp flags syn tcp option maxseg size 1360 counter comment "mss 1360"
    ip daddr 198.19.77.1 tcp dport 9 tcp flags syn tcp option maxseg size 1460 counter comment "mss 1460"
    ip daddr 198.19.77.1 icmp type echo-request ip saddr 10.61.0.1 counter comment "echo masqueraded"
    ip daddr 198.19.77.1 icmp type echo-request ip saddr != 10.61.0.1 counter comment "echo other"
  }
}
NFT
count() { # NS COMMENT
  ip netns exec "$1" nft list table inet tgfwd | awk -v c="\"$2\"" 'index($0, "comment " c) { for (i = 1; i < NF; i++) if ($i == "packets") print $(i + 1) }'
}

check "the LAN host reaches 198.19.77.1 through the gateway's tunnel" ip netns exec "$NS_L" ping -n -c 2 -i 0.2 -W 1 198.19.77.1
check "... masqueraded behind the tunnel's address ($(count "$NS_I" "echo masqueraded") echo requests from 10.61.0.1)" \
  test "$(count "$NS_I" "echo masqueraded")" -ge 2

# The far end opens TCP to the LAN host behind the gateway: nothing arrives in L.
for _ in 1 2 3; do ip netns exec "$NS_I" timeout 1 bash -c "exec 3<>/dev/tcp/$LAN4/8080" 2>/dev/null; done
ip netns exec "$NS_I" ping -n -c 2 -i 0.2 -W 0.5 "$LAN4" >/dev/null 2>&1
check_eq "the far end's TCP to the LAN host is not forwarded into the LAN (SYNs that arrived in L)" 0 \
  "$(count "$NS_L" "syn from the tunnel")"
check "the gateway counted and dropped them" test \
  "$(ip netns exec "$NS_R" nft list chain inet tunnelgate-tggw forward | awk '/nothing from the tunnel/ { for (i = 1; i < NF; i++) if ($i == "packets") print $(i + 1) }')" -ge 3

# C is not a configured source: R does not forward its packets into the tunnel.
ip -n "$NS_C" route add 198.19.77.0/24 via "$R_C0_4" dev eth0
ip netns exec "$NS_C" ping -n -c 2 -i 0.2 -W 0.5 198.19.77.1 >/dev/null 2>&1
check_eq "a host that is not a configured source is not forwarded into the tunnel" 0 "$(count "$NS_I" "echo other")"

# MSS clamping: L's SYNs (MSS 1460 for its 1500-byte link) arrive at the far end with 1360.
for _ in 1 2; do ip netns exec "$NS_L" timeout 1 bash -c "exec 3<>/dev/tcp/198.19.77.1/9" 2>/dev/null; done
check "SYNs through the tunnel arrive with MSS 1360 ($(count "$NS_I" "mss 1360") seen)" test "$(count "$NS_I" "mss 1360")" -ge 1
check_eq "... and none with the LAN's 1460" 0 "$(count "$NS_I" "mss 1460")"

tg_run ip netns exec "$NS_R" "$TG" down tggw
check_rc "down tggw" 0
tg_run ip netns exec "$NS_I" "$TG" down tgfar
check_rc "down tgfar" 0
tg_snapshot "$NS_R" "$TG_TMP/after"
check_same_snapshot "R's kernel state after down equals the state before up" "$TG_TMP/before" "$TG_TMP/after"
check_eq "R's IPv4 forwarding is back to off everywhere" "0 0" "$(fwd lan0) $(ip netns exec "$NS_R" sysctl -n net.ipv4.ip_forward)"

tg_summary
