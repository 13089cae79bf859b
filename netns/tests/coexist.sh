#!/usr/bin/env bash
# coexist: two tunnels, tga and tgb, up in the same namespace at once. Each one's routes lead into its
# own interface through its own table and rule, status lists both, taking one down leaves the other
# working, and taking both down restores C exactly.
set -uo pipefail
# shellcheck source=netns/lib.sh
. "$(dirname "$0")/../lib.sh"
tg_begin

# split_config FILE NAME V4NET V6NET HOST4 HOST6: a split tunnel that carries only HOST4 and HOST6.
split_config() {
  cat >"$1" <<JSON
{
  "name": "$2",
  "tunnelRemoteAddress": "$CARRIER4",
  "mtu": 1400,
  "ipv4Settings": {"addresses": ["$3"], "subnetMasks": ["255.255.255.0"], "includedRoutes": ["$5/32"]},
  "ipv6Settings": {"addresses": ["$4"], "networkPrefixLengths": [64], "includedRoutes": ["$6/128"]},
  "carrierEndpoints": ["$CARRIER4", "$CARRIER6"],
  "runtime": {"kind": "none"}
}
JSON
}
split_config "$TG_TMP/tga.json" tga 10.8.0.2 fd00:8::2 "$INCLUDED4" "$INCLUDED6"
split_config "$TG_TMP/tgb.json" tgb 10.9.0.2 fd00:9::2 "$EXCLUDED4" "$EXCLUDED6"

tg_snapshot "$NS_C" "$TG_TMP/before"
tg_run ip netns exec "$NS_C" "$TG" up "$TG_TMP/tga.json" --detach
check_rc "up --detach tga exits 0" 0
tg_run ip netns exec "$NS_C" "$TG" up "$TG_TMP/tgb.json" --detach
check_rc "up --detach tgb (next to tga) exits 0" 0

check_route "$INCLUDED4 is looked up into tga" "$NS_C" "$INCLUDED4" tga
check_route "$INCLUDED6 is looked up into tga" "$NS_C" "$INCLUDED6" tga
check_route "$EXCLUDED4 is looked up into tgb" "$NS_C" "$EXCLUDED4" tgb
check_route "$EXCLUDED6 is looked up into tgb" "$NS_C" "$EXCLUDED6" tgb
check_route "carrier $CARRIER4 leaves through eth0" "$NS_C" "$CARRIER4" eth0
check_route "LAN host $LAN4 leaves through eth0" "$NS_C" "$LAN4" eth0
tables=$(ip -n "$NS_C" -4 rule show |
  sed -n 's/.*not from all fwmark [^ ]* lookup \([^ ]*\).*/\1/p' | sort -u)
check_eq "each tunnel has its own IPv4 table (two distinct tables in the rules)" 2 \
  "$(printf '%s\n' "$tables" | grep -c .)"

tg_run ip netns exec "$NS_C" "$TG" status --json
check_rc "status --json exits 0" 0
check_eq "status --json lists exactly tga and tgb" $'tga\ntgb' \
  "$(jq -r '.tunnels[].name' <<<"$TG_OUT" 2>&1 | sort)"
check_eq "status --json: both are connected" $'connected\nconnected' \
  "$(jq -r '.tunnels[].status' <<<"$TG_OUT" 2>&1)"
check_eq "status --json: each has its own table, as the kernel's rules say" "$tables" \
  "$(jq -r '.tunnels[].table' <<<"$TG_OUT" 2>&1 | sort -u)"

tg_run ip netns exec "$NS_C" "$TG" down tga
check_rc "down tga exits 0" 0
check_fails "tga is gone" ip -n "$NS_C" link show dev tga
check_route "with tga down, $EXCLUDED4 is still looked up into tgb" "$NS_C" "$EXCLUDED4" tgb
check_route "with tga down, $EXCLUDED6 is still looked up into tgb" "$NS_C" "$EXCLUDED6" tgb
check_route "with tga down, $INCLUDED4 leaves through eth0" "$NS_C" "$INCLUDED4" eth0
check_ping "with tga down, C reaches $INCLUDED4" "$NS_C" "$INCLUDED4"
tg_run ip netns exec "$NS_C" "$TG" status --json
check_eq "with tga down, status --json lists only tgb" tgb "$(jq -r '.tunnels[].name' <<<"$TG_OUT" 2>&1)"

tg_run ip netns exec "$NS_C" "$TG" down tgb
check_rc "down tgb exits 0" 0
wait_for "no detached tunnelgate process is left" 10 tg_no_tunnel_process "$NS_C"
tg_snapshot "$NS_C" "$TG_TMP/after"
check_same_snapshot "C's kernel state after both downs equals the state before" \
  "$TG_TMP/before" "$TG_TMP/after"

tg_summary
