#!/usr/bin/env bash
# Hosting a packet runtime behind the callback C ABI: two tunnelgate instances, each hosting the example
# runtime (IP in UDP, XChaCha20-Poly1305), form a tunnel between C and L across the router.
#
#   C (tunnelgate "tga", 10.60.0.1) ── R ── L (tunnelgate "tgb", 10.60.0.2)
#      example runtime: UDP 10.231.0.2:5400  <══>  192.168.231.2:5400
#
# Asserted: ping and an iperf3 TCP transfer in both packet paths (callback, fd); in the callback path the
# packets go in through packet_in_batch, and with "packetInBatch": null one by one through packet_in; a
# configured batch symbol the library lacks is an error; with a one-packet
# runtime queue a TCP transfer completes with QUEUE_FULL answered by retries and zero drops for it;
# the carrier cut at R makes status go reasserting and back to connected, with traffic resuming;
# a runtime that refuses to start, a missing symbol, a loose secret file each give a clear error and
# leave the kernel untouched; `message` round-trips; malformed packets from the runtime (not IP,
# truncated, over the MTU) are dropped and counted; the secret appears in no output, log or state file.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
tg_trap_cleanup
tg_require_binary
tg_topology_up
LIB=$TG_ROOT/.build/debug/libTunnelgateExampleRuntime.so
[ -f "$LIB" ] || tg_bail "the example runtime is built at $LIB" "build it with: swift build --product TunnelgateExampleRuntime"

SECRET="runtime-secret-$$-$RANDOM-do-not-leak"
secret=$TG_TMP/secret
printf '%s\n' "$SECRET" >"$secret"
chmod 600 "$secret"
outputs=$TG_TMP/outputs   # everything tunnelgate printed, grepped for the secret at the end
: >"$outputs"

config() { # FILE NAME ADDRESS BIND PEER PATH EXTRA-ARGS EXTRA-RUNTIME
  cat >"$1" <<CFG
{"name": "$2", "tunnelRemoteAddress": "${5%:*}", "mtu": 1400,
 "ipv4Settings": {"addresses": ["$3"], "subnetMasks": ["255.255.255.0"], "includedRoutes": ["10.60.0.0/24"]},
 "runtime": {"kind": "callback", "library": "$LIB",
             "arguments": ["--bind", "$4", "--peer", "$5", "--silence-ms", "600", "--keepalive-ms", "150"$7],
             "secretFile": "$secret", "packetPath": "$6"$8}}
CFG
}
run() { tg_run "$@"; printf '%s\n%s\n' "$TG_OUT" "$TG_ERR" >>"$outputs"; }
up_pair() { # PATH [EXTRA-ARGS-OF-TGA] [EXTRA-RUNTIME]   (JSON fragments: , "--queue", "1")
  config "$TG_TMP/a.json" tga 10.60.0.1 "$C_ETH0_4:5400" "$LAN4:5400" "$1" "${2:-}" "${3:-}"
  config "$TG_TMP/b.json" tgb 10.60.0.2 "$LAN4:5400" "$C_ETH0_4:5400" "$1" "" "${3:-}"
  run ip netns exec "$NS_C" "$TG" up "$TG_TMP/a.json" --detach
  check_rc "[$1] tga up" 0
  run ip netns exec "$NS_L" "$TG" up "$TG_TMP/b.json" --detach
  check_rc "[$1] tgb up" 0
}
down_pair() {
  run ip netns exec "$NS_C" "$TG" down tga
  run ip netns exec "$NS_L" "$TG" down tgb
  wait_for "both tunnelgate processes exited" 10 bash -c "[ -z \"\$(ip netns pids $NS_C)\" ] && [ -z \"\$(ip netns pids $NS_L)\" ] || ! pgrep -f 'tunnelgate up' >/dev/null"
}
# iperf_tcp SECONDS: a TCP transfer of that many seconds from C to L through the tunnel; sets $received
# (what iperf3 counted as received: it stops counting when the sender finishes, so it is less than sent)
# and $iperf_rc.
iperf_tcp() {
  ip netns exec "$NS_L" timeout 90 iperf3 -s -1 -B 10.60.0.2 -p 5201 >/dev/null 2>&1 &
  local server=$!
  wait_for "iperf3 server listening" 5 bash -c "ip netns exec $NS_L ss -ltn | grep -q 10.60.0.2:5201"
  ip netns exec "$NS_C" timeout 60 iperf3 -c 10.60.0.2 -p 5201 -t "$1" -J >"$TG_TMP/iperf.json" 2>"$TG_TMP/iperf.err"
  iperf_rc=$?
  received=$(jq -r '.end.sum_received.bytes // 0' "$TG_TMP/iperf.json" 2>/dev/null)
  wait "$server" 2>/dev/null
}

