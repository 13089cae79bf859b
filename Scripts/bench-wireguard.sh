#!/usr/bin/env bash
# Measures the built-in WireGuard against the userspace WireGuard people run, in one run on one machine,
# with every tunnel up at once and the modes interleaved in each round:
#
#   mode       ns A (sends: iperf3 client, ping)    ns B (receives: iperf3 server)
#   veth       -                                    -                                 the bare veth, the limit
#   wggo-new   current wireguard-go                 current wireguard-go              the reference
#   wggo-deb   Debian's wireguard-go                Debian's wireguard-go
#   tg-tg      tunnelgate                           tunnelgate                        (release, as installed)
#   tg>wggo    tunnelgate                           current wireguard-go              tunnelgate sending
#   wggo>tg    current wireguard-go                 tunnelgate                        tunnelgate receiving
#
# "Current wireguard-go" is the binary TG_WIREGUARD_GO names; without it ../shared/tools/wireguard-go-0.0.20250522
# beside this repository (or beside its main worktree) when present. When there is none, the three modes
# that need it are skipped, and said to be, and so are the ratios. Debian's is /usr/bin/wireguard-go.
#
# Every mode has a namespace pair of its own (A ═ veth ═ B, the same addresses in each pair, MTU 1420 inside
# the tunnels), so nothing is shared but the CPU. Every round runs, for each mode in an order that rotates by
# one each round: iperf3 TCP with 1 stream (with ping through the tunnel meanwhile: the RTT under load, and
# each daemon's CPU time from /proc/PID/stat utime+stime before and after), TCP with 4 streams, and UDP
# packets/s received (1,000-byte datagrams offered at 2 Gbit/s, i.e. 250,000 packets/s). A tunnelgate
# tunnel is two processes, the engine and its unprivileged packet plane (tunnelgate-plane, its pid in
# `status --json` .planePID): its CPU time and peak resident memory (VmHWM, read after the last round) are
# the sums over the engine and every process under it. Ratios to wggo-new are taken within each round
# (runs seconds apart, so a change in the machine's load hits both alike); their median and quartiles over
# the rounds are printed next to the targets of issue 16, with the medians of the figures themselves.
# On this shared 2-core machine single runs move by 20-40 %: record 9 rounds or more.
#
#   Scripts/bench-wireguard.sh [ROUNDS] [SECONDS]     (defaults 3 and 3; at most 50 rounds of 30 s)
#
#   every pair: ns A 10.77.0.1 ═══ veth ═══ ns B 10.77.0.2      tunnel: A 10.79.0.1 ═ UDP 51820 ═ B 10.79.0.2
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=Scripts/bench-topology.sh
. Scripts/bench-topology.sh
[ "$(id -u)" -eq 0 ] || { echo "Error: Scripts/bench-wireguard.sh must run as root" >&2; exit 1; }
command -v swift >/dev/null || PATH=/opt/swift/usr/bin:$PATH
rounds=${1:-3}
seconds=${2:-3}
if ! [[ $rounds =~ ^[0-9]+$ ]] || [ "$rounds" -lt 1 ] || [ "$rounds" -gt 50 ]; then
  echo "Error: ROUNDS must be a whole number from 1 to 50, not '$rounds'" >&2; exit 64
