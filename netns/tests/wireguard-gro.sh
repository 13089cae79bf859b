#!/usr/bin/env bash
# The built-in WireGuard's receive path (UDP_GRO, GRO to the TUN) and its send path, whole: 16 MB files
# compared by SHA-256 both ways, IPv4 and IPv6 inside, between Tunnelgate in C and, in L in turn,
# Debian's wireguard-go, current wireguard-go (TG_WIREGUARD_GO, or ../shared/tools beside the tree:
# a benchmark reference, not a dependency; without it that part is reported as skipped and counts
# nothing), and Tunnelgate itself.
#
# C's device runs with its crypto worker on every batch (TUNNELGATE_WIREGUARD_WORKERS=always).
# Asserted per peer: every file arrives with its hash; what C receives from a peer that sends UDP GSO
# runs arrives merged (mergedReceives) and goes to C's TUN as super-packets (superPacketsWritten); no
# TUN write fails; and the sending side's TCP saw no reordering (TcpExtTCPSACKReorder, TCPTSReorder,
# TCPRenoReorder unchanged in its namespace: the coalescing keeps each flow's order). UDP from L reaches
# C's TUN as GSO_UDP_L4 super-packets the TUN takes. Nothing stalls the data path: a wg(8) client
# trickling its request costs no ping, and a flood of valid-MAC1 initiations from 16 addresses is
# answered with cookies while a 16 MB transfer crosses whole.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"

TGW=tgw$((RANDOM % 100000))   # Tunnelgate's interface in C
WGL=wgl$((RANDOM % 100000))   # the peer's in L
tg_defer rm -f "/var/run/wireguard/$TGW.sock" "/var/run/wireguard/$WGL.sock"
tg_begin --needs wireguard-go,wg,python3

# Current wireguard-go, found as Scripts/bench-wireguard.sh finds it.
current=""
if [ -n "${TG_WIREGUARD_GO:-}" ]; then
  [ -x "$TG_WIREGUARD_GO" ] || tg_bail "TG_WIREGUARD_GO=$TG_WIREGUARD_GO is an executable file"
  current=$(readlink -f "$TG_WIREGUARD_GO")
else
  main_tree=$(dirname "$(git -C "$TG_ROOT" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || echo "$TG_ROOT/.git")")
  for dir in "$TG_ROOT/.." "$main_tree/.."; do
    if [ -x "$dir/shared/tools/wireguard-go-0.0.20250522" ]; then
      current=$(readlink -f "$dir/shared/tools/wireguard-go-0.0.20250522")
      break
    fi
  done
fi

umask 077
wg genkey >"$TG_TMP/c.key"; wg pubkey <"$TG_TMP/c.key" >"$TG_TMP/c.pub"
wg genkey >"$TG_TMP/l.key"; wg pubkey <"$TG_TMP/l.key" >"$TG_TMP/l.pub"
C_PUB=$(cat "$TG_TMP/c.pub") L_PUB=$(cat "$TG_TMP/l.pub")
head -c $((16 << 20)) /dev/urandom >"$TG_TMP/c.data"
head -c $((16 << 20)) /dev/urandom >"$TG_TMP/l.data"
C_SUM=$(sha256sum "$TG_TMP/c.data" | cut -d' ' -f1)
L_SUM=$(sha256sum "$TG_TMP/l.data" | cut -d' ' -f1)

cat >"$TG_TMP/$TGW.conf" <<CONF
[Interface]
PrivateKey = $(cat "$TG_TMP/c.key")
Address = 10.70.0.1/24, fd70::1/64
ListenPort = 51821

[Peer]
PublicKey = $L_PUB
Endpoint = $LAN4:51820
AllowedIPs = 10.70.0.0/24, fd70::/64
CONF
cat >"$TG_TMP/$WGL.conf" <<CONF
[Interface]
PrivateKey = $(cat "$TG_TMP/l.key")
Address = 10.70.0.2/24, fd70::2/64
ListenPort = 51820