# runtime_stats NS NAME: the runtime's own status JSON, fresh (app_message "stats"); the state file's copy
# is only rewritten on state changes.
runtime_stats() { ip netns exec "$1" "$TG" message "$2" stats; }

tg_snapshot "$NS_C" "$TG_TMP/c-before"
# callback-single: the callback path with "packetInBatch": null, as for a runtime without the symbol
# (MEHS's has none): packets go in one by one through packet_in.
for path in callback fd callback-single; do
  case $path in
  callback-single) up_pair callback "" ', "symbols": {"packetInBatch": null}' ;;
  *) up_pair "$path" ;;
  esac
  up_out=$TG_OUT
  check_ping "[$path] ping crosses the tunnel" "$NS_C" 10.60.0.2
  check_ping "[$path] and back the other way" "$NS_L" 10.60.0.1
  iperf_tcp 2
  check_eq "[$path] an iperf3 TCP transfer through the tunnel completes" 0 "$iperf_rc"
  check "[$path] ... and carried more than 1 MB ($received bytes)" test "${received:-0}" -ge 1000000
  stats=$(runtime_stats "$NS_C" tga)
  echo "$stats" >>"$outputs"
  calls=$(echo "$stats" | jq '.batchCalls') batched=$(echo "$stats" | jq '.batchPackets') sent=$(echo "$stats" | jq '.packetsIn')
  [ "$path" != fd ] && wait_for "[$path] the host's counters are published" 3 bash -c \
    "ip netns exec $NS_C $TG status tga --json | jq -e '.counters.packetsFromHost >= $sent' >/dev/null"
  host=$(ip netns exec "$NS_C" "$TG" status tga --json | jq -c '.counters | {packetsFromHost, handOffs, handOffSeconds}')
  # The runtime's own status, live (published every second, not only on state changes): its counters
  # have caught up with what the stats message said.
  wait_for "[$path] status --json carries the runtime's live status (state, interface, packetsIn >= $sent)" 3 bash -c \
    "ip netns exec $NS_C $TG status tga --json | jq -e '.runtime.state == \"ready\" and (.runtime.interface | type) == \"string\" and .runtime.packetsIn >= $sent' >/dev/null"
  run ip netns exec "$NS_C" "$TG" status tga
  check_match "[$path] status (text) names the runtime's state and interface" '  runtime: ready \(interface [^)]+\)' "$TG_OUT"
  case $path in
  callback)
    check_match "[$path] up says the packets go in through packet_in_batch" 'callback path, packet_in_batch\)' "$up_out"
    check "[$path] the packets went in through packet_in_batch (batchCalls $calls, batchPackets $batched of packetsIn $sent)" \
      test "$calls" -gt 0 -a "$batched" -eq "$sent" -a "$sent" -gt 1000
    check "[$path] the host counts its hand-offs and the time inside them ($host)" \
      jq -e '.handOffs > 0 and .handOffs <= .packetsFromHost and .handOffSeconds > 0' <<<"$host"
    ;;
  fd)
    check "[$path] the runtime read the TUN itself: no batch calls (batchCalls $calls, packetsIn $sent)" \
      test "$calls" -eq 0 -a "$sent" -gt 1000
    check "[$path] ... and the host handed nothing off ($host)" jq -e '.handOffs == null' <<<"$host"
    ;;
  callback-single)
    check_match "[$path] up says the packets go in through packet_in" 'callback path, packet_in\)' "$up_out"
    check "[$path] the packets went in one by one through packet_in (batchCalls $calls, packetsIn $sent)" \
      test "$calls" -eq 0 -a "$batched" -eq 0 -a "$sent" -gt 1000
    ;;
  esac
  down_pair
