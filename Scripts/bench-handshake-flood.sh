#!/usr/bin/env bash
# Does data keep flowing through the built-in WireGuard while it is flooded with handshake initiations
# whose MAC1 is valid, from many source addresses? Measured in one run on one topology:
#
#   ns A: tunnelgate (receiver, 10.79.0.1) ═══ veth ═══ ns B: tunnelgate (sender, 10.79.0.2)
#                                                        + FLOOD sources 10.77.8.1-N on B's veth
#
# Each round: iperf3 TCP B → A through the tunnel for SECONDS, then the same with Scripts/handshake_flood.py
# sending valid-MAC1 initiations to A's port from N source addresses as fast as one Python process can,
# for the whole run. Printed: the medians of both, their ratio per round (median and quartiles), the
# flood's offered rate, and A's counters: how many initiations cost a Diffie-Hellman (dropsHandshake: the
# ones admitted before A went under load), how many got a cookie reply instead, and dropsSourceRate.
# Both processes share the machine's cores with the flood generator, so the ratio is what the flood
# costs in all, not only A's handshake work.
#
# RATE is the flood's offered initiations per second (0: as fast as one Python process can, which
# takes one of the machine's cores itself; the default 20,000 is 60 times what puts A under load).
#
#   Scripts/bench-handshake-flood.sh [ROUNDS] [SECONDS] [SOURCES] [RATE]     (defaults 5, 3, 64, 20000)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=Scripts/bench-topology.sh
. Scripts/bench-topology.sh
[ "$(id -u)" -eq 0 ] || { echo "Error: Scripts/bench-handshake-flood.sh must run as root" >&2; exit 1; }
command -v swift >/dev/null || PATH=/opt/swift/usr/bin:$PATH
rounds=${1:-5} seconds=${2:-3} sources=${3:-64} rate=${4:-20000}
[ "$rounds" -ge 1 ] && [ "$rounds" -le 50 ] && [ "$seconds" -ge 1 ] && [ "$seconds" -le 30 ] && [ "$sources" -ge 1 ] && [ "$sources" -le 250 ] \
  || { echo "Error: ROUNDS 1-50, SECONDS 1-30, SOURCES 1-250" >&2; exit 64; }

bash Scripts/setup.sh
swift build -c release >/dev/null
TG=$(pwd)/.build/release/tunnelgate
a="tgflood-a-$$" b="tgflood-b-$$"
work=$(mktemp -d "$(pwd)/.build/bench-flood.XXXXXX")
cleanup() {
  for ns in "$a" "$b"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
  done
  for ns in "$a" "$b"; do
    for _ in $(seq 100); do [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break; sleep 0.05; done
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -f /var/run/wireguard/tgfla.sock /var/run/wireguard/tgflb.sock
  rm -rf "$work"
}
trap cleanup EXIT INT TERM
bench_veth_pair "$a" "$b"
flood_sources=()
for i in $(seq "$sources"); do
  ip -n "$b" addr add "10.77.8.$i/24" dev eth0
  flood_sources+=("10.77.8.$i")
done
ip -n "$a" route add 10.77.8.0/24 via 10.77.0.2

umask 077
wg genkey >"$work/a.key"; wg pubkey <"$work/a.key" >"$work/a.pub"
wg genkey >"$work/b.key"; wg pubkey <"$work/b.key" >"$work/b.pub"
cat >"$work/tgfla.conf" <<CONF
[Interface]
PrivateKey = $(cat "$work/a.key")
Address = 10.79.0.1/24
ListenPort = 51900
[Peer]
PublicKey = $(cat "$work/b.pub")
AllowedIPs = 10.79.0.2/32
CONF
cat >"$work/tgflb.conf" <<CONF
[Interface]
PrivateKey = $(cat "$work/b.key")
Address = 10.79.0.2/24
ListenPort = 51901
[Peer]
PublicKey = $(cat "$work/a.pub")
Endpoint = 10.77.0.1:51900
AllowedIPs = 10.79.0.1/32
CONF
ip netns exec "$a" "$TG" up "$work/tgfla.conf" --detach >/dev/null
ip netns exec "$b" "$TG" up "$work/tgflb.conf" --detach >/dev/null
ip netns exec "$b" ping -c 1 -W 3 10.79.0.1 >/dev/null || { echo "Error: the tunnel carries nothing" >&2; exit 1; }

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
tcp() { # bits/s received B → A, one run
  ip netns exec "$a" timeout 90 iperf3 -s -1 -B 10.79.0.1 -p 5201 >/dev/null 2>&1 &
  local server=$!
  for _ in $(seq 100); do ip netns exec "$a" ss -ltn | grep -q "10.79.0.1:5201" && break; sleep 0.02; done
  ip netns exec "$b" iperf3 -c 10.79.0.1 -p 5201 -t "$seconds" -J | jq '.end.sum_received.bits_per_second'
  wait "$server" 2>/dev/null || true
}
counter() { ip netns exec "$a" "$TG" status tgfla --json | jq ".runtime.$1 // 0"; }
for r in $(seq "$rounds"); do
  tcp >>"$work/quiet"
  ip netns exec "$b" timeout $((seconds + 30)) python3 Scripts/handshake_flood.py "$(cat "$work/a.pub")" 10.77.0.1 51900 \
    $((seconds + 1)) "${flood_sources[@]}" --rate "$rate" >>"$work/flood.json" &
  flood=$!
  tcp >>"$work/flooded"
  wait "$flood"
done
paste "$work/flooded" "$work/quiet" | awk '{print $1 / $2}' | sort -n >"$work/ratio"
echo
echo "tunnelgate ⇄ tunnelgate (built-in WireGuard), TCP B → A; A flooded with valid-MAC1 initiations from $sources addresses at ${rate}/s (0: unlimited)"
echo "medians of $rounds rounds of $seconds s; this tree $(git rev-parse --short=12 HEAD); kernel $(uname -r), $(nproc) cores"
printf 'TCP without flood   %8.0f Mbit/s\n' "$(median <"$work/quiet" | awk '{print $1/1e6}')"
printf 'TCP under flood     %8.0f Mbit/s\n' "$(median <"$work/flooded" | awk '{print $1/1e6}')"
awk '{a[NR]=$1} END {printf "under / without     %8.2f (quartiles %.2f–%.2f)\n", (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2, a[int((NR+3)/4)], a[int((3*NR+3)/4)]}' "$work/ratio"
printf 'flood offered       %8.0f initiations/s (median of the rounds)\n' \
  "$(jq -r '.sent / .seconds' "$work/flood.json" | median)"
printf 'A: %s cost a Diffie-Hellman (dropsHandshake), %s got a cookie reply, %s dropsSourceRate, %s dropsMAC; handshakes completed %s\n' \
  "$(counter dropsHandshake)" "$(counter cookieRepliesSent)" "$(counter dropsSourceRate)" "$(counter dropsMAC)" "$(counter handshakesCompleted)"
