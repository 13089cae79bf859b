#!/usr/bin/env bash
# networkextension: an NEPacketTunnelProvider subclass runs on Tunnelgate. The example host
# (tunnelgate-provider-example, Examples/) runs CountingTunnelProvider in C: the seed's settings
# (seeds/003: 10.8.0.2/24, MTU 1400, NEIPv4Route.default(), DNS) with the harness's server $CARRIER4.
# Its setTunnelNetworkSettings goes through Gateway.up, so the kernel shows the same tunnel `tunnelgate up`
# makes; packets C sends into tg0 reach the provider's packetFlow.readPacketObjects; two SIGTERMs call
# stopTunnel exactly once and leave C's kernel state and resolv.conf exactly as before.
#
#   C ── tunnelgate-provider-example ── tg0 (10.8.0.2/24, default route in the tunnel's table)
#   │ eth0 (carrier $CARRIER4 stays here)
#   R ── I
set -uo pipefail
# shellcheck source=netns/lib.sh
. "$(dirname "$0")/../lib.sh"
PROVIDER=${TG_PROVIDER_EXAMPLE:-$TG_ROOT/.build/debug/tunnelgate-provider-example}
[ -x "$PROVIDER" ] || tg_bail "the example host is built at $PROVIDER" "build it with: swift build"
tg_begin
# The provider runs in its packet plane: its switches and files reach it through the test hooks.
tg_plane_test_hooks TG_NE_REMOTE TG_NE_DNS TG_NE_REAPPLY_EXCLUDE TG_NE_COUNT_FILE TG_NE_STOP_FILE

resolv=/etc/netns/$NS_C/resolv.conf
mkdir -p "/etc/netns/$NS_C"
tg_defer rm -rf "/etc/netns/$NS_C"
printf 'nameserver %s\n' "$R_C0_4" >"$resolv"
resolv_before=$(cat "$resolv")
tg_snapshot "$NS_C" "$TG_TMP/before"

count_file=$TG_HOOKS/count
stop_file=$TG_HOOKS/stops
ip netns exec "$NS_C" env TG_NE_REMOTE="$CARRIER4" TG_NE_DNS=10.8.0.1 TG_NE_REAPPLY_EXCLUDE="$EXCLUDED4" \
  TG_NE_COUNT_FILE="$count_file" TG_NE_STOP_FILE="$stop_file" \
  "$PROVIDER" --provider counting >"$TG_TMP/provider.log" 2>&1 &
provider_pid=$!

tg_state_connected() { grep -q '"status" *: *"connected"' "$(tg_state_dir "$NS_C")/tg0.state" 2>/dev/null; }
wait_for "startTunnel completed: the tunnel's state is connected" 15 tg_state_connected
wait_for "$ELSEWHERE4 is looked up into tg0" 5 route_is "$NS_C" "$ELSEWHERE4" tg0

# The seed's settings, as the kernel holds them.
check_match "tg0 has 10.8.0.2/24 (NEIPv4Settings addresses/subnetMasks)" 'inet 10\.8\.0\.2/24 ' "$(ip -n "$NS_C" addr show dev tg0 2>&1)"
tg0_link=$(ip -n "$NS_C" link show dev tg0 2>&1)
check_match "tg0 has MTU 1400 (settings.mtu)" ' mtu 1400 ' "$tg0_link"
check_match "tg0 is up with carrier (the host holds the TUN)" '<([^>]*,)?LOWER_UP[,>]' "$tg0_link"
table4=$(tg_tunnel_table "$NS_C" 4)
check_match "the tunnel's IPv4 table has NEIPv4Route.default() into tg0" '^default dev tg0( |$)' \
  "$(ip -n "$NS_C" -4 route show table "${table4:-none}" 2>&1)"
check_route "$INCLUDED4 is looked up into tg0" "$NS_C" "$INCLUDED4" tg0
# The provider's own sockets (its packet plane's user) reach the server outside the tunnel; anyone else's
# packets to it go into the tunnel.
plane_uid=$(tg_plane_uid "$NS_C" tg0)
check "the provider runs in a packet plane of its own uid ($plane_uid)" test -n "$plane_uid"
# The provider's plane, from outside: its environment is the plane marker and the test's switches.
tg_check_plane provider "$NS_C" tg0 "$(printf '%s\n' "TG_NE_COUNT_FILE=$count_file" TG_NE_DNS=10.8.0.1 \
  "TG_NE_REAPPLY_EXCLUDE=$EXCLUDED4" "TG_NE_REMOTE=$CARRIER4" "TG_NE_STOP_FILE=$stop_file" TUNNELGATE_PROVIDER_PLANE=1 | sort)"
