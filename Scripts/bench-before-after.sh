#!/usr/bin/env bash
# Measures what a change costs on the packet path: the release build of this tree ("after") against the
# release build of another revision ("before"), interleaved in one run on one machine.
#
#   callback   the example runtime, callback packet path (one packet_in_batch per TUN read batch)
#   fd         the example runtime reading and writing the TUN itself
#   wireguard  the built-in WireGuard
#
# Each build gets a namespace pair of its own (A ═ veth ═ B, the same addresses in each pair), with one
# tunnel of every kind up in both namespaces, so that the two builds never share a state directory, a
# slot or a port. Every round measures iperf3 TCP throughput and UDP packets/s through each kind for both
# builds, in a rotating order, so that a change in the machine's load hits them alike; after/before is taken
# within each round (runs seconds apart) and its median and quartiles over the rounds are printed, with the
# medians of the figures themselves. On a shared machine single runs move by 20-30 %: use 9 rounds or more.
#
#   Scripts/bench-before-after.sh REVISION [ROUNDS] [SECONDS]     (defaults 9 and 3)
#
#   pair p (1 before, 2 after): ns A 10.77.0.1 ═══ veth ═══ ns B 10.77.0.2
#   tunnel kind k (1 callback, 2 fd, 3 wireguard): A 10.78.k.1 ═ UDP port 540k ═ B 10.78.k.2
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=Scripts/bench-topology.sh
. Scripts/bench-topology.sh
[ "$(id -u)" -eq 0 ] || { echo "Error: Scripts/bench-before-after.sh must run as root" >&2; exit 1; }
[ $# -ge 1 ] || { echo "usage: Scripts/bench-before-after.sh REVISION [ROUNDS] [SECONDS]" >&2; exit 64; }
command -v swift >/dev/null || PATH=/opt/swift/usr/bin:$PATH
revision=$1
rounds=${2:-9}
seconds=${3:-3}
git rev-parse --verify -q "$revision^{commit}" >/dev/null || { echo "Error: $revision is not a revision of this repository" >&2; exit 64; }

bash Scripts/setup.sh
# The other revision in a worktree of its own under .build (its own .build inside), kept between runs.
before_tree=$(pwd)/.build/before-$(git rev-parse --short=12 "$revision")
if [ ! -d "$before_tree" ]; then git worktree add -q --detach "$before_tree" "$revision"; fi
(cd "$before_tree" && swift build -c release >/dev/null)
swift build -c release >/dev/null
declare -A TG LIB
TG[1]=$before_tree/.build/release/tunnelgate LIB[1]=$before_tree/.build/release/libTunnelgateExampleRuntime.so
TG[2]=$(pwd)/.build/release/tunnelgate LIB[2]=$(pwd)/.build/release/libTunnelgateExampleRuntime.so
label=([1]=before [2]=after)

work=$(mktemp -d "$(pwd)/.build/bench-before-after.XXXXXX")
ns() { echo "tgba-$1$2-$$"; }  # ns PAIR SIDE(a|b)
cleanup() {
  local p s pid
  for p in 1 2; do for s in a b; do
    for pid in $(ip netns pids "$(ns $p $s)" 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
  done; done
  for p in 1 2; do for s in a b; do
    for _ in $(seq 100); do [ -z "$(ip netns pids "$(ns $p $s)" 2>/dev/null)" ] && break; sleep 0.05; done
    ip netns del "$(ns $p $s)" 2>/dev/null || true
    rm -f "/var/run/wireguard/tgba$p$s.sock"
  done; done
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

for p in 1 2; do
  A=$(ns $p a) B=$(ns $p b)
  bench_veth_pair "$A" "$B"
done

umask 077
printf 'bench %s\n' "$$" >"$work/secret"
wg genkey >"$work/a.key"; wg pubkey <"$work/a.key" >"$work/a.pub"
wg genkey >"$work/b.key"; wg pubkey <"$work/b.key" >"$work/b.pub"

kinds=(callback fd wireguard)
declare -A kindIndex=([callback]=1 [fd]=2 [wireguard]=3)
config() { # PAIR KIND SIDE(a|b): writes the configuration, prints its path
  local p=$1 k=${kindIndex[$2]} self peer host
  [ "$3" = a ] && self=10.77.0.1 peer=10.77.0.2 host=1 || self=10.77.0.2 peer=10.77.0.1 host=2
  if [ "$2" = wireguard ]; then
    local other; [ "$3" = a ] && other=b || other=a
    cat >"$work/tgba$p$3.conf" <<CONF
[Interface]
PrivateKey = $(cat "$work/$3.key")
Address = 10.78.$k.$host/24
ListenPort = 540$k
[Peer]
PublicKey = $(cat "$work/$other.pub")
Endpoint = $peer:540$k
AllowedIPs = 10.78.$k.0/24
CONF
    echo "$work/tgba$p$3.conf"
    return
  fi
  local path=callback
  [ "$2" = fd ] && path=fd
  cat >"$work/$p-$2-$3.json" <<CFG
{"name": "bench$k", "tunnelRemoteAddress": "$peer", "mtu": 1400,
 "ipv4Settings": {"addresses": ["10.78.$k.$host"], "subnetMasks": ["255.255.255.0"], "includedRoutes": ["10.78.$k.0/24"]},
 "runtime": {"kind": "callback", "library": "${LIB[$p]}", "arguments": ["--bind", "$self:540$k", "--peer", "$peer:540$k"],
             "secretFile": "$work/secret", "packetPath": "$path"}}
CFG
  echo "$work/$p-$2-$3.json"
}
for p in 1 2; do
  for kind in "${kinds[@]}"; do
    for s in a b; do ip netns exec "$(ns $p $s)" "${TG[$p]}" up "$(config $p "$kind" $s)" --detach >/dev/null; done
  done
  for kind in "${kinds[@]}"; do
    ip netns exec "$(ns $p a)" ping -c 1 -W 3 "10.78.${kindIndex[$kind]}.2" >/dev/null ||
      { echo "Error: the $kind tunnel of the ${label[$p]} build carries nothing" >&2; exit 1; }
  done
done

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
# tcp PAIR DEST: bits/s received, one run
tcp() {
  ip netns exec "$(ns "$1" b)" timeout 90 iperf3 -s -1 -B "$2" -p 5201 >/dev/null 2>&1 &
  local server=$!
  for _ in $(seq 100); do ip netns exec "$(ns "$1" b)" ss -ltn | grep -q "$2:5201" && break; sleep 0.02; done
  ip netns exec "$(ns "$1" a)" iperf3 -c "$2" -p 5201 -t "$seconds" -J | jq '.end.sum_received.bits_per_second'
  wait "$server" 2>/dev/null || true
}
# udp PAIR DEST: packets/s received for 1,000-byte datagrams offered at 2 Gbit/s
udp() {
  ip netns exec "$(ns "$1" b)" timeout 90 iperf3 -s -1 -B "$2" -p 5202 >/dev/null 2>&1 &
  local server=$!
  for _ in $(seq 100); do ip netns exec "$(ns "$1" b)" ss -lun | grep -q "$2:5202" && break; sleep 0.02; done
  ip netns exec "$(ns "$1" a)" iperf3 -c "$2" -p 5202 -u -b 2G -l 1000 -t "$seconds" -J |
    jq '(.end.sum.packets - .end.sum.lost_packets) / .end.sum.seconds'
  wait "$server" 2>/dev/null || true
}

# Every (kind, build) of a round, in an order that rotates by one each round.
runs=()
for kind in "${kinds[@]}"; do for p in 1 2; do runs+=("$kind:$p"); done; done
for r in $(seq "$rounds"); do
  for i in $(seq 0 $((${#runs[@]} - 1))); do
    run=${runs[$(((i + r) % ${#runs[@]}))]}
    kind=${run%:*} p=${run#*:}
    dest=10.78.${kindIndex[$kind]}.2
    tcp "$p" "$dest" >>"$work/tcp-$kind-$p"
    udp "$p" "$dest" >>"$work/udp-$kind-$p"
  done
done
for p in 1 2; do
  for kind in "${kinds[@]}"; do
    for s in a b; do ip netns exec "$(ns $p $s)" "${TG[$p]}" down "$( [ "$kind" = wireguard ] && echo "tgba$p$s" || echo "bench${kindIndex[$kind]}")" >/dev/null; done
  done
done

# paired TEST KIND: after/before within each round: the median over the rounds and the quartiles
paired() {
  paste "$work/$1-$2-2" "$work/$1-$2-1" | awk '{print $1 / $2}' | sort -n |
    awk '{a[NR]=$1} END {printf "%.2f (%.2f–%.2f)", (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2, a[int((NR+3)/4)], a[int((3*NR+3)/4)]}'
}
pairedMedian() { paste "$work/$1-$2-2" "$work/$1-$2-1" | awk '{print $1 / $2}' | median; }
echo
echo "before: $(git rev-parse --short=12 "$revision") ($(git log -1 --format=%s "$revision" | cut -c1-60))"
echo "after:  this tree, $(git rev-parse --short=12 HEAD)$(git diff --quiet HEAD -- Sources Package.swift || echo ' + uncommitted changes')"
echo "medians of $rounds rounds of $seconds s; kernel $(uname -r), $(nproc) cores"
printf '%-10s %14s %14s %14s %14s   %-18s %-18s\n' kind "TCP Mbit/s bef" "TCP Mbit/s aft" "UDP pkt/s bef" "UDP pkt/s aft" "TCP after/before" "UDP after/before"
worst=""
for kind in "${kinds[@]}"; do
  printf '%-10s %14.0f %14.0f %14.0f %14.0f   %-18s %-18s\n' "$kind" \
    "$(median <"$work/tcp-$kind-1" | awk '{print $1/1e6}')" "$(median <"$work/tcp-$kind-2" | awk '{print $1/1e6}')" \
    "$(median <"$work/udp-$kind-1")" "$(median <"$work/udp-$kind-2")" "$(paired tcp "$kind")" "$(paired udp "$kind")"
  for t in tcp udp; do worst+="$(pairedMedian $t "$kind") $kind-$t"$'\n'; done
done
echo
echo "lowest after/before (median over the rounds): $(printf '%s' "$worst" | sort -n | head -n 1)   (target: >= 0.95)"
