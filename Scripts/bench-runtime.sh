#!/usr/bin/env bash
# Measures, in one run on one topology, what a hosted runtime costs: iperf3 TCP throughput and UDP
# packets/s between two namespaces
#
#   veth       directly over the veth pair (the limit of this machine)
#   callback   through two tunnelgate instances hosting the example runtime, callback packet path
#   fd         the same, with the runtime reading and writing the TUN itself (fd packet path)
#
# and where the CPU time goes (per thread of each tunnelgate process) during the callback TCP run.
# Each figure is the median of REPEATS runs; the ratios compare medians measured in this same run.
#
#   Scripts/bench-runtime.sh [REPEATS] [SECONDS]     (defaults 3 and 3)
#
#   ns A: 10.77.0.1 ═══ veth ═══ ns B: 10.77.0.2        tunnel: A 10.78.0.1 ═ example runtime ═ B 10.78.0.2
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ "$(id -u)" -eq 0 ] || { echo "Error: Scripts/bench-runtime.sh must run as root" >&2; exit 1; }
command -v swift >/dev/null || PATH=/opt/swift/usr/bin:$PATH
repeats=${1:-3}
seconds=${2:-3}

bash Scripts/setup.sh
swift build -c release >/dev/null
TG=$(pwd)/.build/release/tunnelgate
LIB=$(pwd)/.build/release/libTunnelgateExampleRuntime.so

a="tgbench-a-$$" b="tgbench-b-$$"
work=$(mktemp -d /tmp/tunnelgate-bench-runtime.XXXXXX)
cleanup() {
  for ns in "$a" "$b"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
  done
  ip netns del "$a" 2>/dev/null || true
  ip netns del "$b" 2>/dev/null || true
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

printf 'bench %s\n' "$$" >"$work/secret"
chmod 600 "$work/secret"
config() { # NAME ADDRESS BIND PEER PATH
  cat >"$work/$1.json" <<CFG
{"name": "$1", "tunnelRemoteAddress": "${4%:*}", "mtu": 1400,
 "ipv4Settings": {"addresses": ["$2"], "subnetMasks": ["255.255.255.0"], "includedRoutes": ["10.78.0.0/24"]},
 "runtime": {"kind": "callback", "library": "$LIB", "arguments": ["--bind", "$3", "--peer", "$4"],
             "secretFile": "$work/secret", "packetPath": "$5"}}
CFG
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
# tcp DEST: bits/s received, one run
tcp() {
  ip netns exec "$b" timeout 90 iperf3 -s -1 -B "$1" -p 5201 >/dev/null 2>&1 &
  local server=$!
  for _ in $(seq 100); do ip netns exec "$b" ss -ltn | grep -q "$1:5201" && break; sleep 0.02; done
  ip netns exec "$a" iperf3 -c "$1" -p 5201 -t "$seconds" -J | jq '.end.sum_received.bits_per_second'
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
# thread_cpu PID: "name ticks" per thread
thread_cpu() {
  for t in /proc/"$1"/task/*; do
    printf '%s %s\n' "$(cat "$t/comm")" "$(awk '{print $14 + $15}' "$t/stat")"
  done
}

declare -A tcp_result udp_result
run_mode() { # MODE DEST
  local t=() u=() i
  for i in $(seq "$repeats"); do t+=("$(tcp "$2")"); u+=("$(udp "$2")"); done
  tcp_result[$1]=$(printf '%s\n' "${t[@]}" | median)
  udp_result[$1]=$(printf '%s\n' "${u[@]}" | median)
}

run_mode veth 10.77.0.2
profile=""
for path in callback fd; do
  config tga 10.78.0.1 10.77.0.1:5400 10.77.0.2:5400 "$path"
  config tgb 10.78.0.2 10.77.0.2:5400 10.77.0.1:5400 "$path"
  ip netns exec "$a" "$TG" up "$work/tga.json" --detach >/dev/null
  ip netns exec "$b" "$TG" up "$work/tgb.json" --detach >/dev/null
  if [ "$path" = callback ]; then
    pa=$(ip netns pids "$a" | head -n 1)
    thread_cpu "$pa" >"$work/cpu-before"
    tcp 10.78.0.2 >/dev/null
    thread_cpu "$pa" >"$work/cpu-after"
    profile=$(join <(sort "$work/cpu-before") <(sort "$work/cpu-after") | awk -v s="$seconds" -v hz="$(getconf CLK_TCK)" \
      '{ d = ($3 - $2) / hz; printf "  %-16s %5.2f s CPU in %s s (%3.0f%% of a core)\n", $1, d, s, 100 * d / s }')
  fi
  run_mode "$path" 10.78.0.2
  ip netns exec "$a" "$TG" down tga >/dev/null
  ip netns exec "$b" "$TG" down tgb >/dev/null
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
echo
echo "medians of $repeats runs of $seconds s; kernel $(uname -r), $(nproc) cores; example runtime, MTU 1400"
printf '%-10s %14s %14s %12s %12s\n' path "TCP Mbit/s" "UDP pkt/s" "TCP/veth" "UDP/veth"
for m in veth callback fd; do
  printf '%-10s %14.0f %14.0f %12s %12s\n' "$m" "$(awk -v x="${tcp_result[$m]}" 'BEGIN{print x/1e6}')" "${udp_result[$m]}" \
    "$(ratio "${tcp_result[$m]}" "${tcp_result[veth]}")" "$(ratio "${udp_result[$m]}" "${udp_result[veth]}")"
done
echo
echo "callback/fd: TCP $(ratio "${tcp_result[callback]}" "${tcp_result[fd]}"), UDP $(ratio "${udp_result[callback]}" "${udp_result[fd]}")   (target: >= 0.85)"
echo
echo "where the CPU went in the sending tunnelgate during one callback TCP run (threads by name):"
echo "$profile"
