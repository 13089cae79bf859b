#!/usr/bin/env bash
# The leak suite, built-in WireGuard: R counts every packet that leaves C's physical links and is not the
# tunnel's own carrier traffic (the lab's leak counters: netns/lib.sh tg_lab_leak_*), while C tries every
# way out we know (tg_leak_generate*), through every transition of a tunnel's life. Modelled on TunnelCrack's ServerIP and LocalNet tests
# (CVE-2023-36671, CVE-2023-36672) and on Mullvad's leak checks.
#
#   C  tunnelgate "tgwNNN" 10.70.0.1 fd70::1, WireGuard from UDP port 51821 (ListenPort, fixed)
#   │  eth0 10.231.0.2 fd00:231::2 (default routes); eth1 10.232.0.2 fd00:232::2 (defaults, metric 2000)
#   │  the generator: root and uid 65534; TCP 8080 443 53 853, UDP 51820 8080, DNS, ICMP, mDNS; routed,
#   │  forced onto eth0/eth1 (SO_BINDTODEVICE), bound to eth0's addresses; to the carriers, L, R, .20 .30,
#   │  elsewhere
#   R  router. Prerouting from c0/c1 (the lab): a leak is anything but C:51821 -> carrier:51820/udp and IPv6 ND/MLD.
#   │  Proxy ARP/NDP on c0 for 198.18.0.0/24 (the hostile network of the LocalNet part).
#   ├── L  LAN host 192.168.231.2 fd00:a1::2
#   └── I  wireguard-go "wgiNNN": the peer at 198.18.0.10:51820 and [2001:db8:18::10]:51820, 10.70.0.2
#          fd70::2; a TCP server on 8080 that answers with the address it saw; hosts .20 .30 ::20 ::30
#
# Phases (each: reset the counters, act, generate, check nothing leaked, and that the tunnel works where
# it should: a test that blocks everything passes a leak check):
#   control without a tunnel; a full tunnel without the kill switch (wg-quick file): ServerIP by routing
#   alone, LocalNet, the host's own default route; a TUN without ipv6Settings; the kill switch (JSON):
#   during up, steady, the IPv6 carrier, tampering and repair (the carrier exemption widened; the chain opened,
#   once and twelve times in a row), carrier loss and return, the TUN deleted, the owner SIGKILLed,
#   failed next ups over the residue (ListenPort taken, a runtime library that does not exist, a config
#   that fails validation, WireGuard's API socket held by a namesake so that its start fails after the
#   settings were applied), an up over the residue, down, after down; the kill switch with
#   excludeLocalNetworks on a hostile LAN; a carrier host name whose answer at up was spoofed (and then
#   moved: it must stay pinned); gateway mode, with and without the kill switch: nothing from the
#   tunnel's far end into the LAN, nothing from a host that is not a source into the tunnel.
# The built-in WireGuard has no runtime failure to provoke (its device fails only if poll() does); a
# runtime failing is in leaks-runtime.sh.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"

TGW=tgw$((RANDOM % 100000))   # Tunnelgate's interface in C (and R's in the gateway part)
WGI=wgi$((RANDOM % 100000))   # wireguard-go's in I
tg_defer rm -f "/var/run/wireguard/$TGW.sock" "/var/run/wireguard/$WGI.sock"
tg_begin --needs wireguard-go,wg

tg_c() { ip netns exec "$NS_C" env ${TG_ENV:-} "$TG" "$@"; }

umask 077
wg genkey >"$TG_TMP/c.key"; wg pubkey <"$TG_TMP/c.key" >"$TG_TMP/c.pub"
wg genkey >"$TG_TMP/i.key"; wg pubkey <"$TG_TMP/i.key" >"$TG_TMP/i.pub"
C_KEY=$(cat "$TG_TMP/c.key") C_PUB=$(cat "$TG_TMP/c.pub") I_PUB=$(cat "$TG_TMP/i.pub")
umask 022

# --- the peer in I, its server, C's second uplink, R's proxy ARP/NDP ------------------------------------
in_i env LOG_LEVEL=error wireguard-go -f "$WGI" >>"$TG_TMP/wireguard-go.log" 2>&1 &
wait_for "wireguard-go's API socket in I" 10 test -S "/var/run/wireguard/$WGI.sock" || tg_bail "wireguard-go in I"
in_i wg set "$WGI" private-key "$TG_TMP/i.key" listen-port 51820 peer "$C_PUB" allowed-ips 10.70.0.1/32,fd70::1/128
in_i ip addr add 10.70.0.2/24 dev "$WGI"
in_i ip addr add fd70::2/64 dev "$WGI" nodad
in_i ip link set "$WGI" up
in_i python3 "$TG_LEAK_TOOL" listen 8080 --max-seconds 280 >/dev/null 2>&1 &
wait_for "I's TCP server listens on 8080" 5 bash -c "ip netns exec $NS_I ss -ltn | grep -q ':8080 '"
# A multi-homed C: a second default route through eth1, so that traffic forced onto eth1 has a way out.
in_c ip -4 route add default via "$R_C1_4" dev eth1 metric 2000
in_c ip -6 route add default via "$R_C1_6" dev eth1 metric 2000
# R answers ARP and NDP on c0 for the "internet" hosts: when C's LAN claims 198.18.0.0/24 is local
# (hostile_on), C's packets for them really reach R over eth0.
in_r sysctl -qw net.ipv4.conf.c0.proxy_arp=1 net.ipv6.conf.c0.proxy_ndp=1 \
  net.ipv4.neigh.c0.proxy_delay=0 net.ipv6.neigh.c0.proxy_delay=0
