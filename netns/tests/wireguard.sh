#!/usr/bin/env bash
# The built-in WireGuard runtime against a real WireGuard peer: Tunnelgate in C (`tunnelgate up
# NAME.conf`, a wg-quick file) and wireguard-go in L configured with wg(8), across the router R.
#
#   C  tunnelgate "tgwNNN"  10.70.0.1  fd70::1   UDP 10.231.0.2 / fd00:231::2
#   │                                             (C's address towards R)
#   R  router
#   │
#   L  wireguard-go "wglNNN"  10.70.0.2  fd70::2  UDP 192.168.231.2:51820 / [fd00:a1::2]:51820
#
# Asserted: handshakes initiated from either side; ping both ways in IPv4 and IPv6 inside the tunnel,
# over an IPv4 and an IPv6 carrier; iperf3 TCP and UDP both ways (TCP leaving C as TUN super-packets
# Tunnelgate segments itself, TSO, and sends in UDP GSO runs); a preshared key; a wrong key gets
# no handshake and no crash; `wg show` and `wg set` work on Tunnelgate's interface; persistent
# keepalive seen by the peer; a rekey (timers shortened by the test-only variable); the peer roaming to
# a new address; the peer restarted mid-transfer; two Tunnelgate instances with each other; bad
# datagrams, a replayed transport packet and a handshake flood are dropped and counted (cookie replies
# engage); the private key appears in no output, log, status or command line; C is left exactly as
# it was.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"

TGW=tgw$((RANDOM % 100000))   # Tunnelgate's interface in C
WGL=wgl$((RANDOM % 100000))   # wireguard-go's in L
TGL=tgl$((RANDOM % 100000))   # Tunnelgate's in L (the Tunnelgate-to-Tunnelgate part)
WGI=wgi$((RANDOM % 100000))   # a second wireguard-go peer, in I (the several-peers part)
tg_defer rm -f "/var/run/wireguard/$TGW.sock" "/var/run/wireguard/$WGL.sock" "/var/run/wireguard/$TGL.sock" \
  "/var/run/wireguard/$WGI.sock"
tg_begin --needs wireguard-go,wg

umask 077
wg genkey >"$TG_TMP/c.key"; wg pubkey <"$TG_TMP/c.key" >"$TG_TMP/c.pub"
wg genkey >"$TG_TMP/l.key"; wg pubkey <"$TG_TMP/l.key" >"$TG_TMP/l.pub"
wg genkey >"$TG_TMP/x.key"; wg pubkey <"$TG_TMP/x.key" >"$TG_TMP/x.pub"
wg genkey >"$TG_TMP/i.key"; wg pubkey <"$TG_TMP/i.key" >"$TG_TMP/i.pub"
wg genpsk >"$TG_TMP/psk"
C_KEY=$(cat "$TG_TMP/c.key") C_PUB=$(cat "$TG_TMP/c.pub") L_PUB=$(cat "$TG_TMP/l.pub") X_PUB=$(cat "$TG_TMP/x.pub")
I_PUB=$(cat "$TG_TMP/i.pub")
PSK=$(cat "$TG_TMP/psk")
outputs=$TG_TMP/outputs   # everything tunnelgate printed, searched for the private key at the end
: >"$outputs"
# re KEY: KEY as an extended regular expression matching itself (base64 has + and /).
re() { printf '%s' "$1" | sed 's/[][\.*^$+?(){}|/]/\\&/g'; }
run() { tg_run "$@"; printf '%s\n%s\n' "$TG_OUT" "$TG_ERR" >>"$outputs"; }

