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
# The carrier cut at R makes status go reasserting and back to connected, with traffic resuming.
# `status --watch` shows connecting, connected, disconnecting, disconnected in order (a slow start).
# A runtime that fails while running: the host logs its error verbatim; without a kill switch the tunnel
# is removed, with one the switch stays (nothing else leaves C) until `down`.
# A runtime that refuses to start, a missing symbol, a loose or foreign secret file, a secret in the
# environment (secretEnvironment) each give a clear error and leave the kernel untouched; `message` round-trips; malformed
# packets from the runtime (not IP, truncated, over the MTU) are dropped and counted.
# The secret: taken from secretFile (secretEnvironment is refused); scrubbed ("[secret]") where a runtime
# quotes it (status, a message reply, a start error); on no live command line, nor in an environment;
# in no output, plan, status, --watch line, log or state file (copied while up).
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
tg_begin --runtime

SECRET="runtime-secret-$$-$RANDOM-do-not-leak"
tg_secret_file "$SECRET"
# The pattern comes from a file, so that no command line of these checks carries the secret either.
pattern=$TG_TMP/pattern
printf '%s\n' "$SECRET" >"$pattern"
outputs=$TG_TMP/outputs   # everything tunnelgate printed, logged or published, grepped for the secret at the end
: >"$outputs"

# config FILE NAME ADDRESS BIND PEER PATH EXTRA-ARGS EXTRA-RUNTIME [EXTRA-TOP] [SECRET-SOURCE]
# EXTRA-* are JSON fragments (, "--queue", "1"); the IPv6 address is fd60::N for the IPv4 10.60.0.N.
config() {
  tg_runtime_config "$1" "$2" "$3" "$4" "$5" --ipv6 '["fd60::/64"]' --args ', "--silence-ms", "600", "--keepalive-ms", "150"'"$7" \
    --secret "${10:-"\"secretFile\": \"$secret\""}" --packet-path "$6" --runtime "$8" --top "${9:-}"
}
config_a() { config "$TG_TMP/a.json" tga 10.60.0.1 "$C_ETH0_4:5400" "$LAN4:5400" "$@"; }
config_b() { config "$TG_TMP/b.json" tgb 10.60.0.2 "$LAN4:5400" "$C_ETH0_4:5400" "$@"; }
run() { tg_run "$@"; printf '%s\n%s\n' "$TG_OUT" "$TG_ERR" >>"$outputs"; }
up_a() { run ip netns exec "$NS_C" "$TG" up "$TG_TMP/a.json" --detach; check_rc "${1:-tga} up" 0; }
up_b() { run ip netns exec "$NS_L" "$TG" up "$TG_TMP/b.json" --detach; check_rc "${1:-tgb} up" 0; }
up_pair() { # PATH [EXTRA-ARGS-OF-TGA] [EXTRA-RUNTIME]
  config_a "$1" "${2:-}" "${3:-}"
  config_b "$1" "" "${3:-}"
  up_a "[$1] tga"
  up_b "[$1] tgb"
}
# keep_files NS NAME: the tunnel's log and state file into $outputs while it runs (down removes both).
keep_files() {
  local dir
  dir=$(tg_state_dir "$1")
  cat "$dir/$2.log" "$dir/$2.state" >>"$outputs" 2>/dev/null
}
# down NS NAME: keeps its files, then takes it down and waits for its process to exit.
down() {
  keep_files "$1" "$2"
  run ip netns exec "$1" "$TG" down "$2"
  wait_for "$2's tunnelgate process exited" 10 tg_no_tunnel_process "$1"
  # The engine waits for its plane before it exits: nothing of the runtime may outlive down.
  check_eq "... and no packet plane is left in it" "" "$(tg_plane_pids "$1")"
}
down_pair() { down "$NS_C" tga; down "$NS_L" tgb; }
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