for a in "$CARRIER6" "$EXCLUDED6" "$INCLUDED6"; do in_r ip -6 neigh add proxy "$a" dev c0; done
hostile_on() {
  in_c ip -4 route add "$INET_NET4" dev eth0 scope link
  in_c ip -6 route add "$INET_NET6" dev eth0
}
hostile_off() {
  in_c ip -4 route del "$INET_NET4" dev eth0 scope link
  in_c ip -6 route del "$INET_NET6" dev eth0
}

CARRIERS=(--carrier "$CARRIER4:51820/udp@51821" --carrier "[$CARRIER6]:51820/udp@51821")
# Without the kill switch, what is bound to a link by its address' scope may leave on it: IPv6
# link-local unicast and multicast, IPv4 link-local multicast (224.0.0.0/24 is never routed).
LINK_SCOPE=(--allow fe80::/10 --allow ff02::/16 --allow 224.0.0.0/24)
# RFC 1918, link-local, multicast and broadcast; link-local, ULA and multicast: what excludeLocalNetworks
# lets through (docs/operations.md).
LOCAL_RANGES=(--allow 10.0.0.0/8 --allow 172.16.0.0/12 --allow 192.168.0.0/16 --allow 169.254.0.0/16
  --allow 224.0.0.0/4 --allow 255.255.255.255/32 --allow fe80::/10 --allow fc00::/7 --allow ff00::/8)

# --- helpers ------------------------------------------------------------------------------------------
ks_table() { echo "inet tunnelgate-$1"; }
ks_present() { in_c nft list table inet "tunnelgate-$TGW" >/dev/null 2>&1; }
status_is() { tg_c status "$TGW" --json 2>/dev/null | jq -e --arg s "$1" '.status == $s' >/dev/null; }
tun_gone() { ! ip -n "$NS_C" link show dev "$TGW" >/dev/null 2>&1; }
# ks_content: the kill switch's table, stateless, without handles, set elements sorted: what a repair
# must give back exactly.
ks_content() {
  in_c nft -s -j list table inet "tunnelgate-$TGW" 2>/dev/null | jq -S '
    [.nftables[] | select(.metainfo | not)] | walk(if type == "object" then del(.handle) else . end) |
    map(if .set and .set.elem then .set.elem |= sort else . end)'
}
ks_content_is() { [ "$(ks_content)" == "$(cat "$1")" ]; }
# tamper_open: opens the kill switch from outside, in one transaction: the output chain's last rule (the
# catch-all drop) deleted and its policy set to accept.
tamper_open() {
  local last
  last=$(in_c nft -a list chain inet "tunnelgate-$TGW" output | sed -n 's/.* # handle \([0-9]*\)$/\1/p' | tail -n 1)
  in_c nft -f - <<EOT
delete rule inet tunnelgate-$TGW output handle ${last:-0}
chain inet tunnelgate-$TGW output { policy accept; }
EOT
}
# ks_diff FILE: how the kill switch's table differs from FILE's (a ks_content), for a failure's detail.
ks_diff() {
  _tg_detail "the kill switch's table (nft -j, stateless) against what up made, first 30 lines of the diff:" \
    "$(diff <(cat "$1") <(ks_content) | head -n 30)"
}

# seen_by_server ADDR UID: what I's server on ADDR:8080 saw uid UID's connection from C come from.
seen_by_server() {
  in_c python3 "$TG_LEAK_TOOL" connect "$1" 8080 --uid "$2" --timeout 2 2>&1 | sed -n 's/^seen \([^ ]*\).*/\1/p'
}
# check_through_tunnel PHASE ADDR TUNNEL-ADDRESS: uid 65534's TCP to ADDR:8080 went through the tunnel.
check_through_tunnel() {
  check_eq "[$1] uid 65534's TCP to $2:8080 went through the tunnel (the server saw it come from $3)" \
    "$3" "$(seen_by_server "$2" 65534 | grep . || echo 'no connection')"
}
# tunnel_works PHASE: a ping crosses the tunnel, and its carrier 5-tuple reached R.
tunnel_works() {
  local before
  before=$(tg_lab_carrier_packets)
  check_ping "[$1] the tunnel works: ping 10.70.0.2 through it" "$NS_C" 10.70.0.2
  check "[$1] ... over the carrier 5-tuple, counted at R ($before -> $(tg_lab_carrier_packets) packets)" \
    test "$(tg_lab_carrier_packets)" -gt "$before"
}
# no_leak PHASE [--before MS]: the two leak checks (to the carriers' addresses: ServerIP; to anything
# else), by the lab's counters; with --before only what R first saw before MS.
no_leak() {
  local phase=$1
  shift
  check_lab_no_leaks "[$phase] nothing but the carrier 5-tuples left C for a carrier's address" --only carrier-addresses "$@"
  check_lab_no_leaks "[$phase] nothing left C for any address that is not a carrier's" --only other-addresses "$@"
}