[Peer]
PublicKey = $C_PUB
AllowedIPs = 10.70.0.1/32, fd70::1/128
CONF

c_status() { in_c "$TG" message "$TGW" status 2>/dev/null | jq -r "$1 // 0"; }
# reorders NS: TCP's count of reordering it detected in NS (SACK, timestamps, Reno dupacks).
reorders() {
  ip netns exec "$1" cat /proc/net/netstat | awk '
    $1 == "TcpExt:" && !names { for (i = 2; i <= NF; i++) name[i] = $i; names = 1; next }
    $1 == "TcpExt:" { for (i = 2; i <= NF; i++) if (name[i] ~ /^TCP(SACK|TS|Reno)Reorder$/) sum += $i; print sum + 0 }'
}

# transfer LABEL FROM-NS TO-NS TO-ADDR FILE SUM: FILE sent from FROM-NS to TO-ADDR in TO-NS, compared by hash.
transfer() {
  local label=$1 from=$2 to=$3 addr=$4 file=$5 sum=$6 port=$((5300 + RANDOM % 500))
  local before
  before=$(reorders "$from")
  ip netns exec "$to" timeout 60 python3 "$TG_ROOT/netns/tests/hash_transfer.py" receive "$addr" "$port" \
    >"$TG_TMP/received" 2>"$TG_TMP/receive.err" &
  local receiver=$!
  wait_for "the receiver listens on $addr port $port" 5 bash -c "ip netns exec $to ss -lnt | grep -q '$addr\\]\\?:$port'"
  ip netns exec "$from" timeout 60 python3 "$TG_ROOT/netns/tests/hash_transfer.py" send "$addr" "$port" "$file" \
    2>"$TG_TMP/send.err"
  local rc=$?
  wait "$receiver"
  check_eq "$label: sent" 0 "$rc"
  check_eq "$label: 16 MB arrived with their SHA-256" "$sum $((16 << 20))" "$(cat "$TG_TMP/received")"
  check_eq "$label: the sender's TCP saw no reordering" "$before" "$(reorders "$from")"
}

# both LABEL: the four transfers with the peer now in L.
both() {
  local label=$1 merged0 supers0
  merged0=$(c_status .mergedReceives) supers0=$(c_status .superPacketsWritten)
  transfer "$label, L→C, IPv4 inside" "$NS_L" "$NS_C" 10.70.0.1 "$TG_TMP/l.data" "$L_SUM"
  transfer "$label, L→C, IPv6 inside" "$NS_L" "$NS_C" fd70::1 "$TG_TMP/l.data" "$L_SUM"
  MERGED=$(( $(c_status .mergedReceives) - merged0 )) SUPERS=$(( $(c_status .superPacketsWritten) - supers0 ))
  transfer "$label, C→L, IPv4 inside" "$NS_C" "$NS_L" 10.70.0.2 "$TG_TMP/c.data" "$C_SUM"
  transfer "$label, C→L, IPv6 inside" "$NS_C" "$NS_L" fd70::2 "$TG_TMP/c.data" "$C_SUM"
}

# A wireguard-go peer in L (BINARY).
wggo_start() {
  ip netns exec "$NS_L" env LOG_LEVEL=error "$1" -f "$WGL" >>"$TG_TMP/wireguard-go.log" 2>&1 &
  L_PID=$!
  wait_for "wireguard-go's API socket in L" 10 test -S "/var/run/wireguard/$WGL.sock"
  in_l wg set "$WGL" private-key "$TG_TMP/l.key" listen-port 51820 peer "$C_PUB" allowed-ips 10.70.0.1/32,fd70::1/128
  in_l ip addr add 10.70.0.2/24 dev "$WGL"
  in_l ip addr add fd70::2/64 dev "$WGL" nodad
  in_l ip link set "$WGL" up
}
wggo_stop() {
  kill "$L_PID" 2>/dev/null
  wait "$L_PID" 2>/dev/null
  rm -f "/var/run/wireguard/$WGL.sock"
  wait_for "wireguard-go's interface is gone" 5 bash -c "! ip -n $NS_L link show $WGL >/dev/null 2>&1"
}

