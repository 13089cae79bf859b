#!/usr/bin/env bash
# networkextension-no-settings: a provider whose startTunnel completes before it sets any settings
# (iTether's does) is connected, as iOS takes the completion (ready to handle network data): the host
# holds the name (status connected, "no network settings", the engine's pid), serves the control socket
# (`tunnelgate message` reaches handleAppMessage) and changes nothing in the kernel. Settings set later
# are applied by the same owner; settings removed while running leave it connected with nothing applied;
# `tunnelgate down` stops it (stopTunnel once) and nothing is left. With includeAllNetworks a start without
# settings fails (nothing would keep traffic inside the tunnel), and settings removed while running keep the
# kill switch until settings come again or the stop, repaired meanwhile when another program deletes or
# flushes it.
#
#   C ── tunnelgate-provider-example (TG_NE_START=no-settings) ── later tg0 (10.8.0.2/24, MTU 1280)
#   │ eth0
#   R ── I
set -uo pipefail
# shellcheck source=netns/lib.sh
. "$(dirname "$0")/../lib.sh"
PROVIDER=${TG_PROVIDER_EXAMPLE:-$TG_ROOT/.build/debug/tunnelgate-provider-example}
[ -x "$PROVIDER" ] || tg_bail "the example host is built at $PROVIDER" "build it with: swift build"
tg_begin
tg_plane_test_hooks TG_NE_REMOTE TG_NE_DNS TG_NE_START TG_NE_COUNT_FILE TG_NE_STOP_FILE

tg_snapshot "$NS_C" "$TG_TMP/before"
state_dir=$(tg_state_dir "$NS_C")
count_file=$TG_HOOKS/count
stop_file=$TG_HOOKS/stops
log=$TG_TMP/provider.log
ip netns exec "$NS_C" env TG_NE_REMOTE="$CARRIER4" TG_NE_DNS=none TG_NE_START=no-settings TG_NE_COUNT_FILE="$count_file" \
  TG_NE_STOP_FILE="$stop_file" "$PROVIDER" --provider counting >"$log" 2>&1 &
host_pid=$!
status_is() { ip netns exec "$NS_C" "$TG" status tg0 --json 2>/dev/null | jq -e "$1" >/dev/null; }
message() { ip netns exec "$NS_C" "$TG" message tg0 "$1" 2>&1; }
count_at_least() { [ "$(cat "$count_file" 2>/dev/null || echo 0)" -ge "$1" ]; }

# --- started without settings: connected, nothing applied -------------------------------------------------
wait_for "[no settings] startTunnel completed: connected, with no settings" 15 status_is '.status == "connected" and .noSettings == true'
engine_pid=$(ip netns exec "$NS_C" "$TG" status tg0 --json 2>/dev/null | jq -r '.pid // empty')
check "[no settings] status names the host's engine as the owner (pid $engine_pid)" test -n "$engine_pid"
check "[no settings] ... a process of the host" bash -c "[ \"$engine_pid\" = \"$host_pid\" ] || grep -qx 'PPid:[[:space:]]*$host_pid' /proc/$engine_pid/status"
tg_run ip netns exec "$NS_C" "$TG" status tg0
check_match "[no settings] tunnelgate status says so" 'no network settings: the provider has set none' "$TG_OUT"
check_eq "[no settings] tunnelgate message reaches handleAppMessage" "received 0" "$(message hello)"
check_fails "[no settings] no TUN" ip -n "$NS_C" link show dev tg0
check_match "[no settings] the log says why it is connected" 'startTunnel completed without network settings: connected, nothing applied' "$(cat "$log")"
tg_snapshot "$NS_C" "$TG_TMP/no-settings"
check_same_snapshot "[no settings] C's kernel state is untouched" "$TG_TMP/before" "$TG_TMP/no-settings"

# --- settings set later: applied by the same owner -------------------------------------------------------
check_eq "[later] the provider sets its settings from handleAppMessage" reapplied "$(message reapply)"
wait_for "[later] connected with settings" 10 status_is '.status == "connected" and (.noSettings | not) and .interface == "tg0"'
check_match "[later] tg0 has 10.8.0.2/24 and MTU 1280" 'mtu 1280 .*inet 10\.8\.0\.2/24 ' "$(ip -n "$NS_C" addr show dev tg0 2>&1 | tr '\n' ' ')"
check_route "[later] $ELSEWHERE4 is looked up into tg0" "$NS_C" "$ELSEWHERE4" tg0
check_eq "[later] the same owner" "$engine_pid" "$(ip netns exec "$NS_C" "$TG" status tg0 --json 2>/dev/null | jq -r '.pid // empty')"
ip netns exec "$NS_C" ping -n -c 2 -i 0.2 -W 1 "$ELSEWHERE4" >/dev/null 2>&1
wait_for "[later] packetFlow, read since the start, delivers what enters tg0" 5 count_at_least 2