# c_quick: C's wg-quick file: a full tunnel (no kill switch: a wg-quick file cannot ask for one).
c_quick() {
  cat >"$TG_TMP/$TGW.conf" <<CONF
[Interface]
PrivateKey = $C_KEY
Address = 10.70.0.1/24, fd70::1/64
ListenPort = 51821

[Peer]
PublicKey = $I_PUB
Endpoint = $CARRIER4:51820
AllowedIPs = 0.0.0.0/0, ::/0
CONF
  chmod 600 "$TG_TMP/$TGW.conf"
}
# ks_config FILE [LISTEN-PORT] [EXTRA-TOP]: the same tunnel in JSON, with the kill switch; the IPv6
# carrier declared too, excluded routes that the kill switch must block anyway.
ks_config() {
  cat >"$1" <<CFG
{"name": "$TGW", "tunnelRemoteAddress": "$CARRIER4", "mtu": 1400,
 "ipv4Settings": {"addresses": ["10.70.0.1"], "subnetMasks": ["255.255.255.0"],
                  "includedRoutes": ["0.0.0.0/0"], "excludedRoutes": ["$EXCLUDED4/32"]},
 "ipv6Settings": {"addresses": ["fd70::1"], "networkPrefixLengths": [64],
                  "includedRoutes": ["::/0"], "excludedRoutes": ["$EXCLUDED6/128"]},
 "carrierEndpoints": ["$CARRIER4:51820", "[$CARRIER6]:51820"],
 "includeAllNetworks": true${3:-},
 "runtime": {"kind": "wireguard", "privateKeyFile": "$TG_TMP/c.key", "listenPort": ${2:-51821},
             "peers": [{"publicKey": "$I_PUB", "endpoint": "$CARRIER4:51820", "allowedIPs": ["0.0.0.0/0", "::/0"]}]}}
CFG
}
down_c() {
  tg_run tg_c down "$TGW"
  check_rc "${1:-down} exits 0" 0
  wait_for "... and C's tunnelgate process has exited" 10 tg_no_tunnel_process "$NS_C"
}

# --- control: without a tunnel the generator's packets reach R --------------------------------------------
tg_lab_leak_declare "${CARRIERS[@]}"
tg_leak_generate
control=$(tg_lab_leak_count)
tuples=$(tg_lab_leak_tuples)
check "[control, no tunnel] the generator's packets reach R's leak counter ($control packets)" test "$control" -gt 0
check "[control] ... sent from root and from uid 65534 ($(jq -c .results "$TG_TMP/leak-gen.json" 2>/dev/null))" \
  jq -e '.results["uid 0: sent"] > 0 and .results["uid 65534: sent"] > 0' "$TG_TMP/leak-gen.json"
check_match "[control] ... TCP to the carrier's port 8080" "^other tcp $(tg_re "$C_ETH0_4"):[0-9]+ -> $(tg_re "$CARRIER4"):8080 " "$tuples"
check_match "[control] ... UDP to the IPv6 carrier's port 51820 from another port than the tunnel's" \
  "^other udp \[$C_ETH0_6\]:[0-9]+ -> \[$CARRIER6\]:51820 " "$tuples"
check_match "[control] ... DNS to the LAN host" "^dns udp $(tg_re "$C_ETH0_4"):[0-9]+ -> $(tg_re "$LAN4"):53 " "$tuples"
check_match "[control] ... ICMPv6 echo to an address only a default route covers" "^other icmpv6 .* -> $ELSEWHERE6 type 128 " "$tuples"
check_match "[control] ... forced onto eth1" "^other tcp $(tg_re "$C_ETH1_4"):[0-9]+ -> " "$tuples"
hostile_on
check_ping "[control] with C's LAN claiming $INET_NET4 is local, $INCLUDED4 is reached on-link over eth0" "$NS_C" "$INCLUDED4"
check_route "[control] ... (the hostile connected route is used)" "$NS_C" "$INCLUDED4" eth0
hostile_off

# --- a full tunnel without the kill switch: routing alone ---------------------------------------------------
c_quick
tg_lab_leak_declare "${CARRIERS[@]}" "${LINK_SCOPE[@]}"
tg_run tg_c up "$TG_TMP/$TGW.conf" --detach
check_rc "[full tunnel] up $TGW.conf (wg-quick, AllowedIPs 0.0.0.0/0, ::/0) exits 0" 0
tg_lab_leaks_reset
tunnel_works "full tunnel"
check "[full tunnel] wireguard-go completed a handshake with C" \
  test "$(in_i wg show "$WGI" latest-handshakes | awk '{print $2}')" -gt 0
# ServerIP: everyone else's packets to the carrier's address go into the tunnel, by routing alone.
tg_lab_leaks_reset
tg_leak_generate --source "$C_ETH0_4" --source "$C_ETH0_6"
no_leak "full tunnel, routed (ServerIP by routing)"
check_through_tunnel "full tunnel" "$CARRIER4" 10.70.0.1
# LocalNet: an "internet" prefix made to look local by C's LAN still goes into the tunnel.
hostile_on
check_route "[full tunnel, LocalNet] $INCLUDED4, claimed local by the LAN, is routed into the tunnel" "$NS_C" "$INCLUDED4" "$TGW"
check_route "[full tunnel, LocalNet] $INCLUDED6, claimed local by the LAN, is routed into the tunnel" "$NS_C" "$INCLUDED6" "$TGW"
tg_lab_leaks_reset
tg_leak_generate --routed-only
no_leak "full tunnel, LocalNet"
hostile_off
# The host's routes stay the host's: a default route replaced without a device resolves its gateway over
# the physical link, and `down` does not take it away.
in_c ip -4 route replace default via "$R_C0_4"
in_c ip -6 route replace default via "$R_C0_6"
check_match "[host routes] 'ip route replace default via $R_C0_4' (no dev) resolves the gateway over eth0, not the tunnel" \
  "^default via $(tg_re "$R_C0_4") dev eth0 " "$(in_c ip -4 route show default)"
check_match "[host routes] 'ip -6 route replace default via $R_C0_6' (no dev) resolves the gateway over eth0" \
  "^default via $R_C0_6 dev eth0 " "$(in_c ip -6 route show default)"
down_c "[full tunnel] down"
check_match "[host routes] after down C still has its IPv4 default route via $R_C0_4 dev eth0" \
  "^default via $(tg_re "$R_C0_4") dev eth0 " "$(in_c ip -4 route show default)" ||
  in_c ip -4 route replace default via "$R_C0_4" dev eth0
check_match "[host routes] after down C still has its IPv6 default route via $R_C0_6 dev eth0" \
  "^default via $R_C0_6 dev eth0 " "$(in_c ip -6 route show default)" ||
  in_c ip -6 route replace default via "$R_C0_6" dev eth0