# C's device seals and opens every batch on two threads (its crypto worker; the default only helps a
# saturated device thread), so everything below crosses that path too.
tg_run in_c env TUNNELGATE_WIREGUARD_WORKERS=sometimes "$TG" up "$TG_TMP/$TGW.conf" --detach
check_rc_nonzero "TUNNELGATE_WIREGUARD_WORKERS=sometimes is refused"
check_match "... naming the variable and what it takes" "TUNNELGATE_WIREGUARD_WORKERS=sometimes: not off, auto or always" "$TG_ERR"
check_fails "... leaving no API socket" test -e "/var/run/wireguard/$TGW.sock"
tg_run in_c env TUNNELGATE_WIREGUARD_WORKERS=always "$TG" up "$TG_TMP/$TGW.conf" --detach
check_rc "tunnelgate up in C (crypto worker always)" 0
check_eq "... and its device has a crypto worker" true "$(c_status .cryptoWorker)"
check_eq "C's device writes its TUN through GRO" true "$(c_status .tunCoalescing)"
check_eq "... and its carrier sockets take merged receives (UDP_GRO)" true "$(c_status .udpReceiveOffload)"

# --- Debian's wireguard-go (no UDP GSO: C's batches are coalesced as they come) ---------------------------
wggo_start /usr/bin/wireguard-go
# C still holds the session with the previous peer: it finds the new one by handshaking again (REKEY_TIMEOUT).
wait_for "[Debian wireguard-go] ping crosses" 20 in_c ping -n -c 1 -W 1 10.70.0.2
both "Debian wireguard-go"
printf '# Debian wireguard-go → C: %s merged receives, %s super-packets to the TUN\n' "$MERGED" "$SUPERS"
wggo_stop

# --- Current wireguard-go (UDP GSO runs: merged by C's sockets) -------------------------------------------
if [ -n "$current" ]; then
  wggo_start "$current"
  # C still holds the session with the previous peer: it finds the new one by handshaking again (REKEY_TIMEOUT).
wait_for "[current wireguard-go] ping crosses" 20 in_c ping -n -c 1 -W 1 10.70.0.2
  both "current wireguard-go"
  check "... C received its GSO runs merged ($MERGED)" test "$MERGED" -gt 0
  check "... and wrote super-packets to its TUN ($SUPERS)" test "$SUPERS" -gt 0
  wggo_stop
else
  echo "# SKIP current wireguard-go: not found (TG_WIREGUARD_GO, ../shared/tools); nothing counted for it"
fi

# --- Tunnelgate in L --------------------------------------------------------------------------------------
tg_run in_l "$TG" up "$TG_TMP/$WGL.conf" --detach
check_rc "Tunnelgate in L" 0
# C still holds the session with the previous peer: it finds the new one by handshaking again (REKEY_TIMEOUT).
wait_for "[Tunnelgate ⇄ Tunnelgate] ping crosses" 20 in_c ping -n -c 1 -W 1 10.70.0.2
both "Tunnelgate ⇄ Tunnelgate"
check "... C received L's GSO runs merged ($MERGED)" test "$MERGED" -gt 0
check "... and wrote super-packets to its TUN ($SUPERS)" test "$SUPERS" -gt 0
l_supers=$(in_l "$TG" message "$WGL" status 2>/dev/null | jq -r '.superPacketsWritten // 0')
check "... as L did with C's ($l_supers)" test "$l_supers" -gt 0
# UDP: a run of one flow's datagrams goes to the TUN as one GSO_UDP_L4 packet, which the kernel cuts
# again for iperf3's socket.
supers0=$(c_status .superPacketsWritten)
ip netns exec "$NS_C" timeout 30 iperf3 -s -1 -B 10.70.0.1 -p 5201 >/dev/null 2>&1 &
server=$!
wait_for "iperf3 server in C" 5 bash -c "ip netns exec $NS_C ss -lnt | grep -q '10.70.0.1:5201'"
ip netns exec "$NS_L" timeout 20 iperf3 -c 10.70.0.1 -p 5201 -u -b 300M -l 1200 -t 2 -J >"$TG_TMP/udp.json" 2>&1
wait "$server"
received=$(jq -r '.end.sum.packets - .end.sum.lost_packets' "$TG_TMP/udp.json" 2>/dev/null)
check "UDP L→C: datagrams arrived (${received:-none})" test "${received:-0}" -gt 1000
check "... and went to C's TUN as UDP super-packets ($supers0 → $(c_status .superPacketsWritten))" \
  test "$(c_status .superPacketsWritten)" -gt "$supers0"