done

# --- backpressure: a one-packet queue --------------------------------------------------------------------
# --direct-send 0: the example would otherwise send most batches on the host's thread, past its queue.
up_pair callback ', "--queue", "1", "--direct-send", "0"'
iperf_tcp 2
check_eq "[queue 1] a TCP transfer completes" 0 "$iperf_rc"
check "[queue 1] ... and carried more than 100 kB through a one-packet queue ($received bytes)" test "${received:-0}" -ge 100000
status=$(ip netns exec "$NS_C" "$TG" status tga --json)
echo "$status" >>"$outputs"
wait_for "counters published" 3 bash -c "ip netns exec $NS_C $TG status tga --json | jq -e '.counters.queueFull > 0' >/dev/null"
status=$(ip netns exec "$NS_C" "$TG" status tga --json)
check "[queue 1] QUEUE_FULL happened ($(echo "$status" | jq -c '{queueFull: .counters.queueFull, retries: .counters.retries}'))" \
  test "$(echo "$status" | jq '.counters.queueFull')" -gt 0
check "[queue 1] and was answered by retries" test "$(echo "$status" | jq '.counters.retries')" -gt 0
check_eq "[queue 1] nothing was dropped for it (refused)" 0 "$(echo "$status" | jq '.counters.droppedRefused')"

# --- the carrier cut and restored ------------------------------------------------------------------------
ip netns exec "$NS_C" "$TG" status tga --watch >"$TG_TMP/watch" 2>&1 &
watcher=$!
ip netns exec "$NS_R" nft -f - <<EOT || tg_bail "nft: carrier cut in R"
table inet cut {
  chain forward {
    type filter hook forward priority -10; policy accept;
    udp dport 5400 drop
  }
}
EOT
wait_for "with the carrier cut, status goes reasserting" 5 bash -c "ip netns exec $NS_C $TG status tga --json | jq -e '.status == \"reasserting\"' >/dev/null"
check "... and the runtime's own state in it is reconnecting" \
  bash -c "ip netns exec $NS_C $TG status tga --json | jq -e '.runtime.state == \"reconnecting\"' >/dev/null"
ip netns exec "$NS_R" nft delete table inet cut
wait_for "with the carrier back, status is connected again" 5 bash -c "ip netns exec $NS_C $TG status tga --json | jq -e '.status == \"connected\"' >/dev/null"
wait_for "... and the runtime's own state is ready again" 3 bash -c \
  "ip netns exec $NS_C $TG status tga --json | jq -e '.runtime.state == \"ready\"' >/dev/null"
check_ping "traffic resumes after the carrier is back" "$NS_C" 10.60.0.2
check "status --watch printed the transitions as JSON lines" \
  bash -c "grep -q '\"status\":\"reasserting\"' $TG_TMP/watch && grep -c '\"status\":\"connected\"' $TG_TMP/watch | grep -q '^[2-9]'"

# --- app messages ----------------------------------------------------------------------------------------
run ip netns exec "$NS_C" "$TG" message tga ping
check_rc "message round-trips" 0
check_eq "... and prints the runtime's reply" pong "$TG_OUT"