# The default routes as the topology made them again.
tg_c_default_route 4
tg_c_default_route 6

# --- no accidental IPv6: a TUN whose config has no ipv6Settings ----------------------------------------------
cat >"$TG_TMP/v4only.json" <<CFG
{"name": "$TGW", "tunnelRemoteAddress": "$CARRIER4", "mtu": 1400,
 "ipv4Settings": {"addresses": ["10.70.0.1"], "subnetMasks": ["255.255.255.0"], "includedRoutes": ["0.0.0.0/0"]},
 "runtime": {"kind": "wireguard", "privateKeyFile": "$TG_TMP/c.key", "listenPort": 51821,
             "peers": [{"publicKey": "$I_PUB", "endpoint": "$CARRIER4:51820", "allowedIPs": ["0.0.0.0/0"]}]}}
CFG
# The capture starts before the TUN exists: what the kernel sends into it when it comes up counts too.
rm -f "$TG_TMP/sniff.ready" "$TG_TMP/sniff.stop"
in_c python3 "$TG_LEAK_TOOL" sniff "$TGW" --ready "$TG_TMP/sniff.ready" --stop-file "$TG_TMP/sniff.stop" \
  --max-seconds 40 >"$TG_TMP/sniff.out" 2>&1 &
sniffer=$!
wait_for "[no ipv6Settings] the capture of what enters the TUN runs" 5 test -s "$TG_TMP/sniff.ready"
tg_run tg_c up "$TG_TMP/v4only.json" --detach
check_rc "[no ipv6Settings] up of an IPv4-only WireGuard tunnel exits 0" 0
check_eq "[no ipv6Settings] the TUN has no IPv6 address of any kind (ip -6 addr show dev $TGW)" "" \
  "$(in_c ip -6 addr show dev "$TGW" 2>&1)"
# Router solicitations follow an interface's link-local address within rtr_solicit_delay (1 s), MLD
# reports at once: three seconds of nothing is the observation.
if _tg_poll 3 grep -q '^ipv6' "$TG_TMP/sniff.out"; then
  tg_fail "[no ipv6Settings] no IPv6 packet (solicitation, MLD report) is sent into the TUN within 3 s of up" \
    "sent into $TGW:" "$(grep '^ipv6' "$TG_TMP/sniff.out" | sort | uniq -c)"
else
  tg_pass "[no ipv6Settings] no IPv6 packet (solicitation, MLD report) is sent into the TUN within 3 s of up"
fi
check_ping "[no ipv6Settings] the tunnel works: ping 10.70.0.2" "$NS_C" 10.70.0.2
wait_for "[no ipv6Settings] ... and the capture saw that echo request enter the TUN (it can see packets)" 3 \
  grep -q "^ipv4 icmp 8 10.70.0.1 -> 10.70.0.2" "$TG_TMP/sniff.out"
touch "$TG_TMP/sniff.stop"
wait "$sniffer" 2>/dev/null
down_c "[no ipv6Settings] down"

# --- the kill switch: during up -----------------------------------------------------------------------------
tg_lab_leak_declare "${CARRIERS[@]}"
ks_config "$TG_TMP/ks.json"
# Timers scaled by 0.02 (test-only variable, docs/wireguard.md): handshake retries every 0.1 s and the
# session's keys gone 10.8 s after the last handshake, so that a cut carrier shows as reasserting soon.
export TG_ENV=TUNNELGATE_WIREGUARD_TEST_TIME_SCALE=0.02
tg_leak_generate_start
# Counted from the moment the kill switch exists (before that nothing promises anything). And the kill
# switch must come first: leak_traffic.py order tells which of the TUN and the table the kernel had first.
tg_order_watch "$TGW"
tg_c up "$TG_TMP/ks.json" --detach >"$TG_TMP/up.out" 2>&1 &
upper=$!
wait_for "[during up] the kill switch table appears" 10 ks_present
tg_lab_leaks_reset
wait "$upper" && up_rc=0 || up_rc=$?
check_eq "[during up] up --detach with includeAllNetworks exits 0" 0 "$up_rc" || _tg_detail "$(cat "$TG_TMP/up.out")"
wait_for "[during up] the tunnel is connected" 10 status_is connected
tg_leak_generate_stop "[during up] the generator ran through up"
tg_order_result
no_leak "during up"
down_order() { down_c "[$1] down"; }
up_order() { # the same up, its engine's ioctls slowed (tg_up_slowed), so that the watch's look tells
  # shellcheck disable=SC2086 # TG_ENV is one VAR=VALUE word or none
  tg_up_slowed "$NS_C" "$TG_TMP/ks.json" ${TG_ENV:-}
  wait_for "$1 the tunnel is connected" 20 status_is connected
}
tg_order_settle "$TGW" down_order up_order
check_eq "[during up] the kill switch table was there before the TUN" "table first" "$TG_ORDER"
ks_content >"$TG_TMP/ks-content.json"

# --- steady state ---------------------------------------------------------------------------------------------
tg_lab_leaks_reset
tunnel_works "kill switch, steady"
tg_lab_leaks_reset
tg_leak_generate --rounds 2
no_leak "kill switch, steady"
check_through_tunnel "kill switch, steady" "$CARRIER4" 10.70.0.1
check_through_tunnel "kill switch, steady" "$CARRIER6" fd70::1
check_ping "[kill switch, steady] loopback works" "$NS_C" 127.0.0.1
# The IPv6 carrier: the peer's endpoint moved to [$CARRIER6]:51820 (wg set, as a roaming peer would).
tg_lab_leaks_reset
in_c wg set "$TGW" peer "$I_PUB" endpoint "[$CARRIER6]:51820"
check_ping "[IPv6 carrier] the tunnel works over the IPv6 carrier" "$NS_C" 10.70.0.2
wait_for "[IPv6 carrier] ... wireguard-go sees C at [$C_ETH0_6]:51821" 3 \
  bash -c "ip netns exec $NS_I wg show $WGI endpoints | grep -qF '[$C_ETH0_6]:51821'"
