#!/usr/bin/env bash
# linux-provider-package: Examples/LinuxProviderPackage, a package of its own that depends on Tunnelgate
# by path, builds out of tree (its own .build) and its provider, written for Linux from scratch in
# NetworkExtension's style, runs in C. EchoTunnelProvider answers ICMP echo requests itself by writing the
# replies to packetFlow, so pings into the tunnel are answered by the provider — from addresses that
# exist nowhere else. Its interface name comes on descriptor 3 (netns/tests/handoff.py, as a manager
# hands it over). SIGTERM: stopTunnel, everything removed, C's kernel state as before.
#
#   C: ping 10.9.0.1, $ELSEWHERE4 ──▶ tge (10.9.0.2/24) ──▶ echo-provider: readPacketObjects
#                         ◀── echo replies ◀── writePacketObjects ◀──┘
#   │ eth0 (carrier $CARRIER4 stays here; the pings never leave C)
#   R ── I
set -uo pipefail
# shellcheck source=netns/lib.sh
. "$(dirname "$0")/../lib.sh"
PACKAGE=$TG_ROOT/Examples/LinuxProviderPackage
tg_require_binary

# The package builds on its own (swift build --package-path) in a fresh scratch directory: SwiftPM's
# incremental build of a path dependency can miss files added to it since the last build.
scratch=$(mktemp -d /tmp/tunnelgate-linux-provider-package.XXXXXX)
tg_defer rm -rf "$scratch"
build_log=$scratch/build.log
if swift build --package-path "$PACKAGE" --scratch-path "$scratch/build" >"$build_log" 2>&1; then
  tg_pass "swift build --package-path Examples/LinuxProviderPackage"
else
  tg_bail "swift build --package-path Examples/LinuxProviderPackage" "$(tail -n 30 "$build_log")"
fi
PROVIDER=$(swift build --package-path "$PACKAGE" --scratch-path "$scratch/build" --show-bin-path 2>/dev/null)/echo-provider
check "the package's provider host is built at $PROVIDER" test -x "$PROVIDER"
tg_topology_up
# The provider runs in its packet plane: its switches and files reach it through the test hooks.
tg_plane_test_hooks ECHO_REMOTE ECHO_ADDRESS ECHO_ROUTES ECHO_COUNT_FILE
tg_snapshot "$NS_C" "$TG_TMP/before"

count_file=$TG_HOOKS/answered
# The host's configuration on its descriptor 3, as a manager's startVPNTunnel hands it over (never in the
# environment): netns/tests/handoff.py.
ip netns exec "$NS_C" env ECHO_REMOTE="$CARRIER4" ECHO_ROUTES="10.9.0.0/24,$ELSEWHERE4/32" ECHO_COUNT_FILE="$count_file" \
  python3 "$TG_ROOT/netns/tests/handoff.py" '{"interfaceName": "tge"}' "$PROVIDER" >"$TG_TMP/provider.log" 2>&1 &
provider_pid=$!

tge_connected() { grep -q '"status" *: *"connected"' "$(tg_state_dir "$NS_C")/tge.state" 2>/dev/null; }
wait_for "the echo provider's tunnel is connected (interface name from the handoff on descriptor 3)" 15 tge_connected
check_eq "... the host read the handoff and closed it (no descriptor of it left)" "" \
  "$(ls -l "/proc/$provider_pid/fd" 2>/dev/null | grep 'memfd:tunnelgate-host-configuration')"
check_match "tge has the provider's 10.9.0.2/24" 'inet 10\.9\.0\.2/24 ' "$(ip -n "$NS_C" addr show dev tge 2>&1)"
check_route "$ELSEWHERE4 is looked up into tge (includedRoutes)" "$NS_C" "$ELSEWHERE4" tge
check_route "tunnelRemoteAddress $CARRIER4 is kept off the tunnel" "$NS_C" "$CARRIER4" eth0

tg_run ip netns exec "$NS_C" ping -n -c 3 -i 0.2 -W 2 10.9.0.1
check_rc "ping 10.9.0.1 through the tunnel is answered" 0
check_match "... 3 replies from 10.9.0.1" '3 packets transmitted, 3 received' "$TG_OUT"
tg_run ip netns exec "$NS_C" ping -n -c 3 -i 0.2 -W 2 "$ELSEWHERE4"
check_rc "ping $ELSEWHERE4 through the tunnel is answered" 0
check_match "... with replies from $ELSEWHERE4" "bytes from $(tg_re "$ELSEWHERE4"): icmp_seq=" "$TG_OUT"
count_is() { [ "$(cat "$count_file" 2>/dev/null)" == "$1" ]; }
wait_for "the provider wrote exactly the 6 replies to packetFlow" 5 count_is 6
rx=$(ip -n "$NS_C" -s link show dev tge | awk '/RX:/ { getline; print $2; exit }')
check "the kernel received the 6 replies on tge (RX packets: ${rx:-none})" test "${rx:-0}" -ge 6
tg_run ip netns exec "$NS_C" "$TG" message tge count
check_match "handleAppMessage (async variant) reports the replies" '^answered 6 ignored [0-9]+$' "$TG_OUT"

kill -TERM "$provider_pid"
wait "$provider_pid"
check_eq "the host exits 0 after SIGTERM" 0 "$?"
check_match "stopTunnel ran (async variant), reason .userInitiated" 'stopTunnel\(1\) after 6 replies' "$(cat "$TG_TMP/provider.log")"
check_fails "tge is gone" ip -n "$NS_C" link show dev tge
tg_run ip netns exec "$NS_C" ping -n -c 1 -W 1 10.9.0.1
check_rc_nonzero "after stop, 10.9.0.1 is not answered"
tg_snapshot "$NS_C" "$TG_TMP/after"
check_same_snapshot "C's kernel state after SIGTERM equals the state before start" "$TG_TMP/before" "$TG_TMP/after"
if [ "$TG_FAILED" -ne 0 ]; then _tg_detail "provider log:" "$(cat "$TG_TMP/provider.log")"; fi

tg_summary