# c_config [ENDPOINT] [EXTRA-PEER-LINES] [PEER-KEY]: C's wg-quick file.
c_config() {
  local endpoint=${1:-$LAN4:51820} extra=${2:-} peer=${3:-$L_PUB}
  cat >"$TG_TMP/$TGW.conf" <<CONF
# Tunnelgate's side: a wg-quick file as people have them.
[Interface]
PrivateKey = $C_KEY
Address = 10.70.0.1/24, fd70::1/64
ListenPort = 51821

[Peer]
PublicKey = $peer
Endpoint = $endpoint
AllowedIPs = 10.70.0.0/24, fd70::/64   # the peer's tunnel networks
$extra
CONF
  chmod 600 "$TG_TMP/$TGW.conf"
}
c_up() {
  run in_c env ${TG_ENV:-} "$TG" up "$TG_TMP/$TGW.conf" --detach
  check_rc "${1:-tunnelgate up $TGW.conf}" 0
}
c_down() {
  run in_c "$TG" down "$TGW"
  wait_for "tunnelgate in C exited" 10 bash -c "! pgrep -f '[t]unnelgate up $TG_TMP/$TGW.conf' >/dev/null"
}
# c_status FIELD: a counter or field from the runtime's status (tunnelgate message NAME status).
c_status() { in_c "$TG" message "$TGW" status 2>/dev/null | jq -r "$1"; }

# The wireguard-go peer in L. l_start starts it, l_conf PEER-KEY [EXTRA wg set ARGS] configures it.
l_start() {
  # ip netns exec and env exec in turn: $! is wireguard-go's own pid.
  ip netns exec "$NS_L" env LOG_LEVEL=error wireguard-go -f "$WGL" >>"$TG_TMP/wireguard-go.log" 2>&1 &
  L_PID=$!
  wait_for "wireguard-go's API socket in L" 10 test -S "/var/run/wireguard/$WGL.sock"
  in_l ip addr add 10.70.0.2/24 dev "$WGL"
  in_l ip addr add fd70::2/64 dev "$WGL" nodad
  in_l ip link set "$WGL" up
}
l_conf() {
  local peer=$1; shift
  in_l wg set "$WGL" private-key "$TG_TMP/l.key" listen-port 51820 \
    peer "$peer" allowed-ips 10.70.0.1/32,fd70::1/128 "$@"
}
l_stop() {
  kill "$L_PID" 2>/dev/null
  wait "$L_PID" 2>/dev/null
  rm -f "/var/run/wireguard/$WGL.sock"
  wait_for "wireguard-go's interface is gone" 5 bash -c "! ip -n $NS_L link show $WGL >/dev/null 2>&1"
}
# handshakes: how many handshakes wireguard-go in L has completed with C (latest-handshake != 0).
l_handshake_time() { in_l wg show "$WGL" latest-handshakes | awk '{print $2}'; }
l_rx() { in_l wg show "$WGL" transfer | awk '{print $2}'; }

iperf() { # LABEL SERVER-NS SERVER-ADDR CLIENT-NS [iperf3 client args]
  local label=$1 sns=$2 addr=$3 cns=$4; shift 4
  ip netns exec "$sns" timeout 40 iperf3 -s -1 -B "$addr" -p 5201 >/dev/null 2>&1 &
  local server=$!
  wait_for "iperf3 server on $addr" 5 bash -c "ip netns exec $sns ss -lntu | grep -q '$addr\\]\\?:5201'"
  ip netns exec "$cns" timeout 30 iperf3 -c "$addr" -p 5201 -t 2 -J "$@" >"$TG_TMP/iperf.json" 2>&1
  local rc=$?
  wait "$server" 2>/dev/null
  check_eq "$label: iperf3 completes" 0 "$rc"
  local bytes
  bytes=$(jq -r '.end.sum_received.bytes // .end.sum.bytes // 0' "$TG_TMP/iperf.json" 2>/dev/null)
  check "$label: more than 1 MB crossed ($bytes bytes)" test "${bytes:-0}" -ge 1000000
  if [[ " $* " == *" -u "* ]]; then
    local lost
    lost=$(jq -r '.end.sum.lost_percent // 100' "$TG_TMP/iperf.json" 2>/dev/null)
    check "$label: under 5% of the datagrams lost ($lost%)" awk "BEGIN{exit !($lost < 5)}"
  fi
}

tg_snapshot "$NS_C" "$TG_TMP/c-before"