check_eq "... which C's TUN took (none refused)" 0 "$(c_status .refusedSuperPackets)"

# --- Nothing stalls the data path -------------------------------------------------------------------------
# A wg(8) client that trickles its request (a byte every 0.4 s) holds C's API thread, not its packets.
python3 - "/var/run/wireguard/$TGW.sock" >"$TG_TMP/trickle.out" 2>&1 <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
for byte in b"get=1\n":
    s.send(bytes([byte]))
    time.sleep(0.4)
s.send(b"\n")
s.settimeout(10)
answer = b""
while not answer.endswith(b"\n\n"):
    chunk = s.recv(65536)
    if not chunk:
        break
    answer += chunk
lines = [line for line in answer.decode().splitlines() if line]
print(lines[-1] if lines else "nothing")
PY
trickle=$!
pings=$(in_c ping -n -q -c 25 -i 0.1 -W 1 10.70.0.2 | awk '/packets transmitted/{print $4}')
wait "$trickle"
check_eq "while a wg(8) client trickles its request over 2.8 s, 25 pings through C all come back" 25 "${pings:-0}"
check_eq "... and the slow client gets its answer in the end" "errno=0" "$(cat "$TG_TMP/trickle.out")"

# A flood of initiations with valid MAC1 from 16 addresses on R: C answers with cookies (its handshake
# thread), and a 16 MB transfer through the tunnel meanwhile arrives whole.
r_if=$(in_r ip -o -4 addr show | awk -v a="$R_C0_4" '$4 ~ "^"a"/" {print $2}')
sources=()
for i in $(seq 100 115); do in_r ip addr add "10.231.0.$i/24" dev "$r_if"; sources+=("10.231.0.$i"); done
cookies0=$(c_status .cookieRepliesSent)
in_r timeout 30 python3 "$TG_ROOT/Scripts/handshake_flood.py" "$(cat "$TG_TMP/c.pub")" "$C_ETH0_4" 51821 8 \
  "${sources[@]}" --rate 20000 >"$TG_TMP/flood.json" 2>&1 &
flood=$!
wait_for "the flood has begun (C counts cookie replies)" 5 \
  bash -c "[ \"\$(ip netns exec $NS_C $TG message $TGW status | jq -r .cookieRepliesSent)\" -gt $cookies0 ]"
transfer "under the flood, L→C" "$NS_L" "$NS_C" 10.70.0.1 "$TG_TMP/l.data" "$L_SUM"
kill "$flood" 2>/dev/null; wait "$flood" 2>/dev/null
check "... C answered the flood with cookie replies ($cookies0 → $(c_status .cookieRepliesSent))" \
  test "$(c_status .cookieRepliesSent)" -gt "$cookies0"
tg_run in_l "$TG" down "$WGL"

check "C's crypto worker took half of its batches ($(c_status .cryptoHandOffs) hand-offs)" test "$(c_status .cryptoHandOffs)" -gt 0
check_eq "no TUN write in C failed" 0 "$(c_status .tunWriteErrors)"
check_eq "no super-packet was refused by C's TUN" 0 "$(c_status .dropsOffloadMalformed)"
tg_run in_c "$TG" down "$TGW"
check_rc "tunnelgate down in C" 0
tg_summary
