#!/usr/bin/env bash
# networkextension-manager: the manager side of NetworkExtension on Linux. tunnelgate-manager-example
# (Examples/, the seed's VPNManager as a command) drives CountingTunnelProvider through
# NETunnelProviderManager: saveToPreferences, connection.startVPNTunnel() spawning the provider host
# detached, NEVPNStatusDidChange connecting → connected in the starting process, sendProviderMessage
# reaching handleAppMessage ("received N"), stopVPNTunnel() → disconnecting → disconnected seen both by
# the stopping process and by a separate watching one, stopTunnel once, and C's kernel state as before.
#
#   C ── tunnelgate-manager-example start ─spawn─▶ tunnelgate-provider-example ── tg0 (10.8.0.2/24)
#   │     (exits once connected)                        ▲ control socket tg0.sock: stop, message
#   │   tunnelgate-manager-example watch|message|stop ──┘ (+ the state directory's tg0.state)
#   │ eth0 (carrier $CARRIER4 stays here)
#   R ── I
set -uo pipefail
# shellcheck source=netns/lib.sh
. "$(dirname "$0")/../lib.sh"
PROVIDER=${TG_PROVIDER_EXAMPLE:-$TG_ROOT/.build/debug/tunnelgate-provider-example}
MANAGER=${TG_MANAGER_EXAMPLE:-$TG_ROOT/.build/debug/tunnelgate-manager-example}
[ -x "$PROVIDER" ] && [ -x "$MANAGER" ] || tg_bail "the example host and manager are built ($PROVIDER, $MANAGER)" "build them with: swift build"
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
# The manager's environment is the provider host's (startVPNTunnel spawns it with the caller's environment).
in_c() { ip netns exec "$NS_C" env TG_NE_REMOTE="$CARRIER4" TG_NE_DNS=10.8.0.1 \
  TG_NE_COUNT_FILE="$count_file" TG_NE_STOP_FILE="$stop_file" "$@"; }

# Before anything is saved, the connection of a new manager is .invalid, and sendProviderMessage throws.
tg_run in_c "$MANAGER" status
check_eq "an unsaved manager's connection.status is invalid" "invalid" "$TG_OUT"

# start: saveToPreferences, loadFromPreferences, startVPNTunnel; the process exits once connected.
tg_run in_c "$MANAGER" start --provider "$PROVIDER" --server "$CARRIER4" -- --provider counting --name tg0
check_rc "manager start: startVPNTunnel() reaches connected" 0
check_eq "NEVPNStatusDidChange in the starting process: connecting, then connected" \
  "NEVPNStatusDidChange: connecting
NEVPNStatusDidChange: connected" "$TG_OUT"
state_dir=$(tg_state_dir "$NS_C")
check_eq "saveToPreferences wrote the configuration to $state_dir/preferences.json" "$PROVIDER tg0 true" \
  "$(jq -r '.managers[] | "\(.protocol.providerBundleIdentifier) \(.protocol.interfaceName) \(.isEnabled)"' "$state_dir/preferences.json" 2>&1)"

# The provider host runs detached: its own session, outliving the manager process; its output in tg0.log.
owner=$(jq -r .pid "$state_dir/tg0.state" 2>/dev/null)
check_eq "the tunnel's owner is the provider host the manager spawned" "$(readlink -f "$PROVIDER")" \
  "$(readlink "/proc/${owner:-0}/exe" 2>&1)"
check_eq "... in a session of its own (setsid)" "${owner:-x}" "$(awk '{print $6}' "/proc/${owner:-0}/stat" 2>&1)"
check_match "... writing its log to the state directory's tg0.log" 'startTunnel completed: connected' \
  "$(cat "$state_dir/tg0.log" 2>&1)"
# Its configuration came on descriptor 3 (a sealed memfd the host read and closed), not in its environment.
check_eq "... with no TUNNELGATE_ configuration in its environment" "" \
  "$(tr '\0' '\n' <"/proc/${owner:-0}/environ" 2>&1 | grep -E '^TUNNELGATE_(INTERFACE_NAME|SERVER_ADDRESS|PROVIDER_CONFIGURATION|START_OPTIONS|INCLUDE_ALL_NETWORKS|EXCLUDE_LOCAL_NETWORKS)=')"
check_eq "... and no descriptor left of the handoff it read" "" \
  "$(ls -l "/proc/${owner:-0}/fd" 2>&1 | grep 'memfd:tunnelgate-host-configuration')"
check_match "... not dumpable: no core limit, soft or hard (PR_SET_DUMPABLE 0 and RLIMIT_CORE 0)" '^Max core file size +0 +0 ' \
  "$(cat "/proc/${owner:-0}/limits" 2>&1)"