# --- settings removed while running: connected, nothing applied again -------------------------------------
check_eq "[removed] setTunnelNetworkSettings(nil)" removed "$(message remove)"
wait_for "[removed] connected, no settings" 10 status_is '.status == "connected" and .noSettings == true'
check_fails "[removed] tg0 is gone" ip -n "$NS_C" link show dev tg0
check_eq "[removed] tunnelgate message still reaches the provider" "received 2" "$(message hello)"
tg_snapshot "$NS_C" "$TG_TMP/removed"
check_same_snapshot "[removed] C's kernel state is as before" "$TG_TMP/before" "$TG_TMP/removed"

# --- down ----------------------------------------------------------------------------------------------
tg_run ip netns exec "$NS_C" "$TG" down tg0
check_rc "[down] tunnelgate down tg0" 0
wait_for "[down] the host ends" 30 tg_exited "$host_pid"
wait "$host_pid"
check_eq "[down] the host exits 0" 0 "$?"
check_eq "[down] stopTunnel once, .userInitiated (1)" "stopTunnel 1" "$(cat "$stop_file" 2>&1)"
check_eq "[down] no state, lock or socket of tg0 is left" "" \
  "$(find "$state_dir" -maxdepth 1 \( -name 'tg0.*' \) 2>/dev/null)"
tg_run ip netns exec "$NS_C" "$TG" status tg0 --json
check_eq "[down] status: disconnected" disconnected "$(jq -r .status <<<"$TG_OUT" 2>&1)"
tg_snapshot "$NS_C" "$TG_TMP/after"
check_same_snapshot "[down] C's kernel state after stop equals the state before start" "$TG_TMP/before" "$TG_TMP/after"

# --- with includeAllNetworks: no settings is no kill switch, so the start fails ------------------------------
log_ks=$TG_TMP/provider-ks.log
tg_run ip netns exec "$NS_C" env TG_NE_REMOTE="$CARRIER4" TG_NE_DNS=none TG_NE_START=no-settings \
  "$PROVIDER" --provider counting --include-all-networks
check_eq "[kill switch, no settings] the host exits 1: connected would promise what nothing enforces" 1 "$TG_RC"
check_match "[kill switch, no settings] ... saying why" 'startTunnel completed without network settings, and includeAllNetworks needs them' "$TG_ERR"
tg_run ip netns exec "$NS_C" "$TG" status tg0 --json
check_match "[kill switch, no settings] the reason is the last disconnect error" 'includeAllNetworks needs them' \
  "$(jq -r '.lastDisconnectError // empty' <<<"$TG_OUT" 2>&1)"
tg_snapshot "$NS_C" "$TG_TMP/after-ks-refused"
check_same_snapshot "[kill switch, no settings] C's kernel state is untouched" "$TG_TMP/before" "$TG_TMP/after-ks-refused"

# --- with includeAllNetworks: settings removed while running keep the kill switch ---------------------------
rm -f "$stop_file"
ip netns exec "$NS_C" env TG_NE_REMOTE="$CARRIER4" TG_NE_DNS=none TG_NE_STOP_FILE="$stop_file" \
  "$PROVIDER" --provider counting --include-all-networks >"$log_ks" 2>&1 &
host_pid=$!
wait_for "[kill switch] connected with settings" 15 status_is '.status == "connected" and .interface == "tg0"'
check_eq "[kill switch] setTunnelNetworkSettings(nil)" removed "$(message remove)"
wait_for "[kill switch] connected, no settings" 10 status_is '.status == "connected" and .noSettings == true'
check_fails "[kill switch] tg0 is gone" ip -n "$NS_C" link show dev tg0
check "[kill switch] the kill switch stays (fail-closed)" ip netns exec "$NS_C" nft list table inet tunnelgate-tg0
check_fails "[kill switch] nothing leaves C: $CARRIER4 does not answer root's ping" ip netns exec "$NS_C" ping -n -c 1 -W 1 "$CARRIER4"
# Someone else deletes, then empties, the held kill switch: the claim's monitor puts it back as it was.
# (Counters aside: the table put back counts from zero.)
kill_switch_now() { ip netns exec "$NS_C" nft list table inet tunnelgate-tg0 2>&1 | sed -E 's/counter packets [0-9]+ bytes [0-9]+/counter/'; }
held=$(kill_switch_now)
same_kill_switch() { [ "$(kill_switch_now)" == "$held" ]; }
ip netns exec "$NS_C" nft delete table inet tunnelgate-tg0
wait_for "[kill switch, held] deleted by another program: put back as it was" 5 same_kill_switch ||
  _tg_detail "held / now:" "$(diff <(echo "$held") <(kill_switch_now))"
