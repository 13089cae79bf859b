#!/usr/bin/env bash
# topology: the harness itself, without tunnelgate. The four namespaces reach each other through R over
# both address families, an untouched namespace snapshots equal to itself, no interface is left in the
# caller's namespace, the lab's impairments and leak counters act on the run, and teardown removes every
# namespace of the run and the lab's state of it.
set -uo pipefail
# shellcheck source=netns/lib.sh
. "$(dirname "$0")/../lib.sh"

tg_topology_up
# The first snapshot right after the build, as scenarios take their "before"; the second after traffic.
tg_snapshot "$NS_C" "$TG_TMP/first"

for addr in "$R_C0_4" "$R_C0_6" "$LAN4" "$LAN6" "$CARRIER4" "$CARRIER6" "$EXCLUDED4" "$EXCLUDED6" \
  "$INCLUDED4" "$INCLUDED6"; do
  check_ping "C reaches $addr through R" "$NS_C" "$addr"
done
check_ping "L reaches $CARRIER4 through R" "$NS_L" "$CARRIER4"
check_ping "L reaches $CARRIER6 through R" "$NS_L" "$CARRIER6"
check_ping "I reaches C at $C_ETH0_6 through R" "$NS_I" "$C_ETH0_6"
check_ping "C reaches R over the second path ($R_C1_4)" "$NS_C" "$R_C1_4"
check_ping "C reaches R over the second path ($R_C1_6)" "$NS_C" "$R_C1_6"
check_route "C's lookup of $CARRIER4 leaves through eth0" "$NS_C" "$CARRIER4" eth0
check_route "C's lookup of $CARRIER6 leaves through eth0" "$NS_C" "$CARRIER6" eth0
check_route "C's lookup of $R_C1_4 leaves through eth1" "$NS_C" "$R_C1_4" eth1

tg_snapshot "$NS_C" "$TG_TMP/second"
check_same_snapshot "an untouched namespace snapshots equal before and after traffic" "$TG_TMP/first" "$TG_TMP/second"
check_match "the snapshot holds C's policy rules" '^32766: .*lookup 254 ' "$(cat "$TG_TMP/first")"

for link in c0 c1 lan0 inet0; do
  check_fails "no $link in the caller's namespace" ip link show dev "$link"
done

# The topology is a lab run: its links can be impaired, its counters see C's traffic.
carrier_of() { grep -q "$1" <<<"$(ip -n "$NS_C" -o link show dev eth0)"; }
tg_lab impair uplink down >/dev/null
wait_for "tg_lab impair uplink down: C's eth0 loses its carrier" 5 carrier_of NO-CARRIER
tg_lab impair uplink up >/dev/null
wait_for "... and up: it has it again" 5 carrier_of LOWER_UP
wait_for "... and C reaches R over it" 5 ip netns exec "$NS_C" ping -n -c 1 -W 1 "$R_C0_4"
tg_lab_leaks_reset
check_lab_no_leaks "the lab's counters: nothing from C since the reset"
check_ping "C reaches $INCLUDED4" "$NS_C" "$INCLUDED4"
check_fails "the lab's counters saw that echo request leave C" tg_lab expect-no-leaks

mine=("${TG_NAMESPACES[@]}")
run=$TG_LAB_RUN
tg_topology_down
tg_topology_down
left=$(ip netns list | awk '{print $1}')
for ns in "${mine[@]}"; do
  check_no_match "teardown (run twice) removed $ns" "^$ns\$" "$left"
done
check_fails "teardown removed the lab run's state (/run/tunnelgate-lab/$run)" test -e "/run/tunnelgate-lab/$run"

tg_summary
