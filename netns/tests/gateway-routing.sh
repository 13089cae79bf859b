#!/usr/bin/env bash
# gateway-routing: a full tunnel in C. Everything is looked up into tg0 except the excluded host and the
# tunnel's own carrier packets (those with its fwmark), which follow C's physical path, also after that path
# moves from eth0 to eth1; anyone else's packets to the carriers go into tg0. C's own default route is never
# touched, nothing for the included host leaves through a physical link, and `down` leaves C's kernel state
# exactly as it was.
set -uo pipefail
# shellcheck source=netns/lib.sh
. "$(dirname "$0")/../lib.sh"
tg_begin

cfg=$TG_TMP/full.json
tg_full_tunnel_config "$cfg" tg0
tg_watch_echo "$NS_I" "$INCLUDED4" "$INCLUDED6" "$EXCLUDED4" "$EXCLUDED6"
# Positive control for the counters: without a tunnel the included host is reached once per family.
check_ping "without a tunnel C reaches $INCLUDED4" "$NS_C" "$INCLUDED4"
check_ping "without a tunnel C reaches $INCLUDED6" "$NS_C" "$INCLUDED6"
tg_snapshot "$NS_C" "$TG_TMP/before"
default4_before=$(ip -n "$NS_C" -4 route show default)
default6_before=$(ip -n "$NS_C" -6 route show default)

tg_run ip netns exec "$NS_C" "$TG" up "$cfg" --detach
check_rc "up --detach exits 0 once the tunnel is applied" 0

# The interface.
check_match "tg0 has 10.8.0.2/24" 'inet 10\.8\.0\.2/24 ' "$(ip -n "$NS_C" addr show dev tg0 2>&1)"
check_match "tg0 has fd00:8::2/64" 'inet6 fd00:8::2/64 ' "$(ip -n "$NS_C" addr show dev tg0 2>&1)"
tg0_link=$(ip -n "$NS_C" link show dev tg0 2>&1)
check_match "tg0 has MTU 1400" ' mtu 1400 ' "$tg0_link"
check_match "tg0 is up" '<([^>]*,)?UP[,>]' "$tg0_link"
check_match "tg0 has carrier (the detached process holds the TUN open)" '<([^>]*,)?LOWER_UP[,>]' "$tg0_link"

# The policy rules and the tunnel's table.
check_match "an IPv4 rule sends unmarked lookups to the tunnel's table" \
  'not from all fwmark [^ ]+ lookup [^ ]+' "$(ip -n "$NS_C" -4 rule show)"
check_match "an IPv6 rule sends unmarked lookups to the tunnel's table" \
  'not from all fwmark [^ ]+ lookup [^ ]+' "$(ip -n "$NS_C" -6 rule show)"
table4=$(tg_tunnel_table "$NS_C" 4)
table6=$(tg_tunnel_table "$NS_C" 6)
check_match "the tunnel's IPv4 table has its default route into tg0" '^default dev tg0( |$)' \
  "$(ip -n "$NS_C" -4 route show table "${table4:-none}" 2>&1)"
check_match "the tunnel's IPv6 table has its default route into tg0" '^default dev tg0( |$)' \
  "$(ip -n "$NS_C" -6 route show table "${table6:-none}" 2>&1)"
throws4=$(ip -n "$NS_C" -4 route show table "${table4:-none}" type throw 2>&1)
throws6=$(ip -n "$NS_C" -6 route show table "${table6:-none}" type throw 2>&1)
check_match "the tunnel's IPv4 table throws excluded $EXCLUDED4 back to the main table" "^throw $(tg_re "$EXCLUDED4")( |\$)" "$throws4"
check_no_match "the tunnel's IPv4 table has no throw route for carrier $CARRIER4 (that would exempt anyone)" "^throw $(tg_re "$CARRIER4")( |\$)" "$throws4"
check_match "the tunnel's IPv6 table throws excluded $EXCLUDED6 back to the main table" "^throw $(tg_re "$EXCLUDED6")( |\$)" "$throws6"
check_no_match "the tunnel's IPv6 table has no throw route for carrier $CARRIER6" "^throw $(tg_re "$CARRIER6")( |\$)" "$throws6"