# --- Handshake initiated by Tunnelgate; traffic both ways over an IPv4 carrier ----------------------------
l_start
l_conf "$C_PUB"
c_config
c_up
check "the private key is on no command line while the tunnel runs" bash -c "! grep -qF -f '$TG_TMP/c.key' /proc/[0-9]*/cmdline"
# The device runs in the tunnel's packet plane, on the engine's sockets.
tg_check_plane wireguard "$NS_C" "$TGW"
plane=$(in_c "$TG" status "$TGW" --json | jq -r '.planePID // empty')
engine=$(tg_tunnel_pids "$NS_C" | head -n 1)
check_match "the plane holds the carrier socket on UDP port 51821" "pid=${plane:-none}," "$(in_c ss -u -a -n -p 'sport = :51821')"
check_match "... which carries the tunnel's fwmark (set by the engine: the plane may not)" \
  "fwmark:0x$(printf %x $((7460 + $(in_c "$TG" status "$TGW" --json | jq -r '.slot // 0'))))" "$(in_c ss -u -a -n -e 'sport = :51821')"
check_match "the plane serves wg(8)'s socket, which the engine made" "pid=${plane:-none}," "$(in_c ss -x -l -p | grep "/var/run/wireguard/$TGW.sock")"
check_eq "... owned by root, owner-only" "0 600 socket" "$(stat -c '%u %a %F' "/var/run/wireguard/$TGW.sock" | sed 's/^\(.* .*\) .*socket$/\1 socket/')"
check_ping "[C initiates] ping 10.70.0.2 crosses the tunnel" "$NS_C" 10.70.0.2
check "wireguard-go saw a handshake from Tunnelgate" test "$(l_handshake_time)" -gt 0
check_ping "ping fd70::2 (IPv6 inside the tunnel)" "$NS_C" fd70::2
check_ping "and back: L pings 10.70.0.1" "$NS_L" 10.70.0.1
check_ping "and back: L pings fd70::1" "$NS_L" fd70::1
check_eq "C's TUN was made with offloads (virtio_net_hdr, TSO)" true "$(c_status .tunOffloads)"
# The default (auto) makes no crypto worker on a machine with fewer than 4 CPUs (docs/wireguard.md).
check_eq "C's device has a crypto worker only with 4 CPUs or more ($(nproc) here)" \
  "$([ "$(nproc)" -ge 4 ] && echo true || echo false)" "$(c_status .cryptoWorker)"
iperf "TCP C→L" "$NS_L" 10.70.0.2 "$NS_C"
supers4=$(c_status .superPacketsRead)
check "... C's kernel handed it to Tunnelgate as TCP super-packets, segmented there (${supers4:-0})" test "${supers4:-0}" -gt 0
trains=$(c_status .segmentedSends)
check "... whose segments left in runs sent as one with UDP_SEGMENT (${trains:-0})" test "${trains:-0}" -gt 0
iperf "TCP L→C" "$NS_L" 10.70.0.2 "$NS_C" -R
iperf "UDP C→L" "$NS_L" 10.70.0.2 "$NS_C" -u -b 100M
iperf "UDP L→C" "$NS_L" 10.70.0.2 "$NS_C" -u -b 100M -R
iperf "TCP over IPv6 inside" "$NS_L" fd70::2 "$NS_C"
supers6=$(c_status .superPacketsRead)
check "... as IPv6 TCP super-packets too ($supers4 → ${supers6:-0})" test "${supers6:-0}" -gt "${supers4:-0}"
check_eq "no TUN read was dropped for its offload header" 0 \
  "$(( $(c_status .dropsOffloadMalformed) + $(c_status .dropsOffloadUnsupported) ))"

