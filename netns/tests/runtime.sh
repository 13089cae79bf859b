#!/usr/bin/env bash
# Hosting a packet runtime behind the callback C ABI: two tunnelgate instances, each hosting the example
# runtime (IP in UDP, XChaCha20-Poly1305), form a tunnel between C and L across the router.
#
#   C (tunnelgate "tga", 10.60.0.1 fd60::1) ── R ── L (tunnelgate "tgb", 10.60.0.2 fd60::2)
#      example runtime: UDP 10.231.0.2:5400  <══>  192.168.231.2:5400
#
# Asserted, in both packet paths (callback, fd) and in the callback path with "packetInBatch": null
# (packet_in one by one): ping over IPv4 and IPv6 both ways, an iperf3 TCP transfer, the runtime was told
# the tunnel's MTU; in the callback path packets go in many per wake-up (batchPackets > batchCalls,
# packetsFromHost > handOffs); a configured batch symbol the library lacks is an error.
# Backpressure: through a one-packet runtime queue a TCP transfer and a UDP burst meet QUEUE_FULL, and
# afterwards every packet the host read from the TUN and did not drop is one the runtime took.
# Non-IP packets sent into the TUN are dropped and counted (droppedNotIP) and nothing breaks.
# The carrier cut at R makes status go reasserting and back to connected, with traffic resuming;
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

