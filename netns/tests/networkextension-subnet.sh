#!/usr/bin/env bash
# networkextension-subnet: a provider whose server (tunnelRemoteAddress $CARRIER4) is inside its TUN's own
# subnet (198.18.0.2/24, as FastProxy1's 192.168.1.1 inside 192.168.1.2/24). iOS keeps tunnelRemoteAddress
# outside the tunnel whatever the addresses; so does Tunnelgate: the address carries IFA_F_NOPREFIXROUTE and
# the subnet's route is in the tunnel's own table, which the provider's exemption passes over. The provider's
# sockets reach the server through eth0, everyone else's packets to it and to the rest of the subnet go into
# tg0, main has no route into tg0, the carrier path is found (connected, never reasserting), and after the
# stop C's kernel state is as before.
#
#   C ── tunnelgate-provider-example ── tg0 (198.18.0.2/24: the subnet route in table T)
#   │ eth0 (the server $CARRIER4, inside that subnet, is reached here)
#   R ── I ($CARRIER4)
set -uo pipefail
# shellcheck source=netns/lib.sh
. "$(dirname "$0")/../lib.sh"
PROVIDER=${TG_PROVIDER_EXAMPLE:-$TG_ROOT/.build/debug/tunnelgate-provider-example}
[ -x "$PROVIDER" ] || tg_bail "the example host is built at $PROVIDER" "build it with: swift build"
tg_begin
tg_plane_test_hooks TG_NE_REMOTE TG_NE_DNS TG_NE_ADDRESS TG_NE_MASK TG_NE_STOP_FILE

tg_snapshot "$NS_C" "$TG_TMP/before"
stop_file=$TG_HOOKS/stops
log=$TG_TMP/provider.log
inside=198.18.0.77   # another address of the subnet, not the server
ip netns exec "$NS_C" env TG_NE_REMOTE="$CARRIER4" TG_NE_DNS=none TG_NE_ADDRESS=198.18.0.2 TG_NE_MASK=255.255.255.0 \
  TG_NE_STOP_FILE="$stop_file" "$PROVIDER" --provider counting >"$log" 2>&1 &
provider_pid=$!
status_is() { ip netns exec "$NS_C" "$TG" status tg0 --json 2>/dev/null | jq -e "$1" >/dev/null; }
dev_of() { sed -n 's/.* dev \([^ ]*\).*/\1/p'; }

wait_for "startTunnel completed: connected" 15 status_is '.status == "connected"'
check_match "tg0 has 198.18.0.2/24, without the kernel's prefix route" 'inet 198\.18\.0\.2/24 .*noprefixroute' \
  "$(ip -n "$NS_C" -4 addr show dev tg0 2>&1)"
check_eq "main has no route into tg0" "" "$(ip -n "$NS_C" -4 route show table main dev tg0 2>&1)"
table4=$(tg_tunnel_table "$NS_C" 4)
check_match "the tunnel's table has the subnet's route" '^198\.18\.0\.0/24 dev tg0 ' \
  "$(ip -n "$NS_C" -4 route show table "${table4:-none}" 2>&1)"
plane_uid=$(tg_plane_uid "$NS_C" tg0)
check "the provider runs in a packet plane of its own uid ($plane_uid)" test -n "$plane_uid"
check_eq "the provider's sockets reach the server $CARRIER4 (inside tg0's subnet) through eth0" eth0 \
  "$(ip -n "$NS_C" route get "$CARRIER4" uid "${plane_uid:-0}" 2>/dev/null | dev_of)"
check_route "anyone else's packets to the server go into tg0" "$NS_C" "$CARRIER4" tg0
check_route "the rest of the subnet ($inside) is routed into tg0" "$NS_C" "$inside" tg0
check_eq "... also for the provider's sockets, as for any destination of theirs: outside" eth0 \
  "$(ip -n "$NS_C" route get "$inside" uid "${plane_uid:-0}" 2>/dev/null | dev_of)"
# The carrier check runs every second: the server has a path, so the tunnel never goes reasserting.
first=$(_tg_now_ms)
two_seconds_or_lost() { [ $(($(_tg_now_ms) - first)) -ge 2000 ] || ! status_is '.status == "connected"'; }
_tg_poll 5 two_seconds_or_lost
check "connected 2 s later: the carrier path to $CARRIER4 was found" status_is '.status == "connected"'
check_no_match "the log never says the carrier path is gone" 'carrier path to .* gone|reasserting' "$(cat "$log")"

kill -TERM "$provider_pid"
wait "$provider_pid"
check_eq "SIGTERM: the host exits 0" 0 "$?"
check_eq "stopTunnel once, .userInitiated (1)" "stopTunnel 1" "$(cat "$stop_file" 2>&1)"
tg_snapshot "$NS_C" "$TG_TMP/after"
check_same_snapshot "C's kernel state after stop equals the state before start" "$TG_TMP/before" "$TG_TMP/after"
if [ "$TG_FAILED" -ne 0 ]; then _tg_detail "provider log:" "$(cat "$log")"; fi
tg_summary