provider_engine=$(pgrep -f -o "^$PROVIDER --provider counting" || true)
check_match "the provider host's engine keeps only the engine's capabilities" '^CapEff:[[:space:]]+00000000002855e6$' \
  "$(cat "/proc/${provider_engine:-0}/status" 2>&1)"
check_eq "tunnelRemoteAddress $CARRIER4 is kept off the tunnel for the provider's sockets (eth0)" eth0 \
  "$(ip -n "$NS_C" route get "$CARRIER4" uid "${plane_uid:-0}" 2>/dev/null | sed -n 's/.* dev \([^ ]*\).*/\1/p')"
check_route "... and anyone else's packets to it go into tg0" "$NS_C" "$CARRIER4" tg0
check_match "NEDNSSettings servers are C's resolv.conf" '^nameserver 10\.8\.0\.1$' "$(cat "$resolv" 2>&1)"
tg_run ip netns exec "$NS_C" "$TG" status tg0
check_rc "tunnelgate status tg0 sees the provider's tunnel" 0
check_match "tunnelgate status says connected" 'connected' "$TG_OUT"

# Packets sent into the tunnel are delivered to readPacketObjects (the provider re-arms after each batch).
ip netns exec "$NS_C" ping -n -c 3 -i 0.2 -W 1 "$ELSEWHERE4" >/dev/null 2>&1
count_at_least() { [ "$(cat "$count_file" 2>/dev/null || echo 0)" -ge "$1" ]; }
wait_for "the provider read the 3 echo requests from packetFlow" 5 count_at_least 3
ip netns exec "$NS_C" ping -n -c 2 -i 0.2 -W 1 "$INCLUDED4" >/dev/null 2>&1
wait_for "after re-arming, the provider read 2 more" 5 count_at_least 5

# sendProviderMessage's path: tunnelgate message → the control socket → handleAppMessage → its reply.
tg_run ip netns exec "$NS_C" "$TG" message tg0 hello
check_rc "tunnelgate message reaches the provider" 0
check_match "... and prints handleAppMessage's reply" '^received [0-9]+$' "$TG_OUT"

# setTunnelNetworkSettings again while running: only the difference is applied, the TUN stays.
index_before=$(ip -n "$NS_C" -o link show dev tg0 | cut -d: -f1)
check_route "before the re-apply, $EXCLUDED4 is routed into the tunnel" "$NS_C" "$EXCLUDED4" tg0
tg_run ip netns exec "$NS_C" "$TG" message tg0 reapply
check_eq "the provider re-applied its settings" reapplied "$TG_OUT"
check_eq "the same TUN, not a new one (interface index)" "$index_before" "$(ip -n "$NS_C" -o link show dev tg0 | cut -d: -f1)"
check_match "the new MTU is in place" ' mtu 1280 ' "$(ip -n "$NS_C" link show dev tg0 2>&1)"
check_route "the newly excluded $EXCLUDED4 leaves through eth0" "$NS_C" "$EXCLUDED4" eth0
check_route "$INCLUDED4 still goes into the tunnel" "$NS_C" "$INCLUDED4" tg0
before=$(cat "$count_file")
ip netns exec "$NS_C" ping -n -c 2 -i 0.2 -W 1 "$INCLUDED4" >/dev/null 2>&1
wait_for "packetFlow still delivers after the re-apply" 5 count_at_least $((before + 2))

# SIGTERM twice: stopTunnel once, then everything is removed.
kill -TERM "$provider_pid"
kill -TERM "$provider_pid" 2>/dev/null
wait "$provider_pid"
rc=$?
check_eq "the host exits 0 after a clean stop" 0 "$rc"
check_eq "stopTunnel was called exactly once, with .userInitiated (1)" "stopTunnel 1" "$(cat "$stop_file" 2>&1)"
check_fails "tg0 is gone" ip -n "$NS_C" link show dev tg0
check_eq "C's resolv.conf is back" "$resolv_before" "$(cat "$resolv" 2>&1)"
state_dir=$(tg_state_dir "$NS_C")
check_eq "no journal, state or lock of tg0 is left in $state_dir" "" \
  "$(find "$state_dir" -maxdepth 1 \( -name tg0.journal -o -name tg0.state -o -name tg0.lock -o -name tg0.dns -o -name tg0.sock \) 2>/dev/null)"
tg_snapshot "$NS_C" "$TG_TMP/after"
check_same_snapshot "C's kernel state after stop equals the state before start" "$TG_TMP/before" "$TG_TMP/after"
if [ "$TG_FAILED" -ne 0 ]; then _tg_detail "provider log:" "$(cat "$TG_TMP/provider.log")"; fi

tg_summary
