#!/usr/bin/env bash
# Measures the built-in WireGuard runtime against the reference userspace implementation, in one run
# on one topology: iperf3 TCP throughput (1 and 4 streams) and UDP packets/s between two namespaces
#
#   veth        directly over the veth pair (the limit of this machine)
#   wggo        wireguard-go in A  ⇄ wireguard-go in B   (the reference)
#   tunnelgate  tunnelgate in A    ⇄ wireguard-go in B   (the built-in runtime, release build)
#
# plus the CPU time each daemon used during the single-stream TCP run and the sending daemon's peak
# resident memory. Each figure is the median of REPEATS runs; ratios compare medians of this run.
#
#   Scripts/bench-wireguard.sh [REPEATS] [SECONDS]     (defaults 3 and 3)
#
#   ns A: 10.77.0.1 ═══ veth ═══ ns B: 10.77.0.2        tunnel: A 10.79.0.1 ═ WireGuard ═ B 10.79.0.2
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ "$(id -u)" -eq 0 ] || { echo "Error: Scripts/bench-wireguard.sh must run as root" >&2; exit 1; }
command -v swift >/dev/null || PATH=/opt/swift/usr/bin:$PATH
repeats=${1:-3}
seconds=${2:-3}

bash Scripts/setup.sh
swift build -c release --product tunnelgate >/dev/null
TG=$(pwd)/.build/release/tunnelgate

