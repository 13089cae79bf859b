#!/usr/bin/env bash
# networkextension-start-timeout: a provider whose startTunnel never calls its completion handler is
# stopped as iOS's session manager stops it (its 60 s timer in Starting, here the host's --start-timeout).
# The example host runs CountingTunnelProvider in C with TG_NE_START=never: the settings are applied and
# the tunnel is connecting; after the timeout the provider gets stopTunnel(.connectionFailed = 14) once,
# the host exits 1, the last disconnect error names the timeout (NEVPNErrorDomain 3), and C is as before;
# with the kill switch (--include-all-networks) the switch stays, nothing leaves C, until `tunnelgate down`.
# A provider that completes its start is not stopped when the timeout passes; a timeout of 0 is refused
# before anything is touched.
#
#   C ── tunnelgate-provider-example --start-timeout 3 ── tg0 (10.8.0.2/24)
#   │ eth0 (carrier $CARRIER4 stays here)
#   R ── I
set -uo pipefail
# shellcheck source=netns/lib.sh
. "$(dirname "$0")/../lib.sh"
PROVIDER=${TG_PROVIDER_EXAMPLE:-$TG_ROOT/.build/debug/tunnelgate-provider-example}
MANAGER=${TG_MANAGER_EXAMPLE:-$TG_ROOT/.build/debug/tunnelgate-manager-example}
[ -x "$PROVIDER" ] || tg_bail "the example host is built at $PROVIDER" "build it with: swift build"
tg_begin
tg_plane_test_hooks TG_NE_REMOTE TG_NE_DNS TG_NE_STOP_FILE TG_NE_START

resolv=/etc/netns/$NS_C/resolv.conf
mkdir -p "/etc/netns/$NS_C"
tg_defer rm -rf "/etc/netns/$NS_C"
printf 'nameserver %s\n' "$R_C0_4" >"$resolv"
resolv_before=$(cat "$resolv")
tg_snapshot "$NS_C" "$TG_TMP/before"
stop_file=$TG_HOOKS/stops
state_dir=$(tg_state_dir "$NS_C")

status_is() { ip netns exec "$NS_C" "$TG" status tg0 --json 2>/dev/null | jq -e "$1" >/dev/null; }
# host START LOG ARGS...: the example host in C, in the background ($host_pid).
host() {
  local start=$1 log=$2
  shift 2
  rm -f "$stop_file"  # made by the plane (its own uid), not by root
  ip netns exec "$NS_C" env TG_NE_REMOTE="$CARRIER4" TG_NE_DNS=10.8.0.1 TG_NE_STOP_FILE="$stop_file" \
    TG_NE_START="$start" "$PROVIDER" --provider counting "$@" >"$log" 2>&1 &
  host_pid=$!
}
state_connecting() { grep -q '"status" *: *"connecting"' "$state_dir/tg0.state" 2>/dev/null; }

# --- (a) startTunnel never completes: stopped after 3 s -----------------------------------------------------
log=$TG_TMP/timeout.log
host never "$log" --start-timeout 3
started=$(_tg_now_ms)
wait_for "[timeout] the settings are applied and the tunnel is connecting" 15 state_connecting
check_route "[timeout] while it starts, $ELSEWHERE4 is looked up into tg0" "$NS_C" "$ELSEWHERE4" tg0
wait_for "[timeout] the host ends by itself" 20 tg_exited "$host_pid"
wait "$host_pid"
rc=$?
elapsed=$(($(_tg_now_ms) - started))
check_eq "[timeout] the host exits 1 (a failed start)" 1 "$rc"
check "[timeout] not before the timeout: ${elapsed} ms since the start (>= 3000)" test "$elapsed" -ge 3000
check_eq "[timeout] the provider got stopTunnel once, with .connectionFailed (14)" \
  "$(printf 'startTunnel not completing\nstopTunnel 14')" "$(cat "$stop_file" 2>&1)"
check_match "[timeout] the host's log names the timeout" 'startTunnel did not complete within 3 s: stopping the provider' "$(cat "$log")"
tg_run ip netns exec "$NS_C" "$TG" status tg0 --json
check_eq "[timeout] tunnelgate status shows the timeout as the last disconnect error" \
  "startTunnel did not complete within 3 s" "$(jq -r .lastDisconnectError <<<"$TG_OUT" 2>&1)"
if [ -x "$MANAGER" ]; then
  tg_run ip netns exec "$NS_C" "$MANAGER" last-error --name tg0
  check_eq "[timeout] fetchLastDisconnectError: NEVPNErrorDomain, NEVPNError.connectionFailed (3)" \
    "NEVPNErrorDomain 3: startTunnel did not complete within 3 s" "$TG_OUT"
