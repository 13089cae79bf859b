#!/usr/bin/env bash
# status: while a tunnel is up, `status tg0 --json` reports it connected with the interface, index, MTU,
# addresses, table and process that the kernel actually has; the human form says the same; after `down`
# both report it disconnected with no residue, and a second `down` is refused.
set -uo pipefail
# shellcheck source=netns/lib.sh
. "$(dirname "$0")/../lib.sh"
tg_begin

cfg=$TG_TMP/full.json
tg_full_tunnel_config "$cfg" tg0
tgc() { ip netns exec "$NS_C" "$TG" "$@"; }

tg_run tgc up "$cfg" --detach
check_rc "up --detach exits 0" 0
check_match "the kernel has tg0 with MTU 1400" ' mtu 1400 ' "$(ip -n "$NS_C" link show dev tg0 2>&1)"

tg_run tgc status tg0 --json
check_rc "status tg0 --json exits 0" 0
json=$TG_OUT
check "status tg0 --json is JSON" jq -e . <<<"$json"
field() { jq -r "$1" <<<"$json" 2>&1; }
check_eq "status: name is tg0" tg0 "$(field .name)"
check_eq "status: status is connected" connected "$(field .status)"
check_eq "status: interface is tg0" tg0 "$(field .interface)"
check_eq "status: mtu is 1400" 1400 "$(field .mtu)"
check_eq "status: addresses are 10.8.0.2/24 and fd00:8::2/64" $'10.8.0.2/24\nfd00:8::2/64' \
  "$(field '.addresses[]' | sort)"
check_eq "status: no residue" false "$(field .residue)"
check_eq "status: interfaceIndex is tg0's index in the kernel" \
  "$(ip -n "$NS_C" -o link show dev tg0 | cut -d: -f1)" "$(field .interfaceIndex)"
check_eq "status: table is the one the kernel's IPv4 rule looks up" "$(tg_tunnel_table "$NS_C" 4)" "$(field .table)"
check_eq "status: table is the one the kernel's IPv6 rule looks up" "$(tg_tunnel_table "$NS_C" 6)" "$(field .table)"
check_eq "status: pid is the tunnelgate process that lives in C" "$(tg_tunnel_pids "$NS_C")" "$(field .pid)"
check_eq "status: 1 included and 1 excluded IPv4 route (the excluded host; the carrier is exempt by identity)" "1 1" \
  "$(field '"\(.ipv4Routes.included) \(.ipv4Routes.excluded)"')"

tg_run tgc status tg0
check_rc "status tg0 exits 0" 0
check_match "status tg0 (human) says connected" '^tg0: connected' "$TG_OUT"
check_match "status tg0 (human) shows the interface and MTU" 'interface: tg0 .*mtu 1400' "$TG_OUT"

tg_run tgc status --json
check_eq "status --json (all tunnels) lists tg0, connected" "tg0 connected" \
  "$(jq -r '.tunnels[] | "\(.name) \(.status)"' <<<"$TG_OUT" 2>&1)"

tg_run tgc down tg0
check_rc "down tg0 exits 0" 0
wait_for "the detached tunnelgate process has exited" 10 tg_no_tunnel_process "$NS_C"
check_fails "tg0 is gone from the kernel" ip -n "$NS_C" link show dev tg0

tg_run tgc status tg0 --json
check_rc "status tg0 --json after down exits 0" 0
check_eq "status after down: disconnected, no residue" "disconnected false" \
  "$(jq -r '"\(.status) \(.residue)"' <<<"$TG_OUT" 2>&1)"
tg_run tgc status tg0
check_rc "status tg0 after down exits 0" 0
check_eq "status tg0 (human) after down is one line: 'tg0: disconnected'" "tg0: disconnected" "$TG_OUT"
tg_run tgc status --json
check_eq "status --json after down lists no tunnel" 0 "$(jq -r '.tunnels | length' <<<"$TG_OUT" 2>&1)"

tg_run tgc down tg0
check_rc "a second down tg0 exits 1" 1
check_match "a second down tg0 says there is no such tunnel" '^Error: .*tg0' "$TG_ERR"

tg_summary
