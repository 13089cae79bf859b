#!/usr/bin/env bash
# Kill switch (includeAllNetworks) and excludeLocalNetworks, asserted by what arrives at the router.
#
#   C (tunnelgate, tg0) ── eth0 ── R ── I (carrier 198.18.0.10, hosts .20 .30)
#                                   └── L (LAN 192.168.231.2)
#
# The lab's counters in R see, in prerouting, every packet that arrives from C's physical interfaces; one
# not for a carrier endpoint and not neighbour discovery is a leak (listed by its 5-tuple). While the
# tunnel is up and after the tunnelgate process is SIGKILLed, none may come; after `down` traffic flows
# again.
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
tg_begin

# --- the leak counters: the lab's, in R (every packet arriving from c0 and c1, per 5-tuple) ---------------
# Anything to a carrier's address is the tunnel's (its carrier traffic, by fwmark); everything else
# that arrives is a leak, listed with its 5-tuple when a check fails.
TO_CARRIERS=(--allow "$CARRIER4/32" --allow "$CARRIER6/128")

# Every way out we try from C: through the routing table, and forced onto eth0 (SO_BINDTODEVICE).
try_to_leak() {
  local a
  for a in "$INCLUDED4" "$EXCLUDED4" "$ELSEWHERE4" "$LAN4"; do
    ip netns exec "$NS_C" ping -n -c 1 -W 0.3 "$a" >/dev/null 2>&1
    ip netns exec "$NS_C" ping -n -c 1 -W 0.3 -I eth0 "$a" >/dev/null 2>&1
  done
  for a in "$INCLUDED6" "$EXCLUDED6" "$ELSEWHERE6" "$LAN6"; do
    ip netns exec "$NS_C" ping -n -c 1 -W 0.3 "$a" >/dev/null 2>&1
    ip netns exec "$NS_C" ping -n -c 1 -W 0.3 -I eth0 "$a" >/dev/null 2>&1
  done
  # DNS to a resolver that is not the tunnel's.
  ip netns exec "$NS_C" bash -c "exec 3<>/dev/udp/$LAN4/53; echo x >&3" 2>/dev/null
  return 0
}

cfg=$TG_TMP/ks.json
cat >"$cfg" <<CFG
{"name": "tg0", "tunnelRemoteAddress": "$CARRIER4", "mtu": 1400,
 "ipv4Settings": {"addresses": ["10.8.0.2"], "subnetMasks": ["255.255.255.0"],
                  "includedRoutes": ["0.0.0.0/0"], "excludedRoutes": ["$EXCLUDED4/32"]},
 "carrierEndpoints": ["$CARRIER4", "$CARRIER6"],
 "includeAllNetworks": true}
CFG
tg_snapshot "$NS_C" "$TG_TMP/before"

# A control: without the kill switch the same attempts do reach R, so the counter can move.
tg_lab_leaks_reset
try_to_leak
_tg_leak_settle
check_fails "control: without a tunnel the attempts do reach R (the lab's counters see leaks)" \
  tg_lab expect-no-leaks "${TO_CARRIERS[@]}"

tg_run ip netns exec "$NS_C" "$TG" up "$cfg" --detach
check_rc "up --detach with includeAllNetworks" 0
check "the kill switch table is in C's ruleset" ip netns exec "$NS_C" nft list table inet tunnelgate-tg0
check_match "status shows the kill switch" 'kill switch: on' "$(ip netns exec "$NS_C" "$TG" status tg0)"
check_match "the output chain drops what it does not allow (IPv6 included, which this tunnel does not carry)" \
  'policy drop' "$(ip netns exec "$NS_C" nft list chain inet tunnelgate-tg0 output)"

tg_lab_leaks_reset
try_to_leak
check_lab_no_leaks "while up: no packet left C's physical interface except to the carriers" "${TO_CARRIERS[@]}"
# The carrier exemption is the tunnel's identity (its fwmark), not the carrier's address.
mark=$(tg_tunnel_table "$NS_C" 4)
check "while up: the tunnel's own carrier traffic (fwmark $mark) reaches the IPv4 carrier" \
  ip netns exec "$NS_C" ping -n -c 1 -W 1 -m "$mark" "$CARRIER4"
check "while up: the tunnel's own carrier traffic (fwmark $mark) reaches the IPv6 carrier" \
  ip netns exec "$NS_C" ping -n -c 1 -W 1 -m "$mark" "$CARRIER6"
tg_watch_echo "$NS_I" "$CARRIER4" "$CARRIER6"
ip netns exec "$NS_C" ping -n -c 1 -W 0.3 "$CARRIER4" >/dev/null 2>&1
ip netns exec "$NS_C" ping -n -c 1 -W 0.3 "$CARRIER6" >/dev/null 2>&1
ip netns exec "$NS_C" setpriv --reuid 65534 --regid 65534 --clear-groups ping -n -c 1 -W 0.3 "$CARRIER4" >/dev/null 2>&1
check_eq "while up: an ordinary process's pings to the carriers (root and uid 65534) do not reach them in clear" 0 \
  "$(( $(tg_echo_count "$NS_I" "$CARRIER4") + $(tg_echo_count "$NS_I" "$CARRIER6") ))"