# wg(8) on Tunnelgate's interface.
run in_c wg show "$TGW"
check_rc "wg show $TGW answers" 0
check_match "wg show lists the peer" "peer: $(re "$L_PUB")" "$TG_OUT"
check_match "... with a latest handshake" "latest handshake: .*(second|minute)" "$TG_OUT"
check_match "... and transfer counters" "transfer: .* received, .* sent" "$TG_OUT"
check_no_match "wg show does not print the private key" "$(re "$C_KEY")" "$TG_OUT"
run in_c wg set "$TGW" peer "$X_PUB" allowed-ips 10.71.0.0/24
check_rc "wg set adds a peer" 0
check_match "wg show lists it with its allowed IPs" "10.71.0.0/24" "$(in_c wg show "$TGW" allowed-ips)"
run in_c wg set "$TGW" listen-port 51821 peer "$X_PUB" allowed-ips 10.72.0.0/24 endpoint "[fe80::1%lo]:1"
check_rc_nonzero "wg set with a bad endpoint fails"
check_match "... and wg(8) names the reason Tunnelgate gave" "Invalid argument" "$TG_ERR"
check_no_match "... and changes nothing" "10.72.0.0/24" "$(in_c wg show "$TGW" allowed-ips)"
# The plane may neither bind nor mark: the engine's sockets stay as the engine made them.
run in_c wg set "$TGW" listen-port 51830
check_rc_nonzero "wg set listen-port is refused (the carrier sockets are the engine's)"
check_match "... C still listens on 51821 only" "51821" "$(in_c wg show "$TGW" listen-port)"
run in_c wg set "$TGW" fwmark 0x99
check_rc_nonzero "wg set fwmark is refused"
check_no_match "... and no socket carries it" "fwmark:0x99" "$(in_c ss -u -a -n -e)"
# One prefix removed: `wg set … allowed-ips -PREFIX` (wireguard-tools ≥ 1.0.20250521; Debian's wg(8)
# predates it) writes allowed_ip=-PREFIX, sent here as it would send it; host bits are masked, as
# wireguard-go does.
in_c wg set "$TGW" peer "$X_PUB" allowed-ips 10.71.0.0/24,10.73.0.0/24 >/dev/null 2>&1
uapi_reply=$(python3 - "/var/run/wireguard/$TGW.sock" "$(echo "$X_PUB" | base64 -d | od -An -tx1 -v | tr -d ' \n')" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
s.connect(sys.argv[1])
s.sendall(f"set=1\npublic_key={sys.argv[2]}\nallowed_ip=-10.71.0.9/24\n\n".encode())
print(s.recv(4096).decode().strip())
PY
)
check_eq "allowed_ip=-PREFIX is accepted" "errno=0" "$uapi_reply"
x_allowed=$(in_c wg show "$TGW" allowed-ips | grep -F -- "$X_PUB")
check_no_match "... and removes that prefix" "10\.71\.0\.0/24" "$x_allowed"
check_match "... leaving the other" "10\.73\.0\.0/24" "$x_allowed"
run in_c wg set "$TGW" peer "$X_PUB" remove
check_no_match "wg set removes it again" "$(re "$X_PUB")" "$(in_c wg show "$TGW" peers)"

# Bad input from the network: garbage, truncated and oversized datagrams, then a replayed transport
# packet, then a handshake flood. Tunnelgate must count them, answer the flood with cookie replies, and
# keep working.
port=$(c_status .listenPort)
check "C listens on its configured port ($port)" test "$port" = 51821
before=$(c_status .dropsMalformedDatagram)
in_r python3 "$TG_ROOT/netns/tests/wireguard_garbage.py" garbage "$C_ETH0_4" "$port" >"$TG_TMP/garbage.out" 2>&1
after=$(c_status .dropsMalformedDatagram)
check "300 garbage, truncated and oversized datagrams were dropped and counted ($before → $after)" \
  test "$after" -ge $((before + 300))
check_ping "the tunnel still carries traffic after the garbage" "$NS_C" 10.70.0.2

before=$(c_status .dropsReplay)
in_r python3 "$TG_ROOT/netns/tests/wireguard_garbage.py" replay "$C_ETH0_4" "$port" c0 >"$TG_TMP/replay.out" 2>&1 &
replayer=$!
wait_for "the replayer is capturing" 5 test -s "$TG_TMP/replay.out"
in_l ping -c 2 -i 0.2 -W 1 10.70.0.1 >/dev/null 2>&1
wait "$replayer"
after=$(c_status .dropsReplay)
check "a captured transport packet sent again is dropped by the replay window ($before → $after)" test "$after" -gt "$before"
check_eq "... and does not move the peer's endpoint" "$LAN4:51820" "$(c_status '.peers[0].endpoint')"