# digest_transfer: 16 MB of pseudo-random bytes over TCP from C to L through the tunnel; sets $sent_digest
# and $got_digest ("BYTES SHA256" of what C sent and of what L received).
digest_transfer() {
  local server port=5301
  ip netns exec "$NS_L" timeout 90 python3 "$TG_ROOT/netns/tests/tcp_digest.py" serve 10.60.0.2 $port >"$TG_TMP/digest.out" 2>&1 &
  server=$!
  wait_for "digest server listening" 5 bash -c "ip netns exec $NS_L ss -ltn | grep -q 10.60.0.2:$port"
  sent_digest=$(ip netns exec "$NS_C" timeout 90 python3 "$TG_ROOT/netns/tests/tcp_digest.py" send 10.60.0.2 $port 16777216 $$ 2>&1)
  wait "$server" 2>/dev/null || true
  got_digest=$(cat "$TG_TMP/digest.out")
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
    jq '.counters | .packetsFromHost - .droppedNoRuntime - .droppedNotIP - .droppedOverMTU - .droppedRefused - (.droppedOffload // 0)')
  took=$(ip netns exec "$1" "$TG" message "$2" stats | jq .packetsIn)
  echo "host read and kept $kept, the runtime took $took"
  [ -n "$kept" ] && [ "$kept" == "$took" ]
}

