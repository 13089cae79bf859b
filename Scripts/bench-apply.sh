#!/usr/bin/env bash
# Measures how fast Tunnelgate applies and removes many routes, against the two
# ways Linux tools do it, in one run on this machine, inside a private namespace:
#
#   tunnelgate   `tunnelgate up CONFIG --detach` with N included routes: TUN, link,
#                address, N routes into table T and the rule, one netlink batch,
#                read back and verified; then `tunnelgate down NAME` (removal, verified)
#   ip -batch    the same N routes from one `ip -batch` file (one request and ack per
#                route, no verification): the practical limit of iproute2
#   per-process  one `ip route add` process per route: what wg-quick does
#
# N = 100, 1,000, 10,000. Each measurement is repeated and the median printed; the
# machine is noisy, so compare ratios, not single times.
#
#   Scripts/bench-apply.sh [REPEATS]      (default 5; per-process runs at most 3 times)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ "$(id -u)" -eq 0 ] || { echo "Error: Scripts/bench-apply.sh must run as root" >&2; exit 1; }
command -v swift >/dev/null || PATH=/opt/swift/usr/bin:$PATH
repeats=${1:-5}

bash Scripts/setup.sh
swift build -c release >/dev/null
TG=$(pwd)/.build/release/tunnelgate

ns="tgbench-$$"
work=$(mktemp -d /tmp/tunnelgate-bench.XXXXXX)
cleanup() {
  ip netns exec "$ns" "$TG" down bench >/dev/null 2>&1 || true
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

ip netns add "$ns"
ip -n "$ns" link set lo up
ip -n "$ns" link add eth0 type veth peer name eth1
ip -n "$ns" addr add 10.255.0.2/24 dev eth0
ip -n "$ns" link set eth0 up
ip -n "$ns" link set eth1 up
ip -n "$ns" route add default via 10.255.0.1
ip -n "$ns" tuntap add dev tgref mode tun
ip -n "$ns" link set tgref up

now_ns() { date +%s%N; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2)}'; }
ms() { awk -v n="$1" 'BEGIN {printf "%.1f", n/1e6}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a/b}'; }

# N distinct /24s from 10.0.0.0/8 (up to 65,536).
prefixes() { awk -v n="$1" 'BEGIN {for (i = 0; i < n; i++) printf "10.%d.%d.0/24\n", int(i/256), i%256}'; }

results=()
for n in 100 1000 10000; do
  prefixes "$n" > "$work/p$n"
  { printf '{"name":"bench","tunnelRemoteAddress":"198.18.0.10","mtu":1400,'
    printf '"ipv4Settings":{"addresses":["100.64.0.2"],"subnetMasks":["255.255.255.0"],"includedRoutes":['
    sed 's/.*/"&"/' "$work/p$n" | paste -sd, -
    printf ']}}\n'; } > "$work/c$n.json"
  sed 's/^/route add /; s/$/ dev tgref table 7999/' "$work/p$n" > "$work/add$n.batch"
  sed 's/^/route del /; s/$/ dev tgref table 7999/' "$work/p$n" > "$work/del$n.batch"

  tg_up=() tg_down=() b_add=() b_del=() p_add=() p_del=()
  for r in $(seq "$repeats"); do
    t0=$(now_ns); ip netns exec "$ns" "$TG" up "$work/c$n.json" --detach >/dev/null; t1=$(now_ns)
    got=$(ip -n "$ns" route show table 7460 | wc -l)
    [ "$got" -ge "$n" ] || { echo "Error: tunnelgate applied $got of $n routes" >&2; exit 1; }
    t2=$(now_ns); ip netns exec "$ns" "$TG" down bench >/dev/null; t3=$(now_ns)
    tg_up+=($((t1 - t0))); tg_down+=($((t3 - t2)))

    t0=$(now_ns); ip -n "$ns" -batch "$work/add$n.batch"; t1=$(now_ns)
    [ "$(ip -n "$ns" route show table 7999 | wc -l)" -eq "$n" ] || { echo "Error: ip -batch applied the wrong count" >&2; exit 1; }
    t2=$(now_ns); ip -n "$ns" -batch "$work/del$n.batch"; t3=$(now_ns)
    b_add+=($((t1 - t0))); b_del+=($((t3 - t2)))

    if [ "$r" -le 3 ] && { [ "$n" -lt 10000 ] || [ "$r" -le 1 ]; }; then
      t0=$(now_ns); while read -r p; do ip -n "$ns" route add "$p" dev tgref table 7999; done < "$work/p$n"; t1=$(now_ns)
      t2=$(now_ns); while read -r p; do ip -n "$ns" route del "$p" dev tgref table 7999; done < "$work/p$n"; t3=$(now_ns)
      p_add+=($((t1 - t0))); p_del+=($((t3 - t2)))
    fi
  done
  mu=$(printf '%s\n' "${tg_up[@]}" | median); md=$(printf '%s\n' "${tg_down[@]}" | median)
  ba=$(printf '%s\n' "${b_add[@]}" | median); bd=$(printf '%s\n' "${b_del[@]}" | median)
  pa=$(printf '%s\n' "${p_add[@]}" | median); pd=$(printf '%s\n' "${p_del[@]}" | median)
  results+=("$(printf '%-6s %-5s %10s %10s %12s %14s %16s' "$n" up "$(ms "$mu")" "$(ms "$ba")" "$(ms "$pa")" "$(ratio "$mu" "$ba")" "$(ratio "$pa" "$mu")")")
  results+=("$(printf '%-6s %-5s %10s %10s %12s %14s %16s' "$n" down "$(ms "$md")" "$(ms "$bd")" "$(ms "$pd")" "$(ratio "$md" "$bd")" "$(ratio "$pd" "$md")")")
done

echo
echo "median wall time in ms ($repeats repeats; per-process: 3, 1 at N=10000); kernel $(uname -r), $(nproc) cores"
printf '%-6s %-5s %10s %10s %12s %14s %16s\n' N op tunnelgate "ip -batch" per-process "tg/ip-batch" "per-process/tg"
printf '%s\n' "${results[@]}"
echo
echo "targets at N=10000: tg/ip-batch <= 1.5, per-process/tg >= 20"
