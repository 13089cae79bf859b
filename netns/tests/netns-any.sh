#!/usr/bin/env bash
# --netns in every form (issue 17 point 1): a namespace that no name holds, only a process ("a container"
# made with `unshare -n`), reached by pid:PID and /proc/PID/ns/net; a bind-mounted namespace file; a
# name under /run/netns. The tunnel is found again by the same argument for status and down, and ends
# by itself when its namespace goes: the process exits, the file or name is removed.
#
#   P (unshare -n sleep: no name, held only by its process)   after up: tgaN in P, every route into it
#   │  eth0 10.89.41.2 fd00:89:41::2 ── pe0 in C (blocked by the kill switch once the tunnel is up)
#   C  tunnelgate runs here (its WireGuard sockets, ListenPort 5200N); forwards P's packets to R
#   R  router: routes 10.89.41.0/24 back to C; counts every packet from C that is not a carrier
#   I  wireguard-go and the tunnels' DNS server (netns/containers.sh, The tunnels' peer)
#
# Asserted: the control (P's leak is counted at R); up --netns pid:P: the TUN in P, P reaches I over
# IPv4 and IPv6 only through the tunnel (the peer's RX, no leak from every way out), the tunnel's DNS
# server answers from the tunnel's address, nothing written to C's resolv.conf; status by pid:P and by
# /proc/P/ns/net; refusals (a file that is no namespace, a mount namespace, a gone process, a bad form)
# naming the argument and changing nothing; down by path; then the holder killed with the tunnel up:
# the tunnel ends by itself, C as before, no tunnelgate process, status in C says why; the same for a
# bind-mounted namespace file removed (umount + rm) and for `ip netns del` of a name; `ip netns del` of a
# name with a process still inside ends the tunnel but keeps the namespace's kill switch until `down`.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../containers.sh"

WGI=wgi$((RANDOM % 100000))
HOLDERS=()
BOUND=()
cleanup() {
  local p f
  for p in "${HOLDERS[@]}"; do kill "$p" 2>/dev/null; done
  for f in "${BOUND[@]}"; do umount "$f" 2>/dev/null; rm -f "$f"; done
  rm -f "/var/run/wireguard/$WGI.sock"
}
tg_begin --needs wireguard-go,dnsmasq,busybox
tg_defer cleanup
TUNNELS=$TG_TMP/tunnels
in_c() { ip netns exec "$NS_C" "$@"; }

ip netns exec "$NS_C" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
ip -n "$NS_R" route add 10.89.41.0/24 via "$C_ETH0_4"
ip -n "$NS_R" -6 route add fd00:89:41::/64 via "$C_ETH0_6"
tg_vpn_peer_start "$WGI" "$TUNNELS"
tg_vpn_tunnel tga2 2
tg_vpn_tunnel tga3 3
tg_vpn_tunnel tga4 4
tg_lab_leak_declare "${TG_VPN_CARRIERS[@]}"

# holder: a process in a network namespace of its own, made in C, with eth0 to C (pe0, P's default
# route); sets $P and $PNS (/proc/P/ns/net). No name holds the namespace: only the process does.
holder() {
  local up=$1
  # Not through a shell function: $! must be the process that becomes sleep (ip netns exec and unshare exec).
  ip netns exec "$NS_C" unshare -n sleep 280 &
  P=$!
  HOLDERS+=("$P")
  # Everything below enters P's namespace: it must be neither C's nor the one this script runs in.
  _tg_poll 5 own_namespace "$P" || tg_bail "the holder $P runs sleep in a namespace of its own" "$(readlink "/proc/$P/ns/net")"
  PNS=/proc/$P/ns/net
  ip -n "$NS_C" link add pe0 type veth peer name eth0 netns "$P"
  ip -n "$NS_C" addr add 10.89.41.1/24 dev pe0
  ip -n "$NS_C" -6 addr add fd00:89:41::1/64 dev pe0 nodad
  ip -n "$NS_C" link set pe0 up
  nsenter --net="$PNS" sh -c "ip link set lo up && ip addr add 10.89.41.2/24 dev eth0 && ip -6 addr add fd00:89:41::2/64 dev eth0 nodad &&
    ip link set eth0 up && ip route add default via 10.89.41.1 && ip -6 route add default via fd00:89:41::1"
  [ -z "$up" ] || wait_for "P reaches $INCLUDED4 directly" 5 nsenter --net="$PNS" ping -c 1 -W 0.5 "$INCLUDED4"
}
own_namespace() {
  local ns
  ns=$(readlink "/proc/$1/ns/net") || return 1
  [ "$(cat "/proc/$1/comm" 2>/dev/null)" = sleep ] && [ "$ns" != "net:[$(stat -L -c %i "/run/netns/$NS_C")]" ] &&
    [ "$ns" != "$(readlink /proc/$$/ns/net)" ]
}
in_p() { nsenter --net="$PNS" "$@"; }
holder_gone() { ! kill -0 "$P" 2>/dev/null; }