tg_leak_generate
no_leak "IPv6 carrier"
in_c wg set "$TGW" peer "$I_PUB" endpoint "$CARRIER4:51820"
check_ping "[IPv6 carrier] back on the IPv4 carrier, the tunnel works" "$NS_C" 10.70.0.2

# --- tampering and repair ------------------------------------------------------------------------------------
# 1: the carrier exemption widened from outside to $INCLUDED4 / $INCLUDED6: an element added to the
# kill switch's carrier set (the same shape as the carrier's own element, the address replaced), or,
# in a table without such a set, a rule accepting the address inserted at the top of the output chain.
# tamper_carrier FAMILY(4|6) CARRIER ADDR: does that; says which.
tamper_carrier() {
  local set=carriers$1 element family=ip
  [ "$1" = 6 ] && family=ip6
  element=$(in_c nft list set inet "tunnelgate-$TGW" "$set" 2>/dev/null | tr '\n\t' '  ' |
    sed -n 's/.*elements = { \([^,}]*\).*/\1/p' | sed 's/ expires [^ ]*//; s/ *$//')
  if [[ $element == *"$2"* ]]; then
    echo "an element added to $set"
    in_c nft add element inet "tunnelgate-$TGW" "$set" "{ ${element//$2/$3} }"
  else
    echo "no carrier set with $2 ($set: $(in_c nft list set inet "tunnelgate-$TGW" "$set" 2>&1 | head -n 1)): a rule inserted"
    in_c nft insert rule inet "tunnelgate-$TGW" output $family daddr "$3" accept comment "\"tunnelgate:$TGW carrier\""
  fi
}
# untamper_carrier FAMILY ADDR: takes the widening out again (by hand, when the repair did not).
untamper_carrier() {
  local handle family=ip
  [ "$1" = 6 ] && family=ip6
  in_c nft delete element inet "tunnelgate-$TGW" "carriers$1" "{ $2 }" 2>/dev/null
  for handle in $(in_c nft -a list chain inet "tunnelgate-$TGW" output |
    sed -n "s/.*$family daddr $(tg_re "$2") accept .* # handle \([0-9]*\)\$/\1/p"); do
    in_c nft delete rule inet "tunnelgate-$TGW" output handle "$handle"
  done
}
tg_run tamper_carrier 4 "$CARRIER4" "$INCLUDED4"
check_rc "[tamper: carrier exemption] $INCLUDED4 is let through the kill switch from outside ($TG_OUT)" 0
tg_run tamper_carrier 6 "$CARRIER6" "$INCLUDED6"
check_rc "[tamper: carrier exemption] ... and $INCLUDED6 ($TG_OUT)" 0
wait_for "[tamper: carrier exemption] the kill switch's content is repaired (equal to what up made) within 2 s" 2 \
  ks_content_is "$TG_TMP/ks-content.json" || ks_diff "$TG_TMP/ks-content.json"
tg_lab_leaks_reset
tg_leak_generate
no_leak "after the carrier-exemption tamper and its repair"
tunnel_works "after the carrier-exemption tamper"
# Not repaired: the test takes the widening out again, so that the next phases measure only themselves.
ks_content_is "$TG_TMP/ks-content.json" || { untamper_carrier 4 "$INCLUDED4"; untamper_carrier 6 "$INCLUDED6"; }
# 2: the output chain's last rule (the catch-all drop) deleted and its policy set to accept.
check "[tamper: rule and policy] the output chain's last rule is deleted from outside and its policy set to accept" tamper_open
wait_for "[tamper: rule and policy] the kill switch's content is repaired (equal to what up made) within 2 s" 2 \
  ks_content_is "$TG_TMP/ks-content.json" || ks_diff "$TG_TMP/ks-content.json"
tg_lab_leaks_reset
tg_leak_generate
no_leak "after the rule/policy tamper and its repair"
tunnel_works "after the rule/policy tamper"
# 3: the same twelve times in a row, each time once the last repair is seen: repairs must not pause
# while the tunnel is up.
repaired=0
for i in $(seq 12); do
  tamper_open >/dev/null 2>&1 || break
  _tg_poll 2 ks_content_is "$TG_TMP/ks-content.json" || break
  repaired=$i
done
check_eq "[tamper storm] the chain opened 12 times in a row: each time repaired within 2 s" 12 "$repaired" ||
  ks_diff "$TG_TMP/ks-content.json"
tg_lab_leaks_reset
tg_leak_generate
no_leak "after 12 tampers in a row"
# Not repaired: the test closes the chain again, so that the next phases measure only themselves.
ks_content_is "$TG_TMP/ks-content.json" || {
  in_c nft chain inet "tunnelgate-$TGW" output '{ policy drop; }'
  in_c nft add rule inet "tunnelgate-$TGW" output counter drop comment "\"tunnelgate:$TGW blocked\""
} 2>/dev/null

# --- carrier loss and return (cut at R) -------------------------------------------------------------------
in_r nft -f - <<EOT || tg_bail "nft: the carrier cut in R"
table inet cut {
  chain forward {
    type filter hook forward priority -10; policy accept;
    udp dport 51820 drop
    udp sport 51820 drop
  }
}
EOT
tg_lab_leaks_reset
check_fails "[carrier lost] nothing crosses the tunnel with its carrier cut" in_c ping -n -c 1 -W 1 10.70.0.2
tg_leak_generate_start
wait_for "[carrier lost] the tunnel goes reasserting" 20 status_is reasserting
tg_leak_generate_stop "[carrier lost] the generator ran while the carrier was gone"
check "[carrier lost] WireGuard kept trying its carrier 5-tuple ($(tg_lab_carrier_packets) packets at R)" \
  test "$(tg_lab_carrier_packets)" -gt 0
