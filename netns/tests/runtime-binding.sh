#!/usr/bin/env bash
# Binding a runtime built with its own names and result codes, without a wrapper: the example runtime
# compiled here as its MEHS-named variant (-DER_ABI_VARIANT_MEHS: only mehs_ios_runtime_start,
# mehs_ios_runtime_packet_in, mehs_runtime_status, mehs_runtime_stop and an app_message of its own,
# no batch call, codes OK 0, QUEUE_FULL 11, INVALID_STATE 12, INVALID_ARGUMENT 13, BUFFER_TOO_SMALL 14,
# FAILED 15), hosted by two tunnelgate instances through "symbols" and "resultCodes".
#
#   C (tunnelgate "tga", 10.61.0.1) ── R ── L (tunnelgate "tgb", 10.61.0.2)
#      the variant: UDP 10.231.0.2:5410  <══>  192.168.231.2:5410
#
# Asserted: the variant exports MEHS's names and nothing of the default ABI; bound by those names and
# codes, up succeeds and the runtime's own status says ready, ping crosses both ways and an iperf3 TCP
# transfer completes; a start refused with the variant's INVALID_ARGUMENT (13) and FAILED (15) is named
# as such; message round-trips through the renamed app_message, a reply larger than the host's first
# buffer through the variant's BUFFER_TOO_SMALL (14); with a one-packet runtime queue the variant's
# QUEUE_FULL (11) is answered by retries, and the host counted exactly the packets the runtime took, with
# nothing dropped. The same library without resultCodes: an unknown code fails start and app_message
# naming it, and QUEUE_FULL's 11 under load fails the tunnel with a clear error instead of dropping;
# without symbols, up fails naming tunnelgate_runtime_start. The kernel state of C is as before after
# every failure.
# shellcheck disable=SC2016 # jq programs name their own $variables
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
tg_begin