c_pub_hex=$(base64 -d <"$TG_TMP/c.pub" | od -An -tx1 | tr -d ' \n')
in_r python3 "$TG_ROOT/netns/tests/wireguard_garbage.py" flood "$C_ETH0_4" "$port" "$c_pub_hex" >"$TG_TMP/flood.out" 2>&1
cookies=$(awk '/cookie replies/{print $1}' "$TG_TMP/flood.out")
check "a flood of 2,000 initiations with valid MAC1 got cookie replies (${cookies:-0})" test "${cookies:-0}" -gt 0
check "... counted by Tunnelgate" test "$(c_status .cookieRepliesSent)" -gt 0
check "Tunnelgate is still running after the flood" pgrep -f "[t]unnelgate up $TG_TMP/$TGW.conf"
check_ping "and still carries traffic" "$NS_C" 10.70.0.2
c_down
l_stop

# --- Handshake initiated by wireguard-go, with a preshared key, over an IPv6 carrier ---------------------
l_start
l_conf "$C_PUB" preshared-key "$TG_TMP/psk" endpoint "[$C_ETH0_6]:51821"
c_config "[$LAN6]:51820" "PresharedKey = $PSK"
c_up "tunnelgate up with a preshared key and an IPv6 carrier"
check_ping "[L initiates, PSK, IPv6 carrier] L pings 10.70.0.1" "$NS_L" 10.70.0.1
check_ping "C pings fd70::2" "$NS_C" fd70::2
check_eq "C's peer endpoint is the IPv6 carrier" "[$LAN6]:51820" "$(c_status '.peers[0].endpoint')"
iperf "TCP over an IPv6 carrier" "$NS_L" 10.70.0.2 "$NS_C"
c_down
l_stop

# --- A wrong key: no handshake, no crash ----------------------------------------------------------------
l_start
l_conf "$X_PUB"                      # L expects another peer
c_config
c_up "tunnelgate up towards a peer that does not know its key"
in_c ping -c 3 -i 0.3 -W 1 10.70.0.2 >/dev/null 2>&1
check_eq "wireguard-go completed no handshake" 0 "$(l_handshake_time)"
check_fails "no ping crosses" in_c ping -c 1 -W 1 10.70.0.2
check "Tunnelgate still runs" pgrep -f "[t]unnelgate up $TG_TMP/$TGW.conf"
c_down
l_stop

# --- Persistent keepalive and rekey (timers scaled 0.05: rekey after 6 s) ----------------------
l_start
l_conf "$C_PUB"
c_config "$LAN4:51820" "PersistentKeepalive = 1"
TG_ENV="TUNNELGATE_WIREGUARD_TEST_TIME_SCALE=0.05" c_up "tunnelgate up with shortened timers (test-only variable)"
wait_for "wireguard-go gets a handshake with no traffic (persistent keepalive starts it)" 10 \
  bash -c "[ \"\$(ip netns exec $NS_L wg show $WGL latest-handshakes | awk '{print \$2}')\" -gt 0 ]"
rx1=$(l_rx)
wait_for "persistent keepalives reach wireguard-go while the tunnel is idle" 10 \
  bash -c "[ \"\$(ip netns exec $NS_L wg show $WGL transfer | awk '{print \$2}')\" -gt $rx1 ]"
check_match "Tunnelgate's log says the timers are scaled" "scaled by 0.05" "$(cat /run/tunnelgate/net-*/"$TGW".log 2>/dev/null)"
first=$(c_status .handshakesCompleted)
in_c ping -c 40 -i 0.25 -W 1 10.70.0.2 >"$TG_TMP/rekey-ping.out" 2>&1 &
pinger=$!
wait_for "a rekey: a new handshake while traffic flows" 20 \
  bash -c "[ \"\$(ip netns exec $NS_C $TG message $TGW status | jq .handshakesCompleted)\" -gt $first ]"