# Route decisions.
check_route "$INCLUDED4 is looked up into tg0" "$NS_C" "$INCLUDED4" tg0
check_route "$INCLUDED6 is looked up into tg0" "$NS_C" "$INCLUDED6" tg0
check_route "$ELSEWHERE4 (only the default covers it) is looked up into tg0" "$NS_C" "$ELSEWHERE4" tg0
check_route "$ELSEWHERE6 (only the default covers it) is looked up into tg0" "$NS_C" "$ELSEWHERE6" tg0
check_route "excluded $EXCLUDED4 leaves through eth0" "$NS_C" "$EXCLUDED4" eth0
check_route "excluded $EXCLUDED6 leaves through eth0" "$NS_C" "$EXCLUDED6" eth0
mark=$table4
check_route_marked "the tunnel's carrier packets to $CARRIER4 leave through eth0" "$NS_C" "$CARRIER4" "$mark" eth0
check_route_marked "the tunnel's carrier packets to $CARRIER6 leave through eth0" "$NS_C" "$CARRIER6" "$mark" eth0
check_route "anyone else's packets to carrier $CARRIER4 are looked up into tg0" "$NS_C" "$CARRIER4" tg0
check_route "anyone else's packets to carrier $CARRIER6 are looked up into tg0" "$NS_C" "$CARRIER6" tg0

# Real traffic, while the tunnel's table sends everything else into the tunnel.
for addr in "$EXCLUDED4" "$EXCLUDED6"; do
  check_ping "with the tunnel up C still reaches $addr over eth0" "$NS_C" "$addr"
done
for addr in "$CARRIER4" "$CARRIER6"; do
  check "with the tunnel up C's marked packets reach carrier $addr over eth0" ip netns exec "$NS_C" ping -n -c 1 -W 1 -m "$mark" "$addr"
done
check_eq "the echo request for excluded $EXCLUDED4 arrived at I" 1 "$(tg_echo_count "$NS_I" "$EXCLUDED4")"
ip netns exec "$NS_C" ping -n -c 1 -W 1 "$INCLUDED4" >/dev/null 2>&1
ip netns exec "$NS_C" ping -n -c 1 -W 1 "$INCLUDED6" >/dev/null 2>&1
check_eq "nothing for included $INCLUDED4 leaked to I (counter still at 1)" 1 "$(tg_echo_count "$NS_I" "$INCLUDED4")"
check_eq "nothing for included $INCLUDED6 leaked to I (counter still at 1)" 1 "$(tg_echo_count "$NS_I" "$INCLUDED6")"

check_eq "C's main IPv4 default route is untouched" "$default4_before" "$(ip -n "$NS_C" -4 route show default)"
check_eq "C's main IPv6 default route is untouched" "$default6_before" "$(ip -n "$NS_C" -6 route show default)"

# The physical path moves: the carrier follows it without tunnelgate doing anything.
ip -n "$NS_C" -4 route replace default via "$R_C1_4" dev eth1
ip -n "$NS_C" -6 route replace default via "$R_C1_6" dev eth1
check_route_marked "after the path moved, the carrier packets to $CARRIER4 leave through eth1" "$NS_C" "$CARRIER4" "$mark" eth1
check_route_marked "after the path moved, the carrier packets to $CARRIER6 leave through eth1" "$NS_C" "$CARRIER6" "$mark" eth1
check_route "after the path moved, excluded $EXCLUDED4 leaves through eth1" "$NS_C" "$EXCLUDED4" eth1
check_route "after the path moved, $INCLUDED4 is still looked up into tg0" "$NS_C" "$INCLUDED4" tg0
check "after the path moved C's marked packets reach carrier $CARRIER4 over eth1" ip netns exec "$NS_C" ping -n -c 1 -W 1 -m "$mark" "$CARRIER4"
check "after the path moved C's marked packets reach carrier $CARRIER6 over eth1" ip netns exec "$NS_C" ping -n -c 1 -W 1 -m "$mark" "$CARRIER6"
tg_c_default_route 4
tg_c_default_route 6
check_route_marked "with the path back, the carrier packets to $CARRIER4 leave through eth0 again" "$NS_C" "$CARRIER4" "$mark" eth0

tg_run ip netns exec "$NS_C" "$TG" down tg0
check_rc "down tg0 exits 0" 0
wait_for "the detached tunnelgate process has exited" 10 tg_no_tunnel_process "$NS_C"
check_fails "tg0 is gone" ip -n "$NS_C" link show dev tg0
state_dir=$(tg_state_dir "$NS_C")
check_eq "down leaves no journal, state, lock or log file of tg0 in $state_dir" "" \
  "$(find "$state_dir" -maxdepth 1 \( -name tg0.journal -o -name tg0.state -o -name tg0.lock -o -name tg0.log \) 2>/dev/null)"
tg_snapshot "$NS_C" "$TG_TMP/after"
check_same_snapshot "C's kernel state after down equals the state before up" "$TG_TMP/before" "$TG_TMP/after"

tg_summary