# --- the variant, built from the example's sources ---------------------------------------------------
cc=${CC:-$(command -v gcc || command -v cc || command -v clang || echo /opt/swift/usr/bin/clang)}
VARIANT=$TG_TMP/libmehs-variant.so
build_out=$("$cc" -std=c11 -O2 -fPIC -shared -fvisibility=hidden -Wall -Wextra -Werror -DER_ABI_VARIANT_MEHS \
  -I "$TG_ROOT/Sources/CTunnelgateRuntime/include" "$TG_ROOT"/Sources/CExampleRuntime/*.c \
  -o "$VARIANT" -lsodium -pthread 2>&1) || tg_bail "the MEHS-named variant builds with $cc" "$build_out"
tg_pass "the MEHS-named variant builds with $cc -DER_ABI_VARIANT_MEHS"
check_eq "it exports MEHS's four names and its own app_message, no tunnelgate_runtime_*, no batch call" \
  "$(printf '%s\n' mehs_example_app_message mehs_ios_runtime_packet_in mehs_ios_runtime_start \
       mehs_runtime_status mehs_runtime_stop)" \
  "$(nm -D --defined-only "$VARIANT" | awk '$2 == "T" { print $3 }' | sort)"

SECRET="binding-secret-$$-$RANDOM"
tg_secret_file "$SECRET"

SYMBOLS='"symbols": {"start": "mehs_ios_runtime_start", "packetIn": "mehs_ios_runtime_packet_in",
                     "status": "mehs_runtime_status", "stop": "mehs_runtime_stop",
                     "appMessage": "mehs_example_app_message"}'
CODES='"resultCodes": {"ok": 0, "queueFull": 11, "invalidState": 12, "invalidArgument": 13,
                       "bufferTooSmall": 14, "failed": 15}'
# The codes tunnelgate assumes without resultCodes, as its errors list them.
DEFAULT_CODES='ok 0, queueFull 1, invalidState 2, invalidArgument 3, bufferTooSmall 4, failed 5'

config() { # FILE NAME ADDRESS BIND PEER EXTRA-ARGS EXTRA-RUNTIME   (JSON fragments, each after a comma; lib.sh tg_runtime_config)
  tg_runtime_config "$1" "$2" "$3" "$4" "$5" --routes '["10.61.0.0/24"]' --library "$VARIANT" \
    --args ', "--silence-ms", "600", "--keepalive-ms", "150"'"$6" --packet-path callback --runtime "$7"
}
config_a() { config "$TG_TMP/a.json" tga 10.61.0.1 "$C_ETH0_4:5410" "$LAN4:5410" "$@"; }
config_b() { config "$TG_TMP/b.json" tgb 10.61.0.2 "$LAN4:5410" "$C_ETH0_4:5410" "$@"; }
up_a() { tg_run ip netns exec "$NS_C" "$TG" up "$TG_TMP/a.json" --detach; }
up_b() { tg_run ip netns exec "$NS_L" "$TG" up "$TG_TMP/b.json" --detach; }
down_pair() {
  tg_run ip netns exec "$NS_C" "$TG" down tga
  tg_run ip netns exec "$NS_L" "$TG" down tgb
  wait_for "both tunnelgate processes exited" 10 no_tunnel_left
}
no_tunnel_left() { tg_no_tunnel_process "$NS_C" && tg_no_tunnel_process "$NS_L"; }
# iperf_tcp SECONDS: a TCP transfer from C to L through the tunnel; sets $iperf_rc and $received.
iperf_tcp() {
  ip netns exec "$NS_L" timeout 90 iperf3 -s -1 -B 10.61.0.2 -p 5201 >/dev/null 2>&1 &
  local server=$!
  wait_for "iperf3 server listening" 5 bash -c "ip netns exec $NS_L ss -ltn | grep -q 10.61.0.2:5201"
  ip netns exec "$NS_C" timeout 60 iperf3 -c 10.61.0.2 -p 5201 -t "$1" -J >"$TG_TMP/iperf.json" 2>"$TG_TMP/iperf.err"
  iperf_rc=$?
  received=$(jq -r '.end.sum_received.bytes // 0' "$TG_TMP/iperf.json" 2>/dev/null)
  wait "$server" 2>/dev/null
}
status_a() { ip netns exec "$NS_C" "$TG" status tga --json; }
# counters_agree: the host's published counters (once a second) have caught up with the runtime's live
# ones: every packet the host counts as handed over, the runtime counts as taken, and every QUEUE_FULL
# the runtime answered, the host counted as one (a predicate for wait_for).
counters_agree() {
  local rt host
  rt=$(ip netns exec "$NS_C" "$TG" message tga stats) || return 1
  host=$(status_a) || return 1
  jq -n -e --argjson rt "$rt" --argjson host "$host" \
    '$host.counters.packetsFromHost == $rt.packetsIn and $host.counters.queueFull == $rt.queueFull' >/dev/null
}
long_message=$(head -c 5000 /dev/zero | tr '\0' x)

tg_snapshot "$NS_C" "$TG_TMP/c-before"

# --- refusals before anything runs -------------------------------------------------------------------
config_a "" ", $CODES"
up_a
check_rc "without symbols: up fails" 1
check_match "... naming the default start symbol the library lacks and its key" \
  "has no symbol 'tunnelgate_runtime_start' \\(runtime\\.symbols\\.start\\)" "$TG_ERR"
config_a ', "--queue", "0"' ", $SYMBOLS, $CODES"
up_a
check_rc "a start the variant refuses with its INVALID_ARGUMENT (13): up fails" 1
check_match "... and says INVALID_ARGUMENT, with the runtime's message" \
  'did not start \(INVALID_ARGUMENT\): .*--queue' "$TG_ERR"
config_a ', "--fail-start", "the server refused our credentials"' ", $SYMBOLS, $CODES"
up_a
check_rc "a start the variant fails with its FAILED (15): up fails" 1
check_match "... and says FAILED, with the runtime's message" \
  'did not start \(FAILED\): the server refused our credentials' "$TG_ERR"
config_a ', "--fail-start", "the server refused our credentials"' ", $SYMBOLS"
up_a
check_rc "the same without resultCodes: up fails" 1
check_match "... naming 15 as a code resultCodes does not name, and the codes assumed" \
  "did not start \\(code 15, not one of runtime\\.resultCodes \\($DEFAULT_CODES\\)\\): the server refused our credentials" \
  "$TG_ERR"
tg_snapshot "$NS_C" "$TG_TMP/c-refused"
check_same_snapshot "after the refused starts C's kernel state is untouched" "$TG_TMP/c-before" "$TG_TMP/c-refused"

# --- bound by MEHS's names and the variant's codes ----------------------------------------------------
config_a "" ", $SYMBOLS, $CODES"
config_b "" ", $SYMBOLS, $CODES"
up_a
check_rc "bound by MEHS's names and the variant's codes: tga up" 0
check_match "... says the packets go in through packet_in (the variant has no batch call)" \
  'callback path, packet_in\)' "$TG_OUT"
up_b
check_rc "tgb up" 0
wait_for "status --json: the runtime's own state is ready, with an interface" 3 bash -c \
  "ip netns exec $NS_C $TG status tga --json | jq -e '.runtime.state == \"ready\" and (.runtime.interface | type) == \"string\"' >/dev/null"
check_ping "ping crosses the tunnel" "$NS_C" 10.61.0.2
check_ping "and back the other way" "$NS_L" 10.61.0.1
iperf_tcp 2
check_eq "an iperf3 TCP transfer through the tunnel completes" 0 "$iperf_rc"
check "... and carried more than 1 MB ($received bytes)" test "${received:-0}" -ge 1000000
tg_run ip netns exec "$NS_C" "$TG" message tga ping
check_rc "message round-trips through the renamed app_message (mehs_example_app_message)" 0
check_eq "... and prints the runtime's reply" pong "$TG_OUT"
tg_run ip netns exec "$NS_C" "$TG" message tga "$long_message"
check_rc "a 5006-byte reply (over the host's first 4096-byte buffer) comes through the variant's BUFFER_TOO_SMALL" 0
check_eq "... whole" "echo: $long_message" "$TG_OUT"
down_pair

# --- QUEUE_FULL is the variant's 11: a one-packet queue ---------------------------------------------------
# (--direct-send does not matter here: without a batch call every packet goes through the queue.)
config_a ', "--queue", "1"' ", $SYMBOLS, $CODES"
up_a
check_rc "[queue 1] tga up" 0
up_b
check_rc "[queue 1] tgb up" 0
iperf_tcp 2
check_eq "[queue 1] a TCP transfer completes" 0 "$iperf_rc"
check "[queue 1] ... and carried more than 100 kB through a one-packet queue ($received bytes)" \
  test "${received:-0}" -ge 100000
wait_for "[queue 1] the host's counters agree with the runtime's: packets handed over = packets taken, QUEUE_FULL answers = counted" \
  5 counters_agree
rt=$(ip netns exec "$NS_C" "$TG" message tga stats)
host=$(status_a)
check "[queue 1] the variant answered QUEUE_FULL (its 11) and the host counted it as such ($(jq -c '{queueFull}' <<<"$rt") host $(jq -c '.counters | {queueFull, retries}' <<<"$host"))" \
  jq -n -e --argjson rt "$rt" --argjson host "$host" '$rt.queueFull > 0 and $host.counters.queueFull > 0'
check "[queue 1] ... and answered it by retries" jq -e '.counters.retries > 0' <<<"$host"
check "[queue 1] nothing was dropped: the host's drop counters are 0 ($(jq -c '.counters | with_entries(select(.key | startswith("dropped")))' <<<"$host"))" \
  jq -e '[.counters | to_entries[] | select(.key | startswith("dropped")) | .value] | all(. == 0)' <<<"$host"
check "[queue 1] ... and so are the runtime's on the way out ($(jq -c '{dropsOversize, dropsNoPeer, dropsSend}' <<<"$rt"))" \
  jq -e '.dropsOversize == 0 and .dropsNoPeer == 0 and .dropsSend == 0' <<<"$rt"
# (The equality of packets handed over and taken is the wait_for above: these two snapshots are taken
# apart, and the host publishes its counters once a second, so a late packet can sit between them.)
check "[queue 1] ... and it took more than 100 packets through it ($(jq -c '{packetsIn}' <<<"$rt"))" \
  jq -e '.packetsIn > 100' <<<"$rt"
down_pair

# --- the same library without resultCodes ------------------------------------------------------------------
# tga runs in the foreground (a background job of this script), so that what it says when the runtime
# fails is kept: a detached tunnel's log goes with its state.
config_a ', "--queue", "1"' ", $SYMBOLS"
config_b "" ", $SYMBOLS, $CODES"
up_b
check_rc "[no resultCodes] tgb up (with them)" 0
ip netns exec "$NS_C" "$TG" up "$TG_TMP/a.json" >"$TG_TMP/a.out" 2>"$TG_TMP/a.err" &
tga=$!
wait_for "[no resultCodes] tga comes up: OK is 0 in both numberings" 10 bash -c \
  "ip netns exec $NS_C $TG status tga --json | jq -e '.status == \"connected\"' >/dev/null"
check_ping "[no resultCodes] a single ping crosses the tunnel (nothing has answered a code but OK)" "$NS_C" 10.61.0.2
tg_run ip netns exec "$NS_C" "$TG" message tga "$long_message"
check_rc "[no resultCodes] a reply that needs BUFFER_TOO_SMALL: message fails" 1
check_match "... naming 14 as a code resultCodes does not name" \
  "app_message failed \\(code 14, not one of runtime\\.resultCodes \\($DEFAULT_CODES\\)\\)" "$TG_ERR"
# Bursts of 64 echo requests at once into the one-packet queue until the variant answers 11 and the
# tunnel stops (each burst is bounded by -w 1; the wait by its timeout).
burst_until_exit() {
  ip netns exec "$NS_C" ping -n -q -c 64 -l 64 -i 0.2 -w 1 -s 1000 10.61.0.2 >/dev/null 2>&1
  tg_exited "$tga"
}
wait_for "[no resultCodes] under bursts the variant answers QUEUE_FULL (11) and tga stops" 20 burst_until_exit
if tg_exited "$tga"; then
  wait "$tga"
  tga_rc=$?
else
  kill "$tga" 2>/dev/null
  wait "$tga"
  tga_rc=timeout
fi
tga_err=$(<"$TG_TMP/a.err")
check_eq "[no resultCodes] tga exits 1" 1 "$tga_rc"
check_match "... saying packet_in returned 11, which resultCodes does not name, and what to do" \
  "the runtime failed: packet_in returned 11, which is none of the result codes configured for this runtime \\($DEFAULT_CODES\\); declare the runtime's own values in runtime\\.resultCodes" \
  "$tga_err"
check_match "... after removing everything it applied" 'tga: disconnected, everything removed' "$tga_err"
tg_run ip netns exec "$NS_L" "$TG" down tgb
check_rc "tgb down" 0
wait_for "no tunnelgate process is left" 10 no_tunnel_left
tg_snapshot "$NS_C" "$TG_TMP/c-after"
check_same_snapshot "C's kernel state is as before the first up" "$TG_TMP/c-before" "$TG_TMP/c-after"

# The secret reached no output.
printf '%s\n' "$SECRET" >"$TG_TMP/pattern"
check "the secret appears in no output of tga" bash -c "! grep -qFf '$TG_TMP/pattern' '$TG_TMP/a.out' '$TG_TMP/a.err'"

tg_summary
