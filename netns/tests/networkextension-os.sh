#!/usr/bin/env bash
# networkextension-os: a provider written as iOS code is (Examples/os-provider-example) runs in C. It
# logs with os.log (`import os.log`, Logger with privacy, os_log) and reads its settings from
# NETunnelProvider.protocolConfiguration, which comes from the handoff on descriptor 3 as a manager's
# startVPNTunnel hands it over (netns/tests/handoff.py): serverAddress, and providerConfiguration's
# address, mtu and a token. The log on standard error has one line per message with its level, the
# public values and <private> for the rest; the token is in no log line, and debug lines are written
# only with OS_ACTIVITY_MODE=debug. SIGTERM: stopTunnel, C's kernel state as before.
#
#   C ── os-provider-example ── tgo (10.7.0.2/24 and MTU 1380 from providerConfiguration)
#   │ eth0 (serverAddress $CARRIER4 stays here)
#   R ── I
set -uo pipefail
# shellcheck source=netns/lib.sh
. "$(dirname "$0")/../lib.sh"
PROVIDER=${TG_OS_PROVIDER_EXAMPLE:-$TG_ROOT/.build/debug/os-provider-example}
[ -x "$PROVIDER" ] || tg_bail "the example provider is built at $PROVIDER" "build it with: swift build"
tg_begin
tg_snapshot "$NS_C" "$TG_TMP/before"

token="tok-$RANDOM$RANDOM-secret"
configuration=$(jq -cn --arg t "$token" '{address: "10.7.0.2", mtu: 1380, token: $t}')
handoff=$(jq -cn --arg s "$CARRIER4" --arg c "$configuration" '{interfaceName: "tgo", serverAddress: $s, providerConfiguration: $c}')
log=$TG_TMP/provider.log

tgo_connected() { grep -q '"status" *: *"connected"' "$(tg_state_dir "$NS_C")/tgo.state" 2>/dev/null; }
start() {  # start [ENV=VALUE...]: the provider with the handoff, its standard error to $log
  ip netns exec "$NS_C" env "$@" python3 "$TG_ROOT/netns/tests/handoff.py" "$handoff" "$PROVIDER" >"$log" 2>&1 &
  provider_pid=$!
  wait_for "the provider's tunnel tgo is connected" 15 tgo_connected
}
stop() {
  kill -TERM "$provider_pid"
  wait "$provider_pid"
  check_eq "the host exits 0 after SIGTERM" 0 "$?"
}

start OS_ACTIVITY_MODE=
check_match "tgo has 10.7.0.2/24: providerConfiguration.address read from protocolConfiguration" \
  'inet 10\.7\.0\.2/24 ' "$(ip -n "$NS_C" addr show dev tgo 2>&1)"
check_match "tgo's MTU is 1380: providerConfiguration.mtu" 'mtu 1380 ' "$(ip -n "$NS_C" link show dev tgo 2>&1)"
check_route "serverAddress $CARRIER4 (protocolConfiguration) is the carrier, kept off the tunnel" "$NS_C" "$CARRIER4" eth0

tg_run ip netns exec "$NS_C" "$TG" message tgo config
check_eq "handleAppMessage reports the protocolConfiguration it sees" \
  "{\"configurationKeys\":[\"address\",\"mtu\",\"token\"],\"hasToken\":true,\"includeAllNetworks\":false,\"interfaceName\":\"tgo\",\"mtu\":1380,\"serverAddress\":\"$CARRIER4\"}" \
  "$(printf '%s' "$TG_OUT" | tr -d '\n')"

have_line() { grep -qxF -- "$1" "$log"; }
wait_for "Logger.notice: one line, level notice, public server shown, token and mtu as iOS writes them" 5 \
  have_line "[com.example.tunnelgate.os:provider] notice: starting for server $CARRIER4 with token <private> mtu 1380"
check "os_log(%{public}@ … %@): the public values, the token <private>" \
  have_line "[com.example.tunnelgate.os:legacy] info: tunnel up with 10.7.0.2 on tgo, token <private>"
check_fails "the token is in no line of the log" grep -qF -- "$token" "$log"
check_fails "the debug line is not written by default" grep -qF "debug lines are not written" "$log"
stop
check "stopTunnel logged at notice" have_line "[com.example.tunnelgate.os:provider] notice: stopTunnel(1)"
check_fails "tgo is gone" ip -n "$NS_C" link show dev tgo

start OS_ACTIVITY_MODE=debug
check "OS_ACTIVITY_MODE=debug: the debug line is written" \
  have_line "[com.example.tunnelgate.os:provider] debug: debug lines are not written unless OS_ACTIVITY_MODE=debug"
check_fails "... and still no token" grep -qF -- "$token" "$log"
stop

tg_snapshot "$NS_C" "$TG_TMP/after"
check_same_snapshot "C's kernel state after SIGTERM equals the state before start" "$TG_TMP/before" "$TG_TMP/after"
if [ "$TG_FAILED" -ne 0 ]; then _tg_detail "provider log:" "$(cat "$log")"; fi

tg_summary