check_fails "[kill switch, held] ... and nothing leaves C" ip netns exec "$NS_C" ping -n -c 1 -W 1 "$CARRIER4"
ip netns exec "$NS_C" nft flush table inet tunnelgate-tg0
wait_for "[kill switch, held] its rules flushed: put back as they were" 5 same_kill_switch
check_fails "[kill switch, held] ... and nothing leaves C" ip netns exec "$NS_C" ping -n -c 1 -W 1 "$CARRIER4"
check_match "[kill switch, held] the log says what was repaired" 'repaired the kill switch after an outside change: ' "$(cat "$log_ks")"
check_eq "[kill switch] settings again" reapplied "$(message reapply)"
wait_for "[kill switch] connected with settings again" 10 status_is '.status == "connected" and (.noSettings | not) and .interface == "tg0"'
check "[kill switch] the kill switch is the tunnel's" status_is '.killSwitch == true'
check_eq "[kill switch] removed again" removed "$(message remove)"
wait_for "[kill switch] no settings again" 10 status_is '.noSettings == true'
kill -TERM "$host_pid"
wait "$host_pid"
check_eq "[kill switch] SIGTERM: the host exits 0" 0 "$?"
check_eq "[kill switch] stopTunnel once, .userInitiated (1)" "stopTunnel 1" "$(cat "$stop_file" 2>&1)"
# Between the TUN's deletion and the engine's answer, packetFlow's reads fail (EBADFD): once per TUN,
# then it waits for the next; not a loop that spins and floods the log.
flow_errors=$(grep -c '^NEPacketTunnelFlow: ' "$log_ks")
check "[kill switch] packetFlow said its TUN went at most once per removal (2 removals: $flow_errors lines)" test "$flow_errors" -le 2
check "[kill switch] after the stop, $CARRIER4 answers root's ping" ip netns exec "$NS_C" ping -n -c 1 -W 2 "$CARRIER4"
check_eq "[kill switch] no state, lock, journal or socket of tg0 is left" "" \
  "$(find "$state_dir" -maxdepth 1 \( -name 'tg0.*' \) 2>/dev/null)"
tg_snapshot "$NS_C" "$TG_TMP/after-ks"
check_same_snapshot "[kill switch] C's kernel state after the stop equals the state before" "$TG_TMP/before" "$TG_TMP/after-ks"

# --- SIGKILL while the claim holds the kill switch: it stays until `tunnelgate down` ---------------------------
log_kill=$TG_TMP/provider-kill.log
ip netns exec "$NS_C" env TG_NE_REMOTE="$CARRIER4" TG_NE_DNS=none "$PROVIDER" --provider counting --include-all-networks >"$log_kill" 2>&1 &
host_pid=$!
wait_for "[SIGKILL] connected with settings" 15 status_is '.status == "connected" and .interface == "tg0"'
check_eq "[SIGKILL] setTunnelNetworkSettings(nil)" removed "$(message remove)"
wait_for "[SIGKILL] connected, no settings, the kill switch held" 10 status_is '.noSettings == true'
plane=$(ip netns exec "$NS_C" "$TG" status tg0 --json 2>/dev/null | jq -r '.planePID // empty')
kill -KILL "$host_pid" ${plane:+"$plane"} 2>/dev/null
wait "$host_pid" 2>/dev/null
wait_for "[SIGKILL] the plane is gone too" 10 tg_exited "${plane:-0}"
check "[SIGKILL] status no longer says connected" status_is '.status != "connected"'
check "[SIGKILL] the kill switch stays (fail-closed)" ip netns exec "$NS_C" nft list table inet tunnelgate-tg0
check_fails "[SIGKILL] nothing leaves C: $CARRIER4 does not answer root's ping" ip netns exec "$NS_C" ping -n -c 1 -W 1 "$CARRIER4"
tg_run ip netns exec "$NS_C" "$TG" down tg0
check_rc "[SIGKILL] tunnelgate down tg0 removes what is left" 0
check "[SIGKILL] after down, $CARRIER4 answers root's ping" ip netns exec "$NS_C" ping -n -c 1 -W 2 "$CARRIER4"
check_eq "[SIGKILL] no state, lock, journal or socket of tg0 is left" "" \
  "$(find "$state_dir" -maxdepth 1 \( -name 'tg0.*' \) 2>/dev/null)"
tg_snapshot "$NS_C" "$TG_TMP/after-kill"
check_same_snapshot "[SIGKILL] C's kernel state after down equals the state before" "$TG_TMP/before" "$TG_TMP/after-kill"

if [ "$TG_FAILED" -ne 0 ]; then _tg_detail "provider log:" "$(cat "$log")"; _tg_detail "kill-switch provider log:" "$(cat "$log_ks" 2>/dev/null)"; fi
tg_summary