# --- Control -----------------------------------------------------------------------------------------------
wait_for "C's links are settled" 5 _tg_settled "$NS_C"
tg_snapshot "$NS_C" "$TG_TMP/c-base"   # C without P's pe0, as it is once every P is gone
holder up
tg_snapshot "$NS_C" "$TG_TMP/c-before"
cp -a /etc/resolv.conf "$TG_TMP/resolv-before"
check "control: P reaches $INCLUDED4 directly" in_p ping -c 1 -W 2 "$INCLUDED4"
tg_lab_leaks_reset
check "control: the generator made its attempts in P" tg_leak_generate_in "$PNS"
_tg_leak_settle
check "control: R counts what P sent ($(tg_lab_leak_count) packets)" test "$(tg_lab_leak_count)" -gt 0

# --- Refusals: named, nothing changed ---------------------------------------------------------------------
tg_run in_c "$TG" up "$TUNNELS/tga2.conf" --netns /etc/hostname --detach
check_rc "up --netns /etc/hostname fails" 1
check_match "... naming the file and why" '/etc/hostname is not a namespace file' "$TG_ERR"
tg_run in_c "$TG" up "$TUNNELS/tga2.conf" --netns "/proc/$P/ns/mnt" --detach
check_rc "up --netns /proc/P/ns/mnt fails" 1
check_match "... a namespace, but not a network namespace" "/proc/$P/ns/mnt is a namespace, but not a network namespace" "$TG_ERR"
gone=$(in_c sh -c 'echo $$')   # a pid that was and is no more
tg_run in_c "$TG" up "$TUNNELS/tga2.conf" --netns "pid:$gone" --detach
check_rc "up --netns pid:GONE fails" 1
check_match "... there is no such process" "no process $gone" "$TG_ERR"
tg_run in_c "$TG" up "$TUNNELS/tga2.conf" --netns pid:x1 --detach
check_rc "up --netns pid:x1 is a usage error" 64
check_match "... saying what pid: takes" "pid: takes a process id" "$TG_ERR"
tg_run in_c "$TG" up "$TUNNELS/tga2.conf" --netns relative/path --detach
check_rc "up --netns relative/path is a usage error" 64
tg_snapshot "$NS_C" "$TG_TMP/c-refused"
check_same_snapshot "after the refusals: C is as before" "$TG_TMP/c-before" "$TG_TMP/c-refused"
check_eq "after the refusals: P has no tunnel interface" 0 "$(in_p ip -o link show | grep -c tga)"
check "after the refusals: no tunnelgate process" tg_no_tunnel_process "$NS_C"