else
  tg_fail "[timeout] fetchLastDisconnectError through the manager example" "not built at $MANAGER"
fi
check_fails "[timeout] tg0 is gone" ip -n "$NS_C" link show dev tg0
check_eq "[timeout] C's resolv.conf is back" "$resolv_before" "$(cat "$resolv" 2>&1)"
tg_snapshot "$NS_C" "$TG_TMP/after-timeout"
check_same_snapshot "[timeout] C's kernel state equals the state before start" "$TG_TMP/before" "$TG_TMP/after-timeout"

# --- (b) the same with the kill switch: it stays until `tunnelgate down` -------------------------------------
log_ks=$TG_TMP/killswitch.log
host never "$log_ks" --start-timeout 2 --include-all-networks
wait_for "[kill switch] the tunnel is connecting" 15 state_connecting
wait_for "[kill switch] the host ends by itself" 20 tg_exited "$host_pid"
wait "$host_pid"
check_eq "[kill switch] the host exits 1" 1 "$?"
check_eq "[kill switch] stopTunnel once, with .connectionFailed (14)" \
  "$(printf 'startTunnel not completing\nstopTunnel 14')" "$(cat "$stop_file" 2>&1)"
check "[kill switch] the switch is still in place" ip netns exec "$NS_C" nft list table inet tunnelgate-tg0
check_fails "[kill switch] nothing leaves C: $CARRIER4 does not answer root's ping" ip netns exec "$NS_C" ping -n -c 1 -W 1 "$CARRIER4"
tg_run ip netns exec "$NS_C" "$TG" down tg0
check_rc "[kill switch] tunnelgate down tg0" 0
check "[kill switch] after down, $CARRIER4 answers root's ping" ip netns exec "$NS_C" ping -n -c 1 -W 2 "$CARRIER4"
tg_snapshot "$NS_C" "$TG_TMP/after-killswitch"
check_same_snapshot "[kill switch] C's kernel state after down equals the state before start" "$TG_TMP/before" "$TG_TMP/after-killswitch"

# --- (c) a start that completes is not stopped when the timeout passes ----------------------------------------
log_ok=$TG_TMP/completes.log
host complete "$log_ok" --start-timeout 1
started=$(_tg_now_ms)
wait_for "[completes] startTunnel completed: connected" 15 status_is '.status == "connected"'
# Polled until 3 s after the start or the tunnel is lost, whichever comes first; then it must be connected.
connected() { kill -0 "$host_pid" 2>/dev/null && status_is '.status == "connected"'; }
passed_or_lost() { ! connected || [ $(($(_tg_now_ms) - started)) -ge 3000 ]; }
_tg_poll 10 passed_or_lost
check "[completes] $(($(_tg_now_ms) - started)) ms after the start (timeout 1 s): still connected, the host still running" connected
check_eq "[completes] no stopTunnel" "" "$(cat "$stop_file" 2>/dev/null)"
kill -TERM "$host_pid"
wait "$host_pid"
check_eq "[completes] SIGTERM: the host exits 0" 0 "$?"
check_eq "[completes] stopTunnel once, .userInitiated (1)" "stopTunnel 1" "$(cat "$stop_file" 2>&1)"

# --- (d) a timeout that cannot be followed is refused before anything is touched ------------------------------
tg_run ip netns exec "$NS_C" env TG_NE_STOP_FILE="$stop_file" "$PROVIDER" --provider counting --start-timeout 0
check_eq "[refused] --start-timeout 0: the host exits 1" 1 "$TG_RC"
check_match "[refused] ... naming startTimeout" 'invalid host configuration: startTimeout must be a number of seconds above 0, not 0' "$TG_ERR"
check_fails "[refused] no tg0" ip -n "$NS_C" link show dev tg0
check_eq "[refused] no state of tg0" "" "$(find "$state_dir" -maxdepth 1 -name 'tg0.state' 2>/dev/null)"
tg_snapshot "$NS_C" "$TG_TMP/after-refused"
check_same_snapshot "[refused] C's kernel state is untouched" "$TG_TMP/before" "$TG_TMP/after-refused"

if [ "$TG_FAILED" -ne 0 ]; then
  for f in "$log" "$log_ks" "$log_ok"; do _tg_detail "$(basename "$f"):" "$(cat "$f" 2>/dev/null)"; done
fi
tg_summary