config() { # FILE NAME ADDRESS BIND PEER PATH EXTRA-ARGS EXTRA-RUNTIME (the IPv6 address is fd60::N for 10.60.0.N)
  cat >"$1" <<CFG
{"name": "$2", "tunnelRemoteAddress": "${5%:*}", "mtu": 1400,
 "ipv4Settings": {"addresses": ["$3"], "subnetMasks": ["255.255.255.0"], "includedRoutes": ["10.60.0.0/24"]},
 "ipv6Settings": {"addresses": ["fd60::${3##*.}"], "networkPrefixLengths": [64], "includedRoutes": ["fd60::/64"]},
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
# iperf_udp COUNT: COUNT datagrams of 1200 bytes at up to 200 Mbit/s from C to L; sets $iperf_rc, $sent_udp.
iperf_udp() {
  ip netns exec "$NS_L" timeout 90 iperf3 -s -1 -B 10.60.0.2 -p 5201 >/dev/null 2>&1 &
  local server=$!
  wait_for "iperf3 server listening" 5 bash -c "ip netns exec $NS_L ss -ltn | grep -q 10.60.0.2:5201"
  ip netns exec "$NS_C" timeout 60 iperf3 -c 10.60.0.2 -p 5201 -u -b 200M -l 1200 -k "$1" -J >"$TG_TMP/iperf.json" 2>"$TG_TMP/iperf.err"
  iperf_rc=$?
  sent_udp=$(jq -r '.end.sum.packets // 0' "$TG_TMP/iperf.json" 2>/dev/null)
  wait "$server" 2>/dev/null
}

# runtime_stats NS NAME: the runtime's own status JSON, fresh (app_message "stats"); status --json's copy
# is published once a second.
runtime_stats() { ip netns exec "$1" "$TG" message "$2" stats; }
host_counters() { ip netns exec "$1" "$TG" status "$2" --json | jq -c '.counters // {}'; }
# num FIELD JSON: a number of JSON, 0 when it has none (for arithmetic).
num() { jq "$1 // 0" <<<"$2"; }
# accounted NS NAME: prints what the host read from the TUN less what it dropped itself, and what the
# runtime says it took; true when they are equal (no packet lost between the two). The host's figures are
# published once a second, so callers poll until they settle. droppedOverMTU also counts the runtime's
# packets over the MTU (emit-malformed sends one): the account holds only before those.
accounted() {
  local kept took
  kept=$(ip netns exec "$1" "$TG" status "$2" --json |
    jq '.counters | .packetsFromHost - .droppedNoRuntime - .droppedNotIP - .droppedOverMTU - .droppedRefused')
  took=$(ip netns exec "$1" "$TG" message "$2" stats | jq .packetsIn)
  echo "host read and kept $kept, the runtime took $took"
  [ -n "$kept" ] && [ "$kept" == "$took" ]
}

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
  check_ping "[$path] IPv6 ping crosses the tunnel" "$NS_C" fd60::2
  check_ping "[$path] and back the other way" "$NS_L" fd60::1
  run ip netns exec "$NS_C" "$TG" status tga --json
  check_eq "[$path] the runtime was told the tunnel's MTU (--tun-mtu): the TUN's mtu and the runtime's" \
    "1400 1400" "$(jq -r '"\(.mtu) \(.runtime.mtu)"' <<<"$TG_OUT")"

  before=$(runtime_stats "$NS_C" tga) host_before=$(host_counters "$NS_C" tga)
  iperf_tcp 2
  check_eq "[$path] an iperf3 TCP transfer through the tunnel completes" 0 "$iperf_rc"
  check "[$path] ... and carried more than 1 MB ($received bytes)" test "${received:-0}" -ge 1000000
  stats=$(runtime_stats "$NS_C" tga)
  echo "$stats" >>"$outputs"
  calls=$(jq '.batchCalls' <<<"$stats") batched=$(jq '.batchPackets' <<<"$stats") sent=$(jq '.packetsIn' <<<"$stats")
  [ "$path" != fd ] && wait_for "[$path] the host's counters are published" 3 bash -c \
    "ip netns exec $NS_C $TG status tga --json | jq -e '.counters.packetsFromHost >= $sent' >/dev/null"
  host=$(host_counters "$NS_C" tga)
  # What the transfer added: a loop that read one packet per wake-up would hand over one per call.
  # (The host's figures before it may not be published yet: then they count as 0, and the pings with them.)
  d_calls=$((calls - $(num .batchCalls "$before"))) d_batched=$((batched - $(num .batchPackets "$before")))
  d_read=$(($(num .packetsFromHost "$host") - $(num .packetsFromHost "$host_before")))
  d_handoffs=$(($(num .handOffs "$host") - $(num .handOffs "$host_before")))
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
    check "[$path] many packets per call during the transfer: $d_batched packets in $d_calls packet_in_batch calls" \
      test "$d_batched" -gt "$d_calls" -a "$d_calls" -gt 0
    check "[$path] the host counts its hand-offs and the time inside them ($host)" \
      jq -e '.handOffs > 0 and .handOffs <= .packetsFromHost and .handOffSeconds > 0' <<<"$host"
    check "[$path] many packets per wake-up during the transfer: $d_read read from the TUN in $d_handoffs hand-offs" \
      test "$d_read" -gt "$d_handoffs" -a "$d_handoffs" -gt 0
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
    check "[$path] many packets per wake-up during the transfer: $d_read read from the TUN in $d_handoffs hand-offs" \
      test "$d_read" -gt "$d_handoffs" -a "$d_handoffs" -gt 0
    ;;
  esac
  down_pair
done

# --- backpressure: a one-packet queue --------------------------------------------------------------------
# --direct-send 0: the example would otherwise send most batches on the host's thread, past its queue.
# QUEUE_FULL keeps the packet and the rest of its batch for a retry: nothing may be lost for it. TCP would
# hide a loss (it retransmits), so besides the transfer the check is an account: every packet the host
# read from the TUN is one the runtime took, or one of the host's own counted drops.
up_pair callback ', "--queue", "1", "--direct-send", "0"'
iperf_tcp 2
check_eq "[queue 1] a TCP transfer completes" 0 "$iperf_rc"
check "[queue 1] ... and carried more than 100 kB through a one-packet queue ($received bytes)" test "${received:-0}" -ge 100000
wait_for "counters published" 3 bash -c "ip netns exec $NS_C $TG status tga --json | jq -e '.counters.queueFull > 0' >/dev/null"
status=$(ip netns exec "$NS_C" "$TG" status tga --json)
echo "$status" >>"$outputs"
check "[queue 1] QUEUE_FULL happened ($(jq -c '{queueFull: .counters.queueFull, retries: .counters.retries}' <<<"$status"))" \
  test "$(jq '.counters.queueFull' <<<"$status")" -gt 0
check "[queue 1] and was answered by retries" test "$(jq '.counters.retries' <<<"$status")" -gt 0
check_eq "[queue 1] nothing was dropped for it (refused)" 0 "$(jq '.counters.droppedRefused' <<<"$status")"
wait_for "[queue 1] after the TCP transfer every packet read from the TUN was taken by the runtime or counted dropped" 5 \
  accounted "$NS_C" tga
# UDP does not retransmit: a burst of datagrams, each of which has to wait for the one-packet queue.
full_before=$(num .queueFull "$(runtime_stats "$NS_C" tga)")
iperf_udp 4000
check_eq "[queue 1] a UDP burst of 4000 datagrams was sent through the tunnel" "0 4000" "$iperf_rc ${sent_udp:-0}"
full_after=$(num .queueFull "$(runtime_stats "$NS_C" tga)")
check "[queue 1] ... and met QUEUE_FULL (the runtime answered it $((full_after - full_before)) times)" \
  test "$full_after" -gt "$full_before"
wait_for "[queue 1] after the UDP burst every datagram read from the TUN was taken by the runtime or counted dropped" 5 \
  accounted "$NS_C" tga

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

# --- non-IP packets from the host side --------------------------------------------------------------------
# Sent into tga's TUN with a packet socket: the host reads them, sees no IPv4 or IPv6 header (first byte
# 0x00, an ethertype no stack handles) and drops them, counted; nothing reaches the runtime.
not_ip_before=$(num .droppedNotIP "$(host_counters "$NS_C" tga)")
ip netns exec "$NS_C" python3 - tga 5 <<'PY'
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM)
for i in range(int(sys.argv[2])):
    s.sendto(bytes([0x00, i]) + bytes(62), (sys.argv[1], 0x88B5))
PY
check_eq "5 non-IP packets were sent into tga's TUN" 0 "$?"
wait_for "... the host counted exactly those 5 dropped (droppedNotIP was $not_ip_before)" 3 bash -c \
  "ip netns exec $NS_C $TG status tga --json | jq -e '.counters.droppedNotIP == $not_ip_before + 5' >/dev/null"
check_ping "the tunnel still works after them" "$NS_C" 10.60.0.2
wait_for "... and every packet read from the TUN is still accounted for (dropped or taken)" 5 accounted "$NS_C" tga

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
