#!/usr/bin/env bash
# Measures, in one run on one topology, what a hosted runtime costs: iperf3 TCP throughput and UDP
# packets/s between two namespaces
#
#   veth        directly over the veth pair (the limit of this machine)
#   callback    through two tunnelgate instances hosting the example runtime, callback packet path: each
#               batch read from the TUN goes in with one packet_in_batch call (the example seals and sends
#               it on the caller's thread while its sender thread is idle)
#   queue       the same with the example's --direct-send 0: every batch goes through its queue to its
#               sender thread
#   one-by-one  the callback path with "packetInBatch": null: packet_in per packet, into the queue, as a
#               runtime without the batch call (MEHS's names) is fed, and as every runtime was before it
#   fd          the runtime reads and writes the TUN itself (fd packet path)
#
# All tunnels are up at once (each pair its own subnet and UDP port) and the modes take turns within each
# round, in a rotating order, so that a change in the machine's load hits them alike; each figure is the
# median over the rounds, and each mode's ratio to fd is also taken within each round (median and
# quartiles over the rounds). On a shared machine single runs move by 20-30 %: use 15 rounds or more. Then one more TCP run per tunnel mode shows where the CPU went: per thread of
# both tunnelgate processes, per data packet, and how much of the run the sending loop spent inside the
# runtime's packet_in calls (handOffSeconds, wall clock: in the callback mode that is where the example
# seals and sends).
#
#   Scripts/bench-runtime.sh [ROUNDS] [SECONDS]     (defaults 15 and 3)
#
#   ns A: 10.77.0.1 ═══ veth ═══ ns B: 10.77.0.2
#   tunnel of mode k (1 callback, 2 queue, 3 one-by-one, 4 fd): A 10.78.k.1 ═ UDP port 540k ═ B 10.78.k.2
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=Scripts/bench-topology.sh
. Scripts/bench-topology.sh
[ "$(id -u)" -eq 0 ] || { echo "Error: Scripts/bench-runtime.sh must run as root" >&2; exit 1; }
command -v swift >/dev/null || PATH=/opt/swift/usr/bin:$PATH
rounds=${1:-15}
seconds=${2:-3}

bash Scripts/setup.sh
swift build -c release >/dev/null
TG=$(pwd)/.build/release/tunnelgate
LIB=$(pwd)/.build/release/libTunnelgateExampleRuntime.so

a="tgbench-a-$$" b="tgbench-b-$$"
# Under .build, not /tmp: a sweep of /tmp/tunnelgate-* by a concurrent test run must not take it mid-run.
work=$(mktemp -d "$(pwd)/.build/bench-runtime.XXXXXX")
cleanup() {
  for ns in "$a" "$b"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
  done
  ip netns del "$a" 2>/dev/null || true
  ip netns del "$b" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

bench_veth_pair "$a" "$b"

printf 'bench %s\n' "$$" >"$work/secret"
chmod 600 "$work/secret"

modes=(callback queue one-by-one fd)
declare -A index=([callback]=1 [queue]=2 [one-by-one]=3 [fd]=4)
config() { # MODE SIDE(a|b)
  local k=${index[$1]} path=callback args="" symbols="" self peer
  [ "$2" = a ] && self=10.77.0.1 peer=10.77.0.2 || self=10.77.0.2 peer=10.77.0.1
  case $1 in
  queue) args=', "--direct-send", "0"' ;;
  one-by-one) symbols=', "symbols": {"packetInBatch": null}' ;;
  fd) path=fd ;;
  esac
  cat >"$work/$1-$2.json" <<CFG
{"name": "bench$k", "tunnelRemoteAddress": "$peer", "mtu": 1400,
 "ipv4Settings": {"addresses": ["10.78.$k.$([ "$2" = a ] && echo 1 || echo 2)"], "subnetMasks": ["255.255.255.0"],
                  "includedRoutes": ["10.78.$k.0/24"]},
 "runtime": {"kind": "callback", "library": "$LIB", "arguments": ["--bind", "$self:540$k", "--peer", "$peer:540$k"$args],
             "secretFile": "$work/secret", "packetPath": "$path"$symbols}}
CFG
}
for m in "${modes[@]}"; do
  config "$m" a
  config "$m" b
  ip netns exec "$a" "$TG" up "$work/$m-a.json" --detach >/dev/null
  ip netns exec "$b" "$TG" up "$work/$m-b.json" --detach >/dev/null
done
dest() { [ "$1" = veth ] && echo 10.77.0.2 || echo "10.78.${index[$1]}.2"; }

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