check_match "tg0 has the provider's 10.8.0.2/24" 'inet 10\.8\.0\.2/24 ' "$(ip -n "$NS_C" addr show dev tg0 2>&1)"
wait_for "$ELSEWHERE4 is looked up into tg0" 5 route_is "$NS_C" "$ELSEWHERE4" tg0
tg_run in_c "$MANAGER" status
check_eq "another process's manager (loadAllFromPreferences) sees connection.status connected" "connected" "$TG_OUT"
tg_run ip netns exec "$NS_C" "$TG" status tg0
check_match "tunnelgate status agrees" 'connected' "$TG_OUT"

# sendProviderMessage → control socket → handleAppMessage; the counting provider answers "received N".
ip netns exec "$NS_C" ping -n -c 3 -i 0.2 -W 1 "$ELSEWHERE4" >/dev/null 2>&1
count_at_least() { [ "$(cat "$count_file" 2>/dev/null || echo 0)" -ge "$1" ]; }
wait_for "the provider read the 3 echo requests from packetFlow" 5 count_at_least 3
tg_run in_c "$MANAGER" message hello
check_rc "sendProviderMessage gets a reply" 0
check_match "... handleAppMessage's own: received N, N ≥ 3" '^received ([3-9]|[1-9][0-9]+)$' "$TG_OUT"

# A separate process watches while a third one stops the tunnel.
watch_log=$TG_TMP/watch.log
in_c "$MANAGER" watch >"$watch_log" 2>&1 &
watch_pid=$!
watch_ready() { grep -q '^status: connected$' "$watch_log"; }
wait_for "the watching process starts with connection.status connected" 5 watch_ready
tg_run in_c "$MANAGER" stop
check_rc "manager stop: stopVPNTunnel() reaches disconnected" 0
check_eq "NEVPNStatusDidChange in the stopping process: disconnecting, then disconnected" \
  "NEVPNStatusDidChange: disconnecting
NEVPNStatusDidChange: disconnected" "$TG_OUT"
wait_for "the watching process ends after disconnected" 5 tg_exited "$watch_pid"
wait "$watch_pid" 2>/dev/null
# Another process polls the state directory every 50 ms, so a shorter state (disconnecting lasts a few ms
# here) may pass unseen; it sees the end state, and nothing out of order.
check_eq "the watching process saw connected, [disconnecting,] disconnected (50 ms polling)" \
  "status: connected
NEVPNStatusDidChange: disconnected" "$(grep -vx 'NEVPNStatusDidChange: disconnecting' "$watch_log")"
wait_for "the provider host has exited" 10 tg_exited "${owner:-0}"
check_eq "stopTunnel was called exactly once, with .userInitiated (1)" "stopTunnel 1" "$(cat "$stop_file" 2>&1)"
check_fails "a clean stop removes the host's tg0.log (as after tunnelgate up --detach)" test -e "$state_dir/tg0.log"
check_eq "the preferences outlive the tunnel" "$PROVIDER" \
  "$(jq -r '.managers[0].protocol.providerBundleIdentifier' "$state_dir/preferences.json" 2>&1)"
tg_run in_c "$MANAGER" status
check_eq "a new manager process sees connection.status disconnected" "disconnected" "$TG_OUT"

tg_run in_c "$MANAGER" message hello
check_rc_nonzero "sendProviderMessage throws when not connected"
check_match "... NEVPNError.connectionFailed: not connected" 'not connected' "$TG_ERR"

# --- fetchLastDisconnectError ------------------------------------------------------------------------------
tg_run in_c "$MANAGER" last-error
check_eq "after a clean stop, fetchLastDisconnectError gives nothing" none "$TG_OUT"
tg_run in_c "$MANAGER" start --provider "$PROVIDER" --server "$CARRIER4" -- --provider counting --name tg0
check_rc "[cancel] manager start again: connected" 0
tg_run in_c "$MANAGER" message "cancel com.example.vpn 7 the server revoked this session"
check_eq "[cancel] the provider cancels the tunnel with an NSError" cancelling "$TG_OUT"
manager_disconnected() { [ "$(in_c "$MANAGER" status 2>/dev/null)" = disconnected ]; }
wait_for "[cancel] the tunnel is disconnected" 10 manager_disconnected
tg_run in_c "$MANAGER" last-error
check_eq "[cancel] fetchLastDisconnectError gives the provider's NSError: domain, code, description" \
  "com.example.vpn 7: the server revoked this session" "$TG_OUT"
tg_run in_c "$TG" status tg0 --json
check_eq "[cancel] tunnelgate status shows it as the last disconnect error" "the server revoked this session" \
  "$(jq -r .lastDisconnectError <<<"$TG_OUT" 2>&1)"
