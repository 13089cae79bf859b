#!/usr/bin/env bash
# split-tunnel: only the internet host's subnet goes into the tunnel. Inside it the excluded host and the
# carrier stay on eth0, the LAN and everything else is not covered at all, and a prefix that is both
# included and excluded is excluded (an exclusion wins a tie). `down` restores C exactly.
set -uo pipefail
# shellcheck source=netns/lib.sh
. "$(dirname "$0")/../lib.sh"
tg_begin

# 198.18.0.128/25 and 2001:db8:18::100/120 are in both lists: the tie.
TIE4=198.18.0.200
TIE6=2001:db8:18::150
cfg=$TG_TMP/split.json
cat >"$cfg" <<JSON
{
  "name": "tg0",
  "tunnelRemoteAddress": "$CARRIER4",
  "mtu": 1400,
  "ipv4Settings": {
    "addresses": ["10.8.0.2"],
    "subnetMasks": ["255.255.255.0"],
    "includedRoutes": ["$INET_NET4", "198.18.0.128/25"],
    "excludedRoutes": ["$EXCLUDED4/32", "198.18.0.128/25"]
  },
  "ipv6Settings": {
    "addresses": ["fd00:8::2"],
    "networkPrefixLengths": [64],
    "includedRoutes": ["$INET_NET6", "2001:db8:18::100/120"],
    "excludedRoutes": ["$EXCLUDED6/128", "2001:db8:18::100/120"]
  },
  "carrierEndpoints": ["$CARRIER4", "$CARRIER6"],
  "runtime": {"kind": "none"}
}
JSON

tg_watch_echo "$NS_I" "$INCLUDED4" "$INCLUDED6"
tg_snapshot "$NS_C" "$TG_TMP/before"
tg_run ip netns exec "$NS_C" "$TG" up "$cfg" --detach
check_rc "up --detach of the split tunnel exits 0" 0

check_route "included $INCLUDED4 is looked up into tg0" "$NS_C" "$INCLUDED4" tg0
check_route "included $INCLUDED6 is looked up into tg0" "$NS_C" "$INCLUDED6" tg0
check_route "excluded $EXCLUDED4 leaves through eth0" "$NS_C" "$EXCLUDED4" eth0
check_route "excluded $EXCLUDED6 leaves through eth0" "$NS_C" "$EXCLUDED6" eth0
mark=$(tg_tunnel_table "$NS_C" 4)
check_route_marked "the tunnel's own carrier packets (fwmark $mark) to $CARRIER4 leave through eth0" "$NS_C" "$CARRIER4" "$mark" eth0
check_route_marked "the tunnel's own carrier packets (fwmark $mark) to $CARRIER6 leave through eth0" "$NS_C" "$CARRIER6" "$mark" eth0
check_route "anyone else's packets to carrier $CARRIER4 (inside an included route) go into tg0" "$NS_C" "$CARRIER4" tg0
check_route "anyone else's packets to carrier $CARRIER6 (inside an included route) go into tg0" "$NS_C" "$CARRIER6" tg0
check_route "LAN host $LAN4 (not covered) leaves through eth0" "$NS_C" "$LAN4" eth0
check_route "LAN host $LAN6 (not covered) leaves through eth0" "$NS_C" "$LAN6" eth0
check_route "$ELSEWHERE4 (not covered) leaves through eth0" "$NS_C" "$ELSEWHERE4" eth0
check_route "$ELSEWHERE6 (not covered) leaves through eth0" "$NS_C" "$ELSEWHERE6" eth0
check_route "$TIE4 (198.18.0.128/25 included and excluded) leaves through eth0: exclusion wins a tie" \
  "$NS_C" "$TIE4" eth0
check_route "$TIE6 (2001:db8:18::100/120 included and excluded) leaves through eth0: exclusion wins a tie" \
  "$NS_C" "$TIE6" eth0

table4=$(tg_tunnel_table "$NS_C" 4)
table6=$(tg_tunnel_table "$NS_C" 6)
check_no_match "the tunnel's IPv4 table has no default route (split tunnel)" '^default ' \
  "$(ip -n "$NS_C" -4 route show table "${table4:-none}" 2>&1)"
check_no_match "the tunnel's IPv6 table has no default route (split tunnel)" '^default ' \
  "$(ip -n "$NS_C" -6 route show table "${table6:-none}" 2>&1)"

check_ping "C reaches LAN host $LAN4" "$NS_C" "$LAN4"
check_ping "C reaches LAN host $LAN6" "$NS_C" "$LAN6"
check_ping "C reaches excluded $EXCLUDED4" "$NS_C" "$EXCLUDED4"
check_ping "C reaches excluded $EXCLUDED6" "$NS_C" "$EXCLUDED6"
ip netns exec "$NS_C" ping -n -c 1 -W 1 "$INCLUDED4" >/dev/null 2>&1
ip netns exec "$NS_C" ping -n -c 1 -W 1 "$INCLUDED6" >/dev/null 2>&1
check_eq "nothing for included $INCLUDED4 reached I over a physical path" 0 "$(tg_echo_count "$NS_I" "$INCLUDED4")"
check_eq "nothing for included $INCLUDED6 reached I over a physical path" 0 "$(tg_echo_count "$NS_I" "$INCLUDED6")"

tg_run ip netns exec "$NS_C" "$TG" down tg0
check_rc "down tg0 exits 0" 0
wait_for "the detached tunnelgate process has exited" 10 tg_no_tunnel_process "$NS_C"
tg_snapshot "$NS_C" "$TG_TMP/after"
check_same_snapshot "C's kernel state after down equals the state before up" "$TG_TMP/before" "$TG_TMP/after"

tg_summary