# --- up --netns pid:P -------------------------------------------------------------------------------------
tg_run in_c "$TG" up "$TUNNELS/tga2.conf" --netns "pid:$P" --detach
check_rc "up tga2.conf --netns pid:P --detach" 0
check_match "the TUN is in P" 'inet 10\.8\.0\.2/24' "$(in_p ip -4 addr show dev tga2 2>&1)"
check_fails "the TUN is not in C" ip -n "$NS_C" link show dev tga2
check_match "P's routes lead into it" 'dev tga2' "$(in_p ip route get "$INCLUDED4" 2>&1)"
check "the tunnel's owner runs in C" test -n "$(tg_tunnel_pids "$NS_C")"
rx=$(tg_vpn_peer_rx)
check "P reaches $INCLUDED4" in_p ping -c 1 -W 3 "$INCLUDED4"
check "P reaches $INCLUDED6 over IPv6" in_p ping -6 -c 1 -W 3 "$INCLUDED6"
check "... through the tunnel (RX $rx -> $(tg_vpn_peer_rx))" test "$(tg_vpn_peer_rx)" -gt "$rx"
check_match "the tunnel's DNS server answers P" "$(tg_re "$INCLUDED4")" "$(in_p busybox nslookup probe.tunnel.example 10.8.0.1 2>&1)"
check_match "... which saw the query come from the tunnel's address" 'probe\.tunnel\.example from 10\.8\.0\.2' "$(cat "$TG_TMP/dnsmasq.log")"
check "C's resolv.conf is untouched (P has no name, so no resolv.conf of its own here)" cmp -s /etc/resolv.conf "$TG_TMP/resolv-before"
tg_lab_leaks_reset
check "the generator made its attempts in P" tg_leak_generate_in "$PNS"
# P has no link but the TUN: what R may see from C besides the carriers is C's own MLD reports (the
# link-local addresses of C's veths to ff02::16, sent by C's kernel for C's links), never P's packets.
check_lab_no_leaks "[up --netns pid:P: every way out of P] nothing but the carriers (and C's own MLD reports, which the lab leaves out) left C"
check_match "status finds the tunnel by pid:P" 'tga2: connected' "$(in_c "$TG" status tga2 --netns "pid:$P" 2>&1)"
check_match "status finds it by /proc/P/ns/net" 'tga2: connected' "$(in_c "$TG" status tga2 --netns "$PNS" 2>&1)"
check_eq "status --json names the namespace as given" "pid:$P" "$(in_c "$TG" status tga2 --netns "pid:$P" --json | jq -r .namespace)"
check_fails "status in C alone does not list it (it is P's)" sh -c "ip netns exec $NS_C $TG status | grep -q tga2"

tg_run in_c "$TG" down tga2 --netns "$PNS"
check_rc "down tga2 --netns /proc/P/ns/net" 0
wait_for "the tunnel's owner has exited" 10 tg_no_tunnel_process "$NS_C"
check_eq "P has no tunnel interface" 0 "$(in_p ip -o link show | grep -c tga)"
check "after down: P reaches $INCLUDED4 directly again" in_p ping -c 1 -W 2 "$INCLUDED4"

# --- The holder exits with the tunnel up ------------------------------------------------------------------
tg_run in_c "$TG" up "$TUNNELS/tga3.conf" --netns "$PNS" --detach
check_rc "up tga3.conf --netns /proc/P/ns/net --detach" 0
check "P reaches $INCLUDED4 through its tunnel" in_p ping -c 1 -W 3 "$INCLUDED4"
inode=$(stat -L -c %i "$PNS")
kill "$P"
wait_for "the holder has exited" 5 holder_gone
wait_for "P's namespace gone: its tunnel ends by itself, no tunnelgate process left" 15 tg_no_tunnel_process "$NS_C"
wait_for "pe0 went with P's namespace" 5 bash -c "! ip -n $NS_C link show dev pe0 >/dev/null 2>&1"
tg_snapshot "$NS_C" "$TG_TMP/c-after"
check_same_snapshot "C is as before P and its tunnels" "$TG_TMP/c-base" "$TG_TMP/c-after"
check_fails "WireGuard's API socket of tga3 is gone" test -e /var/run/wireguard/tga3.sock
check_match "status tga3 in C says why the tunnel ended" "went away: process $P, whose namespace it is, exited" \
  "$(in_c "$TG" status tga3 2>&1)"
check_eq "no record, journal or socket of tga3 left for P's namespace" "" \
  "$(ls /run/tunnelgate/net-"$inode"/tga3.{state,journal,sock,lock} 2>/dev/null)"
check_match "status --netns pid:P now names the gone process and says where the reason is" "no process $P.*status NAME. without --netns" \
  "$(in_c "$TG" status tga3 --netns "pid:$P" 2>&1 | tr '\n' ' ')"