# --- malformed packets from the runtime ------------------------------------------------------------------
run ip netns exec "$NS_C" "$TG" message tga emit-malformed
check_eq "the host refuses a non-IP, a truncated, a length-mismatched and an over-MTU packet" "accepted 0 of 4" "$TG_OUT"
wait_for "the drops are counted" 3 bash -c "ip netns exec $NS_C $TG status tga --json | jq -e '.counters.droppedMalformed >= 3 and .counters.droppedOverMTU >= 1' >/dev/null"
check_ping "the tunnel still works after them" "$NS_C" 10.60.0.2
down_pair
check_match "status --watch ended with disconnected" '"status":"disconnected"' "$(cat "$TG_TMP/watch")"
kill "$watcher" 2>/dev/null

# --- start failures leave the kernel untouched ----------------------------------------------------------
tg_snapshot "$NS_C" "$TG_TMP/c-mid"
check_same_snapshot "after down C is as before the first up" "$TG_TMP/c-before" "$TG_TMP/c-mid"
config "$TG_TMP/bad.json" tga 10.60.0.1 "$C_ETH0_4:5400" "$LAN4:5400" callback ', "--fail-start", "the server refused our credentials"' ""
run ip netns exec "$NS_C" "$TG" up "$TG_TMP/bad.json" --detach
check_rc "a runtime that refuses to start: up fails" 1
check_match "... with the runtime's own error" 'the server refused our credentials' "$TG_ERR"
config "$TG_TMP/bad.json" tga 10.60.0.1 "$C_ETH0_4:5400" "$LAN4:5400" callback "" ', "symbols": {"start": "no_such_start"}'
run ip netns exec "$NS_C" "$TG" up "$TG_TMP/bad.json" --detach
check_rc "a missing symbol: up fails" 1
check_match "... naming the symbol" "has no symbol 'no_such_start'" "$TG_ERR"
config "$TG_TMP/bad.json" tga 10.60.0.1 "$C_ETH0_4:5400" "$LAN4:5400" callback "" ', "symbols": {"packetInBatch": "no_such_batch"}'
run ip netns exec "$NS_C" "$TG" up "$TG_TMP/bad.json" --detach
check_rc "a configured packetInBatch the library lacks: up fails" 1
check_match "... naming the symbol and its key" "has no symbol 'no_such_batch' \\(runtime\\.symbols\\.packetInBatch\\)" "$TG_ERR"
chmod 644 "$secret"
config "$TG_TMP/bad.json" tga 10.60.0.1 "$C_ETH0_4:5400" "$LAN4:5400" callback "" ""
run ip netns exec "$NS_C" "$TG" up "$TG_TMP/bad.json" --detach
check_rc "a secret file readable by others: up fails" 1
check_match "... saying how to fix it" 'chmod 600' "$TG_ERR"
chmod 600 "$secret"
config "$TG_TMP/bad.json" tga 10.60.0.1 "$C_ETH0_4:5400" "$LAN4:5400" callback "" ""
sed -i "s|$LIB|/nonexistent/libnothing.so|" "$TG_TMP/bad.json"
run ip netns exec "$NS_C" "$TG" up "$TG_TMP/bad.json" --detach
check_rc "a missing library: up fails" 1
check_match "... naming it" 'cannot load runtime library /nonexistent/libnothing.so' "$TG_ERR"
tg_snapshot "$NS_C" "$TG_TMP/c-after"
check_same_snapshot "after the failed starts C's kernel state is untouched" "$TG_TMP/c-before" "$TG_TMP/c-after"

# --- the secret is nowhere -------------------------------------------------------------------------------
for ns in "$NS_C" "$NS_L"; do
  dir=$(tg_state_dir "$ns")
  [ -d "$dir" ] && cat "$dir"/* >>"$outputs" 2>/dev/null
done
# The pattern comes from a file, so that no command line of these checks carries the secret either.
printf '%s\n' "$SECRET" >"$TG_TMP/pattern"
check "the secret appears in no output, log or state file" bash -c "! grep -qFf '$TG_TMP/pattern' '$outputs'"
check "the secret is on no command line" bash -c "! cat /proc/[0-9]*/cmdline 2>/dev/null | grep -qaFf '$TG_TMP/pattern'"

tg_summary