check_ping "while up: loopback works" "$NS_C" 127.0.0.1

pid=$(tg_tunnel_pids "$NS_C" | head -n 1)
kill -9 "$pid"
wait_for "the tunnelgate process is gone" 5 tg_exited "$pid"
wait_for "tg0 is gone with its process" 5 bash -c "! ip -n $NS_C link show dev tg0 >/dev/null 2>&1"
tg_lab_leaks_reset
try_to_leak
check_lab_no_leaks "after SIGKILL: still nothing leaves (fail-closed)" "${TO_CARRIERS[@]}"
check "after SIGKILL: the tunnel's identity still reaches the carrier" \
  ip netns exec "$NS_C" ping -n -c 1 -W 1 -m "$mark" "$CARRIER4"
check_match "after SIGKILL: status says the kill switch is still on" 'kill switch: on' "$(ip netns exec "$NS_C" "$TG" status tg0)"

tg_run ip netns exec "$NS_C" "$TG" down tg0
check_rc "down after the crash" 0
check_fails "the kill switch table is gone" ip netns exec "$NS_C" nft list table inet tunnelgate-tg0
check_ping "after down: $INCLUDED4 is reachable directly again" "$NS_C" "$INCLUDED4"
check_ping "after down: $INCLUDED6 is reachable directly again" "$NS_C" "$INCLUDED6"
tg_snapshot "$NS_C" "$TG_TMP/after"
check_same_snapshot "after down C's kernel state equals the state before up" "$TG_TMP/before" "$TG_TMP/after"

# --- up again after a crash: the kill switch is replaced, not removed first ------------------------------
tg_run ip netns exec "$NS_C" "$TG" up "$cfg" --detach
pid=$(tg_tunnel_pids "$NS_C" | head -n 1)
kill -9 "$pid"
wait_for "the tunnelgate process is gone" 5 tg_exited "$pid"
tg_run ip netns exec "$NS_C" "$TG" up "$cfg" --detach
check_rc "up again after SIGKILL replaces the residue" 0
check_eq "one kill switch table, not two" 1 "$(ip netns exec "$NS_C" nft list tables | grep -c 'tunnelgate-tg0')"
tg_run ip netns exec "$NS_C" "$TG" down tg0
check_rc "down" 0

# --- excludeLocalNetworks: the LAN directly, the rest the tunnel or nothing --------------------------------
cat >"$cfg" <<CFG
{"name": "tg0", "tunnelRemoteAddress": "$CARRIER4", "mtu": 1400,
 "ipv4Settings": {"addresses": ["100.64.0.2"], "subnetMasks": ["255.255.255.0"], "includedRoutes": ["0.0.0.0/0"]},
 "ipv6Settings": {"addresses": ["2001:db8:64::2"], "networkPrefixLengths": [64], "includedRoutes": ["::/0"]},
 "carrierEndpoints": ["$CARRIER4"],
 "includeAllNetworks": true, "excludeLocalNetworks": true}
CFG
tg_run ip netns exec "$NS_C" "$TG" up "$cfg" --detach
check_rc "up with excludeLocalNetworks" 0
check_route "the LAN host $LAN4 is routed directly" "$NS_C" "$LAN4" eth0
check_route "the ULA LAN host $LAN6 is routed directly" "$NS_C" "$LAN6" eth0
check_route "$INCLUDED4 goes into the tunnel" "$NS_C" "$INCLUDED4" tg0
check_route "$INCLUDED6 goes into the tunnel" "$NS_C" "$INCLUDED6" tg0
check_ping "the LAN host $LAN4 answers" "$NS_C" "$LAN4"
check_ping "the LAN host $LAN6 answers" "$NS_C" "$LAN6"
tg_lab_leaks_reset
for a in "$INCLUDED4" "$EXCLUDED4" "$ELSEWHERE4"; do ip netns exec "$NS_C" ping -n -c 1 -W 0.3 -I eth0 "$a" >/dev/null 2>&1; done
for a in "$INCLUDED6" "$EXCLUDED6" "$ELSEWHERE6"; do ip netns exec "$NS_C" ping -n -c 1 -W 0.3 -I eth0 "$a" >/dev/null 2>&1; done
check_lab_no_leaks "forced onto eth0, non-local traffic still does not leave" "${TO_CARRIERS[@]}"
tg_run ip netns exec "$NS_C" "$TG" down tg0
check_rc "down" 0
tg_snapshot "$NS_C" "$TG_TMP/after2"
check_same_snapshot "after down C's kernel state equals the state before the first up" "$TG_TMP/before" "$TG_TMP/after2"

tg_summary
