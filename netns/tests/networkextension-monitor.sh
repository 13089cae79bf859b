#!/usr/bin/env bash
# networkextension-monitor: a provider's tunnel is watched as `tunnelgate up`'s is. The example host runs
# CountingTunnelProvider in C with the kill switch (--include-all-networks); others then change the
# tunnel's kernel state and the host repairs it within 2 s, counts it in `tunnelgate status --json`
# (.counters.repairs, .counters.lastRepair) and says so in its log: the policy rule deleted, the kill
# switch table deleted, tg0 set down, its MTU changed. With C's default route gone the carrier endpoint
# ($CARRIER4, the provider's tunnelRemoteAddress) has no path: reasserting within 2 s, connected when the
# route is back, and the provider's own `reasserting` is not touched. Published status = the provider's
# `reasserting` OR no carrier path. After the provider re-applies its settings (MTU 1280) a repair keeps
# the new MTU (the monitor compares with the settings applied now). SIGTERM leaves C as before. A second
# run's plane hung (SIGSTOP): the host notices within 15 s, stays, disconnected with lastDisconnectError,
# holding the kill switch (nothing leaves C), until `tunnelgate down`, which leaves C as before.
#
#   C ── tunnelgate-provider-example --include-all-networks ── tg0 (10.8.0.2/24, default in table T,
#   │                                                               kill switch inet tunnelgate-tg0)
#   │ eth0 ── default via R (the carrier path to $CARRIER4; deleted and put back by this test)
#   R ── I ($CARRIER4)
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

stop_file=$TG_HOOKS/stops
log=$TG_TMP/provider.log
ip netns exec "$NS_C" env TG_NE_REMOTE="$CARRIER4" TG_NE_DNS=10.8.0.1 TG_NE_REAPPLY_EXCLUDE="$EXCLUDED4" \
  TG_NE_STOP_FILE="$stop_file" "$PROVIDER" --provider counting --include-all-networks >"$log" 2>&1 &
provider_pid=$!

# status_is JQ-EXPRESSION: `tunnelgate status tg0 --json` in C satisfies it (a predicate).
status_is() { ip netns exec "$NS_C" "$TG" status tg0 --json 2>/dev/null | jq -e "$1" >/dev/null; }
# log_count REGEX: how many lines of the host's log match; log_has_at_least N REGEX (a predicate).
log_count() { grep -cE -- "$1" "$log" 2>/dev/null; }
log_has_at_least() { [ "$(log_count "$2")" -ge "$1" ]; }
message() { ip netns exec "$NS_C" "$TG" message tg0 "$1" 2>&1; }
mtu_is() { grep -q " mtu $1 " <<<"$(ip -n "$NS_C" link show dev tg0 2>/dev/null)"; }

wait_for "startTunnel completed: the tunnel is connected" 15 status_is '.status == "connected"'
table=$(tg_tunnel_table "$NS_C" 4)
pref=$(ip -n "$NS_C" -4 rule show | sed -En "s/^([0-9]+):.* lookup ${table:-none}( .*)?\$/\1/p" | head -n 1)
check_match "the tunnel's policy rule is in place" '^[0-9]+$' "$pref"
rule_back() { grep -qE "^$pref:.* lookup $table( |\$)" <<<"$(ip -n "$NS_C" -4 rule show)"; }
killswitch=$(ip netns exec "$NS_C" nft -s list table inet tunnelgate-tg0 2>&1)
check_match "the kill switch is in place (includeAllNetworks)" '^table inet tunnelgate-tg0 ' "$killswitch"
check "no repair before anyone changed anything" status_is '(.counters.repairs // 0) == 0'
check_route "$ELSEWHERE4 is looked up into tg0" "$NS_C" "$ELSEWHERE4" tg0

# --- (a) the policy rule deleted --------------------------------------------------------------------------
ip -n "$NS_C" -4 rule del pref "$pref"
wait_for "[rule] the deleted policy rule is back within 2 s" 2 rule_back
check_route "[rule] $ELSEWHERE4 is looked up into tg0 again" "$NS_C" "$ELSEWHERE4" tg0
wait_for "[rule] status --json counts the repair and names the rule (.counters.lastRepair)" 2 \
  status_is ".counters.repairs >= 1 and (.counters.lastRepair | test(\"rule pref $pref .*lookup $table .* is missing\"))"