fi
if ! [[ $seconds =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ] || [ "$seconds" -gt 30 ]; then
  echo "Error: SECONDS must be a whole number from 1 to 30, not '$seconds'" >&2; exit 64
fi

# Current wireguard-go: the environment's, or the shared tools' beside this tree or beside the main worktree.
wggo_new=""
if [ -n "${TG_WIREGUARD_GO:-}" ]; then
  if ! [ -f "$TG_WIREGUARD_GO" ] || ! [ -x "$TG_WIREGUARD_GO" ]; then
    echo "Error: TG_WIREGUARD_GO=$TG_WIREGUARD_GO is not an executable file" >&2; exit 64
  fi
  wggo_new=$(readlink -f "$TG_WIREGUARD_GO")
else
  main_tree=$(dirname "$(git rev-parse --path-format=absolute --git-common-dir 2>/dev/null || echo .git)")
  for dir in "$(pwd)/.." "$main_tree/.."; do
    if [ -x "$dir/shared/tools/wireguard-go-0.0.20250522" ]; then
      wggo_new=$(readlink -f "$dir/shared/tools/wireguard-go-0.0.20250522")
      break
    fi
  done
fi
wggo_deb=/usr/bin/wireguard-go

bash Scripts/setup.sh
[ -x "$wggo_deb" ] || { echo "Error: $wggo_deb (Debian's wireguard-go) is missing: Scripts/setup.sh installs it" >&2; exit 1; }
# The binary as Scripts/install.sh and the package build it (the Swift runtime linked in statically):
# what a user runs, and what its resident memory is.
# The tree as it is built (a change made to it while the rounds run is not in the binary measured).
built_from="$(git rev-parse --short=12 HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- Sources Package.swift 2>/dev/null || echo ' + uncommitted changes')"
# shellcheck source=Scripts/release-flags.sh
. Scripts/release-flags.sh
for product in tunnelgate tunnelgate-plane; do
  swift build "${tg_release_flags[@]}" --product "$product" >/dev/null
done
TG=$(swift build "${tg_release_flags[@]}" --show-bin-path)/tunnelgate

modes=(veth wggo-new wggo-deb tg-tg "tg>wggo" "wggo>tg")
declare -A impl_a=([veth]=none [wggo-new]=new [wggo-deb]=deb [tg-tg]=tg ["tg>wggo"]=tg ["wggo>tg"]=new)
declare -A impl_b=([veth]=none [wggo-new]=new [wggo-deb]=deb [tg-tg]=tg ["tg>wggo"]=new ["wggo>tg"]=tg)
declare -A index=([veth]=0 [wggo-new]=1 [wggo-deb]=2 [tg-tg]=3 ["tg>wggo"]=4 ["wggo>tg"]=5)
active=()
for m in "${modes[@]}"; do
  if [ -z "$wggo_new" ] && { [ "${impl_a[$m]}" = new ] || [ "${impl_b[$m]}" = new ]; }; then continue; fi
  active+=("$m")
done
if [ -z "$wggo_new" ]; then
  echo "bench-wireguard: no current wireguard-go (TG_WIREGUARD_GO unset, no ../shared/tools/wireguard-go-0.0.20250522):" \
    "skipping wggo-new, tg>wggo and wggo>tg, and every ratio to wggo-new" >&2
fi

impl() { if [ "$2" = a ]; then echo "${impl_a[$1]}"; else echo "${impl_b[$1]}"; fi; }  # impl MODE SIDE
ns() { echo "tgwb-$$-${index[$1]}$2"; }     # ns MODE SIDE(a|b)
iface() { echo "tgwb$$${index[$1]}$2"; }     # iface MODE SIDE: unique on the host (/var/run/wireguard/NAME.sock is shared)
work=$(mktemp -d /tmp/tunnelgate-bench-wireguard.XXXXXX)
cleaned=""
cleanup() {
  [ -z "$cleaned" ] || return 0
  cleaned=1
  local m s pid inode left
  for m in "${modes[@]}"; do for s in a b; do
    if [ -f "$work/up-$(iface "$m" $s)" ]; then
      ip netns exec "$(ns "$m" $s)" timeout 30 "$TG" down "$(iface "$m" $s)" >/dev/null 2>&1 || true
    fi
    for pid in $(ip netns pids "$(ns "$m" $s)" 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
  done; done
  for m in "${modes[@]}"; do for s in a b; do
    for _ in $(seq 100); do [ -z "$(ip netns pids "$(ns "$m" $s)" 2>/dev/null)" ] && break; sleep 0.05; done
    # tunnelgate's state directory of the namespace, while the namespace (and so its inode) is still ours:
    # removed when a clean `down` left nothing in it but the allocation lock and the namespace's cookie.
    if inode=$(stat -L -c %i "/run/netns/$(ns "$m" $s)" 2>/dev/null) && [ -d "/run/tunnelgate/net-$inode" ]; then
      left=$(find "/run/tunnelgate/net-$inode" -mindepth 1 -printf '%f\n' | sort | paste -sd ' ')
      if [ "$left" = ".allocation.lock namespace" ]; then rm -rf "/run/tunnelgate/net-$inode"
      else echo "bench-wireguard: left /run/tunnelgate/net-$inode ($(ns "$m" $s)): $left" >&2; fi
    fi
    ip netns del "$(ns "$m" $s)" 2>/dev/null || true
    rm -f "/var/run/wireguard/$(iface "$m" $s).sock"
  done; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() { echo "Error: $*" >&2; exit 1; }
# poll TRIES CMD...: runs CMD every 20 ms until it succeeds, at most TRIES times.
poll() { local n=$1; shift; for _ in $(seq "$n"); do "$@" && return 0; sleep 0.02; done; return 1; }

for m in "${active[@]}"; do
  A=$(ns "$m" a) B=$(ns "$m" b)
  bench_veth_pair "$A" "$B"
done

umask 077
wg genkey >"$work/a.key"; wg pubkey <"$work/a.key" >"$work/a.pub"
wg genkey >"$work/b.key"; wg pubkey <"$work/b.key" >"$work/b.pub"

# start MODE SIDE: brings up that side's end of the mode's tunnel.
start() {
  local m=$1 s=$2 impl name netns host peer other bin pid
  [ "$s" = a ] && impl=${impl_a[$m]} host=1 peer=2 other=b || impl=${impl_b[$m]} host=2 peer=1 other=a
  name=$(iface "$m" "$s") netns=$(ns "$m" "$s")
  case $impl in
    none) ;;
    tg)
      cat >"$work/$name.conf" <<CONF
[Interface]
PrivateKey = $(cat "$work/$s.key")
Address = 10.79.0.$host/24
ListenPort = 51820
MTU = 1420
[Peer]
PublicKey = $(cat "$work/$other.pub")
Endpoint = 10.77.0.$peer:51820
AllowedIPs = 10.79.0.$peer/32
CONF
      : >"$work/up-$name"
      ip netns exec "$netns" "$TG" up "$work/$name.conf" --detach >/dev/null ||
        fail "tunnelgate up of $m side $s failed (its log: ip netns exec $netns $TG status $name)"
      ;;
    new|deb)
      [ "$impl" = new ] && bin=$wggo_new || bin=$wggo_deb
      ip netns exec "$netns" env LOG_LEVEL=error "$bin" -f "$name" >"$work/$name.log" 2>&1 &
      pid=$!
      poll 250 test -S "/var/run/wireguard/$name.sock" || fail "$bin made no /var/run/wireguard/$name.sock ($m side $s)"
      [ "$(readlink -f "/proc/$pid/exe")" = "$(readlink -f "$bin")" ] || fail "pid $pid is not $bin ($m side $s)"
      ip netns exec "$netns" wg set "$name" private-key "$work/$s.key" listen-port 51820 \
        peer "$(cat "$work/$other.pub")" allowed-ips "10.79.0.$peer/32" endpoint "10.77.0.$peer:51820"
      ip -n "$netns" addr add "10.79.0.$host/24" dev "$name"
      ip -n "$netns" link set "$name" mtu 1420 up
      echo "$pid" >"$work/pids-$name"
      ;;
  esac
}
# descendants PID: PID and every process under it.
descendants() {
  ps -e -o pid=,ppid= | awk -v root="$1" '{parent[$1] = $2} END {
    keep[root] = 1; do { grew = 0; for (p in parent) if (!(p in keep) && (parent[p] in keep)) { keep[p] = 1; grew = 1 } } while (grew)
    for (p in keep) print p }'
}
# tunnelgate_pids MODE SIDE: records the engine's pid and its plane's (and anything else under the engine).
tunnelgate_pids() {
  local name netns status engine plane
  name=$(iface "$1" "$2") netns=$(ns "$1" "$2")
  for _ in $(seq 100); do
    status=$(ip netns exec "$netns" "$TG" status "$name" --json) || fail "tunnelgate status $name --json failed ($1 side $2)"
    engine=$(jq -r '.pid // empty' <<<"$status") plane=$(jq -r '.planePID // empty' <<<"$status")
    [ -n "$engine" ] && [ -n "$plane" ] && break
    sleep 0.05
  done
  if [ -z "$engine" ] || [ -z "$plane" ]; then fail "tunnelgate status $name --json names no engine pid and plane pid ($1 side $2)"; fi
  { descendants "$engine"; echo "$plane"; } | sort -nu | paste -sd " " >"$work/pids-$name"
  echo "$engine $plane" >"$work/roles-$name"
  [ "$(wc -w <"$work/pids-$name")" -ge 2 ] || fail "the $1 side $2 tunnel has no plane process"
}

