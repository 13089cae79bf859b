#!/usr/bin/env bash
# Robustness: another program deletes the tunnel's policy rules, flushes its table, removes its
# nftables table or sets its interface down; tunnelgate notices through its netlink monitor and puts
# everything back within a second, and says so in its status. Repairs never pause: a rule deleted 15
# times in a row is back within a second each time (netns/tests/firewall-content.sh has the kill
# switch's content, tampering in a tight loop and failing closed).
#
#   C (tunnelgate, tg0, kill switch) ── R ── I
set -uo pipefail
. "$(dirname "$0")/../lib.sh"
tg_begin

cfg=$TG_TMP/repair.json
cat >"$cfg" <<CFG
{"name": "tg0", "tunnelRemoteAddress": "$CARRIER4", "mtu": 1400,
 "ipv4Settings": {"addresses": ["10.8.0.2"], "subnetMasks": ["255.255.255.0"],
                  "includedRoutes": ["0.0.0.0/0"], "excludedRoutes": ["$EXCLUDED4/32"]},
 "ipv6Settings": {"addresses": ["fd00:8::2"], "networkPrefixLengths": [64], "includedRoutes": ["::/0"]},
 "carrierEndpoints": ["$CARRIER4", "$CARRIER6"],
 "includeAllNetworks": true}
CFG
tg_snapshot "$NS_C" "$TG_TMP/before"
tg_run ip netns exec "$NS_C" "$TG" up "$cfg" --detach
check_rc "up --detach" 0
table=$(tg_tunnel_table "$NS_C" 4)
rules4() { ip -n "$NS_C" -4 rule show | grep -c "lookup $table"; }
rules6() { ip -n "$NS_C" -6 rule show | grep -c "lookup $table"; }
routes_in_table() { ip -n "$NS_C" -4 route show table "$table" | wc -l; }
# Predicates for wait_for, evaluated on every poll.
rules_are() { [ "$(rules4)" -eq "$1" ] && [ "$(rules6)" -eq "$1" ]; }
table_has() { [ "$(routes_in_table)" -eq "$1" ]; }

# The rules.
pref=$(ip -n "$NS_C" -4 rule show | sed -n "s/^\([0-9]*\):.*lookup $table.*/\1/p" | head -n 1)
ip -n "$NS_C" -4 rule del pref "$pref"
ip -n "$NS_C" -6 rule del pref "$pref"
wait_for "the deleted IPv4 and IPv6 rules are back within a second" 1 rules_are 1
check_route "lookups go into the tunnel again" "$NS_C" "$INCLUDED4" tg0

# The routing table.
ip -n "$NS_C" -4 route flush table "$table"
wait_for "the flushed table is filled again within a second (the default route, the excluded host, tg0's subnet)" 1 table_has 3
check_route "the excluded host is kept off the tunnel again" "$NS_C" "$EXCLUDED4" eth0
check_route_marked "the tunnel's own carrier packets still leave through eth0" "$NS_C" "$CARRIER4" "$table" eth0

# The kill switch.
ip netns exec "$NS_C" nft delete table inet tunnelgate-tg0
wait_for "the deleted kill switch is back within a second" 1 ip netns exec "$NS_C" nft list table inet tunnelgate-tg0

# The interface.
ip -n "$NS_C" link set dev tg0 down
wait_for "the interface is up again within a second" 1 bash -c "ip -n $NS_C link show dev tg0 | grep -q '<[^>]*,UP[,>]'"
ip -n "$NS_C" link set dev tg0 mtu 1280
wait_for "the MTU is put back within a second" 1 bash -c "ip -n $NS_C link show dev tg0 | grep -q ' mtu 1400 '"

# Repair never pauses: the IPv4 rule deleted 15 times in a row (repairs used to stop after 10 in 10 s),
# and the kill switch's final drop rule deleted 15 times: each one is back within a second.
repaired=0
for i in $(seq 1 15); do
  ip -n "$NS_C" -4 rule del pref "$pref"
  _tg_poll 1 rules_are 1 && repaired=$((repaired + 1))
done
check_eq "[no pause] each of 15 deletions of the rule in a row is repaired within a second" 15 "$repaired"
blocked_rules() { ip netns exec "$NS_C" nft list chain inet tunnelgate-tg0 output | grep -c 'comment "tunnelgate:tg0 blocked"'; }
has_blocked_rule() { [ "$(blocked_rules)" -eq 1 ]; }
repaired=0
for i in $(seq 1 15); do
  handle=$(ip netns exec "$NS_C" nft -a list chain inet tunnelgate-tg0 output | sed -n 's/.*comment "tunnelgate:tg0 blocked" # handle \([0-9]*\).*/\1/p')
  ip netns exec "$NS_C" nft delete rule inet tunnelgate-tg0 output handle "${handle:-0}"
  _tg_poll 1 has_blocked_rule && repaired=$((repaired + 1))
done
check_eq "[no pause] each of 15 deletions of the kill switch's final drop rule is repaired within a second" 15 "$repaired"

status=$(ip netns exec "$NS_C" "$TG" status tg0)
check_match "status says it repaired" 'repaired [0-9]+ times? after outside changes' "$status"
log=$(tg_state_dir "$NS_C")/tg0.log
check_match "the log says what was repaired" 'repaired after an outside change: .*rule' "$(cat "$log" 2>/dev/null)"

tg_run ip netns exec "$NS_C" "$TG" down tg0
check_rc "down" 0
wait_for "the detached tunnelgate process has exited" 10 tg_no_tunnel_process "$NS_C"
tg_snapshot "$NS_C" "$TG_TMP/after"
check_same_snapshot "after down C's kernel state equals the state before up" "$TG_TMP/before" "$TG_TMP/after"

tg_summary