# --- A bind-mounted namespace file, removed with the tunnel up ----------------------------------------------
holder ""
file=$TG_TMP/p.netns
touch "$file" && mount --bind "$PNS" "$file" && BOUND+=("$file")
kill "$P"   # now the bind mount alone holds the namespace
wait_for "the second holder has exited" 5 holder_gone
tg_run in_c "$TG" up "$TUNNELS/tga4.conf" --netns "$file" --detach
check_rc "up tga4.conf --netns FILE (a bind mount, no process in it) --detach" 0
check_match "status finds it by the file" 'tga4: connected' "$(in_c "$TG" status tga4 --netns "$file" 2>&1)"
umount "$file" && rm -f "$file"
wait_for "the file removed: the tunnel ends by itself" 15 tg_no_tunnel_process "$NS_C"
check_match "status tga4 in C says why" "its namespace file $(tg_re "$file") was removed" "$(in_c "$TG" status tga4 2>&1)"

# --- A name, removed with `ip netns del` -------------------------------------------------------------------
named=${NS_C%-C}-N
ip netns add "$named" && TG_NAMESPACES+=("$named")
tg_run in_c "$TG" up "$TUNNELS/tga2.conf" --netns "$named" --detach
check_rc "up tga2.conf --netns NAME --detach" 0
check_match "a named namespace gets its own resolv.conf" 'nameserver 10\.8\.0\.1' "$(cat "/etc/netns/$named/resolv.conf" 2>&1)"
ip netns del "$named"
wait_for "ip netns del NAME: the tunnel ends by itself" 15 tg_no_tunnel_process "$NS_C"
check_fails "... and /etc/netns/NAME is gone" test -e "/etc/netns/$named"
check_match "status tga2 in C says why" "its namespace file /run/netns/$(tg_re "$named") was removed" "$(in_c "$TG" status tga2 2>&1)"

# --- A name removed while a process is still in the namespace: the kill switch stays ------------------------
kept=${NS_C%-C}-K
ip netns add "$kept" && TG_NAMESPACES+=("$kept")
ip netns exec "$kept" sleep 280 &
K=$!
HOLDERS+=("$K")
wait_for "a process runs in $kept" 5 bash -c "[ \"\$(readlink /proc/$K/ns/net)\" = \"net:[\$(stat -L -c %i /run/netns/$kept)]\" ]"
tg_run in_c "$TG" up "$TUNNELS/tga3.conf" --netns "$kept" --detach
check_rc "up tga3.conf --netns NAME (a process in it) --detach" 0
ip netns del "$kept"
wait_for "ip netns del NAME with a process inside: the tunnel ends" 15 tg_no_tunnel_process "$NS_C"
check "... but the namespace's kill switch stays while the process is in it" \
  nsenter --net="/proc/$K/ns/net" nft list table inet tunnelgate-tga3
check_eq "... and the tunnel's interface is gone" 0 "$(nsenter --net="/proc/$K/ns/net" ip -o link show | grep -c tga3)"
# The reason replaces the first run's in C's record as the engine ends: polled, not read once.
says_why() { grep -qE "its namespace file /run/netns/$(tg_re "$kept") was removed" <<<"$(in_c "$TG" status tga3 2>&1)"; }
wait_for "status tga3 in C says why" 5 says_why
check_match "status --netns pid:K shows what stays, and how to remove it" 'residue|kill switch' \
  "$(in_c "$TG" status tga3 --netns "pid:$K" 2>&1)"
tg_run in_c "$TG" down tga3 --netns "pid:$K"
check_rc "down tga3 --netns pid:K removes it" 0
check_fails "... the kill switch is gone" nsenter --net="/proc/$K/ns/net" nft list table inet tunnelgate-tga3
kill "$K"

wait_for "pe0 is gone" 5 bash -c "! ip -n $NS_C link show dev pe0 >/dev/null 2>&1"
tg_snapshot "$NS_C" "$TG_TMP/c-end"
check_same_snapshot "at the end: C is as before" "$TG_TMP/c-base" "$TG_TMP/c-end"

tg_summary
