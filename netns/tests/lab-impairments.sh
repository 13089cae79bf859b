#!/usr/bin/env bash
# The lab's impairments, each observed to act, on the default topology (Examples/lab/vpn-client.json):
#
#   client ─eth0──uplink──c0─ router ─inet0──wan──up0─ internet ─c0──carrier──eth0─ carrier
#          ─eth1──uplink2─c1─        ─lan0──lan──eth0─ lan       ─i0──included─eth0─ included
#                                                                ─x0──excluded─eth0─ excluded
# Asserted: up prints the run and its namespaces; exec runs in the node with its exit status and its
# resolv.conf; loss 30% measured by 300 pings within bounds (and 0% after clear); rate 4000 kbit
# measured by iperf3 within bounds; an MTU black hole drops a large DF ping without any
# fragmentation-needed reaching the sender while a small one passes; NAT seen by the carrier server
# as the router's address, with the source port kept (masquerade) and changed (port-random); a flap
# seen by the client as carrier loss and back; roaming seen by the carrier server as the new source
# address; a DNS hijack answered with the lie; delay refused with its message (no sch_netem here);
# bad input refused with exit 64 / 1 and nothing made; teardown leaves the host's links, /run/netns,
# nftables and /run/tunnelgate-lab as they were.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
tg_begin --no-topology --no-binary --lab --tmp
TOPO=$TG_ROOT/Examples/lab/vpn-client.json
RUN=i$$
TMP=$TG_TMP
lab_down() { "$LAB" down "$RUN" >/dev/null 2>&1; return 0; }
tg_defer lab_down

host_state() { # the host's state the lab must leave as it found it
  ip -o link show | sed -E 's/ link-netns(id)? [^ ]+//' | awk '{ $1=""; print }'
  ls /run/netns 2>/dev/null | grep "^tgl-$RUN-"
  nft list ruleset
  ls /run/tunnelgate-lab 2>/dev/null | grep -x "$RUN"
}
host_state >"$TMP/host.before"
lab() { "$LAB" --run "$RUN" "$@"; }
in_lab() { local node=$1; shift; "$LAB" exec "$RUN" "$node" -- "$@"; }

# --- bad input first: nothing may be made ------------------------------------------------------
printf '{"nodes": {"a": {}}, "links": [{"name": "l", "a": {"node": "a", "interface": "eth0"}, "b": {"node": "rooter", "interface": "eth0"}}]}' >"$TMP/bad.json"
tg_run "$LAB" up "$TMP/bad.json" --run-id "$RUN"
check_rc "a topology naming a missing node is refused (exit 1)" 1
check_match "the refusal names the key path and the value" 'links\[0\]\.b\.node: "rooter" is not a node' "$TG_ERR"
check_fails "nothing was made for the refused topology" test -e "/run/tunnelgate-lab/$RUN"
tg_run "$LAB" impair
check_rc "a usage error exits 64" 64

# --- up, exec ----------------------------------------------------------------------------------
tg_run "$LAB" up "$TOPO" --run-id "$RUN" --owner $$
check_rc "lab up builds the default topology" 0
check_match "up prints the run id" "^run $RUN\$" "$TG_OUT"
check_match "up prints each node's namespace" "^client tgl-$RUN-client\$" "$TG_OUT"
[ "$TG_RC" -eq 0 ] || tg_bail "the topology came up" "$TG_ERR"
NS_CLIENT=tgl-$RUN-client NS_CARRIER=tgl-$RUN-carrier
tg_run in_lab client sh -c 'exit 7'
check_rc "exec exits with the command's status" 7
check_eq "exec runs in the node (its eth0 address)" "10.231.0.2/24" \
  "$(in_lab client ip -4 -o addr show dev eth0 | awk '{ print $4 }')"
check_match "exec mounts the node's resolv.conf" '^nameserver 192\.168\.231\.2$' "$(in_lab client cat /etc/resolv.conf)"
check "the client reaches the included host over IPv4 and IPv6" sh -c \
  "'$LAB' exec $RUN client -- ping -n -c1 -W2 198.18.30.30 && '$LAB' exec $RUN client -- ping -n -c1 -W2 2001:db8:30::30"

# --- loss ----------------------------------------------------------------------------------------
# 30% each way: an echo and its reply both survive with p = 0.7^2 = 0.49; of 300, the 5-sigma
# bounds are 147 ± 43.
lab impair uplink loss 30 >/dev/null
got=$(in_lab client ping -n -q -c 300 -i 0.005 -W 1 198.18.30.30 | sed -n 's/.* \([0-9]*\) received.*/\1/p')
check "loss 30%: $got of 300 echoes answered, within 104..190" test "${got:-0}" -ge 104 -a "${got:-0}" -le 190
lab impair uplink clear >/dev/null
got=$(in_lab client ping -n -q -c 50 -i 0.005 -W 1 198.18.30.30 | sed -n 's/.* \([0-9]*\) received.*/\1/p')
check_eq "after clear every echo is answered" 50 "${got:-0}"

# --- rate ----------------------------------------------------------------------------------------
lab impair uplink rate 4000 >/dev/null
in_lab carrier iperf3 -s -1 -p 5201 >"$TMP/iperf-server.log" 2>&1 &
wait_for "iperf3 listens in the carrier node" 5 sh -c "ip netns exec $NS_CARRIER ss -ltn | grep -q ':5201 '"
in_lab client iperf3 -c 198.18.10.10 -p 5201 -t 3 -J >"$TMP/iperf.json" 2>&1
rate=$(jq '.end.sum_received.bits_per_second | floor' "$TMP/iperf.json" 2>/dev/null)
check "rate 4000 kbit: iperf3 measured ${rate:-nothing} bit/s, within 2.8..4.4 Mbit/s" \
  test "${rate:-0}" -ge 2800000 -a "${rate:-0}" -le 4400000