wait "$pinger"
check_match "... and no ping was lost across it" " 0% packet loss" "$(cat "$TG_TMP/rekey-ping.out")"

c_down
l_stop

# --- The peer roaming, then restarted mid-transfer -----------------------------------------------------
l_start
l_conf "$C_PUB"
c_config
c_up
check_ping "before roaming, traffic crosses" "$NS_C" 10.70.0.2
# Roaming: R starts rewriting L's datagrams to come from 10.231.0.1:40000 (a NAT rebinding, the most
# common roam); C follows the new source and answers there. (wireguard-go pins its source address, so
# the peer is moved by the path, not by renumbering it.)
ip netns exec "$NS_R" nft -f - <<NFT
table ip tgroam {
  chain post {
    type nat hook postrouting priority 100;
    ip saddr $LAN4 udp sport 51820 snat to $R_C0_4:40000
  }
}
NFT
check_ping "behind the new NAT binding, L pings C through the tunnel" "$NS_L" 10.70.0.1
check_eq "C's endpoint for L followed it" "$R_C0_4:40000" "$(c_status '.peers[0].endpoint')"
check_ping "and C reaches L there" "$NS_C" 10.70.0.2
ip netns exec "$NS_R" nft delete table ip tgroam
check_ping "the binding gone, L pings C from its own address again" "$NS_L" 10.70.0.1
check_eq "and C's endpoint for L follows it back" "$LAN4:51820" "$(c_status '.peers[0].endpoint')"
check_ping "before the restart, traffic crosses" "$NS_C" 10.70.0.2
in_c ping -c 150 -i 0.2 -W 1 10.70.0.2 >"$TG_TMP/restart-ping.out" 2>&1 &
pinger=$!
l_stop
l_start
l_conf "$C_PUB"
wait_for "after wireguard-go restarted, a new handshake" 25 bash -c "[ \"\$(ip netns exec $NS_L wg show $WGL latest-handshakes | awk '{print \$2}')\" -gt 0 ]"
check_ping "traffic resumes through the restarted peer" "$NS_C" 10.70.0.2
kill "$pinger" 2>/dev/null; wait "$pinger" 2>/dev/null
c_down
l_stop

# --- Several peers: cryptokey routing both ways ---------------------------------------------------------
# C has two peers: L owns 10.70.0.2/32, I (a second wireguard-go) owns 10.71.0.0/24. Packets go to the
# peer whose prefix holds their destination; a packet from L with a source that is I's is dropped.
ip netns exec "$NS_I" env LOG_LEVEL=error wireguard-go -f "$WGI" >>"$TG_TMP/wireguard-go.log" 2>&1 &
I_PID=$!
wait_for "the second wireguard-go's API socket in I" 10 test -S "/var/run/wireguard/$WGI.sock"
ip netns exec "$NS_I" wg set "$WGI" private-key "$TG_TMP/i.key" listen-port 51820 peer "$C_PUB" allowed-ips 10.70.0.1/32
ip -n "$NS_I" addr add 10.71.0.2/24 dev "$WGI"
ip -n "$NS_I" link set "$WGI" up
ip -n "$NS_I" route add 10.70.0.0/24 dev "$WGI"
l_start
l_conf "$C_PUB"
cat >"$TG_TMP/$TGW.conf" <<CONF
[Interface]
PrivateKey = $C_KEY
Address = 10.70.0.1/24
ListenPort = 51821
[Peer]
# L
PublicKey = $L_PUB
Endpoint = $LAN4:51820
AllowedIPs = 10.70.0.2/32
[Peer]
# I
PublicKey = $I_PUB
Endpoint = $CARRIER4:51820
AllowedIPs = 10.71.0.0/24
CONF
chmod 600 "$TG_TMP/$TGW.conf"
c_up "tunnelgate up with two peers"
check_ping "10.70.0.2 goes to L" "$NS_C" 10.70.0.2
check_ping "10.71.0.2 goes to I" "$NS_C" 10.71.0.2
check "both peers completed a handshake" test "$(c_status '[.peers[] | select(.latestHandshake > 0)] | length')" -eq 2
ip -n "$NS_L" addr add 10.71.0.5/32 dev "$WGL"
before=$(c_status .dropsSpoofedSource)
check_fails "L sending from 10.71.0.5 (I's prefix) gets no answer" in_l ping -c 2 -i 0.2 -W 1 -I 10.71.0.5 10.70.0.1
check "... because C dropped those packets as spoofed ($before → $(c_status .dropsSpoofedSource))" \
  test "$(c_status .dropsSpoofedSource)" -ge $((before + 2))