tg_run in_c "$MANAGER" start --provider "$PROVIDER" --server "$CARRIER4" -- --provider counting --name tg0
check_rc "[again] a new run connects" 0
tg_run in_c "$MANAGER" last-error
check_eq "[again] ... and the last run's error no longer applies" none "$TG_OUT"
tg_run in_c "$MANAGER" stop
check_rc "[again] and stops" 0

# --- protocolConfiguration: the provider reads the protocol its manager saved, property-list types kept ----
tg_run in_c "$MANAGER" start --provider "$PROVIDER" --server "$CARRIER4" --username alice --plist -- --provider counting --name tg0
check_rc "[protocol] a manager with a username and a property-list providerConfiguration connects" 0
tg_run in_c "$MANAGER" message protocol
check_rc "[protocol] the provider answers what it reads of protocolConfiguration" 0
got=$TG_OUT
check_match "[protocol] serverAddress and username as saved" "^serverAddress=$(tg_re "$CARRIER4")\$" "$got"
check_match "[protocol] ..." '^username=alice$' "$got"
check_match "[protocol] providerBundleIdentifier is the provider's path" "^providerBundleIdentifier=$(tg_re "$PROVIDER")\$" "$got"
check_match "[protocol] providerConfiguration: a String" '^region=String:eu-west$' "$got"
check_match "[protocol] ... a number" '^port=Number:51820$' "$got"
check_match "[protocol] ... a Date, not a string or a number" '^issued=Date:1900000000$' "$got"
check_match "[protocol] ... Data, not base64 text" '^token=Data:deadbeef$' "$got"
check_match "[protocol] ... an array of Bool" '^flags=\[Bool\]:\[true, false\]$' "$got"
check_match "[protocol] ... a nested dictionary" '^nested=Dictionary:\["mtu"\]$' "$got"
# The app saves again while the tunnel runs: the provider's protocolConfiguration follows, before the
# save completes; the provider's own handleAppMessage never sees the host's delivery.
tg_run in_c "$MANAGER" set-username --username bob
check_rc "[protocol] the manager saves a new username while connected" 0
tg_run in_c "$MANAGER" message protocol
check_match "[protocol] ... and the running provider reads it at once" '^username=bob$' "$TG_OUT"
check_match "[protocol] ... with the rest as before" '^issued=Date:1900000000$' "$TG_OUT"
tg_run in_c "$MANAGER" message hello
check_match "[protocol] handleAppMessage still counts only the app's messages" '^received [0-9]+$' "$TG_OUT"
tg_run in_c "$MANAGER" stop
check_rc "[protocol] and stops" 0

# --- passwordReference: a secret in Tunnelgate's root-only store, read by the engine for the provider -----
export TUNNELGATE_SECRETS=$TG_TMP/secrets
secret="pw-$$-$RANDOM-s3cret"
check_eq "[secret] tunnelgate secret add office (from standard input)" 0 "$(printf '%s\n' "$secret" | "$TG" secret add office >/dev/null 2>&1; echo $?)"
check_eq "[secret] the store is root's alone: the directory 700, the file 600" "700 600" \
  "$(stat -c %a "$TUNNELGATE_SECRETS") $(stat -c %a "$TUNNELGATE_SECRETS/office")"
check_eq "[secret] list names it" office "$("$TG" secret list)"
tg_run in_c "$MANAGER" start --provider "$PROVIDER" --server "$CARRIER4" --password-secret office -- --provider counting --name tg0
check_rc "[secret] a manager whose passwordReference names it connects" 0
check_no_match "[secret] the preferences file holds the reference, not the secret" "$(tg_re "$secret")" "$(cat "$state_dir/preferences.json")"
check_match "[secret] ... the reference (tunnelgate-secret:office, base64)" "$(printf 'tunnelgate-secret:office' | base64)" "$(cat "$state_dir/preferences.json")"
tg_run in_c "$MANAGER" message "password-is $secret"
check_eq "[secret] the provider, in its plane, reads the secret its passwordReference names" \
  "password of ${#secret} bytes: it matches" "$TG_OUT"
tg_run in_c "$MANAGER" message "read $TUNNELGATE_SECRETS/office"
check_eq "[secret] ... but cannot read the store itself (the plane's uid)" unreadable "$TG_OUT"
plane_uid=$(tg_plane_uid "$NS_C" tg0)
check "[secret] the provider runs in a packet plane of its own uid ($plane_uid)" test -n "$plane_uid"
leaked=""
for pid in $(ip netns pids "$NS_C"); do
  for f in cmdline environ; do grep -qF -- "$secret" "/proc/$pid/$f" 2>/dev/null && leaked+=" $pid/$f"; done
done
check_eq "[secret] the secret is on no command line or in no environment of any process in C (engine and plane included)" "" "$leaked"
check_eq "[secret] ... nor in the tunnel's log or state files" "" \
  "$(grep -lF -- "$secret" "$state_dir"/tg0.* 2>/dev/null)"