wait_for "[rule] the log says what was repaired" 2 log_has_at_least 1 "repaired after an outside change: .*rule .* is missing"
check_match "[rule] tunnelgate status says it repaired" 'repaired [0-9]+ times? after outside changes' \
  "$(ip netns exec "$NS_C" "$TG" status tg0 2>&1)"

# --- (b) the kill switch deleted, tg0 set down, its MTU changed ----------------------------------------------
ip netns exec "$NS_C" nft delete table inet tunnelgate-tg0
wait_for "[kill switch] the deleted table is back within 2 s" 2 ip netns exec "$NS_C" nft list table inet tunnelgate-tg0
check_eq "[kill switch] ... with the same rules as before (nft -s: without counter values)" "$killswitch" "$(ip netns exec "$NS_C" nft -s list table inet tunnelgate-tg0 2>&1)"
wait_for "[kill switch] counted, lastRepair names the table" 2 \
  status_is '.counters.repairs >= 2 and (.counters.lastRepair | test("nftables table inet tunnelgate-tg0 is missing"))'
ip -n "$NS_C" link set dev tg0 down
wait_for "[tun down] tg0 is up again within 2 s" 2 bash -c "ip -n $NS_C link show dev tg0 | grep -q '<[^>]*,UP[,>]'"
wait_for "[tun down] counted, lastRepair says tg0 was down" 2 \
  status_is '.counters.repairs >= 3 and (.counters.lastRepair | test("link tg0 is down"))'
check_route "[tun down] $ELSEWHERE4 is looked up into tg0 again" "$NS_C" "$ELSEWHERE4" tg0
ip -n "$NS_C" link set dev tg0 mtu 1300
wait_for "[mtu] the MTU is 1400 again within 2 s" 2 mtu_is 1400
wait_for "[b] the log has a line for each repair" 2 log_has_at_least 4 "repaired after an outside change: "

# --- (c) the carrier path: C's route toward $CARRIER4 deleted -----------------------------------------------
gone_re="carrier path to $(tg_re "$CARRIER4") gone: no route"
back_re="carrier path to $(tg_re "$CARRIER4") back via eth0"
check_eq "[carrier] the provider's defaultPath is satisfied (status 1) while the carrier has a path" \
  "defaultPath 1 satisfied" "$(message path)"
ip -n "$NS_C" -4 route del default via "$R_C0_4" dev eth0
wait_for "[carrier] status goes reasserting within 2 s" 2 status_is '.status == "reasserting"'
wait_for "[carrier] the log says the path to $CARRIER4 went, and why" 2 log_has_at_least 1 "$gone_re"
check_eq "[carrier] the provider's own reasserting is untouched" "reasserting false" "$(message reasserting)"
path_is() { [ "$(message path)" = "$1" ]; }
wait_for "[carrier] ... and its defaultPath is unsatisfied (status 2)" 2 path_is "defaultPath 2 unsatisfied"
tg_c_default_route 4
wait_for "[carrier] connected again within 2 s of the route's return" 2 status_is '.status == "connected"'
wait_for "[carrier] the log says the path is back via eth0" 2 log_has_at_least 1 "$back_re"
wait_for "[carrier] ... and defaultPath is satisfied again" 2 path_is "defaultPath 1 satisfied"

# Combined: reasserting while the provider says so OR no carrier endpoint has a path. The host writes the
# status before it logs a carrier line, and before the provider's `reasserting = x` returns, so each status
# is read right after what changed it.
check_eq "[combined] the provider sets reasserting" "reasserting true" "$(message 'reasserting on')"
check "[combined] ... status reasserting" status_is '.status == "reasserting"'
ip -n "$NS_C" -4 route del default via "$R_C0_4" dev eth0
wait_for "[combined] the carrier check saw the path go" 2 log_has_at_least 2 "$gone_re"
check_eq "[combined] the provider clears reasserting" "reasserting false" "$(message 'reasserting off')"
check "[combined] ... still reasserting: no carrier path" status_is '.status == "reasserting"'
check_eq "[combined] the provider sets reasserting again" "reasserting true" "$(message 'reasserting on')"
tg_c_default_route 4
wait_for "[combined] the carrier check saw the path come back" 2 log_has_at_least 2 "$back_re"
check "[combined] ... still reasserting: the provider says so" status_is '.status == "reasserting"'
check_eq "[combined] the provider clears reasserting" "reasserting false" "$(message 'reasserting off')"
check "[combined] ... connected: neither" status_is '.status == "connected"'