c_down
l_stop
kill "$I_PID" 2>/dev/null; wait "$I_PID" 2>/dev/null

# --- Tunnelgate with Tunnelgate ------------------------------------------------------------------------
c_config
cat >"$TG_TMP/$TGL.conf" <<CONF
[Interface]
PrivateKey = $(cat "$TG_TMP/l.key")
Address = 10.70.0.2/24, fd70::2/64
ListenPort = 51820
[Peer]
PublicKey = $C_PUB
AllowedIPs = 10.70.0.1/32, fd70::1/128
CONF
chmod 600 "$TG_TMP/$TGL.conf"
run in_l "$TG" up "$TG_TMP/$TGL.conf" --detach
check_rc "a second Tunnelgate in L (no endpoint: it answers)" 0
c_up
check_ping "[Tunnelgate ⇄ Tunnelgate] ping crosses" "$NS_C" 10.70.0.2
check_ping "and back" "$NS_L" fd70::1
iperf "TCP Tunnelgate ⇄ Tunnelgate" "$NS_L" 10.70.0.2 "$NS_C"
run in_l "$TG" down "$TGL"
c_down

# --- The engine killed: its plane goes with it, and down removes wg(8)'s socket --------------------------
c_config
c_up "tunnelgate up (to be killed)"
plane=$(in_c "$TG" status "$TGW" --json | jq -r '.planePID // empty')
engine=$(tg_tunnel_pids "$NS_C" | head -n 1)
kill -KILL "$engine"
wait_for "the engine killed: its packet plane ends too (parent-death signal)" 10 bash -c "[ -n '$plane' ] && [ ! -d /proc/$plane ]"
check "... leaving wg(8)'s socket behind" test -S "/var/run/wireguard/$TGW.sock"
run in_c "$TG" down "$TGW"
check_rc "tunnelgate down after the crash" 0
check "... removes the dead plane's wg(8) socket" test ! -e "/var/run/wireguard/$TGW.sock"
check_no_match "... and wg show no longer lists the interface" "^$TGW\$" "$(in_c wg show interfaces | tr ' ' '\n')"

# --- Errors before anything is touched ------------------------------------------------------------------
c_config
chmod 644 "$TG_TMP/$TGW.conf"
run in_c "$TG" up "$TG_TMP/$TGW.conf" --detach
check_rc_nonzero "a wg-quick file with a private key that others can read is refused" 
check_match "... saying why" "chmod 600|readable" "$TG_ERR"

# --- Secrets and the state left behind ------------------------------------------------------------------
check_no_match "the private key appears in no output" "$(re "$C_KEY")" "$(cat "$outputs")"
check_no_match "... nor in any log or state file" "$(re "$C_KEY")" "$(cat /run/tunnelgate/net-*/* 2>/dev/null)"
C_KEY_HEX=$(base64 -d <"$TG_TMP/c.key" | od -An -tx1 | tr -d " \n")
check_no_match "... in hex either" "$C_KEY_HEX" "$(cat "$outputs" /run/tunnelgate/net-*/* 2>/dev/null)"
tg_snapshot "$NS_C" "$TG_TMP/c-after"
check_same_snapshot "C is exactly as before" "$TG_TMP/c-before" "$TG_TMP/c-after"
check "no API socket is left behind" test ! -e "/var/run/wireguard/$TGW.sock"
tg_summary