tg_run in_c "$MANAGER" stop
check_rc "[secret] and stops" 0
printf 'other\n' | "$TG" secret add office --replace >/dev/null
tg_run in_c "$MANAGER" start --provider "$PROVIDER" --server "$CARRIER4" --password-secret office -- --provider counting --name tg0
tg_run in_c "$MANAGER" message "password-is $secret"
check_eq "[secret] a replaced secret is what the next start reads" "password of 5 bytes: it does not match" "$TG_OUT"
tg_run in_c "$MANAGER" stop
"$TG" secret remove office >/dev/null
tg_run in_c "$MANAGER" start --provider "$PROVIDER" --server "$CARRIER4" --password-secret office -- --provider counting --name tg0
tg_run in_c "$MANAGER" message "password-is $secret"
check_match "[secret] a removed one is not found by the provider, as a missing keychain item" "^password: no secret named 'office'" "$TG_OUT"
tg_run in_c "$MANAGER" stop
unset TUNNELGATE_SECRETS

# --- providerBundleIdentifier as a bundle identifier: the provider registered under it --------------------
export TUNNELGATE_PROVIDERS=$TG_TMP/providers
mkdir -m 755 "$TUNNELGATE_PROVIDERS"
ln -s "$PROVIDER" "$TUNNELGATE_PROVIDERS/com.example.counting.tunnel"
tg_run in_c "$MANAGER" start --provider com.example.counting.tunnel --server "$CARRIER4" -- --provider counting --name tg0
check_rc "[bundle id] a manager naming the provider by its bundle identifier connects ($TG_ERR)" 0
tg_run in_c "$MANAGER" message protocol
check_match "[bundle id] the provider sees its unchanged identifier" '^providerBundleIdentifier=com\.example\.counting\.tunnel$' "$TG_OUT"
tg_run in_c "$MANAGER" stop
check_rc "[bundle id] and stops" 0
tg_run in_c "$MANAGER" start --provider com.example.unknown --server "$CARRIER4" -- --provider counting --name tg0
check_rc "[bundle id] an identifier nobody registered fails" 1
check_match "[bundle id] ... naming the registration it looked for" "no provider is registered as com\.example\.unknown \($(tg_re "$TUNNELGATE_PROVIDERS")/com\.example\.unknown is missing" "$TG_ERR"
tg_run in_c "$MANAGER" start --provider "com example" --server "$CARRIER4" -- --provider counting --name tg0
check_rc "[bundle id] an identifier with a space is refused" 1
check_match "[bundle id] ... saying why" "neither a path nor a bundle identifier" "$TG_ERR"
chmod 777 "$TUNNELGATE_PROVIDERS"
tg_run in_c "$MANAGER" start --provider com.example.counting.tunnel --server "$CARRIER4" -- --provider counting --name tg0
check_rc "[bundle id] a registration directory anyone may write is not trusted" 1
check_match "[bundle id] ... and said so" "writable by" "$TG_ERR"
unset TUNNELGATE_PROVIDERS

# --- a provider executable others could change is not run (StrictModes) -------------------------------------
cp "$PROVIDER" "$TG_TMP/provider-group"
chmod 775 "$TG_TMP/provider-group"
tg_run in_c "$MANAGER" start --provider "$TG_TMP/provider-group" --server "$CARRIER4" -- --provider counting --name tg0
check_rc "[trust] startVPNTunnel of a group-writable provider executable fails" 1
check_match "[trust] ... with NEVPNError.configurationInvalid naming it, its mode and owner" \
  "providerBundleIdentifier: $(printf '%s' "$TG_TMP/provider-group" | sed 's/[.]/\\./g'): writable by its group \\(mode 0775, owner root\\); refusing it" "$TG_ERR"
check_eq "[trust] ... and runs nothing" "" "$(pgrep -f "$TG_TMP/provider-group")"

check_fails "tg0 is gone" ip -n "$NS_C" link show dev tg0
check_eq "C's resolv.conf is back" "$resolv_before" "$(cat "$resolv" 2>&1)"
check_eq "no journal, state, lock or socket of tg0 is left in $state_dir" "" \
  "$(find "$state_dir" -maxdepth 1 \( -name tg0.journal -o -name tg0.state -o -name tg0.lock -o -name tg0.dns -o -name tg0.sock \) 2>/dev/null)"
tg_snapshot "$NS_C" "$TG_TMP/after"
check_same_snapshot "C's kernel state after stopVPNTunnel equals the state before start" "$TG_TMP/before" "$TG_TMP/after"
if [ "$TG_FAILED" -ne 0 ]; then _tg_detail "provider log (kept only when the stop was not clean):" "$(cat "$state_dir/tg0.log" 2>&1)"; fi

tg_summary