for m in "${active[@]}"; do start "$m" a; start "$m" b; done
for m in "${active[@]}"; do
  [ "$m" = veth ] && continue
  poll 5 ip netns exec "$(ns "$m" a)" ping -n -c 1 -W 2 10.79.0.2 >/dev/null || fail "the $m tunnel carries nothing"
  for s in a b; do if [ "$(impl "$m" $s)" = tg ]; then tunnelgate_pids "$m" $s; fi; done
done

dest() { [ "$1" = veth ] && echo 10.77.0.2 || echo 10.79.0.2; }
# ticks MODE SIDE: CPU clock ticks (utime + stime) of that side's daemon processes so far; 0 without one.
ticks() {
  local f p t=0 pids
  f=$work/pids-$(iface "$1" "$2")
  [ -f "$f" ] || { echo 0; return; }
  read -r -a pids <"$f"
  for p in "${pids[@]}"; do
    [ -r "/proc/$p/stat" ] || fail "process $p of the $1 tunnel (side $2) is gone"
    t=$((t + $(sed 's/^.*) //' "/proc/$p/stat" | awk '{print $12 + $13}')))
  done
  echo "$t"
}
mb() { if [ -n "$1" ]; then awk -v k="$1" 'BEGIN {printf "%.1f", k * 1024 / 1e6}'; else echo -; fi; }  # mb KB: MB (10^6 bytes)
# breakdown MODE SIDE: a tunnelgate side's VmHWM per process and the sum of their Pss now, which shares
# the library pages out between them ("engine 18.1 + plane 18.3 (Pss now 21.0)").
breakdown() {
  local name p role engine plane pids out="" pss=0
  name=$(iface "$1" "$2")
  read -r engine plane <"$work/roles-$name"
  read -r -a pids <"$work/pids-$name"
  for p in "${pids[@]}"; do
    role="pid $p"; [ "$p" = "$engine" ] && role=engine; [ "$p" = "$plane" ] && role=plane
    out+="${out:+ + }$role $(mb "$(awk '/^VmHWM:/ {print $2}' "/proc/$p/status")")"
    pss=$((pss + $(awk '/^Pss:/ {print $2}' "/proc/$p/smaps_rollup")))
  done
  echo "$out (Pss now $(mb "$pss"))"
}
# hwm MODE SIDE: the sum of the VmHWM (kB) of that side's daemon processes.
hwm() {
  local p k=0 pids
  read -r -a pids <"$work/pids-$(iface "$1" "$2")"
  for p in "${pids[@]}"; do
    [ -r "/proc/$p/status" ] || fail "process $p of the $1 tunnel (side $2) is gone"
    k=$((k + $(awk '/^VmHWM:/ {print $2}' "/proc/$p/status")))
  done
  echo "$k"
}
listening() { # NS PROTO(t|u) ADDRESS:PORT
  ip netns exec "$1" ss -Hl"$2"n | grep -q " $3 "
}
server() { # MODE PORT PROTO(t|u): starts a one-off iperf3 server in B and waits until it listens
  local B d
  B=$(ns "$1" b) d=$(dest "$1")
  ip netns exec "$B" timeout $((seconds + 30)) iperf3 -s -1 -B "$d" -p "$2" >/dev/null 2>&1 &
  server_pid=$!
  poll 250 listening "$B" "$3" "$d:$2" || fail "the iperf3 server of $1 does not listen on $d:$2"
}
established() { # NS PORT COUNT: COUNT connections to PORT are established
  [ "$(ip netns exec "$1" ss -Htn state established "( dport = :$2 )" | wc -l)" -ge "$3" ]
}
# tcp MODE STREAMS [ping]: one iperf3 TCP run from A to B, its JSON in $work/tcp.json; with "ping", pings
# through the tunnel meanwhile (every 100 ms, once the data connections are up), its output in $work/ping.txt.
tcp() {
  local A d client count
  A=$(ns "$1" a) d=$(dest "$1")
  server "$1" 5201 t
  ip netns exec "$A" timeout $((seconds + 30)) iperf3 -c "$d" -p 5201 -t "$seconds" -P "$2" -J >"$work/tcp.json" &
  client=$!
  if [ "${3:-}" = ping ]; then
    count=$((seconds * 10 - 5)); [ "$count" -ge 3 ] || count=3
    poll 250 established "$A" 5201 $(($2 + 1)) || true
    ip netns exec "$A" ping -n -i 0.1 -c "$count" -w "$seconds" -W 1 "$d" >"$work/ping.txt" 2>&1 || true
  fi
  wait "$client" || fail "iperf3 TCP ($2 streams) through $1 failed: $(jq -r '.error // empty' "$work/tcp.json" 2>/dev/null)"
  wait "$server_pid" 2>/dev/null || true
}
# udp MODE: packets/s received for 1,000-byte datagrams offered at 2 Gbit/s
udp() {
  local A d
  A=$(ns "$1" a) d=$(dest "$1")
  server "$1" 5202 t  # iperf3 listens on TCP for its control connection, also for UDP tests
  ip netns exec "$A" timeout $((seconds + 30)) iperf3 -c "$d" -p 5202 -u -b 2G -l 1000 -t "$seconds" -J >"$work/udp.json" ||
    fail "iperf3 UDP through $1 failed: $(jq -r '.error // empty' "$work/udp.json" 2>/dev/null)"
  jq '(.end.sum.packets - .end.sum.lost_packets) / .end.sum.seconds' "$work/udp.json"
  wait "$server_pid" 2>/dev/null || true
}
median() { sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "nan"; else print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

hz=$(getconf CLK_TCK)
# measure MODE: one round of that mode; every figure appended to $work/MODE.FIGURE, one line per round.
measure() {
  local m=$1 f=$work/$1 a0 b0 a1 b1 gbit rtt
  a0=$(ticks "$m" a) b0=$(ticks "$m" b)
  tcp "$m" 1 ping
  a1=$(ticks "$m" a) b1=$(ticks "$m" b)
  jq '.end.sum_received.bits_per_second' "$work/tcp.json" >>"$f.tcp1"
  gbit=$(jq '.end.sum_received.bytes * 8 / 1e9' "$work/tcp.json")
  if [ "$m" != veth ]; then
    awk -v d=$((a1 - a0)) -v hz="$hz" -v g="$gbit" 'BEGIN {print d / hz / g}' >>"$f.cpua"
    awk -v d=$((b1 - b0)) -v hz="$hz" -v g="$gbit" 'BEGIN {print d / hz / g}' >>"$f.cpub"
  fi
  rtt=$(grep -o 'time=[0-9.]*' "$work/ping.txt" | cut -d= -f2 | median)
  if [ "$rtt" = nan ]; then
    echo "bench-wireguard: round $r, $m: no ping reply under load (counted as 1000 ms, ping's timeout)" >&2
    rtt=1000
  fi
  echo "$rtt" >>"$f.rtt"
  tcp "$m" 4
  jq '.end.sum_received.bits_per_second' "$work/tcp.json" >>"$f.tcp4"
  udp "$m" >>"$f.udp"
}

echo "bench-wireguard: ${#active[@]} modes, $rounds rounds of 3 × $seconds s each (about $(( ${#active[@]} * rounds * (3 * seconds + 2) )) s)" >&2
for r in $(seq "$rounds"); do
  for i in $(seq 0 $((${#active[@]} - 1))); do
    measure "${active[$(((i + r) % ${#active[@]}))]}"
  done
done
declare -A rss_a rss_b
rss_detail=""
for m in "${active[@]}"; do
  [ "${impl_a[$m]}" = none ] || rss_a[$m]=$(hwm "$m" a)
  [ "${impl_b[$m]}" = none ] || rss_b[$m]=$(hwm "$m" b)
  for s in a b; do
    if [ "$(impl "$m" $s)" = tg ]; then rss_detail+="${rss_detail:+; }$m ${s^^}: $(breakdown "$m" $s)"; fi
  done
done

num() { awk -v x="$1" -v s="$2" -v fmt="$3" 'BEGIN {if (x == "" || x == "nan") print "-"; else printf fmt, x / s}'; }
# ratio MODE BASE FIGURE: MODE/BASE within each round: "median (first quartile–third quartile)"
ratios() { paste "$work/$1.$3" "$work/$2.$3" | awk '$2 > 0 {print $1 / $2}'; }
ratio() {
  ratios "$@" | sort -g |
    awk '{a[NR]=$1} END {printf "%.2f (%.2f–%.2f)", (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2, a[int((NR+3)/4)], a[int((3*NR+3)/4)]}'
}

echo
echo "tunnelgate $built_from, release build, Swift runtime static (as installed)"
echo "wggo-new: ${wggo_new:-absent, skipped}$([ -z "$wggo_new" ] || echo " ($("$wggo_new" --version | sed -n 's/^wireguard-go //p' | head -n 1))")"
echo "wggo-deb: $wggo_deb (Debian $(dpkg-query -W -f '${Version}' wireguard-go))"
echo "medians of $rounds rounds of $seconds s per run; kernel $(uname -r), $(nproc) cores; MTU 1420 in the tunnels"
echo "CPU: each side's daemon CPU seconds per Gbit received in the TCP 1-stream run (= cores per Gbit/s);"
echo "     a tunnelgate side is its engine and its packet plane, summed. RSS: VmHWM after the last round, summed"
echo "     likewise (MB = 10^6 bytes). RTT: median ping through the tunnel during the TCP 1-stream run."
printf '%-9s %11s %11s %10s %10s %10s %8s %8s %8s\n' mode "TCP1 Mbit/s" "TCP4 Mbit/s" "UDP pkt/s" "CPU A s/Gb" "CPU B s/Gb" "RSS A MB" "RSS B MB" "RTT ms"
for m in "${active[@]}"; do
  printf '%-9s %11s %11s %10s %10s %10s %8s %8s %8s\n' "$m" \
    "$(num "$(median <"$work/$m.tcp1")" 1e6 %.0f)" "$(num "$(median <"$work/$m.tcp4")" 1e6 %.0f)" \
    "$(num "$(median <"$work/$m.udp")" 1 %.0f)" \
    "$([ -f "$work/$m.cpua" ] && num "$(median <"$work/$m.cpua")" 1 %.2f || echo -)" \
    "$([ -f "$work/$m.cpub" ] && num "$(median <"$work/$m.cpub")" 1 %.2f || echo -)" \
    "$(mb "${rss_a[$m]:-}")" "$(mb "${rss_b[$m]:-}")" "$(num "$(median <"$work/$m.rtt")" 1 %.3f)"
done

# Targets of issue 16: tg-tg >= 1.5 × wggo-new (TCP1, TCP4, UDP); tunnelgate with wggo-new >= 1.0 × wggo-new
# both ways; RTT under load no worse than wggo-new's; peak resident memory <= 20 MB per tunnel.
met=0 total=0
judge() { # VALUE OP TARGET: sets verdict to "met" or "NOT met", and counts
  total=$((total + 1))
  if awk -v v="$1" -v t="$3" -v op="$2" 'BEGIN {exit !((op == ">=") ? v >= t : v <= t)}'; then met=$((met + 1)) verdict=met; else verdict="NOT met"; fi
}
echo
echo "per-round ratios to wggo-new: median (quartiles) over $rounds rounds"
printf '%-19s %-6s %-18s %-8s %-8s %s\n' ratio figure "value" target "met?" "per round"
for row in "tg-tg tcp1 >= 1.5" "tg-tg tcp4 >= 1.5" "tg-tg udp >= 1.5" "tg-tg rtt <= 1.0" \
           "tg>wggo tcp1 >= 1.0" "tg>wggo tcp4 >= 1.0" "tg>wggo udp >= 1.0" "tg>wggo rtt <= 1.0" \
           "wggo>tg tcp1 >= 1.0" "wggo>tg tcp4 >= 1.0" "wggo>tg udp >= 1.0" "wggo>tg rtt <= 1.0"; do
  read -r m fig op target <<<"$row"
  if [ -z "$wggo_new" ]; then
    printf '%-19s %-6s %-18s %-8s %s\n' "$m / wggo-new" "$fig" "n/a" "$op $target" "skipped: no current wireguard-go"
    continue
  fi
  value=$(ratio "$m" wggo-new "$fig")
  judge "${value%% *}" "$op" "$target"
  printf '%-19s %-6s %-20s %-8s %-8s %s\n' "$m / wggo-new" "$fig" "$value" "$op $target" "$verdict" \
    "$(ratios "$m" wggo-new "$fig" | awk '{printf "%s%.2f", (NR > 1 ? " " : ""), $1}')"
done
highest=0 where=""
for m in "${active[@]}"; do
  [ "${impl_a[$m]}" = tg ] && [ "${rss_a[$m]}" -gt "$highest" ] && highest=${rss_a[$m]} where="$m A"
  [ "${impl_b[$m]}" = tg ] && [ "${rss_b[$m]}" -gt "$highest" ] && highest=${rss_b[$m]} where="$m B"
done
judge "$(mb "$highest")" "<=" 20
echo
echo "tunnelgate peak resident memory per tunnel (engine + plane), highest: $(mb "$highest") MB ($where)   target <= 20 MB   $verdict"
echo "  per process (VmHWM, MB: shared library pages count in each; Pss now: shared pages divided among their users):"
echo "  $rss_detail"
echo "targets met: $met of $total"