# check_processes_clean DESC FILE: FILE (cmdline or environ) of every live tunnelgate process of C and L
# (there must be one in each, and FILE must read as theirs) does not hold the secret.
check_processes_clean() {
  local desc=$1 file=$2 pid pids_c pids_l planes text problems=()
  pids_c=$(tg_tunnel_pids "$NS_C") pids_l=$(tg_tunnel_pids "$NS_L")
  planes="$(tg_plane_pids "$NS_C") $(tg_plane_pids "$NS_L")"
  [ -n "$pids_c" ] || problems+=("no tunnelgate process in C")
  [ -n "$pids_l" ] || problems+=("no tunnelgate process in L")
  [ "$(wc -w <<<"$planes")" -eq 2 ] || problems+=("not one packet plane in each of C and L: $planes")
  for pid in $pids_c $pids_l; do
    text=$(tr '\0' '\n' <"/proc/$pid/$file")
    case $file in
    cmdline) [[ $text == *$'\n'up$'\n'* ]] || problems+=("/proc/$pid/cmdline does not read as tunnelgate up: $text") ;;
    environ) [[ $text == *PATH=* ]] || problems+=("/proc/$pid/environ has no PATH: unreadable?") ;;
    esac
    grep -qFf "$pattern" <<<"$text" && problems+=("/proc/$pid/$file holds the secret")
  done
  # The planes hold the secret in memory only: their command line is `tunnelgate-plane`, their
  # environment empty.
  for pid in $planes; do
    text=$(tr '\0' '\n' <"/proc/$pid/$file")
    case $file in
    cmdline) [ "$text" == tunnelgate-plane ] || problems+=("/proc/$pid/cmdline of the plane is not tunnelgate-plane: $text") ;;
    environ) [ -z "$text" ] || problems+=("/proc/$pid/environ of the plane is not empty") ;;
    esac
    grep -qFf "$pattern" <<<"$text" && problems+=("/proc/$pid/$file holds the secret")
  done
  if [ ${#problems[@]} -eq 0 ]; then
    tg_pass "$desc (pids ${pids_c//$'\n'/ } ${pids_l//$'\n'/ })"
  else
    tg_fail "$desc" "${problems[@]}"
  fi
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
    # The callback path's TUN has TCP segmentation offload: the kernel's TCP hands the plane super-packets,
    # which it cuts into segments (checksums computed anew) before the runtime sees them.
    check "[$path] the TUN gave the plane TCP super-packets, cut before the runtime saw them ($host)" \
      jq -e '.superPacketsFromHost > 0 and .packetsFromHost > .superPacketsFromHost and (.droppedOffload // 0) == 0' <<<"$host"
    digest_transfer
    check_eq "[$path] 16 MB over TCP arrive intact (SHA-256 of what was sent and what arrived)" "$sent_digest" "$got_digest"
    # While both tunnels run: their processes, the plan and the status outputs, all for the final grep.
    check_processes_clean "[$path] the secret is on no command line of a live tunnelgate" cmdline
    check_processes_clean "[$path] ... nor in the environment of one (the secret came from a file)" environ
    run ip netns exec "$NS_C" "$TG" plan "$TG_TMP/a.json"
    check_match "[$path] plan describes the runtime (its output is grepped for the secret)" '# runtime: .* behind the callback ABI' "$TG_OUT"
    run ip netns exec "$NS_C" "$TG" status tga --json
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

# --- the callback path without offloads (TUNNELGATE_CALLBACK_OFFLOADS=off: one TUN read per packet) ----------
config_a callback "" ""
config_b callback "" ""
run ip netns exec "$NS_C" env TUNNELGATE_CALLBACK_OFFLOADS=off "$TG" up "$TG_TMP/a.json" --detach
check_rc "[callback, offloads off] tga up" 0
up_b "[callback, offloads off] tgb"
iperf_tcp 1
check_eq "[callback, offloads off] a TCP transfer completes" 0 "$iperf_rc"
wait_for "[callback, offloads off] the host's counters are published" 3 bash -c \
  "ip netns exec $NS_C $TG status tga --json | jq -e '.counters.packetsFromHost > 1000' >/dev/null"
host=$(host_counters "$NS_C" tga)
check "[callback, offloads off] the TUN gave the plane no super-packet ($host)" \
  jq -e '.packetsFromHost > 1000 and .superPacketsFromHost == null' <<<"$host"
digest_transfer
check_eq "[callback, offloads off] 16 MB over TCP arrive intact" "$sent_digest" "$got_digest"
down_pair

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
wait_for "status --watch ended with disconnected" 3 tg_exited "$watcher"
check_match "... having printed it" '"status":"disconnected"' "$(cat "$TG_TMP/watch")"
cat "$TG_TMP/watch" >>"$outputs"

# --- the lifecycle in status --watch -------------------------------------------------------------------
# A runtime that takes 1.5 s to become ready (--start-delay-ms, a test hook) keeps tga connecting long
# enough to start the watcher then; down's disconnecting lasts only as long as the teardown.
config_a callback ', "--start-delay-ms", "1500"' ""
config_b callback "" ""
up_b "[lifecycle] tgb"
ip netns exec "$NS_C" "$TG" up "$TG_TMP/a.json" --detach >"$TG_TMP/up.out" 2>&1 &
upper=$!
wait_for "[lifecycle] while the runtime starts, tga is connecting" 5 bash -c \
  "ip netns exec $NS_C $TG status tga --json | jq -e '.status == \"connecting\"' >/dev/null"
ip netns exec "$NS_C" "$TG" status tga --watch >"$TG_TMP/watch" 2>&1 &
watcher=$!
wait "$upper"
check_eq "[lifecycle] up returned once the runtime was ready" 0 "$?"
cat "$TG_TMP/up.out" >>"$outputs"
wait_for "[lifecycle] tga is connected" 3 bash -c "ip netns exec $NS_C $TG status tga --json | jq -e '.status == \"connected\"' >/dev/null"
check_ping "[lifecycle] traffic crosses the tunnel" "$NS_C" 10.60.0.2
down "$NS_C" tga
wait_for "[lifecycle] status --watch ended" 3 tg_exited "$watcher"
cat "$TG_TMP/watch" >>"$outputs"
# reasserting is left out: the carrier may hiccup on a loaded machine; the order of the rest is the point.
check_eq "[lifecycle] status --watch printed connecting, connected, disconnecting, disconnected in that order" \
  "$(printf '%s\n' connecting connected disconnecting disconnected)" \
  "$(jq -r .status "$TG_TMP/watch" | grep -vx reasserting | uniq)"

# --- the secret scrubbed where a runtime quotes it; secretEnvironment refused ------------------------------
# tga's runtime quotes the secret in its status (--note, a test hook); the host must replace it with
# "[secret]" in status and in the reply to `message stats`. tgb (still up) derived its key from the same file.
config_a callback ', "--note", "the server quoted '"$SECRET"' back"' "" ""
run ip netns exec "$NS_C" "$TG" up "$TG_TMP/a.json" --detach
check_rc "[scrub] tga up" 0
check_ping "[scrub] the tunnel works: both sides derived the same key" "$NS_C" 10.60.0.2
run ip netns exec "$NS_C" "$TG" status tga --json
check_eq "[scrub] status --json shows the runtime's note with the secret replaced" \
  "the server quoted [secret] back" "$(jq -r .runtime.note <<<"$TG_OUT")"
run ip netns exec "$NS_C" "$TG" message tga stats
check_eq "[scrub] ... and so does the runtime's reply to a message" \
  "the server quoted [secret] back" "$(jq -r .note <<<"$TG_OUT")"
check "[scrub] the state file holds the scrubbed note" grep -qF 'quoted [secret] back' "$(tg_state_dir "$NS_C")/tga.state"
check_processes_clean "[scrub] the secret is in no environment of a live tunnelgate" environ
check_processes_clean "[scrub] ... and on no command line" cmdline
down_pair
# A secret in the environment reaches everything started with that environment and stays in the initial
# environment block: refused by validate and up, naming the key, before anything is touched, and the
# value (set here) is never echoed.
config_a callback "" "" "" '"secretEnvironment": "TG_RUNTIME_SECRET"'
TG_RUNTIME_SECRET=$(<"$secret") run ip netns exec "$NS_C" "$TG" validate "$TG_TMP/a.json"
check_rc "[secretEnvironment] validate refuses it" 1
check_match "... naming the key and what to use instead" 'runtime\.secretEnvironment: refused: .*secretFile' "$TG_ERR"
TG_RUNTIME_SECRET=$(<"$secret") run ip netns exec "$NS_C" "$TG" up "$TG_TMP/a.json" --detach
check_rc "[secretEnvironment] up refuses it" 1
check_match "... with the same line" 'runtime\.secretEnvironment: refused: ' "$TG_ERR"
check_eq "... and starts no tunnelgate process" "" "$(tg_tunnel_pids "$NS_C")"

# --- a runtime whose carrier does not answer yet ----------------------------------------------------------
# tga alone (no peer), its silence already over when it starts (--start-silent 1): its status says
# reconnecting, with its interface, from the first poll on, however soon that poll comes. (A silence of
# 1 ms, as before, raced the host's first poll: on a fast machine it came within the millisecond.) It has
# started (MEHS's contract: an interface means packets may go in): up succeeds and the tunnel starts out
# reasserting, rather than waiting for a "ready" that never comes.
config_a callback ', "--start-silent", "1"' ""
# Its own ports too, so that nothing of tgb's earlier runs (same secret) could ever answer it.
sed -i 's/:5400"/:5498"/g' "$TG_TMP/a.json"
up_a "[no peer yet] tga"
check_match "[no peer yet] up says the tunnel came up reasserting" 'tga: reasserting \(table' "$TG_OUT$TG_ERR"
run ip netns exec "$NS_C" "$TG" status tga --json
check_eq "[no peer yet] status: reasserting, the runtime reconnecting with its interface" "reasserting reconnecting example-udp" \
  "$(jq -r '"\(.status) \(.runtime.state) \(.runtime.interface)"' <<<"$TG_OUT")"
down "$NS_C" tga

# --- a runtime that fails while running --------------------------------------------------------------------
# `message tga fail TEXT` (a test hook) makes the runtime report failed with TEXT as its error. The log is
# read through a descriptor opened while tga runs: a tunnel without a kill switch removes it at the end.
failure="the server revoked this session (code 7)"
config_a callback "" ""
up_a "[runtime fails] tga"
exec {log}<"$(tg_state_dir "$NS_C")/tga.log"
run ip netns exec "$NS_C" "$TG" message tga "fail $failure"
check_eq "[runtime fails] the runtime took the fail message" failing "$TG_OUT"
wait_for "[runtime fails] tga's process exits" 5 tg_no_tunnel_process "$NS_C"
log_text=$(cat <&"$log")
exec {log}<&-
echo "$log_text" >>"$outputs"
check_match "[runtime fails] the host logged the runtime's error verbatim" \
  "^tunnelgate: runtime: failed: $(tg_re "$failure" | sed 's/[()]/\\&/g')\$" "$log_text"
check_match "... and that it stops the tunnel for it" "the runtime failed: .*; stopping" "$log_text"
run ip netns exec "$NS_C" "$TG" status tga --json
check_eq "[runtime fails] without a kill switch tga is disconnected" disconnected "$(jq -r .status <<<"$TG_OUT")"
check_eq "[runtime fails] ... and status keeps why its run ended (the last disconnect error)" \
  "the runtime failed: $failure" "$(jq -r .lastDisconnectError <<<"$TG_OUT")"
run ip netns exec "$NS_C" "$TG" status tga
check_match "... also in the text form" "^  last run ended with: the runtime failed: $(tg_re "$failure" | sed 's/[()]/\\&/g')\$" "$TG_OUT"
tg_snapshot "$NS_C" "$TG_TMP/c-failed"
check_same_snapshot "[runtime fails] ... and C's kernel state is as before the first up" "$TG_TMP/c-before" "$TG_TMP/c-failed"

config_a callback "" "" ', "includeAllNetworks": true, "carrierEndpoints": ["'"$LAN4"'"]'
up_a "[runtime fails, kill switch] tga"
engine_pid=$(tg_tunnel_pids "$NS_C")
run ip netns exec "$NS_C" "$TG" message tga "fail $failure"
# The engine outlives the plane: it stays, holds the kill switch and says why, until down.
no_plane_in_c() { [ -z "$(tg_plane_pids "$NS_C")" ]; }
wait_for "[runtime fails, kill switch] the packet plane is gone" 5 no_plane_in_c
wait_for "[runtime fails, kill switch] status: disconnected, kill switch still on, and why" 5 bash -c \
  "ip netns exec $NS_C $TG status tga --json | jq -e --arg why 'the runtime failed: $failure' '.status == \"disconnected\" and .killSwitch and .lastDisconnectError == \$why'"
check "... and the engine is still running (pid $engine_pid)" test -d "/proc/$engine_pid"
log_text=$(cat "$(tg_state_dir "$NS_C")/tga.log")
echo "$log_text" >>"$outputs"
check_match "[runtime fails, kill switch] the log has the runtime's error verbatim and says the switch stays" \
  "the runtime failed: $(tg_re "$failure" | sed 's/[()]/\\&/g');" "$log_text"
# shellcheck disable=SC2016 # the backquotes are the message's own
check_match "... until down" 'the kill switch stays in place until `tunnelgate down tga`' "$log_text"
check_fails "... and nothing leaves C outside the tunnel (a ping to $INCLUDED4)" \
  ip netns exec "$NS_C" ping -n -c 1 -W 1 "$INCLUDED4"
run ip netns exec "$NS_C" "$TG" down tga
check_rc "[runtime fails, kill switch] down removes it" 0
check_ping "... and traffic leaves C again" "$NS_C" "$INCLUDED4"
tg_snapshot "$NS_C" "$TG_TMP/c-failed"
check_same_snapshot "... and C's kernel state is as before the first up" "$TG_TMP/c-before" "$TG_TMP/c-failed"

# --- start failures leave the kernel untouched ----------------------------------------------------------
config_a callback ', "--fail-start", "the server refused our credentials"' ""
run ip netns exec "$NS_C" "$TG" up "$TG_TMP/a.json" --detach
check_rc "a runtime that refuses to start: up fails" 1
check_match "... with the runtime's own error" 'the server refused our credentials' "$TG_ERR"
config_a callback ', "--fail-start", "the server refused the secret '"$SECRET"'"' ""
run ip netns exec "$NS_C" "$TG" up "$TG_TMP/a.json" --detach
check_rc "a runtime that quotes the secret in its start error: up fails" 1
check_match "... with the secret replaced in the error" 'the server refused the secret \[secret\]' "$TG_ERR"
run ip netns exec "$NS_C" "$TG" status tga --json
check_match "... and in the last disconnect error that status keeps" '"lastDisconnectError".*the server refused the secret \[secret\]' "$TG_OUT"
config_a callback "" ""
up_a "[clean run] tga"
down "$NS_C" tga
run ip netns exec "$NS_C" "$TG" status tga --json
check_eq "[clean run] after a clean stop there is no last disconnect error" null "$(jq -r .lastDisconnectError <<<"$TG_OUT")"
config_a callback "" ', "symbols": {"start": "no_such_start"}'
run ip netns exec "$NS_C" "$TG" up "$TG_TMP/a.json" --detach
check_rc "a missing symbol: up fails" 1
check_match "... naming the symbol" "has no symbol 'no_such_start'" "$TG_ERR"
config_a callback "" ', "symbols": {"packetInBatch": "no_such_batch"}'
run ip netns exec "$NS_C" "$TG" up "$TG_TMP/a.json" --detach
check_rc "a configured packetInBatch the library lacks: up fails" 1
check_match "... naming the symbol and its key" "has no symbol 'no_such_batch' \\(runtime\\.symbols\\.packetInBatch\\)" "$TG_ERR"
chmod 644 "$secret"
config_a callback "" ""
run ip netns exec "$NS_C" "$TG" up "$TG_TMP/a.json" --detach
check_rc "a secret file readable by others: up fails" 1
check_match "... saying how to fix it" 'chmod 600' "$TG_ERR"
chmod 600 "$secret"
cp -p "$secret" "$TG_TMP/secret-foreign"
chown 65534 "$TG_TMP/secret-foreign"
config_a callback "" "" "" "\"secretFile\": \"$TG_TMP/secret-foreign\""
run ip netns exec "$NS_C" "$TG" up "$TG_TMP/a.json" --detach
check_rc "a secret file owned by another user (uid 65534): up fails" 1
check_match "... saying whose it is" "secret-foreign: owned by another user \\(mode 0600, owner uid 65534\\); refusing it" "$TG_ERR"
config_a callback "" ""
sed -i "s|$LIB|/nonexistent/libnothing.so|" "$TG_TMP/a.json"
run ip netns exec "$NS_C" "$TG" up "$TG_TMP/a.json" --detach
check_rc "a missing library: up fails" 1
check_match "... naming it" 'cannot load runtime library /nonexistent/libnothing.so' "$TG_ERR"
tg_snapshot "$NS_C" "$TG_TMP/c-after"
check_same_snapshot "after the failed starts C's kernel state is untouched" "$TG_TMP/c-before" "$TG_TMP/c-after"

# --- the secret is nowhere -------------------------------------------------------------------------------
# $outputs holds every output above, plan's, status (text and JSON), both --watch logs, and every tunnel's
# log and state file as they were just before its down (or after its failure). It must have caught them.
check_match "the outputs grepped hold the tunnels' logs" '^tunnelgate: tgb: connected' "$(cat "$outputs")"
check_match "... and their state files" '"runtimeStatus":' "$(cat "$outputs")"
check_match "... and where a runtime quoted the secret, its scrubbed form" 'quoted \[secret\] back' "$(cat "$outputs")"
check "the secret appears in no output, log or state file" bash -c "! grep -qFf '$pattern' '$outputs'"

tg_summary