lab impair uplink clear >/dev/null
check_eq "clear removes the htb qdisc" "" "$(ip netns exec "$NS_CLIENT" tc qdisc show dev eth0 | grep htb)"

# --- MTU black hole -----------------------------------------------------------------------------
lab impair wan mtu-blackhole 1200 >/dev/null
tg_run in_lab client ping -n -c 2 -W 1 -M do -s 1300 198.18.30.30
check_rc_nonzero "a 1328-byte DF ping through the black hole is lost"
check_no_match "no fragmentation-needed reaches the sender" 'Frag needed|mtu = ' "$TG_OUT$TG_ERR"
check "a 1028-byte DF ping passes" in_lab client ping -n -c 1 -W 1 -M do -s 1000 198.18.30.30
check_match "the black hole counted the large packets" 'packets [1-9].*mtu black hole 1200 wan' \
  "$(ip netns exec "tgl-$RUN-router" nft list table inet tunnelgate_lab)"
lab impair wan clear >/dev/null

# --- NAT -----------------------------------------------------------------------------------------
# The carrier server records the source of a UDP datagram sent from client port PORT (a new port for
# each NAT mode: a flow conntrack already knows keeps the mapping it got).
udp_source() { # PORT: prints ADDRESS PORT as the carrier sees them
  local port=${1:-40001}
  rm -f "$TMP/udp.src"
  in_lab carrier python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("198.18.10.10", 7000)); s.settimeout(5)
open(sys.argv[1] + ".ready", "w").close()
data, addr = s.recvfrom(100); open(sys.argv[1], "w").write("%s %d\n" % addr)' "$TMP/udp.src" &
  local server=$!
  _tg_poll 5 test -e "$TMP/udp.src.ready"
  in_lab client python3 -c '
import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); import sys; s.bind(("0.0.0.0", int(sys.argv[1]))); s.sendto(b"x", ("198.18.10.10", 7000))' "$port"
  wait "$server"
  rm -f "$TMP/udp.src.ready"
  cat "$TMP/udp.src" 2>/dev/null
}
check_eq "without NAT the server sees the client's own address and port" "10.231.0.2 40001" "$(udp_source)"
lab nat router masquerade >/dev/null
check_eq "masquerade: the server sees the router's address, the port kept" "198.18.0.254 40002" "$(udp_source 40002)"
lab nat router port-random >/dev/null
src=$(udp_source 40003)
check_match "port-random: the server sees the router's address" '^198\.18\.0\.254 ' "$src"
check "port-random: with another port than 40003 (saw: $src)" test "${src#* }" != 40003
lab nat router off >/dev/null

# --- flap ----------------------------------------------------------------------------------------
lab impair uplink down >/dev/null
wait_for "flap: the client sees eth0 lose its carrier" 5 sh -c "ip -n $NS_CLIENT link show eth0 | grep -q NO-CARRIER"
lab impair uplink up >/dev/null
wait_for "flap: the carrier comes back" 5 sh -c "ip -n $NS_CLIENT link show eth0 | grep -q LOWER_UP"
wait_for "the client reaches the internet again after the flap" 10 in_lab client ping -n -c1 -W1 198.18.30.30

# --- roaming -------------------------------------------------------------------------------------
lab addr client eth0 10.231.0.77 >/dev/null
check_eq "roaming: the client's eth0 has the new address, same prefix" "10.231.0.77/24" \
  "$(ip -n "$NS_CLIENT" -4 -o addr show dev eth0 | awk '{ print $4 }')"
check_eq "roaming: the carrier server sees the new source address" "10.231.0.77 40004" "$(udp_source 40004)"

# --- DNS hijack ----------------------------------------------------------------------------------
check_eq "the LAN resolver answers the truth" 198.18.30.30 "$(in_lab client getent ahostsv4 included.lab.test | awk 'NR==1 {print $1}')"
lab dns-hijack lan 198.18.99.99 >/dev/null
check_eq "dns-hijack: every name is answered with the lie" "198.18.99.99 198.18.99.99" \
  "$(in_lab client getent ahostsv4 included.lab.test | awk 'NR==1 {print $1}') $(in_lab client getent ahostsv4 any.example | awk 'NR==1 {print $1}')"
lab dns-hijack lan off >/dev/null

# --- delay: refused where the kernel has no sch_netem --------------------------------------------
tg_run lab impair uplink delay 50 10
if grep -qx 'CONFIG_NET_SCH_NETEM=[ym]' <(zcat /proc/config.gz 2>/dev/null); then
  check_rc "delay works with sch_netem" 0
else
  check_rc "delay is refused without sch_netem (exit 1)" 1
  check_match "with a message naming sch_netem" 'need the kernel.s netem qdisc \(sch_netem' "$TG_ERR"
fi

# --- teardown ------------------------------------------------------------------------------------
tg_run "$LAB" down "$RUN"
check_rc "lab down" 0
host_state >"$TMP/host.after"
check_same_snapshot "the host's links, /run/netns, nftables and /run/tunnelgate-lab are as before" "$TMP/host.before" "$TMP/host.after"
tg_summary