a="tgwbench-a-$$" b="tgwbench-b-$$"
ia="tgwba$$" ib="tgwbb$$"
ia=${ia:0:15} ib=${ib:0:15}
work=$(mktemp -d /tmp/tunnelgate-bench-wireguard.XXXXXX)
cleanup() {
  for ns in "$a" "$b"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
  done
  ip netns del "$a" 2>/dev/null || true
  ip netns del "$b" 2>/dev/null || true
  rm -f "/var/run/wireguard/$ia.sock" "/var/run/wireguard/$ib.sock"
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

ip netns add "$a"
ip netns add "$b"
ip -n "$a" link set lo up
ip -n "$b" link set lo up
ip -n "$a" link add eth0 type veth peer name eth0 netns "$b"
ip -n "$a" addr add 10.77.0.1/24 dev eth0
ip -n "$b" addr add 10.77.0.2/24 dev eth0
ip -n "$a" link set eth0 up
ip -n "$b" link set eth0 up

umask 077
wg genkey >"$work/a.key"; wg pubkey <"$work/a.key" >"$work/a.pub"
wg genkey >"$work/b.key"; wg pubkey <"$work/b.key" >"$work/b.pub"

# wggo NS IFACE KEY PEER-PUB ADDRESS PEER-ADDRESS PORT PEER-ENDPOINT: starts and configures wireguard-go.
wggo() {
  ip netns exec "$1" env LOG_LEVEL=error wireguard-go -f "$2" >/dev/null 2>&1 &
  for _ in $(seq 200); do [ -S "/var/run/wireguard/$2.sock" ] && break; sleep 0.02; done
  ip netns exec "$1" wg set "$2" private-key "$3" listen-port "$7" peer "$(cat "$4")" allowed-ips "$6/32" endpoint "$8"
  ip -n "$1" addr add "$5/24" dev "$2"
  ip -n "$1" link set "$2" mtu 1420 up
}
stop_daemons() { # NS...
  local ns pid
  for ns in "$@"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
    for _ in $(seq 200); do [ -z "$(ip netns pids "$ns")" ] && break; sleep 0.02; done
  done
  rm -f "/var/run/wireguard/$ia.sock" "/var/run/wireguard/$ib.sock"
}
tunnelgate_up() {
  cat >"$work/$ia.conf" <<CONF
[Interface]
PrivateKey = $(cat "$work/a.key")
Address = 10.79.0.1/24
ListenPort = 51820
[Peer]
PublicKey = $(cat "$work/b.pub")
Endpoint = 10.77.0.2:51820
AllowedIPs = 10.79.0.2/32
CONF
  ip netns exec "$a" "$TG" up "$work/$ia.conf" --detach >/dev/null
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
# tcp DEST STREAMS: bits/s received, one run
tcp() {
  ip netns exec "$b" timeout 90 iperf3 -s -1 -B "$1" -p 5201 >/dev/null 2>&1 &
  local server=$!
  for _ in $(seq 100); do ip netns exec "$b" ss -ltn | grep -q "$1:5201" && break; sleep 0.02; done
  ip netns exec "$a" iperf3 -c "$1" -p 5201 -t "$seconds" -P "$2" -J | jq '.end.sum_received.bits_per_second'
  wait "$server" 2>/dev/null || true
}
# udp DEST: packets/s received for 1,000-byte datagrams offered at 2 Gbit/s
udp() {
  ip netns exec "$b" timeout 90 iperf3 -s -1 -B "$1" -p 5202 >/dev/null 2>&1 &
  local server=$!
  for _ in $(seq 100); do ip netns exec "$b" ss -lun | grep -q "$1:5202" && break; sleep 0.02; done
  ip netns exec "$a" iperf3 -c "$1" -p 5202 -u -b 2G -l 1000 -t "$seconds" -J |
    jq '(.end.sum.packets - .end.sum.lost_packets) / .end.sum.seconds'
  wait "$server" 2>/dev/null || true
}
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# daemon NS: the pid of the one long-running process in NS
daemon() { ip netns pids "$1" | head -n 1; }

declare -A tcp1 tcp4 udpr cpu_a cpu_b rss
run_mode() { # MODE DEST
  local t1=() t4=() u=() i pa pb before_a before_b hz
  hz=$(getconf CLK_TCK)
  for i in $(seq "$repeats"); do
    if [ "$1" != veth ] && [ "$i" = 1 ]; then
      pa=$(daemon "$a") pb=$(daemon "$b")
      before_a=$(ticks "$pa") before_b=$(ticks "$pb")
      t1+=("$(tcp "$2" 1)")
      cpu_a[$1]=$(awk -v d="$(( $(ticks "$pa") - before_a ))" -v hz="$hz" -v s="$seconds" 'BEGIN{printf "%.0f", 100*d/hz/s}')
      cpu_b[$1]=$(awk -v d="$(( $(ticks "$pb") - before_b ))" -v hz="$hz" -v s="$seconds" 'BEGIN{printf "%.0f", 100*d/hz/s}')
    else
      t1+=("$(tcp "$2" 1)")
    fi
    t4+=("$(tcp "$2" 4)")
    u+=("$(udp "$2")")
  done
  tcp1[$1]=$(printf '%s\n' "${t1[@]}" | median)
  tcp4[$1]=$(printf '%s\n' "${t4[@]}" | median)
  udpr[$1]=$(printf '%s\n' "${u[@]}" | median)
  if [ "$1" != veth ]; then rss[$1]=$(awk '/VmHWM/{print $2}' "/proc/$(daemon "$a")/status"); fi
}

run_mode veth 10.77.0.2

wggo "$a" "$ia" "$work/a.key" "$work/b.pub" 10.79.0.1 10.79.0.2 51820 10.77.0.2:51820
wggo "$b" "$ib" "$work/b.key" "$work/a.pub" 10.79.0.2 10.79.0.1 51820 10.77.0.1:51820
ip netns exec "$a" ping -c 1 -W 2 10.79.0.2 >/dev/null
run_mode wggo 10.79.0.2
stop_daemons "$a" "$b"

wggo "$b" "$ib" "$work/b.key" "$work/a.pub" 10.79.0.2 10.79.0.1 51820 10.77.0.1:51820
tunnelgate_up
ip netns exec "$a" ping -c 1 -W 2 10.79.0.2 >/dev/null
run_mode tunnelgate 10.79.0.2
ip netns exec "$a" "$TG" down "$ia" >/dev/null
stop_daemons "$b"

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
mbit() { awk -v x="$1" 'BEGIN{printf "%.0f", x/1e6}'; }
echo
echo "medians of $repeats runs of $seconds s; kernel $(uname -r), $(nproc) cores; MTU 1420; wireguard-go $(dpkg-query -W -f '${Version}' wireguard-go)"
printf '%-11s %12s %12s %12s %10s %10s %10s\n' mode "TCP1 Mbit/s" "TCP4 Mbit/s" "UDP pkt/s" "CPU A %" "CPU B %" "RSS A MB"
for m in veth wggo tunnelgate; do
  printf '%-11s %12s %12s %12.0f %10s %10s %10s\n' "$m" "$(mbit "${tcp1[$m]}")" "$(mbit "${tcp4[$m]}")" "${udpr[$m]}" \
    "${cpu_a[$m]:--}" "${cpu_b[$m]:--}" "$(awk -v k="${rss[$m]:-0}" 'BEGIN{ if (k == 0) print "-"; else printf "%.1f", k/1024 }')"
done
echo
echo "tunnelgate/wireguard-go: TCP1 $(ratio "${tcp1[tunnelgate]}" "${tcp1[wggo]}"), TCP4 $(ratio "${tcp4[tunnelgate]}" "${tcp4[wggo]}"), UDP $(ratio "${udpr[tunnelgate]}" "${udpr[wggo]}")   (target TCP: >= 1.2)"
echo "tunnelgate/veth:        TCP1 $(ratio "${tcp1[tunnelgate]}" "${tcp1[veth]}"), TCP4 $(ratio "${tcp4[tunnelgate]}" "${tcp4[veth]}"), UDP $(ratio "${udpr[tunnelgate]}" "${udpr[veth]}")"
echo "tunnelgate peak resident memory: $(awk -v k="${rss[tunnelgate]}" 'BEGIN{printf "%.1f", k/1024}') MB   (target: < 20 MB)"
