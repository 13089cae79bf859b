#!/usr/bin/env bash
# The MEHS embedding guide's provider (shared/seeds/000), compiled on Linux, runs end to end:
#
#   C: mehs-provider-example — MehsPacketTunnelProvider over NetworkExtension, its runtime the example
#      runtime under the MEHS names (mehs_ios_runtime_start …), tunnel address 198.18.0.1/16 as in the guide
#        ══ UDP 10.231.0.2:5500 ⇄ 192.168.231.2:5500 ══
#   L: tunnelgate "tgb" hosting the example runtime, 198.18.0.2/16 (the "server")
#
# Asserted: traffic crosses the tunnel both ways; with a two-packet runtime queue a TCP transfer completes
# while QUEUE_FULL happens and is retried by the seed's readPackets/retryPackets; stopTunnel is called once
# on SIGTERM (which stops the runtime once) and the kernel state is as before.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
tg_begin
# The provider runs in its packet plane: its switches and files reach it through the test hooks.
tg_plane_test_hooks TG_MEHS_SERVER TG_MEHS_ARGS TG_MEHS_SECRET_FILE TG_MEHS_STOP_FILE TG_MEHS_DNS
LIB=$TG_ROOT/.build/debug/libTunnelgateExampleRuntime.so
PROVIDER=$TG_ROOT/.build/debug/mehs-provider-example
[ -f "$LIB" ] && [ -x "$PROVIDER" ] || tg_bail "the example runtime and mehs-provider-example are built" "swift build"

tg_secret_file "mehs $$"
cat >"$TG_TMP/tgb.json" <<CFG
{"name": "tgb", "tunnelRemoteAddress": "$C_ETH0_4", "mtu": 1400,
 "ipv4Settings": {"addresses": ["198.18.0.2"], "subnetMasks": ["255.255.0.0"], "includedRoutes": ["198.18.0.0/16"]},
 "runtime": {"kind": "callback", "library": "$LIB", "arguments": ["--bind", "$LAN4:5500", "--peer", "$C_ETH0_4:5500"],
             "secretFile": "$secret"}}
CFG
tg_run ip netns exec "$NS_L" "$TG" up "$TG_TMP/tgb.json" --detach
check_rc "the server side (tunnelgate with the example runtime) is up in L" 0

tg_snapshot "$NS_C" "$TG_TMP/before"
rm -rf "/etc/netns/$NS_C"
tg_defer rm -rf "/etc/netns/$NS_C"
stop_file=$TG_HOOKS/stop
# The provider reads its secret in its packet plane (an unprivileged user): its copy is in the hooks
# directory, readable there (only root reaches it from the host: $TG_TMP is 0700).
cp "$secret" "$TG_HOOKS/secret" && chmod 644 "$TG_HOOKS/secret"
TG_MEHS_SERVER=$LAN4 TG_MEHS_ARGS="--bind $C_ETH0_4:5500 --peer $LAN4:5500 --queue 2" TG_MEHS_SECRET_FILE=$TG_HOOKS/secret \
  TG_MEHS_STOP_FILE=$stop_file TG_MEHS_DNS=198.18.0.2 \
  ip netns exec "$NS_C" "$PROVIDER" >"$TG_TMP/provider.log" 2>&1 &
provider_pid=$!
connected() { ip netns exec "$NS_C" "$TG" status tg0 --json 2>/dev/null | jq -e '.status == "connected"' >/dev/null; }
wait_for "the provider's tunnel is connected (startTunnel completed after the runtime reported its interface)" 10 connected
check_match "tg0 has the guide's address" 'inet 198\.18\.0\.1/16 ' "$(ip -n "$NS_C" addr show dev tg0 2>&1)"
check_match "tg0 has the guide's MTU" ' mtu 1400 ' "$(ip -n "$NS_C" link show dev tg0 2>&1)"
check_route "the server's address stays on the physical path (the guide's excluded route)" "$NS_C" "$LAN4" eth0

check_ping "C reaches the server's tunnel address through the MEHS provider" "$NS_C" 198.18.0.2
check_ping "and the server reaches C's" "$NS_L" 198.18.0.1

ip netns exec "$NS_L" timeout 90 iperf3 -s -1 -B 198.18.0.2 -p 5201 >/dev/null 2>&1 &
server=$!
wait_for "iperf3 server listening" 5 bash -c "ip netns exec $NS_L ss -ltn | grep -q 198.18.0.2:5201"
ip netns exec "$NS_C" timeout 60 iperf3 -c 198.18.0.2 -p 5201 -t 2 -J >"$TG_TMP/iperf.json" 2>&1
check_eq "a TCP transfer through a two-packet runtime queue completes" 0 "$?"
wait "$server" 2>/dev/null
received=$(jq -r '.end.sum_received.bytes // 0' "$TG_TMP/iperf.json")
check "... carrying data ($received bytes)" test "${received:-0}" -gt 100000
tg_run ip netns exec "$NS_C" "$TG" message tg0 status
queue_full=$(echo "$TG_OUT" | jq -r '.queueFull // 0' 2>/dev/null)
check "QUEUE_FULL happened and the seed's retryPackets carried on ($queue_full times)" test "${queue_full:-0}" -gt 0

kill -TERM "$provider_pid"
kill -TERM "$provider_pid" 2>/dev/null
wait "$provider_pid"
check_eq "the host exits 0 after a clean stop" 0 "$?"
check_eq "stopTunnel was called once, with .userInitiated (1)" "stopTunnel 1" "$(cat "$stop_file" 2>&1)"
tg_snapshot "$NS_C" "$TG_TMP/after"
check_same_snapshot "C's kernel state after stop equals the state before start" "$TG_TMP/before" "$TG_TMP/after"
check_fails "the provider's DNS file is gone again" test -e "/etc/netns/$NS_C/resolv.conf"
if [ "$TG_FAILED" -ne 0 ]; then _tg_detail "provider log:" "$(cat "$TG_TMP/provider.log")"; fi

tg_run ip netns exec "$NS_L" "$TG" down tgb
tg_summary