no_leak "carrier lost"
in_r nft delete table inet cut
tg_lab_leaks_reset
tg_leak_generate_start
wait_for "[carrier back] the tunnel is connected again" 20 status_is connected
tg_leak_generate_stop "[carrier back] the generator ran while the carrier came back"
no_leak "carrier back"
tunnel_works "carrier back"

# --- the TUN deleted from outside --------------------------------------------------------------------------
tg_lab_leaks_reset
in_c ip link del "$TGW"
tg_leak_generate
no_leak "TUN deleted from outside"

# --- the owner SIGKILLed ------------------------------------------------------------------------------------
owner=$(tg_tunnel_pids "$NS_C" | head -n 1)
tg_lab_leaks_reset
tg_leak_generate_start
kill -9 "${owner:-0}"
wait_for "[owner SIGKILLed] the tunnelgate process is gone" 5 tg_exited "${owner:-0}"
wait_for "[owner SIGKILLed] ... and its TUN" 5 tun_gone
tg_leak_generate_stop "[owner SIGKILLed] the generator ran through the kill"
no_leak "owner SIGKILLed"
check_match "[owner SIGKILLed] status says the kill switch is still on" 'kill switch: on' "$(tg_c status "$TGW" 2>&1)"

# --- failed next ups of the same name over the residue -------------------------------------------------------
# failed_up PHASE ERROR-REGEX CONFIG: an up that must fail, with the generator running through it; the
# residue's kill switch must stay closed.
failed_up() {
  local phase=$1 regex=$2 config=$3
  tg_lab_leaks_reset
  tg_leak_generate_start
  tg_run tg_c up "$config" --detach
  check_rc_nonzero "[$phase] up fails"
  check_match "[$phase] ... saying why" "$regex" "$TG_ERR"
  tg_leak_generate_stop "[$phase] the generator ran through the failed up"
  no_leak "$phase"
  check "[$phase] the kill switch table is still there" ks_present
}
rm -f "$TG_TMP/hold.ready"
in_c python3 "$TG_LEAK_TOOL" hold-udp 51822 --ready "$TG_TMP/hold.ready" --max-seconds 60 &
holder=$!
wait_for "[failed up: ListenPort taken] another program holds UDP 51822" 5 test -s "$TG_TMP/hold.ready"
ks_config "$TG_TMP/ks-port.json" 51822
failed_up "failed up: ListenPort taken" "51822|[Aa]ddress already in use" "$TG_TMP/ks-port.json"
kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
cat >"$TG_TMP/ks-lib.json" <<CFG
{"name": "$TGW", "tunnelRemoteAddress": "$CARRIER4", "mtu": 1400,
 "ipv4Settings": {"addresses": ["10.70.0.1"], "subnetMasks": ["255.255.255.0"], "includedRoutes": ["0.0.0.0/0"]},
 "carrierEndpoints": ["$CARRIER4"], "includeAllNetworks": true,
 "runtime": {"kind": "callback", "library": "/nonexistent/libnothing.so", "arguments": []}}