# --- settings applied again: the monitor follows the settings applied now ------------------------------------
check_eq "[re-apply] the provider re-applied its settings (MTU 1280, $EXCLUDED4 excluded)" reapplied "$(message reapply)"
check "[re-apply] the new MTU is in place" mtu_is 1280
repairs_before=$(ip netns exec "$NS_C" "$TG" status tg0 --json | jq '.counters.repairs')
ip -n "$NS_C" -4 rule del pref "$pref"
wait_for "[re-apply] the deleted rule is back within 2 s" 2 rule_back
wait_for "[re-apply] ... counted" 2 status_is ".counters.repairs > ${repairs_before:-0}"
check "[re-apply] the repair kept the re-applied MTU 1280 (not the first settings' 1400)" mtu_is 1280
check_route "[re-apply] $EXCLUDED4 still leaves through eth0" "$NS_C" "$EXCLUDED4" eth0
check "[re-apply] still connected" status_is '.status == "connected"'

# --- (d) stop: everything removed, C as before ----------------------------------------------------------------
kill -TERM "$provider_pid"
wait "$provider_pid"
rc=$?
check_eq "the host exits 0 after a clean stop" 0 "$rc"
check_eq "stopTunnel was called exactly once" "stopTunnel 1" "$(cat "$stop_file" 2>&1)"
check_fails "tg0 is gone" ip -n "$NS_C" link show dev tg0
check_eq "C's resolv.conf is back" "$resolv_before" "$(cat "$resolv" 2>&1)"
tg_snapshot "$NS_C" "$TG_TMP/after"
check_same_snapshot "C's kernel state after stop equals the state before start" "$TG_TMP/before" "$TG_TMP/after"

# --- (e) the provider's plane hangs: the host stays, disconnected, holding the kill switch ------------------
log2=$TG_TMP/provider2.log
ip netns exec "$NS_C" env TG_NE_REMOTE="$CARRIER4" TG_NE_DNS=10.8.0.1 TG_NE_REAPPLY_EXCLUDE="$EXCLUDED4" \
  TG_NE_STOP_FILE="$stop_file" "$PROVIDER" --provider counting --include-all-networks >"$log2" 2>&1 &
provider_pid=$!
wait_for "[hung] the provider's tunnel is connected again" 15 status_is '.status == "connected"'
plane=$(ip netns exec "$NS_C" "$TG" status tg0 --json 2>/dev/null | jq -r '.planePID // empty')
check_match "[hung] status names the provider's plane" '^[0-9]+$' "$plane"
kill -STOP "${plane:-0}"
wait_for "[hung] within 15 s: disconnected, lastDisconnectError says the plane hung" 15 \
  status_is '.status == "disconnected" and (.lastDisconnectError // "" | test("said nothing for [0-9]+ s \\(hung\\)"))'
check "[hung] the host is still running" kill -0 "$provider_pid"
check "[hung] the hung plane is gone" bash -c "[ ! -d /proc/$plane ] || grep -q '^State:.*Z' /proc/$plane/status"
check "[hung] the kill switch is still in place" ip netns exec "$NS_C" nft list table inet tunnelgate-tg0
check_fails "[hung] nothing leaves C: the server $CARRIER4 does not answer root's ping" ip netns exec "$NS_C" ping -n -c 1 -W 1 "$CARRIER4"
tg_run ip netns exec "$NS_C" "$TG" down tg0
check_rc "[hung] tunnelgate down tg0" 0
wait "$provider_pid"
check_eq "[hung] the host then exits 0 (down is a stop asked for, as for tunnelgate up)" 0 "$?"
check "[hung] after down, $CARRIER4 answers root's ping outside the tunnel" ip netns exec "$NS_C" ping -n -c 1 -W 2 "$CARRIER4"
tg_snapshot "$NS_C" "$TG_TMP/after-hung"
check_same_snapshot "[hung] C's kernel state after down equals the state before start" "$TG_TMP/before" "$TG_TMP/after-hung"
check_eq "[hung] C's resolv.conf is back" "$resolv_before" "$(cat "$resolv" 2>&1)"
if [ "$TG_FAILED" -ne 0 ]; then _tg_detail "provider log:" "$(cat "$log")"; _tg_detail "second provider log:" "$(cat "$log2")"; fi

tg_summary