all=(veth "${modes[@]}")
for r in $(seq "$rounds"); do
  for i in $(seq 0 $((${#all[@]} - 1))); do
    m=${all[$(((i + r) % ${#all[@]}))]}
    tcp "$(dest "$m")" >>"$work/tcp-$m"
    udp "$(dest "$m")" >>"$work/udp-$m"
  done
done
declare -A tcp_result udp_result
for m in "${all[@]}"; do
  tcp_result[$m]=$(median <"$work/tcp-$m")
  udp_result[$m]=$(median <"$work/udp-$m")
done

# --- where the CPU goes: one TCP run per tunnel mode ------------------------------------------------------
# thread_cpu SIDE PID: "SIDE-name nanoseconds" per thread (schedstat: CPU time in ns)
thread_cpu() {
  local t name
  for t in /proc/"$2"/task/*; do
    name=$(cat "$t/comm")
    case $name in exe | tunnelgate) name=loop ;; esac
    printf '%s-%s %s\n' "$1" "$name" "$(cut -d' ' -f1 "$t/schedstat")"
  done
}
# counter NS NAME KEY: the runtime's live counter (app_message "stats")
counter() { ip netns exec "$1" "$TG" message "$2" stats | jq ".$3"; }
# handoff NS NAME: the host's published handOffSeconds, once its counters caught up with the runtime's
handoff() {
  local sent
  sent=$(counter "$1" "$2" packetsIn)
  for _ in $(seq 60); do
    ip netns exec "$1" "$TG" status "$2" --json | jq -e ".counters.packetsFromHost >= $sent" >/dev/null && break
    sleep 0.05
  done
  ip netns exec "$1" "$TG" status "$2" --json | jq '.counters.handOffSeconds // 0'
}
profile() { # MODE
  local k=${index[$1]} pa pb p0 p1 h0 h1 bits
  pa=$(ip netns exec "$a" "$TG" status "bench$k" --json | jq '.pid')
  pb=$(ip netns exec "$b" "$TG" status "bench$k" --json | jq '.pid')
  h0=$(handoff "$a" "bench$k")
  p0=$(counter "$a" "bench$k" packetsIn)
  { thread_cpu A "$pa"; thread_cpu B "$pb"; } | sort >"$work/cpu0"
  bits=$(tcp "$(dest "$1")")
  { thread_cpu A "$pa"; thread_cpu B "$pb"; } | sort >"$work/cpu1"
  p1=$(counter "$a" "bench$k" packetsIn)
  h1=$(handoff "$a" "bench$k")
  join "$work/cpu0" "$work/cpu1" | awk -v s="$seconds" -v n=$((p1 - p0)) -v h="$(awk -v x="$h0" -v y="$h1" 'BEGIN{print y-x}')" \
    -v mode="$1" -v mbit="$(awk -v x="$bits" 'BEGIN{printf "%.0f", x/1e6}')" '
    { d = ($3 - $2) / 1e9; cpu[$1] += d; total += d }
    END {
      printf "%s: %s Mbit/s, %d data packets A→B; CPU per data packet (µs) and share of a core, per thread:\n", mode, mbit, n
      for (t in cpu) if (cpu[t] > 0.005 * s) {
        line = sprintf("  %-18s %6.2f µs  %4.0f%%", t, 1e6 * cpu[t] / n, 100 * cpu[t] / s)
        if (t == "A-loop" && h > 0) line = line sprintf("   inside the runtime'\''s packet_in calls %3.0f%% of the run (wall clock)", 100 * h / s)
        print line | "sort"
      }
      close("sort")
      printf "  %-18s %6.2f µs\n", "all threads", 1e6 * total / n
    }'
}
profiles=$(for m in "${modes[@]}"; do profile "$m"; done)
for m in "${modes[@]}"; do
  ip netns exec "$a" "$TG" down "bench${index[$m]}" >/dev/null
  ip netns exec "$b" "$TG" down "bench${index[$m]}" >/dev/null
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
# paired TEST MODE: MODE/fd within each round (runs seconds apart, so the machine's load changes little
# between them): the median over the rounds and the quartiles
paired() {
  paste "$work/$1-$2" "$work/$1-fd" | awk '{print $1 / $2}' | sort -n |
    awk '{a[NR]=$1} END {printf "%.2f (%.2f–%.2f)", (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2, a[int((NR+3)/4)], a[int((3*NR+3)/4)]}'
}
echo
echo "medians of $rounds rounds of $seconds s; kernel $(uname -r), $(nproc) cores; example runtime, MTU 1400"
printf '%-12s %12s %12s %9s %9s   %-18s %-18s\n' path "TCP Mbit/s" "UDP pkt/s" "TCP/veth" "UDP/veth" "TCP/fd per round" "UDP/fd per round"
for m in "${all[@]}"; do
  printf '%-12s %12.0f %12.0f %9s %9s   %-18s %-18s\n' "$m" "$(awk -v x="${tcp_result[$m]}" 'BEGIN{print x/1e6}')" "${udp_result[$m]}" \
    "$(ratio "${tcp_result[$m]}" "${tcp_result[veth]}")" "$(ratio "${udp_result[$m]}" "${udp_result[veth]}")" \
    "$(paired tcp "$m")" "$(paired udp "$m")"
done
echo
echo "callback/fd: TCP $(ratio "${tcp_result[callback]}" "${tcp_result[fd]}"), UDP $(ratio "${udp_result[callback]}" "${udp_result[fd]}") (ratios of the medians);" \
  "per round: TCP $(paired tcp callback), UDP $(paired udp callback)   (target: >= 0.85)"
echo
echo "where the CPU went during one TCP run per mode (A sends the data, B sends the ACKs; loop = tunnelgate's thread):"
echo "$profiles"