CFG
failed_up "failed up: runtime library missing" "/nonexistent/libnothing.so" "$TG_TMP/ks-lib.json"
ks_config "$TG_TMP/ks-bad.json" 51821 ', "inculdeAllNetworks": true'
failed_up "failed up: config fails validation" "inculdeAllNetworks" "$TG_TMP/ks-bad.json"
# Last, as it is the one that gets past applying the settings: a wireguard-go interface of the same name
# in L holds /var/run/wireguard/$TGW.sock, and something listens on the name C's tunnel would take
# then (NAME@ID, ID C's namespace inode in base 36: docs/wireguard.md), so the runtime's start fails.
ip netns exec "$NS_L" env LOG_LEVEL=error wireguard-go -f "$TGW" >>"$TG_TMP/wireguard-go.log" 2>&1 &
namesake=$!
c_id=$(python3 -c 'import sys; n = int(sys.argv[1]); d = ""
while n: n, r = divmod(n, 36); d = "0123456789abcdefghijklmnopqrstuvwxyz"[r] + d
print(d)' "$(stat -L -c %i "/run/netns/$NS_C")")
alias_sock=/var/run/wireguard/${TGW:0:$((14 - ${#c_id}))}@$c_id.sock
tg_defer rm -f "$alias_sock"
python3 -c 'import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(4); time.sleep(60)' "$alias_sock" &
squatter=$!
wait_for "[failed up: API socket taken] a wireguard-go named $TGW in L holds its API socket" 10 \
  test -S "/var/run/wireguard/$TGW.sock"
wait_for "[failed up: API socket taken] ... and another listener the name C's tunnel would take next" 10 test -S "$alias_sock"
failed_up "failed up: API socket taken" "API socket|$TGW\.sock|${alias_sock##*/}" "$TG_TMP/ks.json"
kill "$namesake" "$squatter" 2>/dev/null; wait "$namesake" "$squatter" 2>/dev/null
rm -f "$alias_sock"
wait_for "[failed up: API socket taken] the namesake's socket is gone" 5 test ! -e "/var/run/wireguard/$TGW.sock"

# --- an up over the residue ---------------------------------------------------------------------------------
tg_lab_leaks_reset
tg_leak_generate_start
tg_run tg_c up "$TG_TMP/ks.json" --detach
check_rc "[up over the residue] up exits 0" 0
wait_for "[up over the residue] the tunnel is connected" 10 status_is connected
tg_leak_generate_stop "[up over the residue] the generator ran through up"
no_leak "up over the residue"
tunnel_works "up over the residue"
check_eq "[up over the residue] one kill switch table, not two" 1 "$(in_c nft list tables | grep -c "tunnelgate-$TGW")"

# --- down -----------------------------------------------------------------------------------------------------
# What leaves while the kill switch still exists is a leak; once its table is gone traffic is clear by
# design. A poller records the start of the last listing that still found the table: a tuple R first saw
# before that moment was sent while the kill switch stood.
tg_lab_leaks_reset
: >"$TG_TMP/ks-last-seen"
(
  for _ in $(seq 2000); do
    t=$(_tg_now_ms)
    ks_present || break
    echo "$t" >"$TG_TMP/ks-last-seen"
  done
) &
poller=$!
tg_leak_generate_start
tg_run tg_c down "$TGW"
check_rc "[during down] down exits 0" 0
wait_for "[during down] the kill switch table is gone" 10 tg_exited "$poller"
tg_leak_generate_stop "[during down] the generator ran through down"
last_seen=$(cat "$TG_TMP/ks-last-seen")
check "[during down] the kill switch was seen while the generator ran" test -n "$last_seen"
no_leak "during down, first seen while the kill switch stood" --before "${last_seen:-0}"
wait_for "[after down] C's tunnelgate process has exited" 10 tg_no_tunnel_process "$NS_C"
tg_lab_leaks_reset
tg_leak_generate
after=$(tg_lab_leak_count)
check "[after down] traffic leaves C in clear again: the counter moves ($after packets)" test "$after" -gt 0
check_match "[after down] C's IPv4 default route is there" "^default via $(tg_re "$R_C0_4") dev eth0 " "$(in_c ip -4 route show default)"

# --- the kill switch with excludeLocalNetworks on a LAN that claims an "internet" prefix ------------------------
hostile_on
tg_lab_leak_declare "${CARRIERS[@]}" "${LOCAL_RANGES[@]}"
ks_config "$TG_TMP/ks-local.json" 51821 ', "excludeLocalNetworks": true'
tg_run tg_c up "$TG_TMP/ks-local.json" --detach
check_rc "[LocalNet, kill switch] up with excludeLocalNetworks on a LAN that claims $INET_NET4 exits 0" 0
check_route "[LocalNet, kill switch] $INCLUDED4 (not a local range) is routed into the tunnel" "$NS_C" "$INCLUDED4" "$TGW"
check_route "[LocalNet, kill switch] $INCLUDED6 (not a local range) is routed into the tunnel" "$NS_C" "$INCLUDED6" "$TGW"
check_route "[LocalNet, kill switch] the LAN host $LAN4 (RFC 1918) is routed directly" "$NS_C" "$LAN4" eth0
tg_lab_leaks_reset
tunnel_works "LocalNet, kill switch"
tg_lab_leaks_reset
tg_leak_generate
no_leak "LocalNet, kill switch + excludeLocalNetworks"
down_c "[LocalNet, kill switch] down"
hostile_off
unset TG_ENV

# --- a carrier named by a host name whose answer at up was spoofed -------------------------------------------
# C's resolver (its hosts file, as a spoofed DNS answer would) says the tunnel's control server is
# $INCLUDED4 / $INCLUDED6. Whatever the name resolved to, only the runtime's own carrier 5-tuple may
# bypass the tunnel: everybody else's packets for $INCLUDED4 go into it or nowhere. The name is pinned:
# pointed at $EXCLUDED4 afterwards (and a repair made to happen), nothing changes.
NAME=vpn.tunnelgate.test
mkdir -p "/etc/netns/$NS_C"
printf '%s %s\n%s %s\n' "$INCLUDED4" "$NAME" "$INCLUDED6" "$NAME" >"/etc/netns/$NS_C/hosts"
tg_lab_leak_declare "${CARRIERS[@]}" --carrier "$INCLUDED4:51820/udp@51821" --carrier "[$INCLUDED6]:51820/udp@51821"
ks_config "$TG_TMP/ks-name.json"
sed -i "s|\"carrierEndpoints\": \[|\"carrierEndpoints\": [\"$NAME:51820\", |" "$TG_TMP/ks-name.json"
check_match "[spoofed carrier name] plan shows what $NAME resolved to" "$(tg_re "$INCLUDED4")" \
  "$(tg_c plan "$TG_TMP/ks-name.json" 2>&1 | grep -i carrier)"
tg_run tg_c up "$TG_TMP/ks-name.json" --detach
check_rc "[spoofed carrier name] up with carrierEndpoints naming $NAME exits 0" 0
tg_lab_leaks_reset
tunnel_works "spoofed carrier name"
ks_content >"$TG_TMP/ks-name-content.json"
printf '%s %s\n%s %s\n' "$EXCLUDED4" "$NAME" "$EXCLUDED6" "$NAME" >"/etc/netns/$NS_C/hosts"
check "[spoofed carrier name] the name now points at $EXCLUDED4; the kill switch is opened from outside" tamper_open
wait_for "[spoofed carrier name] ... and repaired to exactly what up made (the name's address stays pinned)" 2 \
  ks_content_is "$TG_TMP/ks-name-content.json" || ks_diff "$TG_TMP/ks-name-content.json"
tg_lab_leaks_reset
tg_leak_generate
no_leak "spoofed carrier name"
check_through_tunnel "spoofed carrier name" "$INCLUDED4" 10.70.0.1
down_c "[spoofed carrier name] down"
rm -rf "/etc/netns/$NS_C"

# --- gateway mode: tunnelgate in R forwards L's traffic into its tunnel, and nothing else --------------------
#   L (source) ── R (tunnelgate "$TGW", forwarding) ══ WireGuard ══ I (wireguard-go, 10.70.0.2)
# I, the tunnel's far end, tries to reach L through the tunnel: nothing of it may arrive at L. C, not a
# configured source, tries to reach the tunnel's route through R: none of it may enter the tunnel.
in_i wg set "$WGI" peer "$C_PUB" allowed-ips "10.70.0.1/32,fd70::1/128,$LAN_NET4,$LAN_NET6"
in_i ip -4 route add "$LAN_NET4" dev "$WGI"
in_i ip -6 route add "$LAN_NET6" dev "$WGI"
ip netns exec "$NS_L" nft -f - <<EOT || tg_bail "nft: counters in L"
table inet fromtunnel {
  chain input {
    type filter hook input priority -300; policy accept;
    ip saddr 10.70.0.0/24 counter
    ip6 saddr fd70::/64 counter
  }
}
EOT
in_r nft -f - <<EOT || tg_bail "nft: counters in R"
table inet gwnotsource {
  chain forward {
    type filter hook forward priority 10; policy accept;
    iifname { "c0", "c1" } oifname "$TGW" counter
  }
}
table inet gwin {
  chain pre {
    type filter hook prerouting priority -300; policy accept;
    iifname "$TGW" ip daddr $LAN4 counter
    iifname "$TGW" ip6 daddr $LAN6 counter
  }
}
EOT
in_i nft -f - <<EOT || tg_bail "nft: counters in I"
table inet viatunnel {
  chain input {
    type filter hook input priority -300; policy accept;
    iifname "$WGI" icmp type echo-request counter
    iifname "$WGI" icmpv6 type echo-request counter
  }
}
EOT
sum_counters() { # NS TABLE: the packets of every rule counter in TABLE
  ip netns exec "$1" nft list table inet "$2" | awk '{ for (i = 1; i < NF; i++) if ($i == "packets") s += $(i + 1) } END { print s + 0 }'
}
ip netns exec "$NS_I" sysctl -qw net.ipv4.ping_group_range="0 2147483647"
for ks in false true; do
  label="gateway, includeAllNetworks $ks"
  cat >"$TG_TMP/gw.json" <<CFG
{"name": "$TGW", "tunnelRemoteAddress": "$CARRIER4", "mtu": 1400, "includeAllNetworks": $ks,
 "ipv4Settings": {"addresses": ["10.70.0.1"], "subnetMasks": ["255.255.255.0"], "includedRoutes": ["$INCLUDED4/32"]},
 "ipv6Settings": {"addresses": ["fd70::1"], "networkPrefixLengths": [64], "includedRoutes": ["$INCLUDED6/128"]},
 "forwarding": {"sources": ["$LAN_NET4", "$LAN_NET6"]},
 "runtime": {"kind": "wireguard", "privateKeyFile": "$TG_TMP/c.key", "listenPort": 51821,
             "peers": [{"publicKey": "$I_PUB", "endpoint": "$CARRIER4:51820",
                        "allowedIPs": ["10.70.0.0/24", "fd70::/64", "$INCLUDED4/32", "$INCLUDED6/128"]}]}}
CFG
  tg_run ip netns exec "$NS_R" "$TG" up "$TG_TMP/gw.json" --detach
  check_rc "[$label] up in R with a forwarding section for the LAN" 0
  via_before=$(sum_counters "$NS_I" viatunnel)
  check_ping "[$label] the LAN host reaches $INCLUDED4 through the gateway's tunnel" "$NS_L" "$INCLUDED4"
  check_ping "[$label] ... and $INCLUDED6" "$NS_L" "$INCLUDED6"
  check "[$label] ... arriving at I through the tunnel ($via_before -> $(sum_counters "$NS_I" viatunnel) echo requests)" \
    test "$(sum_counters "$NS_I" viatunnel)" -ge $((via_before + 2))
  # (rule counters cannot be reset by this nft version: each check compares with a baseline)
  l_before=$(sum_counters "$NS_L" fromtunnel) fwd_before=$(sum_counters "$NS_R" gwnotsource) in_before=$(sum_counters "$NS_R" gwin)
  # The far end: TCP, UDP, DNS and ICMP to the LAN host, through the tunnel (I's routes for the LAN point
  # into wireguard-go).
  in_i python3 "$TG_LEAK_TOOL" probe --rounds 2 --uid 0 --routed-only "$LAN4" "$LAN6" >"$TG_TMP/gw-probe.json" 2>&1
  check "[$label] the far end's attempts to reach the LAN host arrived at the gateway through the tunnel ($in_before -> $(sum_counters "$NS_R" gwin) packets)" \
    test "$(sum_counters "$NS_R" gwin)" -gt "$in_before"
  check_eq "[$label] none of them arrived at the LAN host (packets from the tunnel counted in L)" "$l_before" \
    "$(sum_counters "$NS_L" fromtunnel)"
  # Not a source: C, routed through R, for the tunnel's routes.
  in_c ping -n -c 2 -i 0.2 -W 0.5 "$INCLUDED4" >/dev/null 2>&1
  in_c ping -n -c 2 -i 0.2 -W 0.5 "$INCLUDED6" >/dev/null 2>&1
  check_eq "[$label] nothing from C (routed through R, not a configured source) was forwarded into the tunnel" \
    "$fwd_before" "$(sum_counters "$NS_R" gwnotsource)"
  tg_run ip netns exec "$NS_R" "$TG" down "$TGW"
  check_rc "[$label] down" 0
  wait_for "[$label] R's tunnelgate process has exited" 10 tg_no_tunnel_process "$NS_R"
done

tg_summary
